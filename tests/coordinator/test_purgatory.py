"""The purgatory's keyed deadlines on a manual clock, including postpone, the heartbeat path."""

from __future__ import annotations

from broker.coordinator.clock import ManualClock
from broker.coordinator.purgatory import Purgatory


def rig() -> tuple[ManualClock, Purgatory, list[str]]:
    clock = ManualClock(0)
    purgatory = Purgatory(clock)
    clock.attach(purgatory)
    return clock, purgatory, []


def test_postpone_keeps_the_action_and_fires_once_at_the_new_deadline() -> None:
    clock, purgatory, fired = rig()
    armed = purgatory.schedule("k", 100, lambda: fired.append("k"))
    clock.advance(60)
    assert purgatory.postpone(armed, 100)
    assert purgatory.deadline("k") == 160
    clock.advance(99)  # t=159: the first deadline (100) passed without firing
    assert fired == []
    clock.advance(1)
    assert fired == ["k"] and "k" not in purgatory
    assert not purgatory.postpone(armed, 100)  # fired: the caller must schedule again


def test_postpone_never_moves_a_deadline_earlier_than_its_heap_slot() -> None:
    clock, purgatory, fired = rig()
    armed = purgatory.schedule("k", 1000, lambda: fired.append("k"))
    assert not purgatory.postpone(armed, 10)
    assert purgatory.deadline("k") == 1000
    wakeups: list[int] = []
    purgatory.set_wakeup(wakeups.append)
    earlier = purgatory.schedule("k", 10, lambda: fired.append("k"))  # the keyed path moves it earlier
    assert earlier is not armed and wakeups[-1] == 10
    assert not purgatory.postpone(armed, 2000)  # the replaced deadline is dead
    clock.advance(10)
    assert fired == ["k"]
    clock.advance(2000)  # the stale slot at 1000 fires nothing
    assert fired == ["k"]


def test_postpone_of_a_cancelled_deadline_arms_nothing() -> None:
    clock, purgatory, fired = rig()
    armed = purgatory.schedule("k", 10, lambda: fired.append("k"))
    purgatory.cancel("k")
    assert not purgatory.postpone(armed, 10)
    assert "k" not in purgatory and len(purgatory) == 0
    clock.advance(100)
    assert fired == []


def test_scheduling_a_key_later_keeps_its_deadline_object() -> None:
    clock, purgatory, fired = rig()
    armed = purgatory.schedule("k", 10, lambda: fired.append("first"))
    assert purgatory.schedule("k", 50, lambda: fired.append("second")) is armed
    clock.advance(50)
    assert fired == ["second"]
