"""Keyed deadlines: the coordinator's scheduler interface.

Every piece of delayed work (heartbeat expiry, join and sync deadlines, the
offset expiration sweep) is a deadline under a key. Scheduling a key again
replaces its deadline, cancelling removes it. Nothing here touches an event
loop: ``run_due`` fires what is due by the injected clock, and a driver (the
event loop in production, ``ManualClock.advance`` in tests) calls it.

A key keeps one ``Deadline`` object for as long as it is armed, and re-arming
is lazy so that the hot path stays O(1): moving a deadline *later* (every
Heartbeat does this) is one attribute store; when the old heap slot comes up,
the deadline is pushed again at its new time. Moving it earlier pushes one more
heap slot for the same object; the slot whose time no longer matches is skipped.

Each due action runs in isolation: one that raises is logged with its key and counted (``failures``), and the
actions due after it still fire, as Kafka's ``CoordinatorTimer`` fails one timer's write event without touching
the others. Whoever arms an action still owns its consequences: a coordinator timer that must not leave a group
stuck guards itself (``ClassicGroups.fail``), this is only the last line.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, KeysView

from broker.log import get_logger
from broker.timing.clock import Clock

log = get_logger("timing")  # structlog, imported at the first call (broker/log.py)


class KeyedAction:
    """An action many keys share, told which key fired: what a per-key closure would cost, once.

    A broker with 100,000 members arms 100,000 heartbeat keys with the same expiry logic; a closure or a small
    object per key would cost ~70 B each (issue 17), so such a caller subclasses this and passes one instance.
    """

    __slots__ = ()

    def fire(self, key: Hashable) -> None:
        raise NotImplementedError


Action = Callable[[], None] | KeyedAction


class Deadline:
    """A key's armed deadline; ``schedule`` returns it so a hot caller can move it without a keyed lookup."""

    # Four slots, not five: a member's deadline is one of the objects 100,000 members multiply (issue 17), and
    # ``armed_at`` None says "fired or cancelled" where a flag would take a slot (64 B an object, not 80).
    __slots__ = ("action", "armed_at", "due_ms", "key")

    def __init__(self, key: Hashable, due_ms: int, action: Action) -> None:
        self.key = key
        self.due_ms = due_ms  # when the action fires, by the purgatory's clock
        self.action = action
        self.armed_at: int | None = due_ms  # the time of its newest heap slot; None once fired or cancelled

    @property
    def live(self) -> bool:
        """False once fired or cancelled."""
        return self.armed_at is not None


class Purgatory:
    def __init__(self, clock: Clock, wakeup: Callable[[int], None] | None = None) -> None:
        self._clock = clock
        self._wakeup = wakeup
        self._entries: dict[Hashable, Deadline] = {}
        self._heap: list[tuple[int, int, Deadline]] = []
        self._seq = itertools.count()
        self.failures = 0  # actions that raised (each logged with its key)

    def set_wakeup(self, wakeup: Callable[[int], None]) -> None:
        """Called with a deadline whenever it becomes the earliest one armed."""
        self._wakeup = wakeup

    def schedule(self, key: Hashable, delay_ms: int, action: Action) -> Deadline:
        due_ms = self._clock.now_ms() + (delay_ms if delay_ms > 0 else 0)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Deadline(key, due_ms, action)
            self._push(entry, due_ms)
        else:
            entry.action = action
            self._move(entry, due_ms)
        return entry

    def postpone(self, armed: Deadline, delay_ms: int) -> bool:
        """Move a still-armed deadline to ``delay_ms`` from now, keeping its action.

        The heartbeat path: no keyed lookup and no new object. False when the deadline has fired or
        been cancelled; the caller then schedules by key.
        """
        if armed.armed_at is None:
            return False
        self._move(armed, self._clock.now_ms() + (delay_ms if delay_ms > 0 else 0))
        return True

    def _move(self, entry: Deadline, due_ms: int) -> None:
        entry.due_ms = due_ms
        armed_at = entry.armed_at
        if armed_at is not None and due_ms < armed_at:
            entry.armed_at = due_ms
            self._push(entry, due_ms)

    def cancel(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.armed_at = None

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.due_ms

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> KeysView[Hashable]:
        """Every armed key (a live view): what the checks of timers left armed look at."""
        return self._entries.keys()

    def next_deadline(self) -> int | None:
        """The earliest armed heap slot (possibly one re-armed later; firing it early is harmless)."""
        heap = self._heap
        while heap and _stale(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_due(self) -> int:
        """Fire every action whose deadline has passed, earliest first."""
        now = self._clock.now_ms()
        heap = self._heap
        fired = 0
        while heap and heap[0][0] <= now:
            slot = heapq.heappop(heap)
            if _stale(slot):
                continue
            entry = slot[2]
            if entry.due_ms > now:
                entry.armed_at = entry.due_ms
                self._push(entry, entry.due_ms)
                continue
            del self._entries[entry.key]
            entry.armed_at = None
            fired += 1
            action = entry.action
            try:
                if isinstance(action, KeyedAction):
                    action.fire(entry.key)
                else:
                    action()
            except Exception:
                self.failures += 1
                log.exception("timer action failed", key=repr(entry.key))
        return fired

    def _push(self, entry: Deadline, armed_at: int) -> None:
        heap = self._heap
        earliest = heap[0][0] if heap else None
        heapq.heappush(heap, (armed_at, next(self._seq), entry))
        if self._wakeup is not None and (earliest is None or armed_at < earliest):
            self._wakeup(armed_at)


def _stale(slot: tuple[int, int, Deadline]) -> bool:
    """A slot of a fired or cancelled deadline, or one superseded by an earlier re-arm."""
    return slot[0] != slot[2].armed_at  # a fired or cancelled deadline's armed_at is None
