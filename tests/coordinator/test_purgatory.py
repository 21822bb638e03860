"""The purgatory's keyed deadlines on a manual clock, including reschedule, the heartbeat path."""

from __future__ import annotations

from broker.coordinator.clock import ManualClock
from broker.coordinator.purgatory import Purgatory


def rig() -> tuple[ManualClock, Purgatory, list[str]]:
    clock = ManualClock(0)
    purgatory = Purgatory(clock)
    clock.attach(purgatory)
    return clock, purgatory, []


def test_reschedule_later_keeps_the_action_and_fires_once_at_the_new_deadline() -> None:
    clock, purgatory, fired = rig()
    purgatory.schedule("k", 100, lambda: fired.append("k"))
    clock.advance(60)
    assert purgatory.reschedule("k", 100)
    clock.advance(99)  # t=159: the first deadline (100) passed without firing
    assert fired == []
    clock.advance(1)
    assert fired == ["k"] and "k" not in purgatory


def test_reschedule_earlier_fires_at_the_earlier_deadline_only() -> None:
    clock, purgatory, fired = rig()
    wakeups: list[int] = []
    purgatory.set_wakeup(wakeups.append)
    purgatory.schedule("k", 1000, lambda: fired.append("k"))
    assert purgatory.reschedule("k", 10)
    assert wakeups[-1] == 10  # the loop timer is moved forward
    clock.advance(10)
    assert fired == ["k"]
    clock.advance(2000)  # the stale slot at 1000 fires nothing
    assert fired == ["k"]


def test_reschedule_of_an_unknown_key_arms_nothing() -> None:
    clock, purgatory, fired = rig()
    assert not purgatory.reschedule("missing", 10)
    assert "missing" not in purgatory and len(purgatory) == 0
    purgatory.schedule("k", 10, lambda: fired.append("k"))
    purgatory.cancel("k")
    assert not purgatory.reschedule("k", 10)
    clock.advance(100)
    assert fired == []
