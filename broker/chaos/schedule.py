"""The kill schedule of a chaos run: which consumer dies next, by which signal, and when it comes back.

One RNG, seeded with ``--seed``, decides both the signal (SIGKILL with probability ``--kill-ratio``, else SIGTERM)
and the victim among the live consumers, in that order: the same seed gives the same kills as long as the same
consumers are alive. After a SIGKILL the broker notices only when the member's session times out; SIGTERM makes the
consumer close, and a closing dynamic member sends LeaveGroup (a static one does not: KIP-345).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.chaos.launch import Incarnation, client_id


@dataclass
class Kill:
    """One kill: whom (slot, incarnation, pid), how, when, and the incarnation that replaced the victim."""

    number: int
    slot: int
    incarnation: int
    pid: int
    signal: str
    at: float  # time.time() when the signal was sent
    t: float  # seconds since the schedule started
    restarted_as: str | None = None
    restarted_at: float | None = None

    @property
    def client_id(self) -> str:
        return client_id(self.slot, self.incarnation)


class Schedule:
    """The kills made so far, and the restarts due: slot -> ``time.time()`` to start its next incarnation."""

    def __init__(self, seed: int, kill_ratio: float, restart_after: float) -> None:
        self.rng = random.Random(seed)
        self.kill_ratio = kill_ratio
        self.restart_after = restart_after
        self.started: float | None = None  # time.time() when the chaos began
        self.kills: list[Kill] = []
        self.restarts: dict[int, float] = {}

    def kill_one(
        self, slots: Mapping[int, Incarnation], announce: Callable[[Incarnation, str], None] | None = None
    ) -> Kill | None:
        """Signal one live consumer not signalled yet and plan its restart; None when there is none.

        ``announce(victim, signal)`` is called right before the signal is sent (the runner tells the broker: a
        ``chaos_action`` event); what it does takes nothing from the seeded choices."""
        assert self.started is not None
        how = "SIGKILL" if self.rng.random() < self.kill_ratio else "SIGTERM"
        live = sorted(slot for slot, c in slots.items() if c.alive and c.signalled is None)
        if not live:
            return None
        victim = slots[self.rng.choice(live)]
        if announce is not None:
            announce(victim, how)
        victim.process.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        at = time.time()
        victim.signalled, victim.signalled_at = how, at
        kill = Kill(
            len(self.kills) + 1, victim.slot, victim.incarnation, victim.process.pid, how, at, at - self.started
        )
        self.kills.append(kill)
        self.restarts[victim.slot] = at + self.restart_after
        return kill

    def restart_later(self, slot: int, now: float) -> None:
        """A consumer that exited by itself comes back like a killed one (unless it already is to)."""
        self.restarts.setdefault(slot, now + self.restart_after)

    def due(self, now: float) -> list[int]:
        """The slots whose restart time has come, in slot order."""
        return [slot for slot, at in sorted(self.restarts.items()) if now >= at]

    def restarted(self, old: Incarnation, new: Incarnation) -> None:
        """``new`` replaced ``old``: no restart due for its slot any more, and ``old``'s kill says by whom."""
        del self.restarts[old.slot]
        for kill in self.kills:
            if kill.slot == old.slot and kill.incarnation == old.incarnation:
                kill.restarted_as, kill.restarted_at = new.client_id, new.started_at
