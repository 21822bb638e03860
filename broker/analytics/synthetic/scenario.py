"""What happens around the coordinator: deploys, crashes, restarts, scaling, and the broker's own restarts.

- groups of dynamic or static members (KIP-345), eager (``range``) or cooperative (``cooperative-sticky``,
  KIP-429: partitions that change owner are first revoked, left unowned, and assigned one rebalance later);
- deploys (the initial rebalance delay, extended while members keep joining), scale-ups, rolling restarts,
  graceful leaves, SIGKILLed consumers found by their session timeout (``since_last_heartbeat_ms`` just over
  the session timeout), a replacement process that arrives before the dead member expires, static members
  bounced (``member_fenced`` without a rebalance) or gone for longer than their session, members stuck past the
  rebalance timeout, a rebalance restarted while CompletingRebalance, kicks and forced rebalances through the
  control API, groups emptied, deleted (DeleteGroups, or offsets expired) and created again;
- broker restarts: a graceful stop moves every group to Dead, and the next run (a new ``run_id``, ``seq`` from
  1) starts with no groups, which the clients form again with new member ids;
- KIP-848 consumer groups (``modern.py``), a quarter of them: the same deploys, crashes, restarts, scale-ups,
  leaves and shutdowns, as epoch bumps, target assignments and reconciliations (no static members, kicks or
  forced rebalances there; a graceful stop says nothing of them: the broker unloads them silently).

Heartbeats and offset commits are not events (the latter only at debug level) and are not written.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.analytics.synthetic.modern import ConsumerCoordinator
from broker.analytics.synthetic.share import ShareTraffic
from broker.analytics.synthetic.world import (
    A_DISTURB,
    A_EXPIRE,
    A_JOIN,
    A_LEAVE,
    A_START,
    A_STATIC_RETURN,
    DEAD,
    DISTURBANCE_WEIGHTS,
    EMPTY,
    FORCE,
    KICK,
    KILL,
    LEAVE,
    MEAN_STABLE_MS,
    P_REPLACEMENT,
    P_SECOND_VICTIM,
    RESTART,
    SCALE_UP,
    SHUTDOWN,
    STABLE,
    STATIC_BOUNCE,
    STATIC_DOWN,
    Group,
    Member,
    Process,
)
from broker.events.names import GROUP_DELETED, OFFSETS_EXPIRED, STATE_CHANGED

_KINDS = list(DISTURBANCE_WEIGHTS)
_WEIGHTS = list(DISTURBANCE_WEIGHTS.values())
#: Lines buffered before a write.
FLUSH_LINES = 8192


class SimulatedBroker(ConsumerCoordinator):
    """One broker's log: the simulation of its groups, run until it has written about ``events`` events."""

    def __init__(
        self,
        path: Path,
        rng: random.Random,
        groups: list[Group],
        events: int,
        restarts: int,
        bad_lines: int,
        start_ms: int,
        share: ShareTraffic | None = None,
    ) -> None:
        super().__init__(path, rng, start_ms)
        self.groups = groups
        #: Share groups (issue 28), merged into the log by time; none by default.
        self.share = share
        self.target = events
        self.count = 0
        self.done_before = 0  # events of the runs before the current one
        self.restart_at = [events * (i + 1) // (restarts + 1) for i in range(restarts)]
        # The bad lines' places are drawn before the first run id: the order of the draws is the seed's log.
        self.bad_at = sorted(self.r(1, max(events, 2)) for _ in range(bad_lines))
        self.checkpoint = min(self.restart_at[:1] + self.bad_at[:1] + [events])
        #: Told the events written so far at each write (``generate``'s progress lines), if set.
        self.tally: Callable[[int], None] | None = None
        self.new_run()
        self.handlers: list[Callable[[Group, Any], None]] = [
            self._start,
            self._join,
            self._rejoin,
            self._sync,
            self._leave,
            self._expire,
            self._static_return,
            self._initial_delay,
            self._join_deadline,
            self._sync_deadline,
            self._disturb,
            self._empty_next,
            self._cg_heartbeat,
        ]

    # -- the loop ---------------------------------------------------------------------------------------

    def run(self) -> None:
        for g in self.groups:
            self.at(self.now + self.r(0, 300_000), g, A_START)
        share = self.share
        if share is not None:
            share.start(self.now)
        heap = self.heap
        handlers = self.handlers
        restart_at = self.restart_at
        bad_at = self.bad_at
        with open(self.path, "w", encoding="ascii", newline="\n") as out:
            while self.count < self.target:
                if not heap:  # every group went quiet for good: start them again
                    for g in self.groups:
                        self.at(self.now + self.r(1000, 60_000), g, A_START)
                share_t = share.next_t if share is not None else None
                if share is not None and share_t is not None and share_t <= heap[0][0]:
                    self.now = share_t
                    share.step()
                else:
                    t, _, g, action, arg = heapq.heappop(heap)
                    self.now = t
                    handlers[action](g, arg)
                self.count = count = self.seq + self.done_before
                if count >= self.checkpoint:
                    if restart_at and count >= restart_at[0]:
                        restart_at.pop(0)
                        self._restart_broker()
                    while bad_at and count >= bad_at[0]:
                        bad_at.pop(0)
                        self.bad_line()
                    self.checkpoint = min(restart_at[:1] + bad_at[:1] + [self.target])
                if len(self.buf) >= FLUSH_LINES:
                    self.flush(out)
                    if self.tally is not None:
                        self.tally(count)
            self.flush(out)
            if self.tally is not None:
                self.tally(self.count)

    def _restart_broker(self) -> None:
        rng = self.rng
        if rng.random() < 0.75:
            # A graceful stop unloads every group (coordinator.shutdown): each classic one goes to Dead, in
            # creation order; consumer groups are dropped without a word (section 7.7).
            for g in sorted((g for g in self.groups if g.exists and g.cg is None), key=lambda g: g.created):
                self.emit(STATE_CHANGED, g, f',"from":"{g.state}","to":"{DEAD}","generation_id":{g.gen}')
        self.done_before += self.seq
        self.now += self.r(3000, 30_000)
        self.new_run()
        self.heap.clear()
        if self.share is not None:
            self.share.start(self.now)
        for g in self.groups:
            alive = [m.process() for m in g.members.values() if m.alive]
            g.reset()
            if alive:
                # The clients find the new broker knows no group (UNKNOWN_MEMBER_ID) and join afresh.
                for process in alive:
                    self.at(self.now + self.r(500, 8000), g, A_JOIN, process)
            else:
                self.at(self.now + self.r(10_000, 1_800_000), g, A_START)

    # -- the consumers ----------------------------------------------------------------------------------

    def _start(self, g: Group, _: Any) -> None:
        """A deployment: the group's processes start within a few seconds of each other."""
        if g.members:
            return
        if not g.processes:
            g.processes = [self._new_process(g) for _ in range(g.size)]
        t = self.now
        for i, process in enumerate(g.processes):
            self.at(t if i == 0 else t + self.r(0, 2500), g, A_JOIN, process)

    def _new_process(self, g: Group) -> Process:
        n = g.next_client
        g.next_client += 1
        host = f"/10.{self.r(0, 256)}.{self.r(0, 256)}.{self.r(1, 255)}"
        if g.static:
            iid = f"{g.gid}-{n - 1}"
            return Process(f"consumer-{g.gid}-{iid}", host, iid)
        return Process(f"consumer-{g.gid}-{n}", host, None)

    def _static_return(self, g: Group, process: Process) -> None:
        self._join(g, process)

    def _kill(self, g: Group, m: Member) -> None:
        """The process dies (SIGKILL, a crashed host): its heartbeats stop, the session timer will fire."""
        m.alive = False
        m.last_hb = self.now - self.r(0, g.hb)
        # The purgatory fires a few ms after the deadline.
        self.at(m.last_hb + g.session + self.r(0, 4), g, A_EXPIRE, (m, "session_timeout", m.last_hb))

    def _completing_twist(self, g: Group, t: int) -> None:
        rng = self.rng
        statics = [m for m in g.members.values() if m.iid is not None]
        dynamics = [m for m in g.members.values() if m.iid is None and m.id != g.leader]
        roll = rng.random()
        if statics and roll < 0.4:
            self.at(t, g, A_STATIC_RETURN, rng.choice(statics).process())
        elif dynamics and (roll < 0.7 or len(g.members) > 2 * g.size):
            self.at(t, g, A_LEAVE, rng.choice(dynamics))
        else:
            self.at(t, g, A_JOIN, self._new_process(g))

    def _next_disturbance(self, g: Group) -> None:
        if not g.disturb_pending:
            g.disturb_pending = True
            wait = int(self.rng.expovariate(g.activity / MEAN_STABLE_MS)) + 1000
            self.at(self.now + wait, g, A_DISTURB)

    def _disturb(self, g: Group, _: Any) -> None:
        """Something happens to a Stable group."""
        rng = self.rng
        g.disturb_pending = False
        if not g.members:
            return
        if g.state != STABLE:
            self._next_disturbance(g)
            return
        alive = [m for m in g.members.values() if m.alive]
        if not alive:  # all of them are dead, waiting to expire
            self._next_disturbance(g)
            return
        statics = [m for m in alive if m.iid is not None]
        dynamics = [m for m in alive if m.iid is None]
        kind = rng.choices(_KINDS, _WEIGHTS)[0]
        if g.cg is not None and kind in (STATIC_BOUNCE, STATIC_DOWN, KICK, FORCE):
            kind = KILL  # the scenario's consumer groups have no static members, kicks or forced rebalances
        if kind in (STATIC_BOUNCE, STATIC_DOWN) and not statics:
            kind = RESTART
        if kind in (LEAVE, RESTART, SHUTDOWN) and not dynamics:
            kind = KILL if rng.random() < 0.5 else SCALE_UP
        if kind == SCALE_UP and len(g.members) > 2 * g.size:
            kind = LEAVE if dynamics else KILL  # autoscaling has a ceiling: a scaled-up group shrinks again
        if kind == KILL:
            victims = [rng.choice(alive)]
            if len(alive) >= 3 and rng.random() < P_SECOND_VICTIM:
                victims.append(rng.choice([m for m in alive if m is not victims[0]]))
            for m in victims:
                self._kill(g, m)
                if rng.random() < P_REPLACEMENT:
                    self.at(self.now + self.r(2000, 40_000), g, A_JOIN, m.process())
            self._next_disturbance(g)  # the group stays Stable until the expiry; other things may happen
        elif kind == LEAVE:
            self._leave(g, rng.choice(dynamics))
        elif kind == RESTART:
            m = rng.choice(dynamics)
            self._leave(g, m)
            self.at(self.now + self.r(2000, 20_000), g, A_JOIN, m.process())
        elif kind == SCALE_UP:
            self._join(g, self._new_process(g))
        elif kind == STATIC_BOUNCE:
            m = rng.choice(statics)
            self.at(self.now + self.r(500, min(g.session - 100, 8000)), g, A_STATIC_RETURN, m.process())
            self._next_disturbance(g)
        elif kind == STATIC_DOWN:
            m = rng.choice(statics)
            self._kill(g, m)
            self.at(self.now + g.session + self.r(5000, 300_000), g, A_STATIC_RETURN, m.process())
            self._next_disturbance(g)
        elif kind == KICK:
            m = rng.choice(alive)
            m.last_hb = self.now - self.r(0, g.hb)
            self._expire(g, (m, "kicked", m.last_hb))
        elif kind == FORCE:
            self._prepare(g, "forced", None, "forced through the control API")
        else:  # SHUTDOWN: the application is stopped; every consumer leaves, one after another
            t = self.now
            for m in dynamics:
                self.at(t, g, A_LEAVE, m)
                t += self.r(5, 200)
            for m in statics:  # static members do not send LeaveGroup: they expire
                self._kill(g, m)
            g.processes = []

    def _empty_next(self, g: Group, epoch: int) -> None:
        """An Empty group is deployed again, deleted (DeleteGroups), or outlives its offsets."""
        if not g.exists or g.state != EMPTY or g.members or g.epoch != epoch:
            return
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            self._start(g, None)
            return
        if g.cg is not None:
            # DeleteGroups of a consumer group: no state change is written, only the deletion (section 8.4).
            self._cg_emit(GROUP_DELETED, g, ',"reason":"deleted by DeleteGroups"')
            g.reset()
            g.processes = []
            self.at(self.now + self.r(60_000, 7_200_000), g, A_START)
            return
        if roll < 0.85:
            reason = "deleted by DeleteGroups"
        else:
            self.emit(OFFSETS_EXPIRED, g, "")
            reason = "empty group without offsets expired"
        self._transition(g, DEAD)
        self.emit(GROUP_DELETED, g, f',"reason":"{reason}"')
        g.reset()
        g.processes = []
        self.at(self.now + self.r(60_000, 7_200_000), g, A_START)
