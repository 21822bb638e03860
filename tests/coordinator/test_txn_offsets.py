"""Transactional offsets on the group side: checklist items 35-55 of ``docs/spec/transactions.md`` section 9 that
are group-level (sections 5.1-5.6), on the manual clock.

The transaction coordinator's own checks (items 33, 34, 45: verify/add of the offsets partition, fenced epochs) are
its job and the API layer's (``tests/wire/test_txn_offset_commit.py``); here the group coordinator gets the request
after the TC said yes, and ``complete_transaction`` stands for the TC's completion.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import FetchedOffset, PartitionCommit, TxnCommitRequest
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, E, Harness
from tests.coordinator.modern.consumer.harness import ConsumerHarness

PID = 7


def txn_commit(
    h: Harness,
    offsets: dict[tuple[str, int], int],
    *,
    group_id: str = GROUP,
    producer_id: int = PID,
    generation_id: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "txn",
) -> dict[tuple[str, int], E]:
    topics: dict[str, list[PartitionCommit]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(PartitionCommit(partition, offset, 3, metadata))
    result = h.coordinator.commit_transactional_offsets(
        TxnCommitRequest(
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=0,
            topics=tuple((t, tuple(ps)) for t, ps in topics.items()),
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
        )
    )
    return {(topic, p): error for topic, parts in result for p, error in parts}


def fetch(h: Harness, partitions: list[int], *, stable: bool = False, group_id: str = GROUP) -> list[FetchedOffset]:
    result = h.coordinator.fetch_offsets(group_id, [("t", partitions)], require_stable=stable)
    assert result.error is E.none, result
    ((_, fetched),) = result.topics
    return list(fetched)


def offsets(h: Harness, partitions: list[int], **kwargs: object) -> list[int]:
    return [f.offset for f in fetch(h, partitions, **kwargs)]  # type: ignore[arg-type]


def test_item_35_empty_group_id() -> None:
    h = Harness()
    assert txn_commit(h, {("t", 0): 1, ("u", 2): 3}, group_id="") == {
        ("t", 0): E.invalid_group_id,
        ("u", 2): E.invalid_group_id,
    }


def test_item_37_unknown_group_with_generation_minus_one_creates_a_simple_group() -> None:
    h = Harness()
    assert txn_commit(h, {("t", 0): 5}, group_id="g2") == {("t", 0): E.none}
    assert h.state("g2") is GroupState.EMPTY
    assert not h.group("g2").protocol_type
    _, listed = h.coordinator.list_groups()
    assert [(g.group_id, g.protocol_type) for g in listed] == [("g2", "")]
    # 5.5: the group stays even when the transaction aborts.
    h.coordinator.complete_transaction(PID, ["g2"], commit=False)
    assert h.state("g2") is GroupState.EMPTY


def test_item_38_unknown_group_with_a_generation() -> None:
    h = Harness()
    assert txn_commit(h, {("t", 0): 5}, group_id="g2", generation_id=3) == {("t", 0): E.illegal_generation}
    assert "g2" not in h.coordinator.groups


def test_item_39_40_classic_member_and_generation_checks() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    assert txn_commit(h, {("t", 0): 5}, generation_id=1, member_id=leader) == {("t", 0): E.none}
    assert txn_commit(h, {("t", 0): 5}, generation_id=0, member_id=leader) == {("t", 0): E.illegal_generation}
    assert txn_commit(h, {("t", 0): 5}, generation_id=1, member_id="ghost") == {("t", 0): E.unknown_member_id}
    assert txn_commit(h, {("t", 0): 5}, generation_id=-1, member_id="ghost") == {("t", 0): E.unknown_member_id}


def test_item_41_static_instance_held_by_another_member() -> None:
    h = Harness()
    first = h.join(instance_id="i1")
    h.advance(h.config.initial_rebalance_delay_ms)
    member = first.value.member_id
    assert h.sync(member, 1, {member: b""}, instance_id="i1").value.error is E.none
    result = txn_commit(h, {("t", 0): 5}, generation_id=1, member_id="other", instance_id="i1")
    assert result == {("t", 0): E.fenced_instance_id}
    assert txn_commit(h, {("t", 0): 5}, generation_id=1, member_id=member, instance_id="i2") == {
        ("t", 0): E.unknown_member_id
    }
    assert txn_commit(h, {("t", 0): 5}, generation_id=1, member_id=member, instance_id="i1") == {("t", 0): E.none}


def test_item_42_completing_rebalance_is_accepted_and_does_not_refresh_the_session() -> None:
    h = Harness()
    joins = [h.join_new() for _ in range(2)]
    h.advance(h.config.initial_rebalance_delay_ms)
    members = [j.value.member_id for j in joins]
    assert h.state() is GroupState.COMPLETING_REBALANCE
    due = h.purgatory.deadline(heartbeat_key(GROUP, members[0]))
    assert due is not None
    h.advance(1_000)
    assert txn_commit(h, {("t", 0): 5}, generation_id=1, member_id=members[0]) == {("t", 0): E.none}
    assert h.purgatory.deadline(heartbeat_key(GROUP, members[0])) == due


def test_item_43_anonymous_commit_into_a_stable_group() -> None:
    h = Harness()
    h.stable_group(2)
    assert txn_commit(h, {("t", 0): 5}) == {("t", 0): E.none}


def test_item_44_metadata_too_large_on_one_partition_only() -> None:
    h = Harness()
    topics = (("t", (PartitionCommit(0, 1, -1, "x" * 4097), PartitionCommit(1, 2, -1, "ok"))),)
    result = h.coordinator.commit_transactional_offsets(TxnCommitRequest(GROUP, PID, 0, topics))
    assert result == (("t", ((0, E.offset_metadata_too_large), (1, E.none))),)


def test_items_46_47_pending_offsets_are_invisible_but_unstable() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    assert txn_commit(h, {("t", 0): 10, ("t", 1): 11}) == {("t", 0): E.none, ("t", 1): E.none}
    assert offsets(h, [0, 1, 2]) == [1, -1, -1]
    assert fetch(h, [0, 1, 2], stable=True) == [
        FetchedOffset(0, error=E.unstable_offset_commit),
        FetchedOffset(1, error=E.unstable_offset_commit),
        FetchedOffset(2),
    ]
    # "All topics" lists only committed partitions; the pending one among them is unstable.
    everything = h.coordinator.fetch_offsets(GROUP, None, require_stable=True)
    assert everything.topics == (("t", (FetchedOffset(0, error=E.unstable_offset_commit),)),)
    assert h.coordinator.fetch_offsets(GROUP, None).topics == (("t", (FetchedOffset(0, 1, -1, ""),)),)


def test_item_48_commit_makes_them_committed() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10}, metadata="m")
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert fetch(h, [0], stable=True) == [FetchedOffset(0, 10, 3, "m")]


def test_item_49_abort_keeps_the_previous_value() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    txn_commit(h, {("t", 0): 10})
    h.coordinator.complete_transaction(PID, [GROUP], commit=False)
    assert fetch(h, [0], stable=True) == [FetchedOffset(0, 1, -1, "")]
    # No pending entry is left: a later COMMIT of the same producer changes nothing.
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0]) == [1]


def test_item_50_regular_commit_after_the_txn_commit_wins() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10})
    h.commit({("t", 0): 20})
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0]) == [20]


def test_item_51_regular_commit_before_the_txn_commit_is_overwritten() -> None:
    h = Harness()
    h.commit({("t", 0): 20})
    txn_commit(h, {("t", 0): 10})
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0]) == [10]


def test_completion_only_touches_the_named_groups_and_producer() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10})
    txn_commit(h, {("t", 0): 30}, group_id="other")
    txn_commit(h, {("t", 1): 40}, producer_id=PID + 1)
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0, 1]) == [10, -1]
    assert [f.error for f in fetch(h, [0, 1], stable=True)] == [E.none, E.unstable_offset_commit]
    assert fetch(h, [0], stable=True, group_id="other") == [FetchedOffset(0, error=E.unstable_offset_commit)]


def test_item_52_delete_groups_with_a_pending_offset() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10})
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0]) == [-1]


def test_offset_delete_removes_the_pending_offset() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10, ("t", 1): 11})
    assert h.coordinator.delete_offsets(GROUP, [("t", [0])]).error is E.none
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0, 1]) == [-1, 11]


def test_item_53_retention_spares_pending_offsets_and_groups_with_open_transactions() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("t", 1): 2})
    txn_commit(h, {("t", 0): 10})
    txn_commit(h, {("t", 0): 5}, group_id="g2")  # a simple group with only a pending offset
    h.advance(h.config.offsets_retention_ms + h.config.offsets_retention_check_interval_ms)
    assert offsets(h, [0, 1]) == [1, -1]
    assert "g2" in h.coordinator.groups
    h.coordinator.complete_transaction(PID, [GROUP, "g2"], commit=False)
    h.advance(h.config.offsets_retention_ms + h.config.offsets_retention_check_interval_ms)
    assert GROUP not in h.coordinator.groups and "g2" not in h.coordinator.groups


def test_topic_deletion_drops_pending_offsets() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 10, ("u", 0): 1})
    h.coordinator.on_topic_deleted("t")
    assert [f.error for f in fetch(h, [0], stable=True)] == [E.none]
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0]) == [-1]


def test_item_55_rebalance_between_consume_and_commit() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    txn_commit(h, {("t", 0): 10}, generation_id=1, member_id=leader)
    assert h.leave(follower).error is E.none
    rejoined = h.join(leader)  # the rebalance completes: generation 2
    assert rejoined.done and rejoined.value.generation_id == 2
    assert txn_commit(h, {("t", 1): 10}, generation_id=1, member_id=leader, producer_id=PID + 1) == {
        ("t", 1): E.illegal_generation
    }
    # The new owner waits for the old transaction.
    assert fetch(h, [0], stable=True) == [FetchedOffset(0, error=E.unstable_offset_commit)]
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert offsets(h, [0], stable=True) == [10]


def test_item_54_consumer_group_member_epoch() -> None:
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    epoch = h.member("a").member_epoch
    assert txn_commit(h, {("t", 0): 1}, generation_id=epoch - 1, member_id="a") == {("t", 0): E.illegal_generation}
    assert txn_commit(h, {("t", 0): 1}, generation_id=-1, member_id="") == {("t", 0): E.unknown_member_id}
    assert txn_commit(h, {("t", 0): 1}, generation_id=epoch, member_id="a") == {("t", 0): E.none}
    h.coordinator.complete_transaction(PID, [GROUP], commit=True)
    assert h.coordinator.fetch_offsets(GROUP, [("t", [0])]).topics == (("t", (FetchedOffset(0, 1, 3, "txn"),)),)


def test_inactive_coordinator() -> None:
    h = Harness()
    h.coordinator.shutdown()
    assert txn_commit(h, {("t", 0): 1}) == {("t", 0): E.coordinator_not_available}
