"""OffsetCommit on classic groups: checklist items 110-121 (spec 13.1, 21).

Not covered here: TxnOffsetCommit (the broker offers no transactions); topic/partition existence and ACL
filtering happen in the API layer before the coordinator is called (spec 6), so they are not coordinator tests.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import CommitRequest, FetchedOffset, PartitionCommit
from broker.coordinator.offset_store import CommittedOffset
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, Harness

Offsets = dict[tuple[str, int], int]
TP0 = ("t", 0)
TP1 = ("t", 1)


def fetch_one(h: Harness, topic: str, partition: int, group_id: str = GROUP) -> FetchedOffset:
    result = h.coordinator.fetch_offsets(group_id, [(topic, [partition])])
    assert result.error is E.none
    ((name, (fetched,)),) = result.topics
    assert name == topic
    return fetched


def all_errors(result: dict[tuple[str, int], ErrorCode], error: ErrorCode) -> bool:
    return bool(result) and all(e is error for e in result.values())


def completing_group(h: Harness) -> tuple[str, str]:
    """Two dynamic members joined (generation 1), nobody synced: CompletingRebalance. Returns (leader, follower)."""
    first = h.join_new()
    second = h.join_new()
    h.advance(0)
    assert first.value.error is E.none and second.value.error is E.none
    assert h.state() is GroupState.COMPLETING_REBALANCE
    leader = first.value.leader
    follower = second.value.member_id if first.value.member_id == leader else first.value.member_id
    return leader, follower


def empty_group_after_leave(h: Harness) -> None:
    (member,) = h.stable_group(1)
    assert h.leave(member).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2
    assert h.group().protocol_type == "consumer"


# -- 110 / 111: unknown group ------------------------------------------------------


def test_110_commit_to_unknown_group_with_generation_is_illegal_generation_before_v9() -> None:
    h = Harness()
    for version in (1, 2, 5, 7, 8):
        result = h.commit({TP0: 5, TP1: 6, ("u", 3): 1}, generation_id=1, member_id="m", version=version)
        assert result == {TP0: E.illegal_generation, TP1: E.illegal_generation, ("u", 3): E.illegal_generation}
    # generation 0 is ">= 0" too
    assert all_errors(h.commit({TP0: 5}, generation_id=0, version=8), E.illegal_generation)
    assert GROUP not in h.coordinator.groups


def test_110_commit_to_unknown_group_with_generation_is_group_id_not_found_from_v9() -> None:
    h = Harness()
    result = h.commit({TP0: 5, TP1: 6}, generation_id=3, member_id="m", version=9)
    assert result == {TP0: E.group_id_not_found, TP1: E.group_id_not_found}
    assert all_errors(h.commit({TP0: 5}, generation_id=0, version=9), E.group_id_not_found)
    assert GROUP not in h.coordinator.groups
    assert fetch_one(h, "t", 0) == FetchedOffset(0, -1, -1, "", E.none)


def test_111_commit_to_unknown_group_with_generation_minus_one_creates_simple_group() -> None:
    h = Harness()
    before = h.clock.now_ms()
    assert h.commit({TP0: 42, TP1: 43}, metadata="meta") == {TP0: E.none, TP1: E.none}
    group = h.group()
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 0
    assert group.protocol_type is None
    assert group.protocol_name is None
    assert group.members == {}
    assert group.offsets == {
        TP0: CommittedOffset(42, -1, "meta", before, None),
        TP1: CommittedOffset(43, -1, "meta", before, None),
    }
    assert fetch_one(h, "t", 1) == FetchedOffset(1, 43, -1, "meta", E.none)
    error, listed = h.coordinator.list_groups()
    assert error is E.none
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [(GROUP, "", "Empty", "classic")]
    described = h.coordinator.describe(GROUP)
    assert (described.error, described.state, described.protocol_type, described.protocol_data, described.members) == (
        E.none,
        "Empty",
        "",
        "",
        (),
    )


def test_111_simple_group_accepts_a_join_of_any_protocol_type() -> None:
    """Spec 22.9: a JoinGroup into a simple group works (an Empty group accepts any protocol type)."""
    h = Harness()
    assert h.commit({TP0: 1}) == {TP0: E.none}
    join = h.join_new(protocol_type="connect")
    h.advance(0)
    assert join.value.error is E.none
    assert join.value.generation_id == 1
    assert h.group().protocol_type == "connect"
    assert fetch_one(h, "t", 0).offset == 1


def test_111_empty_string_is_a_valid_group_id_for_offset_commit() -> None:
    """Spec 6: OffsetCommit accepts "" as a group id (only null is invalid, which the wire cannot express)."""
    h = Harness()
    assert h.commit({TP0: 9}, group_id="") == {TP0: E.none}
    assert h.group("").state is GroupState.EMPTY
    assert fetch_one(h, "t", 0, group_id="").offset == 9


# -- 112: Dead -----------------------------------------------------------------------


def test_112_commit_on_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.commit({TP0: 1}, generation_id=1, member_id=member) == {TP0: E.none}
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.commit({TP0: 2, TP1: 3}, generation_id=1, member_id=member) == {
        TP0: E.coordinator_not_available,
        TP1: E.coordinator_not_available,
    }
    # generation -1 / anonymous commits are rejected as well (Dead is checked first)
    assert h.commit({TP0: 2}) == {TP0: E.coordinator_not_available}
    assert h.commit({TP0: 2}, generation_id=5, member_id="x", version=9) == {TP0: E.coordinator_not_available}
    assert h.group().offsets[TP0].offset == 1


def test_112_dead_simple_group_rejects_commits() -> None:
    h = Harness()
    assert h.commit({TP0: 1}) == {TP0: E.none}
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.commit({TP0: 2}) == {TP0: E.coordinator_not_available}
    assert h.group().offsets[TP0].offset == 1


# -- 113 / 114: member validation ------------------------------------------------------


def test_113_commit_with_unknown_member_or_wrong_generation() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit({TP0: 1, TP1: 2}, generation_id=1, member_id="stranger") == {
        TP0: E.unknown_member_id,
        TP1: E.unknown_member_id,
    }
    assert h.commit({TP0: 1}, generation_id=0, member_id=follower) == {TP0: E.illegal_generation}
    assert h.commit({TP0: 1}, generation_id=2, member_id=leader) == {TP0: E.illegal_generation}
    # unknown member wins over a wrong generation (member validated first)
    assert h.commit({TP0: 1}, generation_id=7, member_id="stranger") == {TP0: E.unknown_member_id}
    assert h.group().offsets == {}
    assert h.commit({TP0: 1}, generation_id=1, member_id=follower) == {TP0: E.none}
    assert h.state() is GroupState.STABLE


def test_113_member_with_empty_member_id_and_a_generation_is_unknown() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.commit({TP0: 1}, generation_id=1, member_id="") == {TP0: E.unknown_member_id}


def test_114_commit_with_unknown_or_fenced_instance_id() -> None:
    h = Harness()
    join = h.join(instance_id="inst-a")
    h.advance(0)
    member = join.value.member_id
    assert member == "inst-a-uuid1"
    assert h.sync(member, 1, {member: b"a"}).value.error is E.none
    # unknown instance id -> UNKNOWN_MEMBER_ID, even with a valid member id
    assert h.commit({TP0: 1}, generation_id=1, member_id=member, instance_id="inst-b") == {TP0: E.unknown_member_id}
    # known instance id owned by another member id -> FENCED_INSTANCE_ID (also with generation -1)
    assert h.commit({TP0: 1}, generation_id=1, member_id="inst-a-old", instance_id="inst-a") == {
        TP0: E.fenced_instance_id
    }
    assert h.commit({TP0: 1}, generation_id=-1, member_id="inst-a-old", instance_id="inst-a") == {
        TP0: E.fenced_instance_id
    }
    # fenced wins over a wrong generation
    assert h.commit({TP0: 1}, generation_id=9, member_id="inst-a-old", instance_id="inst-a") == {
        TP0: E.fenced_instance_id
    }
    assert h.commit({TP0: 1}, generation_id=9, member_id=member, instance_id="inst-a") == {TP0: E.illegal_generation}
    assert h.group().offsets == {}
    assert h.commit({TP0: 1}, generation_id=1, member_id=member, instance_id="inst-a") == {TP0: E.none}


def test_114_old_id_of_a_replaced_static_member_is_fenced() -> None:
    h = Harness()
    first = h.join(instance_id="inst")
    h.advance(0)
    old_id = first.value.member_id
    assert h.sync(old_id, 1, {old_id: b"x"}).value.error is E.none
    second = h.join(instance_id="inst")  # static replacement in Stable, no rebalance
    new_id = second.value.member_id
    assert second.value.error is E.none and new_id != old_id
    assert h.commit({TP0: 1}, generation_id=1, member_id=old_id, instance_id="inst") == {TP0: E.fenced_instance_id}
    assert h.commit({TP0: 1}, generation_id=1, member_id=new_id, instance_id="inst") == {TP0: E.none}


# -- 115: CompletingRebalance ---------------------------------------------------------


def test_115_commit_while_completing_rebalance() -> None:
    h = Harness()
    leader, follower = completing_group(h)
    assert h.commit({TP0: 1, TP1: 2}, generation_id=1, member_id=follower) == {
        TP0: E.rebalance_in_progress,
        TP1: E.rebalance_in_progress,
    }
    assert h.commit({TP0: 1}, generation_id=1, member_id=leader) == {TP0: E.rebalance_in_progress}
    assert h.commit({TP0: 1}, generation_id=1, member_id="stranger") == {TP0: E.unknown_member_id}
    assert h.commit({TP0: 1}, generation_id=0, member_id=follower) == {TP0: E.illegal_generation}
    assert h.commit({TP0: 1}, generation_id=2, member_id=follower) == {TP0: E.illegal_generation}
    assert h.commit({TP0: 1}) == {TP0: E.unknown_member_id}  # anonymous into a non-empty group
    assert h.group().offsets == {}
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_115_commit_in_completing_rebalance_does_not_refresh_the_session() -> None:
    h = Harness()
    start = h.clock.now_ms()
    member = h.join_new()
    h.advance(0)
    member_id = member.value.member_id
    h.advance(SESSION_MS - 1_000)
    assert h.commit({TP0: 1}, generation_id=1, member_id=member_id) == {TP0: E.rebalance_in_progress}
    assert h.purgatory.deadline(heartbeat_key(GROUP, member_id)) == start + SESSION_MS
    h.advance(1_000)
    assert not h.group().has_member(member_id)
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2


def test_115_commit_while_preparing_rebalance_with_valid_member_is_accepted() -> None:
    """13.1 e: commits from the previous generation are accepted during PreparingRebalance (and refresh the session)."""
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new()  # parked: the group starts rebalancing
    assert not newcomer.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(4_000)
    assert h.commit({TP0: 10, TP1: 11}, generation_id=1, member_id=follower) == {TP0: E.none, TP1: E.none}
    assert h.purgatory.deadline(heartbeat_key(GROUP, follower)) == h.clock.now_ms() + SESSION_MS
    assert h.commit({TP0: 12}, generation_id=2, member_id=leader) == {TP0: E.illegal_generation}
    assert h.commit({TP0: 12}, generation_id=1, member_id="stranger") == {TP0: E.unknown_member_id}
    assert fetch_one(h, "t", 0).offset == 10
    assert fetch_one(h, "t", 1).offset == 11


# -- 116 / 117 / 118: anonymous commits --------------------------------------------------


def test_116_anonymous_commit_to_non_empty_group_is_unknown_member() -> None:
    h = Harness()
    h.stable_group(2)
    assert h.commit({TP0: 1, TP1: 2}) == {TP0: E.unknown_member_id, TP1: E.unknown_member_id}
    assert h.commit({TP0: 1}, version=1) == {TP0: E.unknown_member_id}
    assert h.group().offsets == {}
    # also while rebalancing
    h.join_new()
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.commit({TP0: 1}) == {TP0: E.unknown_member_id}
    assert h.group().offsets == {}


def test_117_generation_minus_one_on_empty_group_ignores_member_and_instance_ids() -> None:
    h = Harness()
    empty_group_after_leave(h)
    assert h.commit({TP0: 1}) == {TP0: E.none}
    assert h.commit({TP0: 2}, member_id="whoever") == {TP0: E.none}
    assert h.commit({TP0: 3}, instance_id="no-such-instance") == {TP0: E.none}
    assert h.commit({TP0: 4, TP1: 5}, member_id="whoever", instance_id="no-such-instance") == {
        TP0: E.none,
        TP1: E.none,
    }
    assert fetch_one(h, "t", 0).offset == 4
    assert fetch_one(h, "t", 1).offset == 5
    assert h.state() is GroupState.EMPTY
    # but a generation >= 0 on an Empty group goes through member validation
    assert h.commit({TP0: 6}, generation_id=2, member_id="whoever") == {TP0: E.unknown_member_id}
    assert h.commit({TP0: 6}, generation_id=2, member_id="x", instance_id="i") == {TP0: E.unknown_member_id}
    assert fetch_one(h, "t", 0).offset == 4


def test_117_generation_minus_one_on_simple_group_ignores_ids() -> None:
    h = Harness()
    assert h.commit({TP0: 1}) == {TP0: E.none}
    assert h.commit({TP0: 2}, member_id="m", instance_id="i") == {TP0: E.none}
    assert fetch_one(h, "t", 0).offset == 2


def test_118_commit_after_all_members_left_then_fetch() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit({TP0: 7}, generation_id=1, member_id=leader) == {TP0: E.none}
    result = h.leave(leader, follower)
    assert [m.error for m in result.members] == [E.none, E.none]
    assert h.state() is GroupState.EMPTY
    # the old member's commit is now rejected, an anonymous one accepted
    assert h.commit({TP0: 8}, generation_id=1, member_id=leader) == {TP0: E.unknown_member_id}
    assert h.commit({TP0: 9, TP1: 10}) == {TP0: E.none, TP1: E.none}
    assert fetch_one(h, "t", 0) == FetchedOffset(0, 9, -1, "", E.none)
    assert fetch_one(h, "t", 1) == FetchedOffset(1, 10, -1, "", E.none)


# -- 119: retention time ---------------------------------------------------------------


def test_119_retention_time_sets_expire_timestamp() -> None:
    h = Harness()
    h.advance(1_234)
    now = h.clock.now_ms()
    for version in (2, 3, 4):
        assert h.commit({("t", version): 1}, retention_ms=86_400_000, version=version) == {("t", version): E.none}
    for version in (2, 3, 4):
        stored = h.group().offsets[("t", version)]
        assert stored.commit_timestamp_ms == now
        assert stored.expire_timestamp_ms == now + 86_400_000
    # RetentionTimeMs -1 (the default, and v5+ which has no such field): no expire timestamp
    assert h.commit({TP0: 1}, retention_ms=-1, version=4) == {TP0: E.none}
    assert h.group().offsets[TP0].expire_timestamp_ms is None
    # a zero retention is a real value, not "unset"
    assert h.commit({TP1: 1}, retention_ms=0, version=2) == {TP1: E.none}
    assert h.group().offsets[TP1].expire_timestamp_ms == now


def test_119_v1_commit_timestamp_is_stored_when_given() -> None:
    h = Harness()
    now = h.clock.now_ms()
    request = CommitRequest(
        GROUP,
        (("t", (PartitionCommit(0, 5, commit_timestamp_ms=now - 50_000), PartitionCommit(1, 6))),),
        api_version=1,
    )
    assert h.coordinator.commit_offsets(request) == (("t", ((0, E.none), (1, E.none))),)
    assert h.group().offsets[TP0].commit_timestamp_ms == now - 50_000
    assert h.group().offsets[TP1].commit_timestamp_ms == now


# -- 120: metadata size ------------------------------------------------------------------


def test_120_metadata_too_large_fails_only_that_partition() -> None:
    h = Harness()
    limit = h.config.offset_metadata_max_bytes
    assert limit == 4096
    request = CommitRequest(
        GROUP,
        (
            (
                "t",
                (
                    PartitionCommit(0, 10, metadata="x" * limit),
                    PartitionCommit(1, 11, metadata="x" * (limit + 1)),
                    PartitionCommit(2, 12, metadata=None),
                ),
            ),
            ("u", (PartitionCommit(0, 13, metadata="y"),)),
        ),
    )
    assert h.coordinator.commit_offsets(request) == (
        ("t", ((0, E.none), (1, E.offset_metadata_too_large), (2, E.none))),
        ("u", ((0, E.none),)),
    )
    assert fetch_one(h, "t", 0) == FetchedOffset(0, 10, -1, "x" * limit, E.none)
    assert fetch_one(h, "t", 1) == FetchedOffset(1, -1, -1, "", E.none)
    assert fetch_one(h, "t", 2) == FetchedOffset(2, 12, -1, "", E.none)  # null metadata is stored as ""
    assert fetch_one(h, "u", 0) == FetchedOffset(0, 13, -1, "y", E.none)


def test_120_too_large_commit_keeps_the_previous_offset() -> None:
    h = Harness()
    assert h.commit({TP0: 1}, metadata="ok") == {TP0: E.none}
    assert h.commit({TP0: 2}, metadata="m" * 5000) == {TP0: E.offset_metadata_too_large}
    assert fetch_one(h, "t", 0) == FetchedOffset(0, 1, -1, "ok", E.none)


def test_120_metadata_length_is_counted_in_utf16_units() -> None:
    """offset.metadata.max.bytes is compared with Java's String.length() (UTF-16 code units)."""
    h = Harness()
    # 4096 two-byte UTF-8 characters are 4096 UTF-16 units: accepted
    assert h.commit({TP0: 1}, metadata="\u00e9" * 4096) == {TP0: E.none}
    # 2049 astral characters are 4098 UTF-16 units (only 2049 code points): rejected
    assert h.commit({TP1: 1}, metadata="\U0001f600" * 2049) == {TP1: E.offset_metadata_too_large}
    # 2048 astral characters are exactly 4096 units: accepted
    assert h.commit({TP1: 2}, metadata="\U0001f600" * 2048) == {TP1: E.none}


