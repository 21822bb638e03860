"""Which group a ConsumerGroupHeartbeat lands in: checklist items 22-27 of ``docs/spec/consumer-groups.md`` section 13
(rules of sections 4.5 and 4.6), and what this broker does instead of online migration (10.2, not implemented).
"""

from __future__ import annotations

from broker.coordinator.messages import ConsumerHeartbeatResult, ListedGroup
from tests.coordinator.modern.consumer.harness import GROUP, ConsumerHarness, E, consumer_config


def test_item_22_heartbeat_for_an_unknown_group() -> None:
    """Item 22: HB(5) for an unknown group -> GROUP_ID_NOT_FOUND; nothing is created."""
    h = ConsumerHarness()
    result = h.hb("m", 5)
    assert result == ConsumerHeartbeatResult(E.group_id_not_found, f"Consumer group {GROUP} not found.")
    assert h.coordinator.group_type(GROUP) is None


def test_item_23_join_creates_a_consumer_group() -> None:
    """Item 23: a join creates the group: response epoch 1; ListGroups shows it as type consumer, protocol type
    consumer, state Stable."""
    h = ConsumerHarness()
    result = h.ok(h.cjoin("m"))
    assert result.member_epoch == 1 and result.member_id == "m"
    assert h.coordinator.group_type(GROUP) == "consumer"
    assert h.coordinator.list_groups() == (E.none, (ListedGroup(GROUP, "consumer", "Stable", "consumer"),))


def test_item_24_join_converts_an_empty_classic_group_keeping_its_offsets() -> None:
    """Item 24: a join to an Empty classic group holding committed offsets -> success; the group is now a consumer
    group; OffsetFetch still returns the old offsets (4.5, offline conversion)."""
    h = ConsumerHarness()
    assert h.commit({("t", 0): 42, ("t", 1): 7}) == {("t", 0): E.none, ("t", 1): E.none}
    assert h.coordinator.group_type(GROUP) == "classic"
    h.ok(h.cjoin("m"))
    assert h.coordinator.group_type(GROUP) == "consumer"
    assert GROUP not in h.coordinator.groups
    fetched = h.coordinator.fetch_offsets(GROUP, [("t", [0, 1, 2])])
    assert fetched.error is E.none
    ((_, partitions),) = fetched.topics
    assert [p.offset for p in partitions] == [42, 7, -1]


def test_item_25_join_to_a_non_empty_connect_group() -> None:
    """Item 25: a join to a non-empty classic group with protocol type "connect" -> GROUP_ID_NOT_FOUND; the classic
    group is untouched."""
    h = ConsumerHarness()
    (worker,) = h.stable_group(1, protocol_type="connect")
    result = h.cjoin("m")
    assert result.error is E.group_id_not_found and result.member_epoch == 0
    assert h.coordinator.group_type(GROUP) == "classic"
    assert h.coordinator.has_member(GROUP, worker)


def test_item_26_heartbeat_to_a_non_empty_classic_group() -> None:
    """Item 26: HB(1) (epoch != 0) to a non-empty classic group -> GROUP_ID_NOT_FOUND "Group X is not a consumer
    group."; a leave likewise."""
    h = ConsumerHarness()
    (member,) = h.stable_group(1)
    expected = ConsumerHeartbeatResult(E.group_id_not_found, f"Group {GROUP} is not a consumer group.")
    assert h.hb(member, 1) == expected
    assert h.hb(member, -1) == expected
    assert h.coordinator.has_member(GROUP, member)


def test_item_27_group_at_its_maximum_size() -> None:
    """Item 27: at group.consumer.max.size 2 a third member's join -> GROUP_MAX_SIZE_REACHED (nothing recorded);
    the existing members' heartbeats, and a known member's re-join, still succeed."""
    h = ConsumerHarness(consumer_config(consumer_max_size=2))
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    epochs = h.epochs()
    result = h.cjoin("c")
    assert result == ConsumerHeartbeatResult(
        E.group_max_size_reached, "The consumer group has reached its maximum capacity of 2 members."
    )
    assert set(h.cgroup().members) == {"a", "b"} and h.epochs() == epochs
    assert h.ok(a.poll()).member_epoch == epochs[0]
    assert h.ok(b.poll()).member_epoch == epochs[0]
    assert h.ok(h.cjoin("a")).member_epoch == epochs[0]  # a member already in the group is not counted as new


# -- online migration is not implemented (section 10): what the broker does instead --------------------------


def test_join_to_a_non_empty_classic_group_is_refused() -> None:
    """Section 4.5 / 10.2: with online upgrade not implemented (as policy ``disabled``), a join to a classic group
    with members -> GROUP_ID_NOT_FOUND; the classic group and its members are untouched (spec item 105)."""
    h = ConsumerHarness()
    leader, follower = h.stable_group(2)
    generation = h.group().generation_id
    result = h.cjoin("m")
    assert result.error is E.group_id_not_found
    assert result.error_message is not None and "classic group" in result.error_message
    assert result.member_id is None and result.member_epoch == 0
    assert h.coordinator.group_type(GROUP) == "classic"
    assert h.heartbeat(leader, generation) is E.none
    assert h.heartbeat(follower, generation) is E.none


def test_join_group_to_a_non_empty_consumer_group_is_refused() -> None:
    """Section 9.4 / 10.3: with classic-protocol members not supported (as policy ``disabled``), a JoinGroup to a
    consumer group with members -> INCONSISTENT_GROUP_PROTOCOL; the consumer group is untouched."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    epochs = h.epochs()
    join = h.join_new()
    assert join.done and join.value.error is E.inconsistent_group_protocol
    assert h.coordinator.group_type(GROUP) == "consumer"
    assert h.epochs() == epochs and list(h.cgroup().members) == ["m"]
    assert h.hb("m", 1).error is E.none
