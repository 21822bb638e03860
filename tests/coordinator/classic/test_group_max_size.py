"""Checklist items 21-27: group.max.size (KIP-389), spec section 7.1 step 3.

Item 27 (a group LOADED from __consumer_offsets with more members than group.max.size immediately goes to
PreparingRebalance) cannot apply: this in-memory broker never loads groups, so a group can only exceed the cap when
the cap is lowered at runtime, which item 26 covers.
"""

from __future__ import annotations

import dataclasses

from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import JoinResult
from broker.timing.deferred import Deferred
from tests.coordinator.harness import REBALANCE_MS, E, Harness

MAX_SIZE = 3
DELAY_MS = 100
# Members joining together at t0: the first delay sees newMemberAdded and waits one more delay (7.4).
INITIAL_JOIN_MS = 2 * DELAY_MS


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def harness(max_size: int = MAX_SIZE, delay_ms: int = DELAY_MS) -> Harness:
    return Harness(config=GroupConfig(max_size=max_size, initial_rebalance_delay_ms=delay_ms))


def assert_max_size_reached(result: JoinResult) -> None:
    assert result.error is E.group_max_size_reached
    assert result.member_id == ""
    assert result.generation_id == -1
    assert result.protocol_type is None
    assert result.leader == ""
    assert result.members == ()


def test_21_new_member_rejected_when_full_while_preparing_rebalance() -> None:
    """Item 21 (PreparingRebalance): max.size members awaiting the initial join; one more -> GROUP_MAX_SIZE_REACHED."""
    h = harness()
    joins = [h.join(version=3) for _ in range(MAX_SIZE)]
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert not any(j.done for j in joins)
    assert_max_size_reached(answered(h.join(version=3)))
    assert_max_size_reached(answered(h.join(version=9)))  # even the MEMBER_ID_REQUIRED step is refused
    assert_max_size_reached(answered(h.join(instance_id="extra")))
    assert h.group().pending_members == set()
    assert len(h.group().members) == MAX_SIZE
    h.advance(INITIAL_JOIN_MS)
    assert [answered(j).error for j in joins] == [E.none] * MAX_SIZE
    assert answered(joins[0]).generation_id == 1


def test_21_new_member_rejected_when_full_while_completing_or_stable() -> None:
    """Item 21 (CompletingRebalance and Stable): a new member of a full group -> GROUP_MAX_SIZE_REACHED, id ""."""
    h = harness()
    joins = [h.join(version=3) for _ in range(MAX_SIZE)]
    h.advance(INITIAL_JOIN_MS)
    results = [answered(j) for j in joins]
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert_max_size_reached(answered(h.join(version=3)))
    assert h.state() is GroupState.COMPLETING_REBALANCE

    leader = results[0].leader
    ids = [r.member_id for r in results]
    for member_id in ids:
        sync = h.sync(member_id, 1, {m: b"" for m in ids} if member_id == leader else None)
        assert sync.done and sync.value.error is E.none
    assert h.state() is GroupState.STABLE
    assert_max_size_reached(answered(h.join(version=3)))
    assert_max_size_reached(answered(h.join()))
    assert_max_size_reached(answered(h.join(instance_id="extra")))
    assert h.state() is GroupState.STABLE
    assert list(h.group().members) == ids
    assert h.group().generation_id == 1


def test_22_two_step_dynamic_joins_over_max_size_split_the_same_way_twice() -> None:
    """Item 22: N=max+1 dynamic v4 members: exactly max get NONE, the rest GROUP_MAX_SIZE_REACHED; a rejoin gives the
    same split."""
    h = harness()
    n = MAX_SIZE + 1
    firsts = [answered(h.join(version=4)) for _ in range(n)]
    assert [f.error for f in firsts] == [E.member_id_required] * n
    member_ids = [f.member_id for f in firsts]
    assert len(set(member_ids)) == n
    assert h.group().pending_members == set(member_ids)

    seconds = [h.join(m, version=4) for m in member_ids]
    h.advance(INITIAL_JOIN_MS)
    errors = [answered(j).error for j in seconds]
    assert errors == [E.none] * MAX_SIZE + [E.group_max_size_reached]
    assert answered(seconds[-1]).member_id == ""
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert list(h.group().members) == member_ids[:MAX_SIZE]

    rejoins = [answered(h.join(m, version=4)) for m in member_ids]
    assert [r.error for r in rejoins] == errors
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().generation_id == 1


