"""Committed offsets of consumer groups: checklist items 89-97 of ``docs/spec/consumer-groups.md`` section 13
(section 8).

Not here: item 95 (TxnOffsetCommit with a stale member epoch -> ILLEGAL_GENERATION) is tested with the other
transactional offsets, in tests/coordinator/test_txn_offsets.py (transactions spec item 54).
"""

from __future__ import annotations

from broker.coordinator.messages import FetchedOffset, ListedGroup
from tests.coordinator.modern.consumer.harness import GROUP, ConsumerHarness, E


def settled_pair(h: ConsumerHarness) -> None:
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    assert h.epochs() == (2, 2)


def fetched(h: ConsumerHarness, group_id: str = GROUP, **member: object) -> list[int]:
    result = h.coordinator.fetch_offsets(group_id, [("t", [0, 1])], **member)  # type: ignore[arg-type]
    assert result.error is E.none, result
    ((_, partitions),) = result.topics
    return [p.offset for p in partitions]


def test_item_89_commit_with_the_current_epoch() -> None:
    """Item 89: OffsetCommit v9 with the member's current epoch -> NONE; the commit does not refresh the session."""
    h = ConsumerHarness()
    settled_pair(h)
    due = h.session_due("a")
    h.advance(1_000)
    errors = h.commit({("t", 0): 10, ("t", 1): 11}, member_id="a", generation_id=2)
    assert errors == {("t", 0): E.none, ("t", 1): E.none}
    assert fetched(h) == [10, 11]
    assert h.session_due("a") == due


def test_item_90_commit_with_the_previous_epoch() -> None:
    """Item 90: OffsetCommit v9 with the previous epoch after an epoch bump -> STALE_MEMBER_EPOCH on every partition,
    even though the partitions did not move (12.7 trap 8)."""
    h = ConsumerHarness(topics={"t": 4, "u": 1})
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b", names=["u"]))
    assert h.ok(h.hb("a", 1)).member_epoch == 2
    errors = h.commit({("t", 0): 10, ("t", 1): 11}, member_id="a", generation_id=1)
    assert errors == {("t", 0): E.stale_member_epoch, ("t", 1): E.stale_member_epoch}
    assert fetched(h) == [-1, -1]


def test_item_91_commit_below_v9_from_a_consumer_protocol_member() -> None:
    """Item 91: OffsetCommit v8 from a consumer-protocol member -> UNSUPPORTED_VERSION."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    errors = h.commit({("t", 0): 10}, member_id="a", generation_id=1, version=8)
    assert errors == {("t", 0): E.unsupported_version}


def test_item_92_admin_commit_needs_an_empty_group() -> None:
    """Item 92: OffsetCommit with epoch -1 and member "" on a non-empty consumer group -> UNKNOWN_MEMBER_ID; on an
    Empty consumer group -> NONE."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    assert h.commit({("t", 0): 10}) == {("t", 0): E.unknown_member_id}
    h.ok(h.hb("a", -1))
    assert h.coordinator.group_type(GROUP) == "consumer" and h.cgroup().is_empty()
    assert h.commit({("t", 0): 10}) == {("t", 0): E.none}
    assert h.coordinator.group_type(GROUP) == "consumer"
    assert fetched(h) == [10, -1]


def test_item_93_commit_to_a_group_that_does_not_exist() -> None:
    """Item 93: OffsetCommit v9 with epoch 3 for a group that does not exist -> GROUP_ID_NOT_FOUND; epoch -1 ->
    NONE, and a simple classic group is created."""
    h = ConsumerHarness()
    assert h.commit({("t", 0): 10}, member_id="a", generation_id=3) == {("t", 0): E.group_id_not_found}
    assert h.coordinator.group_type(GROUP) is None
    assert h.commit({("t", 0): 10}) == {("t", 0): E.none}
    assert h.coordinator.group_type(GROUP) == "classic"


def test_item_94_offset_fetch_with_member_fields() -> None:
    """Item 94: OffsetFetch v9 with MemberId null / epoch -1 -> offsets; a member id with a stale epoch -> group-level
    STALE_MEMBER_EPOCH; an unknown member -> UNKNOWN_MEMBER_ID; an unknown group -> offsets -1, no error."""
    h = ConsumerHarness()
    settled_pair(h)
    h.commit({("t", 0): 10}, member_id="a", generation_id=2)
    assert fetched(h) == [10, -1]
    assert fetched(h, member_id="a", member_epoch=2) == [10, -1]
    stale = h.coordinator.fetch_offsets(GROUP, [("t", [0])], member_id="a", member_epoch=1)
    assert stale.error is E.stale_member_epoch and stale.topics == ()
    unknown = h.coordinator.fetch_offsets(GROUP, [("t", [0])], member_id="zz", member_epoch=2)
    assert unknown.error is E.unknown_member_id and unknown.topics == ()
    nowhere = h.coordinator.fetch_offsets("nowhere", [("t", [0])], member_id="a", member_epoch=2)
    assert nowhere.error is E.none and nowhere.topics == (("t", (FetchedOffset(0),)),)


def test_item_96_offset_delete() -> None:
    """Item 96: OffsetDelete on a topic the group subscribes to -> GROUP_SUBSCRIBED_TO_TOPIC; on an unsubscribed
    topic -> NONE and the offset is gone, even with active members (section 8.3)."""
    h = ConsumerHarness(topics={"t": 4, "old": 1})
    h.ok(h.cjoin("a"))
    h.commit({("t", 0): 10, ("old", 0): 5}, member_id="a", generation_id=1)
    result = h.coordinator.delete_offsets(GROUP, [("t", [0]), ("old", [0])])
    assert result.error is E.none
    assert result.topics == (("t", ((0, E.group_subscribed_to_topic),)), ("old", ((0, E.none),)))
    offsets = h.coordinator.fetch_offsets(GROUP, [("t", [0]), ("old", [0])]).topics
    assert [p.offset for _, ps in offsets for p in ps] == [10, -1]
    assert h.coordinator.delete_offsets("nowhere", [("t", [0])]).error is E.group_id_not_found


def test_item_97_delete_groups() -> None:
    """Item 97: DeleteGroups on a non-empty consumer group -> NON_EMPTY_GROUP; after every member left -> NONE, the
    group and its offsets are gone and ListGroups no longer lists it; a new join starts from epoch 1 (8.4)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.commit({("t", 0): 10}, member_id="a", generation_id=1)
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.non_empty_group),)
    h.ok(h.hb("a", -1))
    assert h.coordinator.list_groups() == (E.none, (ListedGroup(GROUP, "consumer", "Empty", "consumer"),))
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    assert h.coordinator.group_type(GROUP) is None
    assert h.coordinator.list_groups() == (E.none, ())
    assert fetched(h) == [-1, -1]
    assert h.hb("a", 2).error is E.group_id_not_found
    assert h.ok(h.cjoin("a")).member_epoch == 1


def test_empty_group_without_offsets_goes_at_the_next_sweep() -> None:
    """Section 8.5: the retention sweep deletes an Empty consumer group left without offsets (one with offsets
    stays); a later heartbeat with an epoch for it -> GROUP_ID_NOT_FOUND."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b", group_id="kept"))
    h.commit({("t", 0): 10}, member_id="b", generation_id=1, group_id="kept")
    h.ok(h.hb("a", -1))
    h.ok(h.hb("b", -1, group_id="kept"))
    h.advance(h.config.offsets_retention_check_interval_ms)
    assert h.coordinator.group_type(GROUP) is None
    assert h.coordinator.group_type("kept") == "consumer"
    assert h.hb("a", 2).error is E.group_id_not_found
