"""Checklist items 32-43: the join phase, leader election and generations (spec sections 7.3-7.8)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import JoinResult, LeavingMember
from broker.timing.deferred import Deferred
from tests.coordinator.harness import E, Harness, subscription

OTHER_PROTOCOLS = (("range", subscription("topic", "other-topic")),)
SUPERSET = (("range", subscription("topic")), ("roundrobin", subscription("topic")))


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def sync_all(h: Harness, results: list[JoinResult]) -> None:
    """Every member syncs; the leader hands out empty assignments. The group must end up Stable."""
    leader = results[0].leader
    ids = [r.member_id for r in results]
    generation = results[0].generation_id
    leader_result = next(r for r in results if r.member_id == leader)
    instance = {m.member_id: m.group_instance_id for m in leader_result.members}
    for member_id in [leader] + [m for m in ids if m != leader]:
        assignments = dict.fromkeys(ids, b"") if member_id == leader else None
        sync = h.sync(member_id, generation, assignments, instance_id=instance[member_id])
        assert sync.done and sync.value.error is E.none, sync.value if sync.done else "parked"
    assert h.state() is GroupState.STABLE


# -- Generations ------------------------------------------------------------------------------------------------


def test_32_generation_increments_once_per_completed_rebalance() -> None:
    """Item 32: generation 1 after the first join, 2 after a second member forces a rebalance."""
    h = Harness()
    (leader,) = h.stable_group(1)
    assert h.group().generation_id == 1
    newcomer = h.join(version=3)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().generation_id == 1
    leader_again = h.join(leader)
    results = [answered(leader_again), answered(newcomer)]
    assert [r.error for r in results] == [E.none, E.none]
    assert [r.generation_id for r in results] == [2, 2]
    assert h.group().generation_id == 2
    assert h.state() is GroupState.COMPLETING_REBALANCE


# -- Stable / CompletingRebalance rejoins --------------------------------------------------------------------------


def test_33_unchanged_follower_rejoin_is_answered_without_rebalance() -> None:
    """Item 33: Stable group, unchanged follower rejoins -> immediate answer, same generation and leader, no
    rebalance; a later leader rejoin starts one and the follower then sees the next generation."""
    h = Harness()
    leader, follower = h.stable_group(2)
    result = answered(h.join(follower))
    assert result.error is E.none
    assert result.member_id == follower
    assert result.generation_id == 1
    assert result.leader == leader
    assert result.protocol_type == "consumer"
    assert result.protocol_name == "range"
    assert result.members == ()
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 1

    leader_join = h.join(leader)
    assert not leader_join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    follower_join = h.join(follower)
    leader_result, follower_result = answered(leader_join), answered(follower_join)
    assert leader_result.generation_id == follower_result.generation_id == 2
    assert leader_result.leader == follower_result.leader == leader
    assert {m.member_id for m in leader_result.members} == {leader, follower}
    assert follower_result.members == ()


def test_34_leader_rejoin_with_same_metadata_triggers_rebalance() -> None:
    """Item 34: Stable group, leader rejoins with identical metadata -> PreparingRebalance."""
    h = Harness()
    leader, follower = h.stable_group(2)
    join = h.join(leader)
    assert not join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().generation_id == 1
    assert h.group().members[leader].is_awaiting_join
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress


def test_35_changed_metadata_rejoin_triggers_rebalance_when_stable() -> None:
    """Item 35 (Stable): a follower rejoining with changed metadata -> rebalance."""
    h = Harness()
    leader, follower = h.stable_group(2)
    join = h.join(follower, protocols=OTHER_PROTOCOLS)
    assert not join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().members[follower].protocols == OTHER_PROTOCOLS
    leader_join = h.join(leader)
    assert answered(join).generation_id == answered(leader_join).generation_id == 2
    assert dict((m.member_id, m.metadata) for m in answered(leader_join).members)[follower] == OTHER_PROTOCOLS[0][1]


def test_35_changed_metadata_rejoin_triggers_rebalance_when_completing() -> None:
    """Item 35 (CompletingRebalance): a member rejoining with changed metadata -> rebalance; a parked SyncGroup is
    answered REBALANCE_IN_PROGRESS."""
    h = Harness()
    joins = [h.join_new(), h.join_new()]
    h.advance(0)
    leader, follower = (answered(j).member_id for j in joins)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    follower_sync = h.sync(follower, 1)
    assert not follower_sync.done
    join = h.join(follower, protocols=OTHER_PROTOCOLS)
    assert not join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert follower_sync.done and follower_sync.value.error is E.rebalance_in_progress
    assert h.group().generation_id == 1
    assert answered(h.join(leader)).generation_id == 2


def test_36_identical_rejoin_while_completing_gets_current_generation() -> None:
    """Item 36: CompletingRebalance, a member rejoins with identical metadata -> immediate answer with the current
    generation; only the leader gets the member list; no rebalance."""
    h = Harness()
    joins = [h.join_new(), h.join_new()]
    h.advance(0)
    leader, follower = (answered(j).member_id for j in joins)
    group = h.group()
    assert h.state() is GroupState.COMPLETING_REBALANCE

    follower_again = answered(h.join(follower))
    assert follower_again.error is E.none
    assert follower_again.generation_id == 1
    assert follower_again.leader == leader
    assert follower_again.protocol_name == "range"
    assert follower_again.members == ()

    leader_again = answered(h.join(leader))
    assert leader_again.error is E.none
    assert leader_again.generation_id == 1
    assert leader_again.leader == leader
    assert leader_again.skip_assignment is False
    assert [m.member_id for m in leader_again.members] == [leader, follower]

    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert group.generation_id == 1
    assert group.not_yet_synced == {leader, follower}


# -- Join completion: who stays, who leads ---------------------------------------------------------------------


def test_37_join_completion_removes_dynamic_laggards_keeps_static_ones() -> None:
    """Item 37: at join completion dynamic members that did not rejoin are removed, static ones are kept."""
    h = Harness()
    long_session = 60_000
    rebalance = 10_000
    static = h.join(instance_id="static", session_ms=long_session, rebalance_ms=rebalance)
    dynamic = h.join(version=3, session_ms=long_session, rebalance_ms=rebalance)
    h.advance(0)
    results = [answered(static), answered(dynamic)]
    sync_all(h, results)
    static_id, dynamic_id = (r.member_id for r in results)

    newcomer = h.join(version=3, session_ms=long_session, rebalance_ms=rebalance)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(rebalance - 1)
    assert not newcomer.done
    h.advance(1)
    result = answered(newcomer)
    assert result.error is E.none
    assert result.generation_id == 2
    assert result.leader == result.member_id  # the static leader did not rejoin
    assert {(m.member_id, m.group_instance_id) for m in result.members} == {
        (static_id, "static"),
        (result.member_id, None),
    }
    assert set(h.group().members) == {static_id, result.member_id}
    assert h.heartbeat(dynamic_id, 1) is E.unknown_member_id
    assert h.heartbeat(static_id, 1) is E.illegal_generation


@dataclass
class StuckGroup:
    leader_id: str
    follower_id: str
    dynamic_id: str
    stuck_at_ms: int


LONG_SESSION_MS = 45_000
STATIC_REBALANCE_MS = 10_000


def dynamic_member_joins_static_group(h: Harness) -> StuckGroup:
    """Item 40 set-up: static leader + follower (Stable, gen 1); a dynamic member joins; the statics do not rejoin.

    After the rebalance timeout the dynamic member leads generation 2 and both statics are kept."""
    leader_join = h.join(instance_id="leader", session_ms=LONG_SESSION_MS, rebalance_ms=STATIC_REBALANCE_MS)
    follower_join = h.join(instance_id="follower", session_ms=LONG_SESSION_MS, rebalance_ms=STATIC_REBALANCE_MS)
    h.advance(0)
    results = [answered(leader_join), answered(follower_join)]
    sync_all(h, results)
    leader_id, follower_id = (r.member_id for r in results)
    assert h.group().leader_id == leader_id

    dynamic = h.join(version=3, protocols=SUPERSET, session_ms=LONG_SESSION_MS, rebalance_ms=STATIC_REBALANCE_MS)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(STATIC_REBALANCE_MS - 1)
    assert not dynamic.done
    h.advance(1)
    result = answered(dynamic)
    assert result.error is E.none
    assert result.generation_id == 2
    assert result.leader == result.member_id
    assert len(result.members) == 3
    assert {m.group_instance_id for m in result.members} == {"leader", "follower", None}
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(h.group().members) == {leader_id, follower_id, result.member_id}
    assert set(h.group().static_members) == {"leader", "follower"}
    return StuckGroup(leader_id, follower_id, result.member_id, stuck_at_ms=0)


def group_stuck_with_non_rejoined_static_leader(h: Harness) -> StuckGroup:
    """Continuation (items 38, 41): the static follower leaves, the dynamic member does not rejoin; at the join
    deadline only the static leader is left and nobody rejoined -> stuck in PreparingRebalance at generation 2."""
    stuck = dynamic_member_joins_static_group(h)
    left = h.leave(LeavingMember(stuck.follower_id, "follower"))
    assert left.members[0].error is E.none
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(STATIC_REBALANCE_MS)
    group = h.group()
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert set(group.members) == {stuck.leader_id}
    assert group.generation_id == 2
    stuck.stuck_at_ms = h.clock.now_ms()
    return stuck


def test_38_nobody_rejoined_with_static_members_left_rearms_join_timer() -> None:
    """Item 38: join deadline with nobody rejoined but a static member present -> the join timer is re-armed again and
    again (PreparingRebalance, generation unchanged) until the static member's session expires."""
    h = Harness()
    stuck = group_stuck_with_non_rejoined_static_leader(h)
    group = h.group()
    start = h.clock.now_ms()
    assert h.purgatory.deadline(group.join_key) == start + STATIC_REBALANCE_MS
    for round_ in range(1, 4):
        h.advance(STATIC_REBALANCE_MS)
        assert h.state() is GroupState.PREPARING_REBALANCE
        assert group.generation_id == 2
        assert set(group.members) == {stuck.leader_id}
        assert h.purgatory.deadline(group.join_key) == start + (round_ + 1) * STATIC_REBALANCE_MS
    # the leader's session was last refreshed when generation 2 was formed (stuck_at - rebalance timeout)
    expiry = stuck.stuck_at_ms - STATIC_REBALANCE_MS + LONG_SESSION_MS
    h.advance(expiry - h.clock.now_ms() - 1)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(1)
    assert h.state() is GroupState.EMPTY
    assert group.generation_id == 3
    assert h.group().join_key not in h.purgatory