def test_23_dynamic_v3_joins_over_max_size_split_the_same_way_twice() -> None:
    """Item 23: same with v<4 dynamic joins (no MEMBER_ID_REQUIRED step)."""
    h = harness()
    n = MAX_SIZE + 1
    joins = [h.join(version=3) for _ in range(n)]
    h.advance(INITIAL_JOIN_MS)
    results = [answered(j) for j in joins]
    errors = [r.error for r in results]
    assert errors == [E.none] * MAX_SIZE + [E.group_max_size_reached]
    assert results[-1].member_id == ""
    assert list(h.group().members) == [r.member_id for r in results[:MAX_SIZE]]

    rejoins = [answered(h.join(r.member_id, version=3)) for r in results]
    assert [r.error for r in rejoins] == errors
    assert [r.generation_id for r in rejoins[:MAX_SIZE]] == [1] * MAX_SIZE
    assert len(h.group().members) == MAX_SIZE


def test_24_static_joins_over_max_size_split_the_same_way_twice() -> None:
    """Item 24: same with static members."""
    h = harness()
    n = MAX_SIZE + 1
    instances = [f"instance-id-{i}" for i in range(1, n + 1)]
    joins = [h.join(instance_id=i) for i in instances]
    h.advance(INITIAL_JOIN_MS)
    results = [answered(j) for j in joins]
    errors = [r.error for r in results]
    assert errors == [E.none] * MAX_SIZE + [E.group_max_size_reached]
    assert results[-1].member_id == ""
    assert set(h.group().static_members) == set(instances[:MAX_SIZE])

    rejoins = [answered(h.join(r.member_id, instance_id=i)) for r, i in zip(results, instances, strict=True)]
    assert [r.error for r in rejoins] == errors
    assert set(h.group().static_members) == set(instances[:MAX_SIZE])
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_25_members_already_awaiting_join_can_rejoin_a_full_rebalancing_group() -> None:
    """Item 25: while PreparingRebalance at max size, members with a parked JoinGroup may send it again; a newcomer
    may not."""
    h = harness()
    n = MAX_SIZE + 1
    member_ids = [answered(h.join(version=4)).member_id for _ in range(n)]
    seconds = [h.join(m, version=4) for m in member_ids]
    assert_max_size_reached(answered(seconds[-1]))
    assert h.state() is GroupState.PREPARING_REBALANCE

    thirds = [h.join(m, version=4) for m in member_ids]
    assert not any(j.done for j in thirds[:MAX_SIZE])
    assert_max_size_reached(answered(thirds[-1]))
    h.advance(INITIAL_JOIN_MS)
    assert [answered(j).error for j in thirds] == [E.none] * MAX_SIZE + [E.group_max_size_reached]
    assert list(h.group().members) == member_ids[:MAX_SIZE]


def test_25_members_of_a_full_stable_group_can_rejoin() -> None:
    """Item 25: a full Stable group rebalances; its existing members are let back in."""
    h = harness(delay_ms=0)
    leader, *followers = h.stable_group(MAX_SIZE)
    leader_join = h.join(leader)
    assert h.state() is GroupState.PREPARING_REBALANCE
    follower_joins = [h.join(f) for f in followers]
    # everyone rejoined: the join phase completes at once
    assert h.state() is GroupState.COMPLETING_REBALANCE
    results = [answered(j) for j in (leader_join, *follower_joins)]
    assert [r.error for r in results] == [E.none] * MAX_SIZE
    assert [r.generation_id for r in results] == [2] * MAX_SIZE
    assert len(h.group().members) == MAX_SIZE


def test_26_last_rejoiners_are_kicked_out_when_max_size_is_lowered() -> None:
    """Item 26: max size lowered below the group size; during the rebalance the first max rejoiners get NONE, the
    last ones GROUP_MAX_SIZE_REACHED and are removed from the group."""
    h = harness(max_size=10, delay_ms=0)
    members = h.stable_group(MAX_SIZE + 2)
    h.coordinator.config = dataclasses.replace(h.config, max_size=MAX_SIZE)

    joins = [h.join(m) for m in members]  # the leader's rejoin starts the rebalance
    for kicked_out, join in zip(members[MAX_SIZE:], joins[MAX_SIZE:], strict=True):
        assert_max_size_reached(answered(join))
        assert not h.group().has_member(kicked_out)
    assert list(h.group().members) == members[:MAX_SIZE]
    assert h.group().awaiting_join_count == MAX_SIZE
    # NEW coordinator: the rejection itself does not re-check join completion; the join timer completes it.
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert not any(j.done for j in joins[:MAX_SIZE])
    h.advance(REBALANCE_MS - 1)
    assert not any(j.done for j in joins[:MAX_SIZE])
    h.advance(1)
    results = [answered(j) for j in joins[:MAX_SIZE]]
    assert [r.error for r in results] == [E.none] * MAX_SIZE
    assert [r.generation_id for r in results] == [2] * MAX_SIZE
    assert results[0].leader == members[0]
    assert {m.member_id for m in results[0].members} == set(members[:MAX_SIZE])
    assert h.state() is GroupState.COMPLETING_REBALANCE
    for kicked_out in members[MAX_SIZE:]:
        assert h.heartbeat(kicked_out, 2) is E.unknown_member_id
