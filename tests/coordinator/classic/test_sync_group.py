"""SyncGroup scenarios: checklist items 54-71 of docs/spec/group-coordinator.md (sections 8, 8.1, 21).

Not testable on the coordinator:
* 66 (SyncGroup v5 with a null ProtocolType or ProtocolName -> INCONSISTENT_GROUP_PROTOCOL) is a KafkaApis-layer
  check that runs before the coordinator is called; it is covered by the wire tests.
* 67 (the leader's assignment write fails -> parked syncs get the mapped error, group back to PreparingRebalance):
  an in-memory broker persists nothing, so the assignment "write" cannot fail.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import JoinResult, LeavingMember, SyncRequest, SyncResult
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, Harness

REBALANCE_5S = 5_000  # shorter than the session timeout, so the sync deadline fires before any session expiry


def completing_group(h: Harness, size: int, **join_kwargs: int) -> list[JoinResult]:
    """``size`` dynamic members join a new group; returns their join results, leader first (CompletingRebalance)."""
    joins = [h.join_new(**join_kwargs) for _ in range(size)]
    h.advance(h.config.initial_rebalance_delay_ms)
    results = [j.value for j in joins]
    assert all(r.error is E.none for r in results), results
    assert h.state() is GroupState.COMPLETING_REBALANCE
    leader = results[0].leader
    return sorted(results, key=lambda r: r.member_id != leader)


def assert_error_only(result: SyncResult, error: E) -> None:
    assert result == SyncResult(error, b"", None, None)


# -- validation ------------------------------------------------------------------------------


def test_54_sync_for_unknown_group_is_unknown_member_id() -> None:
    h = Harness()
    sync = h.sync("member", 1, group_id="unknown-group")
    assert sync.done
    assert_error_only(sync.value, E.unknown_member_id)
    assert "unknown-group" not in h.coordinator.groups


def test_55_sync_for_unknown_member_of_existing_group_is_unknown_member_id() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2)
    assert_error_only(h.sync("unknown-member", 1).value, E.unknown_member_id)
    # the same in CompletingRebalance, before the group is Stable
    h2 = Harness()
    completing_group(h2, 1)
    assert_error_only(h2.sync("unknown-member", 1).value, E.unknown_member_id)
    assert h2.state() is GroupState.COMPLETING_REBALANCE
    assert h.state() is GroupState.STABLE and h.group().leader_id == leader


def test_55_sync_on_empty_group_is_unknown_member_id_before_member_validation() -> None:
    h = Harness()
    member, _other = h.stable_group(2)
    group = h.group()
    group.transition_to(GroupState.PREPARING_REBALANCE, h.clock.now_ms())
    group.transition_to(GroupState.EMPTY, h.clock.now_ms())
    assert member in group.members
    assert_error_only(h.sync(member, 1).value, E.unknown_member_id)
    assert_error_only(h.sync(member, 5).value, E.unknown_member_id)  # not ILLEGAL_GENERATION: Empty comes first


def test_56_sync_with_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    (leader,) = completing_group(h, 1)
    assert leader.generation_id == 1
    for generation in (2, 0, -1):
        assert_error_only(h.sync(leader.member_id, generation, {leader.member_id: b"x"}).value, E.illegal_generation)
    # nothing was stored or parked: the group still waits for its leader
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().members[leader.member_id].sync_answer is None
    assert h.group().members[leader.member_id].assignment == b""


def test_57_sync_on_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert_error_only(h.sync(leader, 1, {leader: b"a"}).value, E.coordinator_not_available)
    assert_error_only(h.sync(follower, 1).value, E.coordinator_not_available)
    # Dead is checked before member validation and generation
    assert_error_only(h.sync("unknown-member", 7).value, E.coordinator_not_available)


# -- assignment propagation ----------------------------------------------------------------


def test_58_leader_syncs_with_empty_assignment_list() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    follower_sync = h.sync(follower.member_id, 1)
    assert not follower_sync.done
    leader_sync = h.sync(leader.member_id, 1, {})
    assert leader_sync.value == SyncResult(E.none, b"", "consumer", "range")
    assert follower_sync.value == SyncResult(E.none, b"", "consumer", "range")
    assert h.state() is GroupState.STABLE
    assert h.heartbeat(leader.member_id, 1) is E.none
    assert h.heartbeat(follower.member_id, 1) is E.none


def test_59_follower_syncs_before_leader_is_parked_then_both_answered() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    assert leader.leader == follower.leader == leader.member_id
    follower_sync = h.sync(follower.member_id, 1)
    assert not follower_sync.done
    assert h.state() is GroupState.COMPLETING_REBALANCE
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert leader_sync.value == SyncResult(E.none, b"L", "consumer", "range")
    assert follower_sync.value == SyncResult(E.none, b"F", "consumer", "range")
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 1


def test_59_assignment_map_last_duplicate_wins_and_non_members_are_ignored() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    follower_sync = h.sync(follower.member_id, 1)
    leader_sync = h.coordinator.sync(
        SyncRequest(
            group_id=GROUP,
            generation_id=1,
            member_id=leader.member_id,
            assignments=(
                (follower.member_id, b"first"),
                ("not-a-member", b"stray"),
                (follower.member_id, b"second"),
            ),
        )
    )
    assert leader_sync.value == SyncResult(E.none, b"", "consumer", "range")  # the leader was left out: empty
    assert follower_sync.value == SyncResult(E.none, b"second", "consumer", "range")
    assert set(h.group().members) == {leader.member_id, follower.member_id}


def test_60_leader_syncs_first_then_follower_is_answered_immediately() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"\x00", follower.member_id: b"\x01"})
    assert leader_sync.value == SyncResult(E.none, b"\x00", "consumer", "range")
    assert h.state() is GroupState.STABLE
    follower_sync = h.sync(follower.member_id, 1)
    assert follower_sync.done
    assert follower_sync.value == SyncResult(E.none, b"\x01", "consumer", "range")
    assert h.state() is GroupState.STABLE


def test_61_parked_follower_gets_rebalance_in_progress_when_leader_leaves() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    h.advance(1_000)
    follower_sync = h.sync(follower.member_id, 1)
    assert not follower_sync.done
    h.advance(2_000)
    result = h.leave(leader.member_id)
    assert result.members[0].error is E.none
    assert_error_only(follower_sync.value, E.rebalance_in_progress)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().leader_id == follower.member_id
    assert h.group().generation_id == 1
    # the answered member's session starts counting again from the answer
    assert h.purgatory.deadline(heartbeat_key(GROUP, follower.member_id)) == h.clock.now_ms() + SESSION_MS
    assert h.heartbeat(follower.member_id, 1) is E.rebalance_in_progress


def test_61_parked_follower_gets_rebalance_in_progress_when_new_member_joins() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    follower_sync = h.sync(follower.member_id, 1)
    assert not follower_sync.done
    newcomer = h.join_new()
    assert not newcomer.done
    assert_error_only(follower_sync.value, E.rebalance_in_progress)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert len(h.group().members) == 3
    # the leader learns about the rebalance from its own SyncGroup too
    assert_error_only(h.sync(leader.member_id, 1, {leader.member_id: b"L"}).value, E.rebalance_in_progress)
    # assignments were reset when the rebalance started
    assert all(m.assignment == b"" for m in h.group().members.values())


# -- protocol type / name (v5) ---------------------------------------------------------------


def test_62_sync_v5_with_other_protocol_type_is_inconsistent_group_protocol() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"L"}, protocol_type="whatever")
    assert_error_only(leader_sync.value, E.inconsistent_group_protocol)
    follower_sync = h.sync(follower.member_id, 1, protocol_type="whatever")
    assert_error_only(follower_sync.value, E.inconsistent_group_protocol)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().members[follower.member_id].sync_answer is None


def test_63_sync_v5_with_other_protocol_name_is_inconsistent_group_protocol() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"L"}, protocol_name="whatever")
    assert_error_only(leader_sync.value, E.inconsistent_group_protocol)
    follower_sync = h.sync(follower.member_id, 1, protocol_name="whatever")
    assert_error_only(follower_sync.value, E.inconsistent_group_protocol)
    # a matching type does not rescue a wrong name
    mixed = h.sync(follower.member_id, 1, protocol_type="consumer", protocol_name="roundrobin")
    assert_error_only(mixed.value, E.inconsistent_group_protocol)
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_64_sync_without_protocol_type_and_name_succeeds() -> None:
    """Item 64: v<5 requests carry no type/name (None here). The coordinator still returns the group's values;
    leaving them out of v<5 responses is the wire layer's job (covered by the wire tests)."""
    h = Harness()
    leader, follower = completing_group(h, 2)
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    follower_sync = h.sync(follower.member_id, 1)
    assert leader_sync.value == SyncResult(E.none, b"L", "consumer", "range")
    assert follower_sync.value == SyncResult(E.none, b"F", "consumer", "range")


