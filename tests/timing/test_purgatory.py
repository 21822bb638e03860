"""The purgatory's keyed deadlines on a manual clock, including postpone, the heartbeat path."""

from __future__ import annotations

from broker.timing.clock import ManualClock
from broker.timing.purgatory import Purgatory


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


def test_moving_a_deadline_earlier_fires_it_once_at_the_earlier_time() -> None:
    clock, purgatory, fired = rig()
    wakeups: list[int] = []
    purgatory.set_wakeup(wakeups.append)
    armed = purgatory.schedule("k", 1000, lambda: fired.append("k"))
    assert purgatory.postpone(armed, 10)  # earlier: one more heap slot for the same deadline object
    assert purgatory.deadline("k") == 10 and wakeups[-1] == 10
    assert purgatory.schedule("k", 5, lambda: fired.append("k")) is armed  # by key, too
    clock.advance(5)
    assert fired == ["k"]
    clock.advance(2000)  # the superseded slots at 10 and 1000 fire nothing
    assert fired == ["k"]
    assert purgatory.next_deadline() is None


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