def test_39_new_leader_when_old_leader_does_not_rejoin() -> None:
    """Item 39: the leader fails to rejoin, another member does -> that member leads the new generation."""
    h = Harness()
    leader, follower = h.stable_group(2, session_ms=60_000, rebalance_ms=10_000)
    join = h.join(follower, protocols=OTHER_PROTOCOLS, session_ms=60_000, rebalance_ms=10_000)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(10_000)
    result = answered(join)
    assert result.error is E.none
    assert result.generation_id == 2
    assert result.leader == follower
    assert [m.member_id for m in result.members] == [follower]
    assert h.group().leader_id == follower
    assert h.heartbeat(leader, 1) is E.unknown_member_id


def test_40_dynamic_member_leads_when_static_leader_does_not_rejoin() -> None:
    """Item 40: dynamic member joins a Stable static group; the static leader does not rejoin within the rebalance
    timeout -> the dynamic member leads generation 2, statics kept (member list of 3)."""
    h = Harness()
    stuck = dynamic_member_joins_static_group(h)
    group = h.group()
    assert group.leader_id == stuck.dynamic_id
    assert group.generation_id == 2
    assert group.protocol_name == "range"
    # the non-rejoined statics still hold generation 1
    assert h.heartbeat(stuck.leader_id, 1, instance_id="leader") is E.illegal_generation
    assert h.heartbeat(stuck.leader_id, 2, instance_id="leader") is E.none