def test_65_sync_with_matching_protocol_type_and_name_echoes_them() -> None:
    h = Harness()
    leader, follower = completing_group(h, 2)
    leader_sync = h.sync(
        leader.member_id,
        1,
        {leader.member_id: b"L", follower.member_id: b"F"},
        protocol_type="consumer",
        protocol_name="range",
    )
    follower_sync = h.sync(follower.member_id, 1, protocol_type="consumer", protocol_name="range")
    assert leader_sync.value == SyncResult(E.none, b"L", "consumer", "range")
    assert follower_sync.value == SyncResult(E.none, b"F", "consumer", "range")
    assert h.state() is GroupState.STABLE


# 66: null ProtocolType/ProtocolName on v5 -> INCONSISTENT_GROUP_PROTOCOL is checked by the API layer (wire tests).
# 67: assignment persistence cannot fail in an in-memory broker (see the module docstring).


# -- sync expiry (8.1) -----------------------------------------------------------------------


def test_68_no_sync_at_all_removes_every_member_after_rebalance_timeout() -> None:
    h = Harness()
    results = completing_group(h, 2, rebalance_ms=REBALANCE_5S)
    assert [r.generation_id for r in results] == [1, 1]
    h.advance(REBALANCE_5S - 1)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert len(h.group().members) == 2
    h.advance(1)
    # every member was removed and the rebalance completed at once with nobody left
    assert h.group().members == {}
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2
    assert h.group().leader_id is None
    for r in results:
        assert h.heartbeat(r.member_id, 1) is E.unknown_member_id
        assert h.purgatory.deadline(heartbeat_key(GROUP, r.member_id)) is None


