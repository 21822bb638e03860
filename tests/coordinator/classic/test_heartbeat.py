"""Heartbeat scenarios: checklist items 72-79 of docs/spec/group-coordinator.md (sections 9, 21)."""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, Harness, stable_static_group


def test_72_heartbeat_for_unknown_group_is_unknown_member_id() -> None:
    h = Harness()
    assert h.heartbeat("member", 1, group_id="unknown-group") is E.unknown_member_id
    assert h.heartbeat("member", 1, group_id="unknown-group", instance_id="instance") is E.unknown_member_id
    assert "unknown-group" not in h.coordinator.groups


def test_73_heartbeat_on_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.heartbeat(leader, 1) is E.coordinator_not_available
    assert h.heartbeat(follower, 1) is E.coordinator_not_available
    # Dead wins over member validation and generation
    assert h.heartbeat("unknown-member", 42) is E.coordinator_not_available


def test_74_heartbeat_on_empty_group_is_unknown_member_id() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.leave(member).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2
    assert h.heartbeat(member, 1) is E.unknown_member_id
    assert h.heartbeat(member, 2) is E.unknown_member_id


def test_74_heartbeat_from_a_member_still_listed_in_an_empty_group_is_unknown_member_id() -> None:
    """Kafka's test puts a member into an Empty group directly; the state check answers UNKNOWN_MEMBER_ID."""
    h = Harness()
    member, _other = h.stable_group(2)
    group = h.group()
    group.transition_to(GroupState.PREPARING_REBALANCE, h.clock.now_ms())
    group.transition_to(GroupState.EMPTY, h.clock.now_ms())
    assert member in group.members and group.generation_id == 1
    assert h.heartbeat(member, 1) is E.unknown_member_id
    assert h.heartbeat(member, 0) is E.illegal_generation  # generation is checked before the state


def test_75_heartbeat_with_unknown_member_id_is_unknown_member_id() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2)
    assert h.heartbeat("unknown-member", 1) is E.unknown_member_id
    assert h.heartbeat("", 1) is E.unknown_member_id
    assert h.state() is GroupState.STABLE
    assert h.heartbeat(leader, 1) is E.none


def test_76_heartbeat_with_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    for generation in (2, 0, -1):
        assert h.heartbeat(leader, generation) is E.illegal_generation
        assert h.heartbeat(follower, generation) is E.illegal_generation
    # an illegal-generation heartbeat does not refresh the session (armed at the sync, t=0)
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(leader, 2) is E.illegal_generation
    assert h.heartbeat(follower, 1) is E.none
    h.advance(1)
    assert h.heartbeat(leader, 1) is E.unknown_member_id
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress


def test_77_heartbeat_while_completing_rebalance_is_none_and_refreshes_session() -> None:
    h = Harness()
    joins = [h.join_new() for _ in range(2)]
    h.advance(0)
    leader, follower = (j.value for j in joins)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert leader.generation_id == follower.generation_id == 1
    h.advance(SESSION_MS - 1_000)
    assert h.heartbeat(leader.member_id, 1) is E.none
    assert h.heartbeat(follower.member_id, 1) is E.none
    assert h.purgatory.deadline(heartbeat_key(GROUP, follower.member_id)) == h.clock.now_ms() + SESSION_MS
    h.advance(SESSION_MS - 1_000)  # past the first session deadline
    assert h.heartbeat(leader.member_id, 1) is E.none
    assert h.heartbeat(follower.member_id, 1) is E.none
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_78_heartbeat_while_preparing_rebalance_is_rebalance_in_progress_and_refreshes_session() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new()
    assert not newcomer.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    h.advance(SESSION_MS - 1)  # beyond the sessions armed at the last sync
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    assert {leader, follower} <= set(h.group().members)
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_79_static_member_heartbeat_with_stale_member_id_is_fenced() -> None:
    h = Harness()
    leader, follower = stable_static_group(h, "leader-instance", "follower-instance")
    rejoin = h.join(instance_id="follower-instance")
    assert rejoin.value.error is E.none
    new_follower = rejoin.value.member_id
    assert new_follower != follower and new_follower.startswith("follower-instance-")
    assert h.heartbeat(follower, 1, instance_id="follower-instance") is E.fenced_instance_id
    assert h.heartbeat(new_follower, 1, instance_id="follower-instance") is E.none
    # without the instance id the stale id is simply unknown
    assert h.heartbeat(follower, 1) is E.unknown_member_id
    # an id that belongs to another instance is fenced as well
    assert h.heartbeat(leader, 1, instance_id="follower-instance") is E.fenced_instance_id
    assert h.heartbeat(leader, 1, instance_id="leader-instance") is E.none