def test_41_stuck_group_becomes_empty_when_static_leader_expires() -> None:
    """Item 41 (expiry): the stuck group's only (static) member expires -> join completes with nobody: Empty,
    leader null, generation 3."""
    h = Harness()
    stuck = group_stuck_with_non_rejoined_static_leader(h)
    h.advance(STATIC_REBALANCE_MS + 1)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(LONG_SESSION_MS)  # well past the leader's session expiry
    group = h.group()
    assert group.members == {}
    assert group.leader_id is None
    assert group.generation_id == 3
    assert h.state() is GroupState.EMPTY
    assert h.heartbeat(stuck.leader_id, 2, instance_id="leader") is E.unknown_member_id


def test_41_stuck_group_completes_at_once_when_static_leader_rejoins() -> None:
    """Item 41 (rejoin): the static leader rejoins with member id "" before expiring -> it replaces itself, the join
    completes at once: CompletingRebalance, generation 3, sole member and leader."""
    h = Harness()
    stuck = group_stuck_with_non_rejoined_static_leader(h)
    result = answered(h.join(instance_id="leader", session_ms=LONG_SESSION_MS, rebalance_ms=STATIC_REBALANCE_MS))
    assert result.error is E.none
    assert result.member_id != stuck.leader_id
    assert result.member_id.startswith("leader-")
    assert result.generation_id == 3
    assert result.leader == result.member_id
    assert [(m.member_id, m.group_instance_id) for m in result.members] == [(result.member_id, "leader")]
    group = h.group()
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(group.members) == {result.member_id}
    assert group.leader_id == result.member_id
    assert group.generation_id == 3