def test_68_heartbeats_do_not_hold_off_the_sync_deadline() -> None:
    h = Harness()
    results = completing_group(h, 3, rebalance_ms=REBALANCE_5S)
    h.advance(REBALANCE_5S // 2)
    for r in results:
        assert h.heartbeat(r.member_id, 1) is E.none
    h.advance(REBALANCE_5S - REBALANCE_5S // 2)
    for r in results:
        assert h.heartbeat(r.member_id, 1) is E.unknown_member_id
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2


def test_69_only_leader_syncs_followers_removed_after_rebalance_timeout() -> None:
    h = Harness()
    leader, *followers = completing_group(h, 3, rebalance_ms=REBALANCE_5S)
    h.advance(REBALANCE_5S // 2)
    leader_sync = h.sync(leader.member_id, 1, {r.member_id: r.member_id.encode() for r in (leader, *followers)})
    assert leader_sync.value == SyncResult(E.none, leader.member_id.encode(), "consumer", "range")
    assert h.state() is GroupState.STABLE
    assert h.heartbeat(leader.member_id, 1) is E.none
    h.advance(REBALANCE_5S - REBALANCE_5S // 2 - 1)
    assert len(h.group().members) == 3
    h.advance(1)
    assert set(h.group().members) == {leader.member_id}
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().generation_id == 1
    assert h.group().leader_id == leader.member_id
    assert h.heartbeat(leader.member_id, 1) is E.rebalance_in_progress
    for f in followers:
        assert h.heartbeat(f.member_id, 1) is E.unknown_member_id


def test_70_only_followers_sync_leader_removed_and_parked_followers_rebalance() -> None:
    h = Harness()
    leader, *followers = completing_group(h, 3, rebalance_ms=REBALANCE_5S)
    h.advance(REBALANCE_5S // 2)
    syncs = [h.sync(f.member_id, 1) for f in followers]
    assert not any(s.done for s in syncs)
    h.advance(REBALANCE_5S - REBALANCE_5S // 2 - 1)
    assert not any(s.done for s in syncs)
    h.advance(1)
    for s in syncs:
        assert_error_only(s.value, E.rebalance_in_progress)
    follower_ids = {f.member_id for f in followers}
    assert set(h.group().members) == follower_ids
    assert h.group().leader_id in follower_ids
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().generation_id == 1
    assert h.heartbeat(leader.member_id, 1) is E.unknown_member_id
    for f in followers:
        assert h.heartbeat(f.member_id, 1) is E.rebalance_in_progress


def test_71_everyone_syncs_sync_timer_cancelled_and_group_stays_stable() -> None:
    h = Harness()
    leader, *followers = completing_group(h, 3, rebalance_ms=REBALANCE_5S)
    sync_key = h.group().sync_key
    assert h.purgatory.deadline(sync_key) == h.clock.now_ms() + REBALANCE_5S
    h.advance(REBALANCE_5S // 2)
    ids = [r.member_id for r in (leader, *followers)]
    assert h.sync(leader.member_id, 1, {m: b"" for m in ids}).value.error is E.none
    assert sync_key in h.purgatory  # followers still owe their SyncGroup
    assert all(h.sync(f.member_id, 1).value.error is E.none for f in followers)
    assert sync_key not in h.purgatory
    h.advance(REBALANCE_5S - REBALANCE_5S // 2 + 1)
    assert h.state() is GroupState.STABLE
    assert set(h.group().members) == set(ids)
    for m in ids:
        assert h.heartbeat(m, 1) is E.none
    h.advance(REBALANCE_5S // 2)
    for m in ids:
        assert h.heartbeat(m, 1) is E.none
    assert h.group().generation_id == 1


def test_70_sync_deadline_is_cancelled_when_a_leave_starts_a_rebalance() -> None:
    """Item 70 variant: a rebalance started before the sync deadline cancels it; the join deadline rules instead."""
    h = Harness()
    leader, f1, f2 = completing_group(h, 3, rebalance_ms=REBALANCE_5S)
    parked = h.sync(f1.member_id, 1)
    assert h.leave(LeavingMember(f2.member_id)).members[0].error is E.none
    # the leave started a rebalance from CompletingRebalance: the parked sync is answered now
    assert_error_only(parked.value, E.rebalance_in_progress)
    assert h.group().sync_key not in h.purgatory
    h.advance(REBALANCE_5S)
    # the sync deadline was cancelled, so the join deadline (leader and f1 did not rejoin) removed both
    assert h.group().members == {}
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2
    assert leader.member_id not in h.group().members
