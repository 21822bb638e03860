"""Issue 14, defect 7: a JoinGroup listing one protocol name twice must not wedge its group.

Kafka reads a member's protocols keyed by name (``"mapKey": true``; ``ClassicGroupMember.vote`` and ``metadata``
take the first entry of a name) but counts every entry towards ``supportedProtocols``, so ``range`` listed twice
made protocol selection raise when the join phase ended: the JoinGroup was never answered and the group sat in
PreparingRebalance past its rebalance timeout. The coordinator now keeps the first entry of each name at the door
(``join.unique_protocols``); these tests drive every path that selects a protocol with such a member: the end of
the join phase by timer (every JoinGroup version), a rejoin, a LeaveGroup and a static member's replacement.
"""

from __future__ import annotations

import pytest

from broker.coordinator.classic.join import unique_protocols
from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import JoinedMember, JoinResult
from broker.timing.deferred import Deferred
from broker.timing.keys import join_key
from tests.coordinator.harness import GROUP, REBALANCE_MS, E, Harness, stable_static_group, subscription

FIRST = subscription("first")
SECOND = subscription("second")
RANGE_TWICE: tuple[tuple[str, bytes], ...] = (("range", FIRST), ("range", SECOND))
DELAY_MS = 3_000


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def assert_nothing_failed(h: Harness) -> None:
    """No timer action raised and no coordinator operation had to be failed on the way."""
    assert h.purgatory.failures == 0
    assert h.coordinator.failed_operations == 0


def test_unique_protocols_keeps_the_first_of_each_name_in_order() -> None:
    once = (("range", b"a"), ("roundrobin", b"b"))
    assert unique_protocols(once) is once  # the common case allocates nothing
    assert unique_protocols(()) == ()
    assert unique_protocols(RANGE_TWICE) == (("range", FIRST),)
    mixed = (("a", b"1"), ("b", b"2"), ("a", b"3"), ("c", b"4"), ("b", b"5"))
    assert unique_protocols(mixed) == (("a", b"1"), ("b", b"2"), ("c", b"4"))


@pytest.mark.parametrize("version", range(10))
def test_a_lone_member_listing_range_twice_gets_its_generation(version: int) -> None:
    """The reproducer (JoinGroup v3 listing ``range`` twice), at every version: the initial-delay timer ends the
    join phase, the member is answered as the leader of generation 1 with ``range`` and the metadata of the first
    ``range`` entry, and the group goes on to Stable."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    join = h.join_new(version=version, protocols=RANGE_TWICE)
    assert not join.done
    h.advance(DELAY_MS)
    result = answered(join)
    assert result.error is E.none
    assert (result.generation_id, result.protocol_name, result.leader) == (1, "range", result.member_id)
    assert result.members == (JoinedMember(result.member_id, None, FIRST),)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().supported_protocols == {"range": 1}
    synced = h.sync(result.member_id, 1, {result.member_id: b"mine"})
    assert synced.done and synced.value.error is E.none and synced.value.assignment == b"mine"
    assert h.state() is GroupState.STABLE
    assert h.heartbeat(result.member_id, 1) is E.none
    assert_nothing_failed(h)


def test_the_join_phase_never_outlives_the_rebalance_timeout() -> None:
    """However the group got there, a member listing a name twice never keeps it in PreparingRebalance."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    join = h.join("", version=3, protocols=RANGE_TWICE, rebalance_ms=REBALANCE_MS)
    h.advance(REBALANCE_MS)
    assert answered(join).error is E.none
    assert h.state() is not GroupState.PREPARING_REBALANCE
    assert join_key(GROUP) not in h.purgatory
    assert_nothing_failed(h)


def test_a_member_rejoining_with_a_name_twice_completes_the_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    rejoin = h.join(follower, protocols=RANGE_TWICE)  # new metadata: a rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE
    again = h.join(leader)
    for result in (answered(rejoin), answered(again)):
        assert (result.error, result.generation_id, result.protocol_name) == (E.none, 2, "range")
    assert dict((m.member_id, m.metadata) for m in answered(again).members)[follower] == FIRST
    assert h.group().supported_protocols == {"range": 2}
    assert_nothing_failed(h)


def test_a_leave_that_ends_the_join_phase_answers_the_member_that_listed_a_name_twice() -> None:
    """LeaveGroup reaches protocol selection too: the follower rejoins listing ``range`` twice, then the leader
    leaves, which ends the join phase at once (everyone left has rejoined)."""
    h = Harness()
    leader, follower = h.stable_group(2)
    rejoin = h.join(follower, protocols=RANGE_TWICE)
    assert not rejoin.done
    left = h.leave(leader)
    assert left.error is E.none and [m.error for m in left.members] == [E.none]
    result = answered(rejoin)
    assert (result.error, result.generation_id, result.protocol_name, result.leader) == (E.none, 2, "range", follower)
    assert result.members == (JoinedMember(follower, None, FIRST),)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert_nothing_failed(h)


def test_a_static_member_replaced_with_a_name_twice_keeps_the_stable_generation() -> None:
    """A static member rejoining with an empty member id in Stable selects the next generation's protocol at
    once (KIP-345): with ``range`` twice it is still ``range``, so no rebalance and an immediate answer."""
    h = Harness()
    (old_id,) = stable_static_group(h, "inst")
    replaced = h.join(instance_id="inst", protocols=RANGE_TWICE)
    result = answered(replaced)
    assert result.error is E.none
    assert result.member_id != old_id
    assert (result.generation_id, result.protocol_name) == (1, "range")
    assert h.state() is GroupState.STABLE
    assert h.group().supported_protocols == {"range": 1}
    assert_nothing_failed(h)


def test_a_second_member_listing_a_name_twice_joins_the_group() -> None:
    """The check that a new member supports the group's protocols reads names as a set; counting must agree."""
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new(protocols=RANGE_TWICE)
    rejoins = [h.join(leader), h.join(follower)]
    results = [answered(newcomer), *(answered(r) for r in rejoins)]
    assert {r.error for r in results} == {E.none}
    assert {r.generation_id for r in results} == {2}
    assert {r.protocol_name for r in results} == {"range"}
    assert len(h.group().members) == 3 and h.group().supported_protocols == {"range": 3}
    assert_nothing_failed(h)
