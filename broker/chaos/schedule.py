"""The kill schedule of a chaos run: which consumer dies next, by which signal, and when it comes back.

One RNG, seeded with ``--seed``, decides both the signal (SIGKILL with probability ``--kill-ratio``, else SIGTERM)
and the victim among the live consumers, in that order: the same seed gives the same kills as long as the same
consumers are alive. After a SIGKILL the broker notices only when the member's session times out; SIGTERM makes the
consumer close, and a closing dynamic member sends LeaveGroup (a static one does not: KIP-345).

With ``--group-protocol share`` the other signal is SIGSTOP instead of SIGTERM (``gentle``): the member stays
connected and keeps its share session but neither heartbeats nor acknowledges, so the records it holds come back
only when their acquisition lock expires (KIP-932, docs/spec/share-groups.md 6.6); ``--restart-after`` seconds
later it gets SIGCONT (``resume``) instead of a new incarnation.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.chaos.launch import Incarnation, client_id

SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGSTOP": signal.SIGSTOP}


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

    def __init__(self, seed: int, kill_ratio: float, restart_after: float, gentle: str = "SIGTERM") -> None:
        self.rng = random.Random(seed)
        self.kill_ratio = kill_ratio
        self.gentle = gentle  # the signal of the kills that are not SIGKILL: SIGTERM, or SIGSTOP (share groups)
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
        how = "SIGKILL" if self.rng.random() < self.kill_ratio else self.gentle
        live = sorted(slot for slot, c in slots.items() if c.alive and c.signalled is None)
        if not live:
            return None
        victim = slots[self.rng.choice(live)]
        if announce is not None:
            announce(victim, how)
        victim.process.send_signal(SIGNALS[how])
        at = time.time()
        victim.signalled, victim.signalled_at = how, at
        if how == "SIGSTOP":
            victim.pauses.append((at, None))
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

    def resume(self, stopped: Incarnation) -> None:
        """SIGCONT a SIGSTOPped member whose time has come: it is live again, and may be picked again."""
        stopped.process.send_signal(signal.SIGCONT)
        at = time.time()
        stopped.pauses[-1] = (stopped.pauses[-1][0], at)
        stopped.signalled, stopped.signalled_at = None, None
        del self.restarts[stopped.slot]
        for kill in self.kills:
            if kill.slot == stopped.slot and kill.incarnation == stopped.incarnation and kill.restarted_at is None:
                kill.restarted_as, kill.restarted_at = stopped.client_id, at

    def restarted(self, old: Incarnation, new: Incarnation) -> None:
        """``new`` replaced ``old``: no restart due for its slot any more, and ``old``'s kill says by whom."""
        del self.restarts[old.slot]
        for kill in self.kills:  # a share run's member may have been SIGSTOPped (and resumed) before its SIGKILL
            if kill.slot == old.slot and kill.incarnation == old.incarnation and kill.restarted_at is None:
                kill.restarted_as, kill.restarted_at = new.client_id, new.started_at
