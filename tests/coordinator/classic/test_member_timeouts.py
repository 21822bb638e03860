"""Checklist items 44-53: new-member join timeout, session expiry, pending-member expiry (spec sections 7.6, 9, 11)."""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import JoinResult, SyncResult
from broker.timing.deferred import Deferred
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, REBALANCE_MS, SESSION_MS, E, Harness

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def synced(pending: Deferred[SyncResult]) -> SyncResult:
    assert pending.done, "SyncGroup is still parked"
    return pending.value


def deadline_in(h: Harness, member_id: str) -> int | None:
    """Milliseconds from now until the member's heartbeat key fires (None when not armed)."""
    deadline = h.purgatory.deadline(heartbeat_key(GROUP, member_id))
    return None if deadline is None else deadline - h.clock.now_ms()


def test_44_new_member_join_times_out_after_five_minutes_in_a_hung_rebalance() -> None:
    """Item 44: a new member joins while the existing member (long timeouts) does not rejoin; after the new-member
    join timeout (5 min) its JoinGroup is answered UNKNOWN_MEMBER_ID (member id "") and it is removed."""
    h = Harness()
    session_ms = NEW_MEMBER_JOIN_TIMEOUT_MS + 5_000
    rebalance_ms = NEW_MEMBER_JOIN_TIMEOUT_MS * 2
    first_join = h.join(version=3, session_ms=session_ms, rebalance_ms=rebalance_ms)
    h.advance(0)
    first = answered(first_join)
    assert first.error is E.none
    assert first.leader == first.member_id
    group = h.group()
    assert not any(m.is_new for m in group.members.values())

    new_join = h.join(version=3, session_ms=session_ms, rebalance_ms=rebalance_ms)
    assert not new_join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert len(group.members) == 2
    (new_member,) = [m for m in group.members.values() if m.is_new]
    assert new_member.member_id != first.member_id
    assert deadline_in(h, new_member.member_id) == NEW_MEMBER_JOIN_TIMEOUT_MS

    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS - 1)
    assert not new_join.done
    h.advance(1)
    result = answered(new_join)
    assert result.error is E.unknown_member_id
    assert result.member_id == ""
    assert result.generation_id == -1
    assert list(group.members) == [first.member_id]
    assert not any(m.is_new for m in group.members.values())
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert group.generation_id == 1


def test_45_new_member_that_never_syncs_or_heartbeats_expires_after_its_session() -> None:
    """Item 45: new member joins, the join completes, it never syncs nor heartbeats -> removed after its session
    timeout (not the 5-minute new-member timeout); the group shrinks and rebalances."""
    h = Harness()
    (leader,) = h.stable_group(1)
    new_join = h.join(version=3)
    leader_join = h.join(leader)
    newcomer = answered(new_join)
    assert answered(leader_join).generation_id == newcomer.generation_id == 2
    assert synced(h.sync(leader, 2, {leader: b"a", newcomer.member_id: b"b"})).error is E.none
    assert h.state() is GroupState.STABLE
    assert deadline_in(h, newcomer.member_id) == SESSION_MS

    h.advance(SESSION_MS // 2)
    assert h.heartbeat(leader, 2) is E.none
    h.advance(SESSION_MS // 2 - 1)
    assert h.heartbeat(leader, 2) is E.none
    assert h.group().has_member(newcomer.member_id)
    h.advance(1)
    assert not h.group().has_member(newcomer.member_id)
    assert list(h.group().members) == [leader]
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 2) is E.rebalance_in_progress
    assert h.heartbeat(newcomer.member_id, 2) is E.unknown_member_id


def test_46_join_completion_clears_is_new_on_every_member() -> None:
    """Item 46: after join completion no member is new, and session timers use the session timeout."""
    h = Harness()
    (leader,) = h.stable_group(1)
    new_join = h.join(version=3)
    group = h.group()
    assert [m.is_new for m in group.members.values()] == [False, True]
    leader_join = h.join(leader)
    newcomer = answered(new_join)
    assert answered(leader_join).error is E.none
    assert not any(m.is_new for m in group.members.values())
    assert deadline_in(h, newcomer.member_id) == SESSION_MS
    assert deadline_in(h, leader) == SESSION_MS


def test_46_new_member_timeout_no_longer_applies_after_completion() -> None:
    """Item 46: a member whose session is longer than the new-member timeout is not kicked at 5 minutes once joined
    and synced; it expires on its own session timeout."""
    h = Harness()
    session_ms = NEW_MEMBER_JOIN_TIMEOUT_MS + 5_000
    join = h.join(version=3, session_ms=session_ms)
    h.advance(0)
    member_id = answered(join).member_id
    group = h.group()
    assert not any(m.is_new for m in group.members.values())
    assert synced(h.sync(member_id, 1, {member_id: b""})).error is E.none
    assert len(group.members) == 1
    h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS + 100)
    assert len(group.members) == 1
    h.advance(session_ms - NEW_MEMBER_JOIN_TIMEOUT_MS - 100)
    assert len(group.members) == 0
    assert h.state() is GroupState.EMPTY


