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


class Deadline:
    """One armed deadline; ``schedule`` returns it so a hot caller can move it without a keyed lookup."""

    __slots__ = ("action", "armed_at", "deadline", "live")

    def __init__(self, deadline: int, action: Action) -> None:
        self.deadline = deadline
        self.action = action
        self.armed_at = deadline
        self.live = True  # False once fired, cancelled or replaced


class Purgatory:
    def __init__(self, clock: Clock, wakeup: Callable[[int], None] | None = None) -> None:
        self._clock = clock
        self._wakeup = wakeup
        self._entries: dict[Hashable, Deadline] = {}
        self._heap: list[tuple[int, int, Hashable, Deadline]] = []
        self._seq = itertools.count()

    def set_wakeup(self, wakeup: Callable[[int], None]) -> None:
        """Called with a deadline whenever it becomes the earliest one armed."""
        self._wakeup = wakeup

    def schedule(self, key: Hashable, delay_ms: int, action: Action) -> Deadline:
        deadline = self._clock.now_ms() + max(delay_ms, 0)
        entry = self._entries.get(key)
        if entry is not None and entry.armed_at <= deadline:
            entry.deadline = deadline
            entry.action = action
            return entry
        if entry is not None:
            entry.live = False
        entry = Deadline(deadline, action)
        self._entries[key] = entry
        self._push(key, entry)
        return entry

    def postpone(self, armed: Deadline, delay_ms: int) -> bool:
        """Move a still-armed deadline to ``delay_ms`` from now, if that is no earlier than its heap slot.

        The heartbeat path: one attribute store, no keyed lookup and no new object. False means the
        caller must ``schedule`` by key (the deadline fired, was cancelled or replaced, or would move
        earlier, which needs a new heap slot).
        """
        if not armed.live:
            return False
        deadline = self._clock.now_ms() + (delay_ms if delay_ms > 0 else 0)
        if deadline < armed.armed_at:
            return False
        armed.deadline = deadline
        return True

    def cancel(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.live = False

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
            entry.live = False
            entry.action()
            fired += 1
        return fired

    def _push(self, key: Hashable, entry: Deadline) -> None:
        heap = self._heap
        earliest = heap[0][0] if heap else None
        heapq.heappush(heap, (entry.armed_at, next(self._seq), key, entry))
        if self._wakeup is not None and (earliest is None or entry.armed_at < earliest):
            self._wakeup(entry.armed_at)
