"""Session and revocation timers, and leaving: checklist items 67-70 of ``docs/spec/consumer-groups.md`` section 13
(sections 4.4, 4.13, 7.1, 7.3, 7.4), on the manual clock.

Not here: item 71 (a bad broker setting refuses start) is a configuration test; item 72 (group-level
``consumer.heartbeat.interval.ms``) is not supported: the broker has no group-level configs (section 7.6 makes them
optional), so every response carries the broker's interval.
"""

from __future__ import annotations

from broker.coordinator.messages import ConsumerHeartbeatResult
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import MemberState
from tests.coordinator.modern.consumer.harness import GROUP, INTERVAL_MS, SESSION_MS, ConsumerHarness, E


def test_item_67_session_timeout() -> None:
    """Item 67: a member that stops heartbeating is removed after the session timeout; group epoch +1; the others
    get its partitions; heartbeating every interval keeps a member alive indefinitely."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    epoch = h.epochs()[0]
    b_last = h.clock.now_ms()
    while h.clock.now_ms() < b_last + SESSION_MS - INTERVAL_MS:
        h.advance(INTERVAL_MS)
        h.ok(a.poll())
        assert "b" in h.cgroup().members
    h.advance(b_last + SESSION_MS - h.clock.now_ms())
    assert "b" not in h.cgroup().members
    assert h.epochs() == (epoch + 1, epoch) and h.cstate() is ConsumerGroupState.ASSIGNING
    assert h.session_due("b") is None and h.rebalance_due("b") is None
    result = h.ok(a.poll())
    assert result.member_epoch == epoch + 1 and h.named(result.assignment) == {"t": {0, 1, 2, 3}}
    for _ in range(10 * SESSION_MS // INTERVAL_MS):  # a minute more: a stays
        h.advance(INTERVAL_MS)
        h.ok(a.poll())
    assert list(h.cgroup().members) == ["a"] and h.epochs()[0] == epoch + 1
    assert h.hb("b", epoch).error is E.unknown_member_id


def revoking(rebalance_ms: int) -> tuple[ConsumerHarness, dict[str, list[int]]]:
    """ "a" (with the given rebalance timeout) owned all of t; "b" joined and a was told to revoke half."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a", rebalance_ms=rebalance_ms))
    h.ok(h.cjoin("b"))
    kept = h.named(h.ok(h.hb("a", 1)).assignment)
    assert kept is not None and h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert h.rebalance_due("a") == h.clock.now_ms() + rebalance_ms
    return h, {topic: sorted(partitions) for topic, partitions in kept.items()}


def test_item_68_revocation_timeout() -> None:
    """Item 68: a revoking member that never acknowledges is fenced after its RebalanceTimeoutMs, even while it
    heartbeats; its next HB -> UNKNOWN_MEMBER_ID. Acknowledging in time -> never fenced."""
    h, _ = revoking(rebalance_ms=4_000)
    start = h.clock.now_ms()
    while h.clock.now_ms() + INTERVAL_MS < start + 4_000:
        h.advance(INTERVAL_MS)
        assert h.ok(h.hb("a", 1)).member_epoch == 1
    h.advance(start + 4_000 - h.clock.now_ms())
    assert "a" not in h.cgroup().members and h.epochs() == (3, 2)
    assert h.session_due("a") is None
    assert h.hb("a", 1).error is E.unknown_member_id
    assert h.named(h.ok(h.hb("b", 2)).assignment) == {"t": {0, 1, 2, 3}}

    h, kept = revoking(rebalance_ms=4_000)
    h.advance(3_999)
    assert h.ok(h.hb("a", 1, owned=kept)).member_epoch == 2
    assert h.rebalance_due("a") is None
    for _ in range(20):
        h.advance(INTERVAL_MS)
        h.ok(h.hb("a", 2))
        h.ok(h.hb("b", 2))
    assert set(h.cgroup().members) == {"a", "b"} and h.epochs() == (2, 2)


def test_item_69_leave() -> None:
    """Item 69: HB(-1) -> MemberEpoch -1, HeartbeatIntervalMs 0; the member is gone with its timers; its next
    HB(e > 0) -> UNKNOWN_MEMBER_ID."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b"))
    h.ok(h.hb("a", 1))  # a is revoking: both timers run
    assert h.rebalance_due("a") is not None
    assert h.hb("a", -1) == ConsumerHeartbeatResult(E.none, None, "a", -1, 0, None)
    assert list(h.cgroup().members) == ["b"] and h.epochs() == (3, 2)
    assert h.session_due("a") is None and h.rebalance_due("a") is None
    assert h.hb("a", 1).error is E.unknown_member_id
    assert h.hb("a", 2).error is E.unknown_member_id


def test_item_70_leave_of_an_unknown_member_or_group() -> None:
    """Item 70: HB(-1) for an unknown member -> UNKNOWN_MEMBER_ID; for an unknown group -> GROUP_ID_NOT_FOUND."""
    h = ConsumerHarness()
    assert h.hb("a", -1) == ConsumerHeartbeatResult(E.group_id_not_found, f"Group {GROUP} not found.")
    h.ok(h.cjoin("a"))
    assert h.hb("b", -1) == ConsumerHeartbeatResult(E.unknown_member_id, f"Member b is not a member of group {GROUP}.")
    assert h.epochs() == (1, 1)
