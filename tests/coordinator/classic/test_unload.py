"""Unloading (``GroupCoordinator.shutdown``, spec 16) and loading: checklist items 150-152.

``shutdown()`` gives up every group the way Kafka unloads an offsets partition: groups go Dead, parked JoinGroups
of a PreparingRebalance group and parked SyncGroups of a CompletingRebalance/Stable group are answered
NOT_COORDINATOR, timers are dropped. Afterwards the coordinator is inactive, so every request gets
COORDINATOR_NOT_AVAILABLE (spec 6: "coordinator not started/shutting down").

Item 152 applies only in part: the coordinator keeps groups in memory and has no load phase (nothing to replay), so
"load schedules a session timer for every stored member" has no counterpart; what remains testable is that starting
the coordinator schedules the expiration sweep and that every member carries a session timer that expires normally.
"""

from __future__ import annotations

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import JoinResult, LeaveResult, LeavingMember, SyncResult
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, Harness


def state_of(group: ClassicGroup) -> GroupState:
    """Read the state through a call, so a type checker does not keep an earlier narrowing."""
    return group.state


def group_keys(h: Harness, group_id: str, member_ids: list[str]) -> list[object]:
    group = h.group(group_id)
    keys: list[object] = [group.join_key, group.sync_key]
    keys += [heartbeat_key(group_id, m) for m in member_ids]
    return [k for k in keys if k in h.purgatory]


def test_150_unload_while_preparing_rebalance_answers_parked_joins_not_coordinator() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    leader_rejoin = h.join(leader)  # the leader's rejoin starts a rebalance
    newcomer = h.join("", version=3, client_id="late")  # parked at once (no KIP-394 step)
    pending_id = h.join("", version=9).value.member_id  # KIP-394 pending member, never joins
    assert not leader_rejoin.done and not newcomer.done
    group = h.group()
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.is_pending_member(pending_id)
    assert group_keys(h, GROUP, [leader, follower, "late-uuid3", pending_id])

    h.coordinator.shutdown()

    assert leader_rejoin.value == JoinResult(error=E.not_coordinator, member_id=leader)
    assert newcomer.value == JoinResult(error=E.not_coordinator, member_id="late-uuid3")
    assert state_of(group) is GroupState.DEAD
    assert group.previous_state is GroupState.PREPARING_REBALANCE
    assert GROUP not in h.coordinator.groups
    assert group.awaiting_join_count == 0
    for m in [leader, follower, "late-uuid3", pending_id]:
        assert heartbeat_key(GROUP, m) not in h.purgatory
    assert group.join_key not in h.purgatory
    # nothing fires later: no member is removed, the group stays Dead
    members_before = set(group.members)
    h.advance(10 * 60_000)
    assert state_of(group) is GroupState.DEAD
    assert set(group.members) == members_before


def test_150_parked_join_of_brand_new_group_is_answered_not_coordinator() -> None:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=3_000))
    join = h.join("", version=3)
    h.advance(2_999)
    assert not join.done
    group = h.group()
    assert group.state is GroupState.PREPARING_REBALANCE
    h.coordinator.shutdown()
    assert join.value == JoinResult(error=E.not_coordinator, member_id="client-uuid1")
    assert state_of(group) is GroupState.DEAD
    h.advance(10_000)  # the initial-delay timer is gone
    assert group.generation_id == 0
    assert state_of(group) is GroupState.DEAD


def test_151_unload_while_completing_rebalance_answers_parked_syncs_not_coordinator() -> None:
    h = Harness()
    first = h.join_new()
    second = h.join_new()
    third = h.join_new()
    h.advance(0)
    leader = first.value.leader
    followers = [j.value.member_id for j in (first, second, third) if j.value.member_id != leader]
    syncs = [h.sync(m, 1) for m in followers]
    assert not any(s.done for s in syncs)
    group = h.group()
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.sync_key in h.purgatory

    h.coordinator.shutdown()

    assert [s.value for s in syncs] == [SyncResult(E.not_coordinator), SyncResult(E.not_coordinator)]
    assert all(m.sync_answer is None for m in group.members.values())
    assert state_of(group) is GroupState.DEAD
    assert group.previous_state is GroupState.COMPLETING_REBALANCE
    assert group.sync_key not in h.purgatory
    for m in [leader, *followers]:
        assert heartbeat_key(GROUP, m) not in h.purgatory
    # the leader's late sync finds no coordinator
    assert h.sync(leader, 1, {leader: b"x"}).value == SyncResult(E.coordinator_not_available)


def test_151_unload_stable_group_answers_nothing_and_drops_timers() -> None:
    """A Stable group has no parked requests (syncs are answered at once); unload just kills it."""
    h = Harness()
    leader, follower = h.stable_group(2)
    group = h.group()
    h.coordinator.shutdown()
    assert state_of(group) is GroupState.DEAD
    assert group.previous_state is GroupState.STABLE
    assert heartbeat_key(GROUP, leader) not in h.purgatory
    assert heartbeat_key(GROUP, follower) not in h.purgatory


def test_151_every_request_after_unload_is_coordinator_not_available() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.commit({("t", 0): 1}, generation_id=1, member_id=member) == {("t", 0): E.none}
    h.coordinator.shutdown()
    assert h.join("").value == JoinResult(error=E.coordinator_not_available, member_id="")
    assert h.join(member).value == JoinResult(error=E.coordinator_not_available, member_id=member)
    assert h.sync(member, 1).value == SyncResult(E.coordinator_not_available)
    assert h.heartbeat(member, 1) is E.coordinator_not_available
    assert h.leave(LeavingMember(member)) == LeaveResult(E.coordinator_not_available)
    assert h.commit({("t", 0): 2}, generation_id=1, member_id=member) == {("t", 0): E.coordinator_not_available}
    assert h.commit({("t", 0): 2}) == {("t", 0): E.coordinator_not_available}
    assert h.coordinator.fetch_offsets(GROUP, [("t", [0])]).error is E.coordinator_not_available
    assert h.coordinator.describe(GROUP).error is E.coordinator_not_available
    assert h.coordinator.list_groups() == (E.coordinator_not_available, ())
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.coordinator_not_available),)
    assert h.coordinator.delete_offsets(GROUP, [("t", [0])]).error is E.coordinator_not_available
    assert h.coordinator.groups == {}


def test_152_start_schedules_the_expiration_sweep_and_members_expire_normally() -> None:
    """152 (partial, see module docstring): sweep scheduled from the start; session timers per member."""
    h = Harness()
    t0 = h.clock.now_ms()
    assert h.join("", group_id="lonely").value.error is E.member_id_required  # Empty group without offsets
    h.advance(h.config.offsets_retention_check_interval_ms - 1)
    assert "lonely" in h.coordinator.groups
    h.advance(1)
    assert h.clock.now_ms() == t0 + 600_000
    assert "lonely" not in h.coordinator.groups

    leader, follower = h.stable_group(2)
    now = h.clock.now_ms()
    for m in (leader, follower):
        assert h.purgatory.deadline(heartbeat_key(GROUP, m)) == now + SESSION_MS
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(leader, 1) is E.none
    h.advance(1)  # the follower never heartbeated
    assert not h.group().has_member(follower)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
