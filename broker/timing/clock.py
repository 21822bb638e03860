"""Time sources for the coordinators, the storage timers and the event hub.

The coordinator never reads the system clock itself: it is handed a ``Clock`` so
that production runs on real time and tests run on a ``ManualClock`` that only
moves when the test says so.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch; never goes backwards."""
        ...


class Timers(Protocol):
    """What a ManualClock drives as it advances: a Purgatory, seen only through these two calls."""

    def next_deadline(self) -> int | None: ...

    def run_due(self) -> object: ...  # the Purgatory returns how many fired


class SystemClock:
    """Wall-clock milliseconds that never go backwards.

    Anchored to the wall clock once at start, then advanced by the monotonic
    clock, so a wall-clock step (NTP) cannot fire or starve deadlines.
    """

    __slots__ = ("_offset_ns",)

    def __init__(self) -> None:
        self._offset_ns = time.time_ns() - time.monotonic_ns()

    def now_ms(self) -> int:
        return (time.monotonic_ns() + self._offset_ns) // 1_000_000


class ManualClock:
    """A clock that moves only when ``advance`` is called.

    Purgatories attached to it fire their due deadlines in deadline order while
    time advances, each one seeing the clock set to its own deadline, exactly as
    a real loop would have fired them.
    """

    __slots__ = ("_now", "_purgatories")

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._purgatories: list[Timers] = []

    def now_ms(self) -> int:
        return self._now

    def attach(self, purgatory: Timers) -> None:
        self._purgatories.append(purgatory)

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not go backwards")
        target = self._now + ms
        while True:
            due = [d for p in self._purgatories if (d := p.next_deadline()) is not None and d <= target]
            if not due:
                break
            self._now = max(self._now, min(due))
            for purgatory in self._purgatories:
                purgatory.run_due()
        self._now = target
