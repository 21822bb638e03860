"""Keyed deadlines: the coordinator's scheduler interface.

Every piece of delayed work (heartbeat expiry, join and sync deadlines, the
offset expiration sweep) is a deadline under a key. Scheduling a key again
replaces its deadline, cancelling removes it. Nothing here touches an event
loop: ``run_due`` fires what is due by the injected clock, and a driver (the
event loop in production, ``ManualClock.advance`` in tests) calls it.

Re-arming is lazy so that the hot path stays O(1): moving a deadline *later*
(every Heartbeat does this) only updates the entry; when the stale heap slot
comes up, the entry is pushed again at its new deadline. Only moving a deadline
earlier, or a new key, touches the heap.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable

from broker.coordinator.clock import Clock

Action = Callable[[], None]


class _Entry:
    __slots__ = ("action", "armed_at", "deadline")

    def __init__(self, deadline: int, action: Action) -> None:
        self.deadline = deadline
        self.action = action
        self.armed_at = deadline


class Purgatory:
    def __init__(self, clock: Clock, wakeup: Callable[[int], None] | None = None) -> None:
        self._clock = clock
        self._wakeup = wakeup
        self._entries: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[int, int, Hashable, _Entry]] = []
        self._seq = itertools.count()

    def set_wakeup(self, wakeup: Callable[[int], None]) -> None:
        """Called with a deadline whenever it becomes the earliest one armed."""
        self._wakeup = wakeup

    def schedule(self, key: Hashable, delay_ms: int, action: Action) -> None:
        deadline = self._clock.now_ms() + max(delay_ms, 0)
        entry = self._entries.get(key)
        if entry is not None and entry.armed_at <= deadline:
            entry.deadline = deadline
            entry.action = action
            return
        entry = _Entry(deadline, action)
        self._entries[key] = entry
        self._push(key, entry)

    def reschedule(self, key: Hashable, delay_ms: int) -> int | None:
        """Move an armed key's deadline and keep its action; returns the new deadline, None if nothing is armed.

        The heartbeat path: no new action object, and a later deadline is a single attribute store.
        """
        entry = self._entries.get(key)
        if entry is None:
            return None
        deadline = self._clock.now_ms() + (delay_ms if delay_ms > 0 else 0)
        if entry.armed_at <= deadline:
            entry.deadline = deadline
        else:
            earlier = self._entries[key] = _Entry(deadline, entry.action)
            self._push(key, earlier)
        return deadline

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def next_deadline(self) -> int | None:
        """The earliest armed heap slot (possibly a stale one; firing it is harmless)."""
        heap = self._heap
        while heap and self._entries.get(heap[0][2]) is not heap[0][3]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_due(self) -> int:
        """Fire every action whose deadline has passed, earliest first."""
        now = self._clock.now_ms()
        heap = self._heap
        fired = 0
        while heap and heap[0][0] <= now:
            _, _, key, entry = heapq.heappop(heap)
            if self._entries.get(key) is not entry:
                continue
            if entry.deadline > now:
                entry.armed_at = entry.deadline
                self._push(key, entry)
                continue
            del self._entries[key]
            entry.action()
            fired += 1
        return fired

    def _push(self, key: Hashable, entry: _Entry) -> None:
        heap = self._heap
        earliest = heap[0][0] if heap else None
        heapq.heappush(heap, (entry.armed_at, next(self._seq), key, entry))
        if self._wakeup is not None and (earliest is None or entry.armed_at < earliest):
            self._wakeup(entry.armed_at)
