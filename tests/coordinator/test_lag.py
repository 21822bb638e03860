"""A group's offsets view (``broker/coordinator/lag.py``): committed offset, log end offset, lag and owner per
partition, as ``kafka-consumer-groups.sh --describe`` prints them, read through the coordinator."""

from __future__ import annotations

from broker.coordinator.lag import PartitionOffsets, total_lag
from tests.coordinator.harness import GROUP, Harness
from tests.coordinator.modern.consumer.harness import ConsumerHarness
from tests.coordinator.test_events import assign

ENDS = {("topic", 0): 100, ("topic", 1): 40, ("topic", 2): 7, ("other", 0): 5}


def leo(topic: str, partition: int) -> int | None:
    return ENDS.get((topic, partition))


def test_a_classic_group_rows_join_commits_owners_and_log_end_offsets() -> None:
    h = Harness()
    first = h.join_new()
    second = h.join_new()
    h.advance(0)
    leader, follower = first.value.member_id, second.value.member_id
    plan = {leader: assign(topic=[1, 0]), follower: assign(topic=[2])}
    assert h.sync(follower, 1).done is False
    h.sync(leader, 1, plan)
    h.commit({("topic", 0): 90, ("topic", 1): 40, ("gone", 3): 12}, generation_id=1, member_id=leader)

    rows = h.coordinator.group_offsets(GROUP, leo)
    assert rows is not None
    host = "/127.0.0.1"
    assert rows == (
        PartitionOffsets("gone", 3, 12, None, None, None, None, None),  # committed, no such partition, unowned
        PartitionOffsets("topic", 0, 90, 100, 10, leader, "client", host),
        PartitionOffsets("topic", 1, 40, 40, 0, leader, "client", host),
        PartitionOffsets("topic", 2, None, 7, None, follower, "client", host),  # owned, nothing committed
    )
    assert total_lag(rows) == 10
    assert h.coordinator.group_offsets("nope", leo) is None


def test_a_group_without_members_shows_its_commits_unowned_and_a_commit_past_the_end_a_negative_lag() -> None:
    """As Kafka's tool: LEO - committed, whatever its sign; a simple group (assign() and commits) has no owner."""
    h = Harness()
    h.commit({("other", 0): 8, ("topic", 2): 0}, group_id="simple")
    rows = h.coordinator.group_offsets("simple", leo)
    assert rows == (
        PartitionOffsets("other", 0, 8, 5, -3, None, None, None),
        PartitionOffsets("topic", 2, 0, 7, 7, None, None, None),
    )
    assert total_lag(rows) == 4


def test_a_classic_member_whose_assignment_does_not_decode_owns_nothing() -> None:
    h = Harness()
    [member] = h.stable_group(1)  # its assignment is its own id's bytes: not the consumer protocol's
    h.commit({("topic", 1): 30}, generation_id=1, member_id=member)
    assert h.coordinator.group_offsets(GROUP, leo) == (PartitionOffsets("topic", 1, 30, 40, 10, None, None, None),)


def test_a_consumer_group_owners_are_what_each_member_may_own_now() -> None:
    h = ConsumerHarness(topics={"t": 2})
    first = h.consumer("m0")
    second = h.consumer("m1")
    first.poll()
    second.poll()
    h.settle(first, second)
    owned = {p: m for m in ("m0", "m1") for p in h.assigned(m).get("t", ())}
    assert sorted(owned) == [0, 1]
    h.commit({("t", 0): 3}, generation_id=first.epoch, member_id="m0")

    ends = {("t", 0): 10, ("t", 1): 4}
    rows = h.coordinator.group_offsets(GROUP, lambda topic, partition: ends.get((topic, partition)))
    assert rows == (
        PartitionOffsets("t", 0, 3, 10, 7, owned[0], "client", "/127.0.0.1"),
        PartitionOffsets("t", 1, None, 4, None, owned[1], "client", "/127.0.0.1"),
    )