def test_47_member_that_stops_heartbeating_is_expired() -> None:
    """Item 47: joined and synced, then silent -> after the session timeout its heartbeat gets UNKNOWN_MEMBER_ID."""
    h = Harness()
    (member,) = h.stable_group(1)
    h.advance(SESSION_MS - 1)
    assert h.group().has_member(member)
    h.advance(1)
    assert not h.group().has_member(member)
    assert h.heartbeat(member, 1) is E.unknown_member_id
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2


def test_48_heartbeats_keep_the_member_alive_across_several_sessions() -> None:
    """Item 48: heartbeats within the session timeout keep the member alive over many session periods."""
    h = Harness()
    leader, follower = h.stable_group(2)
    for _ in range(5):
        h.advance(SESSION_MS - 1)
        assert h.heartbeat(leader, 1) is E.none
        assert h.heartbeat(follower, 1) is E.none
    assert set(h.group().members) == {leader, follower}
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 1


def test_49_offset_commit_keeps_the_member_alive() -> None:
    """Item 49: an OffsetCommit within the session timeout (Stable) also refreshes the session."""
    h = Harness()
    (member,) = h.stable_group(1)
    h.advance(SESSION_MS // 2)
    assert h.commit({("topic", 0): 5}, generation_id=1, member_id=member) == {("topic", 0): E.none}
    assert deadline_in(h, member) == SESSION_MS
    h.advance(SESSION_MS // 2 + 100)  # past the original session deadline
    assert h.heartbeat(member, 1) is E.none
    assert h.state() is GroupState.STABLE


def test_50_heartbeating_member_that_does_not_rejoin_is_removed_at_rebalance_timeout() -> None:
    """Item 50: during a rebalance a member keeps heartbeating (REBALANCE_IN_PROGRESS) but does not rejoin; another
    does -> at the rebalance timeout the laggard is removed and then gets UNKNOWN_MEMBER_ID."""
    h = Harness()
    leader, follower = h.stable_group(2)
    leader_join = h.join(leader)
    assert h.state() is GroupState.PREPARING_REBALANCE
    for _ in range(REBALANCE_MS // 5_000 - 1):
        h.advance(5_000)
        assert h.heartbeat(follower, 1) is E.rebalance_in_progress
    h.advance(4_999)
    assert not leader_join.done
    assert h.group().has_member(follower)
    h.advance(1)
    result = answered(leader_join)
    assert result.generation_id == 2
    assert [m.member_id for m in result.members] == [leader]
    assert h.heartbeat(follower, 1) is E.unknown_member_id
    assert h.heartbeat(follower, 2) is E.unknown_member_id
    assert h.heartbeat(leader, 2) is E.none


def test_51_non_rejoined_static_leader_expires_and_survivor_stabilises() -> None:
    """Item 51: Stable group with a static leader; a dynamic member joins; the static member heartbeats with the old
    generation -> REBALANCE_IN_PROGRESS, then ILLEGAL_GENERATION once generation 2 forms without it; when it expires
    the survivor sees NONE, NONE, REBALANCE_IN_PROGRESS, rejoins alone -> generation 3, no more rebalances."""
    h = Harness()
    static_session, static_rebalance = 10_000, 12_000
    other_session = 6_000
    static_join = h.join(instance_id="leader", session_ms=static_session, rebalance_ms=static_rebalance)
    h.advance(0)
    static_id = answered(static_join).member_id
    assert synced(h.sync(static_id, 1, {static_id: b""}, instance_id="leader")).error is E.none

    other_join = h.join(version=3, session_ms=other_session, rebalance_ms=other_session)
    assert h.state() is GroupState.PREPARING_REBALANCE
    for _ in range(2):  # t = 5000, 10000
        h.advance(5_000)
        assert h.heartbeat(static_id, 1, instance_id="leader") is E.rebalance_in_progress

    h.advance(2_000)  # t = 12000: the join deadline (max rebalance timeout) completes without the static member
    other = answered(other_join)
    other_id = other.member_id
    assert other.error is E.none
    assert other.generation_id == 2
    assert other.leader == other_id
    assert {m.member_id for m in other.members} == {static_id, other_id}
    assert synced(h.sync(other_id, 2, {other_id: b"x"})).error is E.none
    assert h.heartbeat(static_id, 1, instance_id="leader") is E.illegal_generation

    h.advance(3_000)  # t = 15000
    assert h.heartbeat(static_id, 1, instance_id="leader") is E.illegal_generation
    # the static member's session was last refreshed at t = 12000 -> it expires at t = 22000
    h.advance(2_000)  # t = 17000
    assert h.heartbeat(other_id, 2) is E.none
    h.advance(4_000)  # t = 21000
    assert h.heartbeat(other_id, 2) is E.none
    assert h.group().has_member(static_id)
    h.advance(4_000)  # t = 25000 (static member expired at 22000)
    assert h.heartbeat(other_id, 2) is E.rebalance_in_progress
    assert not h.group().has_member(static_id)
    assert h.group().static_members == {}

    rejoin = answered(h.join(other_id, session_ms=other_session, rebalance_ms=other_session))
    assert rejoin.error is E.none
    assert rejoin.generation_id == 3
    assert rejoin.leader == other_id
    assert [m.member_id for m in rejoin.members] == [other_id]
    assert synced(h.sync(other_id, 3, {other_id: b"y"})).error is E.none
    for _ in range(20):
        h.advance(other_session // 2)
        assert h.heartbeat(other_id, 3) is E.none
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 3


def test_52_pending_member_that_never_rejoins_is_dropped_after_its_session() -> None:
    """Item 52: a v4+ pending id that never comes back is dropped after its session timeout; no member is added."""
    h = Harness()
    (member,) = h.stable_group(1)
    pending_session = 6_000
    pending = answered(h.join(version=4, session_ms=pending_session))
    assert pending.error is E.member_id_required
    group = h.group()
    assert group.pending_members == {pending.member_id}
    assert h.state() is GroupState.STABLE
    assert deadline_in(h, pending.member_id) == pending_session

    h.advance(pending_session // 2)
    assert h.heartbeat(member, 1) is E.none
    h.advance(pending_session // 2 - 1)
    assert group.pending_members == {pending.member_id}
    h.advance(1)
    assert group.pending_members == set()
    assert list(group.members) == [member]
    assert h.state() is GroupState.STABLE
    assert group.generation_id == 1
    assert answered(h.join(pending.member_id, version=4)).error is E.unknown_member_id


def test_53_expiry_of_an_already_removed_member_is_a_no_op() -> None:
    """Item 53 (removed member): the old id of a replaced static member still has its timer; when it fires nothing
    happens. A direct expiry call for an unknown member or group is a no-op as well."""
    h = Harness()
    first = h.join(instance_id="inst")
    h.advance(0)
    old_id = answered(first).member_id
    assert synced(h.sync(old_id, 1, {old_id: b"a"}, instance_id="inst")).error is E.none
    h.advance(SESSION_MS // 2)
    replaced = answered(h.join(instance_id="inst"))
    new_id = replaced.member_id
    assert replaced.error is E.none
    assert new_id != old_id
    assert deadline_in(h, old_id) == SESSION_MS // 2  # the old timer is still armed

    h.advance(SESSION_MS // 2)  # the old id's timer fires
    group = h.group()
    assert heartbeat_key(GROUP, old_id) not in h.purgatory
    assert list(group.members) == [new_id]
    assert h.state() is GroupState.STABLE
    assert group.generation_id == 1
    assert h.heartbeat(new_id, 1, instance_id="inst") is E.none

    h.coordinator._sessions.on_expired(GROUP, "no-such-member")
    h.coordinator._sessions.on_expired("no-such-group", new_id)
    assert list(group.members) == [new_id]
    assert h.state() is GroupState.STABLE
    assert "no-such-group" not in h.coordinator.groups


def test_53_expiry_in_a_dead_group_is_a_no_op() -> None:
    """Item 53 (Dead group): a member's session timer firing after the group went Dead changes nothing."""
    h = Harness()
    (member,) = h.stable_group(1)
    group = h.group()
    group.transition_to(GroupState.DEAD, h.clock.now_ms())
    h.advance(SESSION_MS)
    assert heartbeat_key(GROUP, member) not in h.purgatory  # it fired
    assert group.state is GroupState.DEAD
    assert list(group.members) == [member]
    assert group.generation_id == 1
    assert h.heartbeat(member, 1) is E.coordinator_not_available
