"""LeaveGroup scenarios: checklist items 80-92 of docs/spec/group-coordinator.md (sections 10, 21).

The coordinator answers in the v3+ shape (top-level error + one answer per identity). Folding that into the v0-2
response (top-level error = the first member's error, e.g. UNKNOWN_MEMBER_ID for an unknown group in item 80) is the
API layer's job and is covered by the wire tests.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import JoinResult, LeaveResult, LeavingMember, LeftMember
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, E, Harness, stable_static_group

LEADER_INSTANCE = "leader-instance"
FOLLOWER_INSTANCE = "follower-instance"


def pending_member(h: Harness) -> str:
    """A KIP-394 pending member id: the first half of a v4+ join."""
    first = h.join("")
    assert first.value.error is E.member_id_required
    member_id = first.value.member_id
    assert h.group().is_pending_member(member_id)
    return member_id


def test_80_leave_for_unknown_group_answers_each_member_unknown_member_id() -> None:
    h = Harness()
    result = h.leave("member", group_id="unknown-group")
    assert result == LeaveResult(E.none, (LeftMember("member", None, E.unknown_member_id),))
    assert "unknown-group" not in h.coordinator.groups


def test_81_leave_with_unknown_member_id_in_existing_group() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    result = h.leave("unknown-member")
    assert result == LeaveResult(E.none, (LeftMember("unknown-member", None, E.unknown_member_id),))
    # nobody left, so nothing changes
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 1
    assert set(h.group().members) == {leader, follower}


def test_81_duplicate_identities_in_a_batch_are_processed_independently() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    result = h.leave(follower, follower)
    assert result == LeaveResult(
        E.none,
        (LeftMember(follower, None, E.none), LeftMember(follower, None, E.unknown_member_id)),
    )
    assert set(h.group().members) == {leader}
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_82_leave_on_dead_group_is_top_level_coordinator_not_available() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.leave(leader) == LeaveResult(E.coordinator_not_available, ())
    assert h.leave(leader, follower, LeavingMember("", "some-instance")) == LeaveResult(E.coordinator_not_available, ())
    assert set(h.group().members) == {leader, follower}


def test_83_leave_of_the_only_member_empties_the_group() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    result = h.leave(member)
    assert result == LeaveResult(E.none, (LeftMember(member, None, E.none),))
    group = h.group()
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2
    assert group.members == {}
    assert group.leader_id is None
    assert group.protocol_name is None
    assert heartbeat_key(GROUP, member) not in h.purgatory
    assert h.heartbeat(member, 1) is E.unknown_member_id


def test_83_leaver_with_parked_join_gets_unknown_member_id_and_group_completes() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    leader_join = h.join(leader)  # the leader's rejoin starts a rebalance
    follower_join = h.join(follower)
    # both rejoined: the join completed at once
    assert leader_join.value.generation_id == follower_join.value.generation_id == 2
    again = h.join(follower, protocols=(("roundrobin", b""), ("range", b"")))  # changed metadata: rebalance
    assert not again.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    result = h.leave(follower)
    assert result.members == (LeftMember(follower, None, E.none),)
    assert again.value == JoinResult(E.unknown_member_id, member_id="")
    # the leader has not rejoined generation 3 yet, so the group keeps preparing
    assert set(h.group().members) == {leader}
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_84_leave_with_known_instance_and_wrong_member_id_is_fenced() -> None:
    h = Harness()
    leader, follower = stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE)
    result = h.leave(LeavingMember("invalid-member", LEADER_INSTANCE))
    assert result == LeaveResult(E.none, (LeftMember("invalid-member", LEADER_INSTANCE, E.fenced_instance_id),))
    # another instance's member id is just as wrong
    result = h.leave(LeavingMember(follower, LEADER_INSTANCE))
    assert result.members == (LeftMember(follower, LEADER_INSTANCE, E.fenced_instance_id),)
    assert h.state() is GroupState.STABLE
    assert set(h.group().members) == {leader, follower}


def test_85_leave_by_instance_id_with_empty_member_id_removes_static_member() -> None:
    h = Harness()
    leader, follower = stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE)
    result = h.leave(LeavingMember("", FOLLOWER_INSTANCE))
    assert result == LeaveResult(E.none, (LeftMember("", FOLLOWER_INSTANCE, E.none),))
    group = h.group()
    assert set(group.members) == {leader}
    assert group.static_members == {LEADER_INSTANCE: leader}
    assert group.state is GroupState.PREPARING_REBALANCE
    assert heartbeat_key(GROUP, follower) not in h.purgatory
    assert h.heartbeat(follower, 1, instance_id=FOLLOWER_INSTANCE) is E.unknown_member_id


def test_86_batch_leave_of_two_static_members_by_instance_id() -> None:
    h = Harness()
    stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE)
    result = h.leave(LeavingMember("", LEADER_INSTANCE), LeavingMember("", FOLLOWER_INSTANCE))
    assert result == LeaveResult(
        E.none, (LeftMember("", LEADER_INSTANCE, E.none), LeftMember("", FOLLOWER_INSTANCE, E.none))
    )
    group = h.group()
    assert group.members == {} and group.static_members == {}
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2


def test_87_batch_leave_for_unknown_group_with_two_instance_ids() -> None:
    h = Harness()
    result = h.leave(LeavingMember("", LEADER_INSTANCE), LeavingMember("", FOLLOWER_INSTANCE), group_id="unknown")
    assert result == LeaveResult(
        E.none,
        (
            LeftMember("", LEADER_INSTANCE, E.unknown_member_id),
            LeftMember("", FOLLOWER_INSTANCE, E.unknown_member_id),
        ),
    )
    assert "unknown" not in h.coordinator.groups


def test_88_batch_leave_valid_instance_and_fenced_instance() -> None:
    h = Harness()
    leader, follower = stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE)
    result = h.leave(LeavingMember(leader, LEADER_INSTANCE), LeavingMember("invalid-member", FOLLOWER_INSTANCE))
    assert result == LeaveResult(
        E.none,
        (
            LeftMember(leader, LEADER_INSTANCE, E.none),
            LeftMember("invalid-member", FOLLOWER_INSTANCE, E.fenced_instance_id),
        ),
    )
    group = h.group()
    assert set(group.members) == {follower}
    assert group.leader_id == follower
    assert group.state is GroupState.PREPARING_REBALANCE


def test_89_batch_leave_unknown_instance_and_known_instance() -> None:
    h = Harness()
    leader, follower = stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE)
    result = h.leave(LeavingMember("", "unknown-instance"), LeavingMember("", LEADER_INSTANCE))
    assert result == LeaveResult(
        E.none,
        (LeftMember("", "unknown-instance", E.unknown_member_id), LeftMember("", LEADER_INSTANCE, E.none)),
    )
    assert set(h.group().members) == {follower}
    assert leader not in h.group().static_members.values()
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_90_batch_leave_unknown_instance_and_pending_member() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    leader_join = h.join(leader)  # PreparingRebalance
    pending = pending_member(h)
    follower_join = h.join(follower)
    # everyone rejoined, but the pending member holds the join phase open
    assert not leader_join.done and not follower_join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    result = h.leave(LeavingMember("", "unknown-instance"), LeavingMember(pending))
    assert result == LeaveResult(
        E.none, (LeftMember("", "unknown-instance", E.unknown_member_id), LeftMember(pending, None, E.none))
    )
    group = h.group()
    assert not group.pending_members
    assert heartbeat_key(GROUP, pending) not in h.purgatory
    # with the pending member gone the join phase completes with the two members
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert set(group.members) == {leader, follower}
    assert leader_join.value.generation_id == follower_join.value.generation_id == 2
    # the dropped id is no longer recognised
    assert h.join(pending).value == JoinResult(E.unknown_member_id, member_id=pending)


def test_91_batch_leave_joined_pending_and_unknown_members() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    pending = pending_member(h)
    assert h.state() is GroupState.STABLE  # a pending member does not start a rebalance
    result = h.leave(follower, pending, "unknown-member")
    assert result == LeaveResult(
        E.none,
        (
            LeftMember(follower, None, E.none),
            LeftMember(pending, None, E.none),
            LeftMember("unknown-member", None, E.unknown_member_id),
        ),
    )
    group = h.group()
    assert set(group.members) == {leader}
    assert not group.pending_members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.heartbeat(follower, 1) is E.unknown_member_id


def test_92_static_follower_leaves_during_completing_rebalance_with_non_rejoined_static_leader() -> None:
    """Item 92 (Kafka's groupStuckInRebalanceTimeoutDueToNonjoinedStaticMember)."""
    long_session = 45_000  # longer than the 30 s rebalance timeout: no session expires during the scenario
    h = Harness()
    leader, follower = stable_static_group(h, LEADER_INSTANCE, FOLLOWER_INSTANCE, session_ms=long_session)
    dynamic_join = h.join_new(session_ms=long_session)
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(30_000)  # the rebalance timeout: only the dynamic member rejoined
    dynamic = dynamic_join.value
    assert dynamic.error is E.none
    assert dynamic.generation_id == 2
    assert dynamic.leader == dynamic.member_id
    assert {m.member_id for m in dynamic.members} == {leader, follower, dynamic.member_id}
    group = h.group()
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.static_members == {LEADER_INSTANCE: leader, FOLLOWER_INSTANCE: follower}

    result = h.leave(follower)
    assert result.members == (LeftMember(follower, None, E.none),)
    assert h.state() is GroupState.PREPARING_REBALANCE

    h.advance(30_000)  # nobody rejoins: the dynamic member is dropped, the static leader kept
    assert set(group.members) == {leader}
    assert group.generation_id == 2
    assert h.state() is GroupState.PREPARING_REBALANCE
    # stuck: the join deadline is re-armed for another rebalance timeout
    assert h.purgatory.deadline(group.join_key) == h.clock.now_ms() + 30_000