# -- Pending (KIP-394) members and join completion -----------------------------------------------------------------


PENDING_SESSION_MS = 6_000


def group_with_pending_member(h: Harness) -> tuple[str, str, str, Deferred[JoinResult], Deferred[JoinResult]]:
    """Stable group of two; the leader rejoins (PreparingRebalance); a v4 newcomer gets MEMBER_ID_REQUIRED (short
    session); the follower rejoins. Returns (leader, follower, pending id, leader join, follower join)."""
    leader, follower = h.stable_group(2)
    leader_join = h.join(leader)
    assert h.state() is GroupState.PREPARING_REBALANCE
    pending = answered(h.join(version=4, session_ms=PENDING_SESSION_MS))
    assert pending.error is E.member_id_required
    follower_join = h.join(follower)
    group = h.group()
    assert group.pending_members == {pending.member_id}
    assert group.awaiting_join_count == len(group.members) == 2
    assert h.state() is GroupState.PREPARING_REBALANCE  # the pending id holds completion back
    assert not leader_join.done and not follower_join.done
    return leader, follower, pending.member_id, leader_join, follower_join


def test_42_join_completes_as_soon_as_the_pending_member_joins() -> None:
    """Item 42 (joins): everyone else rejoined; the pending member's JoinGroup completes the phase with 3 members."""
    h = Harness()
    leader, follower, pending_id, leader_join, follower_join = group_with_pending_member(h)
    result = answered(h.join(pending_id, version=4))
    assert result.error is E.none
    assert result.generation_id == 2
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(h.group().members) == {leader, follower, pending_id}
    assert h.group().pending_members == set()
    assert len(answered(leader_join).members) == 3
    assert answered(follower_join).generation_id == 2


def test_42_join_completes_without_the_pending_member_when_it_times_out() -> None:
    """Item 42 (times out): the pending id expires after its session timeout -> the phase completes with 2 members."""
    h = Harness()
    leader, follower, pending_id, leader_join, follower_join = group_with_pending_member(h)
    h.advance(PENDING_SESSION_MS - 1)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert not leader_join.done
    h.advance(1)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(h.group().members) == {leader, follower}
    assert h.group().pending_members == set()
    assert answered(leader_join).generation_id == answered(follower_join).generation_id == 2
    assert answered(h.join(pending_id, version=4)).error is E.unknown_member_id


def test_43_pending_member_leaving_lets_the_join_complete() -> None:
    """Item 43: the pending member leaves via LeaveGroup -> dropped from pending, the join completes; the others keep
    heartbeating (REBALANCE_IN_PROGRESS before, NONE after)."""
    h = Harness()
    leader, follower, pending_id, leader_join, follower_join = group_with_pending_member(h)
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    left = h.leave(pending_id)
    assert left.error is E.none
    assert [(m.member_id, m.error) for m in left.members] == [(pending_id, E.none)]
    assert h.group().pending_members == set()
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(h.group().members) == {leader, follower}
    assert answered(leader_join).generation_id == 2
    assert answered(follower_join).generation_id == 2
    assert h.heartbeat(leader, 2) is E.none
    assert h.heartbeat(follower, 2) is E.none
    assert h.heartbeat(leader, 1) is E.illegal_generation