def test_120_negative_offsets_are_stored_as_given_and_order_is_kept() -> None:
    h = Harness()
    request = CommitRequest(
        GROUP,
        (
            ("b", (PartitionCommit(3, -5, leader_epoch=2), PartitionCommit(1, 0))),
            ("a", (PartitionCommit(0, 99),)),
        ),
    )
    assert h.coordinator.commit_offsets(request) == (
        ("b", ((3, E.none), (1, E.none))),
        ("a", ((0, E.none),)),
    )
    assert fetch_one(h, "b", 3) == FetchedOffset(3, -5, 2, "", E.none)


# -- 121: session refresh --------------------------------------------------------------------


def test_121_commit_in_stable_refreshes_the_session() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    for _ in range(5):  # 5 * 8 s = 40 s > several session timeouts, kept alive by commits only
        h.advance(8_000)
        assert h.commit({TP0: 1}, generation_id=1, member_id=member) == {TP0: E.none}
        assert h.purgatory.deadline(heartbeat_key(GROUP, member)) == h.clock.now_ms() + SESSION_MS
    assert h.group().has_member(member)
    assert h.state() is GroupState.STABLE
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(member, 1) is E.none  # still alive, and this heartbeat refreshes again
    h.advance(SESSION_MS)
    assert h.heartbeat(member, 1) is E.unknown_member_id
    assert h.state() is GroupState.EMPTY


def test_121_rejected_commit_does_not_refresh_the_session() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    start = h.clock.now_ms()
    h.advance(8_000)
    assert h.commit({TP0: 1}, generation_id=2, member_id=member) == {TP0: E.illegal_generation}
    assert h.purgatory.deadline(heartbeat_key(GROUP, member)) == start + SESSION_MS
    h.advance(1_999)
    assert h.group().has_member(member)
    h.advance(1)
    assert not h.group().has_member(member)
    assert h.state() is GroupState.EMPTY


def test_121_commit_keeps_one_member_alive_while_the_other_expires() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.advance(6_000)
    assert h.commit({TP0: 1}, generation_id=1, member_id=follower) == {TP0: E.none}
    h.advance(4_000)  # leader's session (10 s) ran out, follower's runs until 16 s
    assert not h.group().has_member(leader)
    assert h.group().has_member(follower)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
