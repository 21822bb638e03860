"""Drives a Purgatory from the event loop: the one loop timer of a running broker (broker/server/broker.py)."""

from __future__ import annotations

import asyncio

from broker.log import get_logger
from broker.timing.clock import Clock
from broker.timing.purgatory import Purgatory

log = get_logger("server")  # structlog, imported at the first call (broker/log.py)


class LoopTimer:
    """Drives a Purgatory from the event loop: one loop timer, at the earliest deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock, purgatory: Purgatory) -> None:
        self._loop = loop
        self._clock = clock
        self._purgatory = purgatory
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0
        purgatory.set_wakeup(self.arm)
        first = purgatory.next_deadline()
        if first is not None:
            self.arm(first)

    def arm(self, deadline_ms: int) -> None:
        if self._handle is not None:
            if self._armed_for <= deadline_ms:
                return
            self._handle.cancel()
        # +1 ms: the loop's clock may wake a hair early, and an early wake would find nothing due.
        delay = max(deadline_ms - self._clock.now_ms() + 1, 0) / 1000
        self._armed_for = deadline_ms
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        try:
            self._purgatory.run_due()
        except Exception:
            log.exception("timer action failed")
        upcoming = self._purgatory.next_deadline()
        if upcoming is not None:
            self.arm(upcoming)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
