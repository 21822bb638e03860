"""Checklist items 28-31: group.initial.rebalance.delay.ms and its extension (spec 7.4, "InitialDelayedJoin")."""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import JoinResult
from broker.timing.deferred import Deferred
from tests.coordinator.harness import E, Harness

DELAY_MS = 3_000


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def harness() -> Harness:
    return Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))


def test_28_single_joiner_is_answered_exactly_after_the_initial_delay() -> None:
    """Item 28: new group, single joiner -> not answered before the delay, answered right when it elapses."""
    h = harness()
    start = h.clock.now_ms()
    join = h.join_new()  # v9: MEMBER_ID_REQUIRED first, then the real join
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.purgatory.deadline(h.group().join_key) == start + DELAY_MS
    h.advance(DELAY_MS - 1)
    assert not join.done
    assert h.group().generation_id == 0
    h.advance(1)
    result = answered(join)
    assert result.error is E.none
    assert result.generation_id == 1
    assert result.leader == result.member_id
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_29_joiner_before_first_delay_extends_it_once() -> None:
    """Item 29: rebalance timeout 3*delay; B joins at delay-1 -> both answered at 2*delay, not before."""
    h = harness()
    rebalance_ms = 3 * DELAY_MS
    a = h.join(version=3, rebalance_ms=rebalance_ms)
    h.advance(DELAY_MS - 1)
    b = h.join(version=3, rebalance_ms=rebalance_ms)
    assert h.group().new_member_added
    h.advance(1)  # t = delay: the flag re-arms the timer for another delay
    assert not a.done and not b.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(DELAY_MS - 1)  # t = 2*delay - 1
    assert not a.done and not b.done
    h.advance(1)  # t = 2*delay
    first, second = answered(a), answered(b)
    assert first.error is E.none and second.error is E.none
    assert first.generation_id == second.generation_id == 1
    assert first.leader == second.leader == first.member_id
    assert len(first.members) == 2
    assert second.members == ()
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_30_extension_is_capped_by_the_rebalance_timeout() -> None:
    """Item 30: rebalance timeout 2*delay; A, B at t0, C at delay+1 -> nobody answered at 2*delay-1, all three
    answered at 2*delay."""
    h = harness()
    rebalance_ms = 2 * DELAY_MS
    a = h.join(version=3, rebalance_ms=rebalance_ms)
    b = h.join(version=3, rebalance_ms=rebalance_ms)
    h.advance(DELAY_MS + 1)
    c = h.join(version=3, rebalance_ms=rebalance_ms)
    assert h.group().new_member_added
    h.advance(DELAY_MS - 2)  # t = 2*delay - 1
    assert not any(j.done for j in (a, b, c))
    h.advance(1)  # t = 2*delay: remaining is 0, so the flag set by C cannot extend again
    results = [answered(j) for j in (a, b, c)]
    assert [r.error for r in results] == [E.none] * 3
    assert [r.generation_id for r in results] == [1, 1, 1]
    assert {m.member_id for m in results[0].members} == {r.member_id for r in results}
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_31_initial_rebalance_never_completes_early() -> None:
    """Item 31: during the initial rebalance the join phase does not complete even when everyone has joined (even on
    a rejoin); the generation stays 0 until the timer fires."""
    h = harness()
    member_id = answered(h.join(version=4)).member_id
    first = h.join(member_id, version=4)
    other_id = answered(h.join(version=4)).member_id
    second = h.join(other_id, version=4)
    group = h.group()
    assert group.has_all_members_joined()
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert group.generation_id == 0
    assert not first.done and not second.done

    # an existing member sending its JoinGroup again re-checks completion, which must not fire either
    again = h.join(member_id, version=4)
    assert not again.done
    assert group.generation_id == 0
    assert h.state() is GroupState.PREPARING_REBALANCE

    h.advance(DELAY_MS)  # the second member set newMemberAdded: one extension
    assert not again.done and not second.done
    assert group.generation_id == 0
    h.advance(DELAY_MS - 1)
    assert not again.done and not second.done
    assert group.generation_id == 0
    h.advance(1)
    assert answered(again).error is E.none
    assert answered(second).error is E.none
    assert group.generation_id == 1
    assert h.state() is GroupState.COMPLETING_REBALANCE
