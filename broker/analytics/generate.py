"""Synthetic group-event logs: realistic version-1 logs (``docs/events.md``) of any size, without a broker.

The analytics job's tests and its scale benchmark need logs of millions of events that look like what a real
broker writes. Driving the real coordinator is exact but two orders of magnitude too slow, so this module is a
small discrete-event simulation of the same state machine (``broker/coordinator/coordinator.py``) and of the
clients around it, emitting the same events with the same fields in the same causal order within one step:

- groups of dynamic or static members (KIP-345), eager (``range``) or cooperative (``cooperative-sticky``,
  KIP-429: partitions that change owner are first revoked, left unowned, and assigned one rebalance later);
- deploys (the initial rebalance delay, extended while members keep joining), scale-ups, rolling restarts,
  graceful leaves, SIGKILLed consumers found by their session timeout (``since_last_heartbeat_ms`` just over
  the session timeout), a replacement process that arrives before the dead member expires, static members
  bounced (``member_fenced`` without a rebalance) or gone for longer than their session, members stuck past the
  rebalance timeout, a rebalance restarted while CompletingRebalance, kicks and forced rebalances through the
  control API, groups emptied, deleted (DeleteGroups, or offsets expired) and created again;
- broker restarts: a graceful stop moves every group to Dead, and the next run (a new ``run_id``, ``seq`` from
  1) starts with no groups, which the clients form again with new member ids.

Heartbeats and offset commits are not events (the latter only at debug level) and are not written. Each file is
one broker's log: with several files, each broker coordinates its own groups over the same span of time, as
Kafka spreads groups over coordinators. Everything is deterministic for a seed. Lines are rendered with
f-strings (every string is a known-safe identifier, so nothing needs escaping) to write a few hundred
thousand events a second in plain Python. No Spark here: generation must not need it.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GenerateResult", "add_arguments", "add_options", "generate", "main", "run"]

#: 2026-01-01T00:00:00Z: where the logs' clock starts unless told otherwise.
DEFAULT_START_MS = 1_767_225_600_000

# Topics with Kafka-typical partition counts; a group consumes one or two of them.
TOPICS: tuple[tuple[str, int], ...] = (
    ("orders", 12),
    ("payments", 6),
    ("clicks", 24),
    ("inventory", 8),
    ("audit-log", 3),
    ("sessions", 16),
    ("shipments", 4),
    ("metrics", 32),
)
APPS: tuple[str, ...] = (
    "billing",
    "checkout",
    "fraud-scorer",
    "search-indexer",
    "notifier",
    "ledger",
    "recommender",
    "etl",
    "reporting",
    "archiver",
    "pricing",
    "shipping-tracker",
)
# Group sizes and how often they occur.
SIZES: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12)
SIZE_WEIGHTS: tuple[float, ...] = (10, 20, 25, 15, 15, 10, 5)

PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
EMPTY = "Empty"
DEAD = "Dead"

INITIAL_REBALANCE_DELAY_MS = 3000  # group.initial.rebalance.delay.ms
MEAN_STABLE_MS = 600_000  # mean quiet time of a group between disturbances, before its activity factor

# What the Java client says (JoinGroup v8+, LeaveGroup v5+); other clients send no reason.
REJOIN_REASON = "group is already rebalancing"
REVOKE_REASON = "need to revoke partitions and re-join"
CLOSE_REASON = "the consumer is being closed"

# Disturbances of a Stable group, by weight.
KILL, LEAVE, RESTART, SCALE_UP, STATIC_BOUNCE, STATIC_DOWN, KICK, FORCE, SHUTDOWN = range(9)
DISTURBANCE_WEIGHTS: dict[int, float] = {
    KILL: 28,
    LEAVE: 6,
    RESTART: 22,
    SCALE_UP: 10,
    STATIC_BOUNCE: 22,
    STATIC_DOWN: 6,
    KICK: 1,
    FORCE: 1,
    SHUTDOWN: 2.5,
}

_KINDS = list(DISTURBANCE_WEIGHTS)
_WEIGHTS = list(DISTURBANCE_WEIGHTS.values())

# Chances of the rarer twists.
P_SECOND_VICTIM = 0.2  # a SIGKILL takes two members (one host)
P_REPLACEMENT = 0.6  # a SIGKILLed process is restarted (k8s) and joins again
P_STUCK = 0.0015  # a member that must rejoin is stuck in processing past the rebalance timeout
P_SYNC_LAGGARD = 0.004  # a follower never sends SyncGroup
P_COMPLETING_RESTART = 0.05  # something happens while the leader computes the assignment

# The actions of the simulation: client requests, coordinator timers and scenario steps.
(
    A_START,
    A_JOIN,
    A_REJOIN,
    A_SYNC,
    A_LEAVE,
    A_EXPIRE,
    A_STATIC_RETURN,
    A_INITIAL_DELAY,
    A_JOIN_DEADLINE,
    A_SYNC_DEADLINE,
    A_DISTURB,
    A_EMPTY_NEXT,
) = range(12)

_heappush = heapq.heappush
_PSTR = [str(i) for i in range(4096)]


@dataclass
class GenerateResult:
    """What ``generate`` wrote."""

    paths: list[Path]
    events: int
    bad_lines: int
    bytes: int
    seconds: float
    runs: int
    groups: int

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


class _Member:
    __slots__ = (
        "alive",
        "awaiting",
        "cid",
        "cid_js",
        "host_js",
        "id",
        "iid",
        "iid_js",
        "js",
        "last_hb",
        "owned",
        "stuck",
    )

    def __init__(self, member_id: str, iid: str | None, cid: str, host: str) -> None:
        self.id = member_id
        self.js = f'"{member_id}"'
        self.iid = iid
        self.iid_js = "null" if iid is None else f'"{iid}"'
        self.cid = cid
        self.cid_js = f'"{cid}"'
        self.host_js = f'"{host}"'
        self.alive = True
        self.awaiting = True
        self.stuck = False
        self.last_hb = 0
        self.owned: list[int] = []  # partition codes (topic index << 12 | partition), sorted

    def sort_key(self) -> tuple[int, str]:
        # Kafka's MemberInfo order, which the range assignor follows: static members by instance id first.
        return (0, self.iid) if self.iid is not None else (1, self.id)


@dataclass(slots=True)
class _Process:
    """A consumer process: what survives its member id (a restart, a broker restart)."""

    cid: str
    host: str
    iid: str | None


class _Group:
    __slots__ = (
        "activity",
        "coop",
        "created",
        "disturb_pending",
        "epoch",
        "exists",
        "gen",
        "gid",
        "hb",
        "js",
        "leader",
        "members",
        "new_added",
        "next_client",
        "parts",
        "prev_state",
        "processes",
        "proto",
        "proto_js",
        "protocols_js",
        "reason",
        "reb_proto_js",
        "reb_start",
        "rejoin_js",
        "rto",
        "session",
        "size",
        "state",
        "static",
        "static_ids",
        "tkey",
        "tnames",
        "view",
        "waiting",
    )

    def __init__(self, gid: str, rng: random.Random) -> None:
        self.gid = gid
        self.js = f'"{gid}"'
        chosen = sorted(rng.sample(TOPICS, 2 if rng.random() < 0.3 else 1))
        self.tnames = [name for name, _ in chosen]
        self.tkey = "+".join(self.tnames)
        self.parts = [(t << 12) | p for t, (_, count) in enumerate(chosen) for p in range(count)]
        self.coop = rng.random() < 0.4
        if self.coop:
            self.proto = "cooperative-sticky"
            self.protocols_js = '["cooperative-sticky"]'
            self.reb_proto_js = '"cooperative"'
        else:
            self.proto = "range"
            # The Java client's default since 3.0 lists both; the group still picks range, everyone's first.
            self.protocols_js = '["range","cooperative-sticky"]' if rng.random() < 0.5 else '["range"]'
            self.reb_proto_js = '"eager"'
        self.proto_js = f'"{self.proto}"'
        self.static = rng.random() < 0.2
        self.reason = rng.random() < 0.7  # a Java client (JoinGroup v8+): requests carry reasons
        self.rejoin_js = f'"{REJOIN_REASON}"' if self.reason else "null"
        self.session = rng.choice((10_000, 10_000, 30_000, 45_000, 45_000))
        self.rto = rng.choice((300_000, 300_000, 60_000))
        self.hb = min(3000, self.session // 3)
        self.size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        self.activity = rng.lognormvariate(0.0, 1.0)  # a few groups flap a lot, most are quiet
        self.processes: list[_Process] = []
        self.next_client = 1
        self.reset()

    def reset(self) -> None:
        """The coordinator forgot the group (deleted, or the broker restarted)."""
        self.exists = False
        self.created = 0
        self.state = EMPTY
        self.prev_state = DEAD
        self.gen = 0
        self.members: dict[str, _Member] = {}
        self.static_ids: dict[str, str] = {}
        self.leader: str | None = None
        self.view: dict[str, list[int]] | None = None  # the last generation's owners: member id -> partitions
        self.reb_start = 0
        self.new_added = False
        self.waiting = 0  # members that have not (re)joined the current rebalance
        self.epoch = 0
        self.disturb_pending = False


_Action = tuple[int, int, _Group, int, Any]  # (time, order, group, action, argument)


class _Broker:
    """One broker's log: the simulation of its groups and the writer of its file."""

    def __init__(
        self,
        path: Path,
        rng: random.Random,
        groups: list[_Group],
        events: int,
        restarts: int,
        bad_lines: int,
        start_ms: int,
    ) -> None:
        self.path = path
        self.rng = rng
        self.rnd = rng.random
        self.groups = groups
        self.target = events
        self.now = start_ms
        self.seq = 0
        self.count = 0
        self.runs = 0
        self.bad = 0
        self.bytes = 0
        self.heap: list[_Action] = []
        self._order = itertools.count().__next__  # ties at one time go first in, first out
        self.created = 0
        self.buf: list[str] = []
        self.rendered: dict[tuple[Any, ...], tuple[str, int]] = {}
        self.ranges: dict[tuple[str, int], list[list[int]]] = {}
        self.done_before = 0  # events of the runs before the current one
        self.restart_at = [events * (i + 1) // (restarts + 1) for i in range(restarts)]
        self.bad_at = sorted(self.r(1, max(events, 2)) for _ in range(bad_lines))
        self.checkpoint = min(self.restart_at[:1] + self.bad_at[:1] + [events])
        self._new_run()
        self.handlers: list[Callable[[_Group, Any], None]] = [
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
        ]

    # -- output -----------------------------------------------------------------------------------------

    def r(self, low: int, high: int) -> int:
        """A uniform int in [low, high): random.randrange's job at a tenth of its cost."""
        return low + int(self.rnd() * (high - low))

    def _new_run(self) -> None:
        self.runs += 1
        self.seq = 0
        run_id = f"{self.rng.getrandbits(48):012x}"
        self.run_id = run_id
        self.tail = f',"run_id":"{run_id}","event":"'

    def emit(self, name: str, g: _Group, rest: str) -> None:
        self.seq += 1
        self.buf.append(f'{{"v":1,"seq":{self.seq},"ts_ms":{self.now}{self.tail}{name}","group_id":{g.js}{rest}}}\n')

    def _flush(self, out: Any) -> None:
        text = "".join(self.buf)
        self.buf.clear()
        self.bytes += len(text)
        out.write(text)

    # -- the loop ---------------------------------------------------------------------------------------

    def at(self, t: int, g: _Group, action: int, arg: Any = None) -> None:
        _heappush(self.heap, (t, self._order(), g, action, arg))

    def run(self) -> None:
        for g in self.groups:
            self.at(self.now + self.r(0, 300_000), g, A_START)
        heap = self.heap
        handlers = self.handlers
        restart_at = self.restart_at
        bad_at = self.bad_at
        with open(self.path, "w", encoding="ascii", newline="\n") as out:
            while self.count < self.target:
                if not heap:  # every group went quiet for good: start them again
                    for g in self.groups:
                        self.at(self.now + self.r(1000, 60_000), g, A_START)
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
                        self._bad_line()
                    self.checkpoint = min(restart_at[:1] + bad_at[:1] + [self.target])
                if len(self.buf) >= 8192:
                    self._flush(out)
            self._flush(out)

    # -- faults in the file -----------------------------------------------------------------------------

    def _bad_line(self) -> None:
        """A line a reader must reject and report, without taking a seq (it is not a record of this run)."""
        kind = self.r(0, 3)
        last = self.buf[-1] if self.buf else '{"v":1,"seq":1,"ts_ms":0,"run_id":"x","event":"group_created"}\n'
        if kind == 0:  # a torn write: the start of a record, cut short
            line = last[: self.r(10, max(len(last) - 2, 11))] + "\n"
        elif kind == 1:  # not JSON at all
            line = "java.lang.OutOfMemoryError: Java heap space\n"
        else:  # a record without its seq and ts_ms, as if written by hand
            line = f'{{"v":1,"run_id":"{self.run_id}","event":"group_created","group_id":"hand-written"}}\n'
        self.buf.append(line)
        self.bad += 1

    # -- broker restarts --------------------------------------------------------------------------------

    def _restart_broker(self) -> None:
        rng = self.rng
        if rng.random() < 0.75:
            # A graceful stop unloads every group (coordinator.shutdown): each goes to Dead, in creation order.
            for g in sorted((g for g in self.groups if g.exists), key=lambda g: g.created):
                self.emit("state_changed", g, f',"from":"{g.state}","to":"{DEAD}","generation_id":{g.gen}')
        self.done_before += self.seq
        self.now += self.r(3000, 30_000)
        self._new_run()
        self.heap.clear()
        for g in self.groups:
            alive = [self._process_of(m) for m in g.members.values() if m.alive]
            g.reset()
            if alive:
                # The clients find the new broker knows no group (UNKNOWN_MEMBER_ID) and join afresh.
                for process in alive:
                    self.at(self.now + self.r(500, 8000), g, A_JOIN, process)
            else:
                self.at(self.now + self.r(10_000, 1_800_000), g, A_START)

    # -- coordinator behaviour --------------------------------------------------------------------------

    def _transition(self, g: _Group, state: str) -> None:
        g.prev_state = g.state
        g.state = state
        self.emit("state_changed", g, f',"from":"{g.prev_state}","to":"{state}","generation_id":{g.gen}')

    def _prepare(self, g: _Group, cause: str, member_id: str | None, reason: str) -> None:
        """_prepare_rebalance: PreparingRebalance, and what the clients do about it."""
        previous = g.state
        initial = previous == EMPTY
        self._transition(g, PREPARING)
        who = "null" if member_id is None else f'"{member_id}"'
        self.emit(
            "rebalance_started",
            g,
            f',"generation_id":{g.gen},"previous_state":"{previous}","members":{len(g.members)},'
            f'"cause":"{cause}","member_id":{who},"reason":"{reason}"',
        )
        g.reb_start = self.now
        g.epoch += 1
        if initial:
            delay = INITIAL_REBALANCE_DELAY_MS
            self.at(self.now + delay, g, A_INITIAL_DELAY, (g.epoch, delay, max(g.rto - delay, 0)))
            return
        # Members parked in SyncGroup hear at once; the others at their next heartbeat.
        low, span = (1, 59) if previous == COMPLETING else (10, g.hb - 10)
        rnd = self.rnd
        heap = self.heap
        order = self._order
        now = self.now
        for m in g.members.values():
            if m.awaiting or not m.alive:
                continue
            if rnd() < P_STUCK and not m.iid:
                m.stuck = True  # still heartbeating, but stuck in processing: it will not rejoin in time
                continue
            _heappush(heap, (now + low + int(rnd() * span), order(), g, A_REJOIN, (m, REJOIN_REASON)))
        if self._all_joined(g):
            self._complete_join(g)
        else:
            self.at(self.now + g.rto, g, A_JOIN_DEADLINE, g.epoch)

    @staticmethod
    def _all_joined(g: _Group) -> bool:
        return g.waiting == 0

    def _maybe_complete_join(self, g: _Group) -> None:
        if g.waiting == 0 and g.state == PREPARING and g.prev_state != EMPTY:
            self._complete_join(g)

    def _remove(self, g: _Group, m: _Member) -> None:
        del g.members[m.id]
        if not m.awaiting:
            g.waiting -= 1
        if m.iid is not None:
            g.static_ids.pop(m.iid, None)
        if g.leader == m.id:
            g.leader = next(iter(g.members), None)

    def _complete_join(self, g: _Group) -> None:
        rng = self.rng
        g.epoch += 1  # the join deadline of this rebalance is void now
        for m in [m for m in g.members.values() if not m.awaiting]:
            if m.iid is None:
                self._remove(g, m)
                self.emit(
                    "member_left",
                    g,
                    f',"member_id":{m.js},"group_instance_id":null,"client_id":{m.cid_js},'
                    '"cause":"rejoin_timeout","reason":"did not rejoin within the rebalance timeout"',
                )
                # Its next poll finds it is no longer a member; it joins again as a new one.
                self.at(self.now + self.r(1000, 20_000), g, A_JOIN, self._process_of(m))
        leader = g.leader
        if leader is not None and not g.members[leader].awaiting:
            leader = next((m.id for m in g.members.values() if m.awaiting), None)
        g.leader = leader
        g.gen += 1
        if not g.members:
            self._transition(g, EMPTY)
            self.emit(
                "join_completed",
                g,
                f',"generation_id":{g.gen},"state":"{EMPTY}","protocol_type":"consumer","protocol":null,'
                '"leader":null,"members":[]',
            )
            self.emit("group_emptied", g, f',"generation_id":{g.gen}')
            g.view = None
            self.at(self.now + self.r(60_000, 3_600_000), g, A_EMPTY_NEXT, g.epoch)
            return
        self._transition(g, COMPLETING)
        members = ",".join(m.js for m in g.members.values())
        self.emit(
            "join_completed",
            g,
            f',"generation_id":{g.gen},"state":"{COMPLETING}","protocol_type":"consumer","protocol":{g.proto_js},'
            f'"leader":"{leader}","members":[{members}]',
        )
        for m in g.members.values():
            m.awaiting = False
            m.stuck = False
        g.waiting = len(g.members)
        compute = self.r(2, 40)
        if rng.random() < P_COMPLETING_RESTART:
            # The leader is slow to compute the assignment, and the group changes meanwhile.
            compute = self.r(300, 3000)
            self._completing_twist(g, self.now + self.r(1, compute))
        self.at(self.now + compute, g, A_SYNC, g.gen)
        if len(g.members) > 1 and rng.random() < P_SYNC_LAGGARD:
            laggard = next(m for m in g.members.values() if m.id != leader)
            self.at(self.now + g.rto, g, A_SYNC_DEADLINE, (g.gen, laggard))

    def _completing_twist(self, g: _Group, t: int) -> None:
        rng = self.rng
        statics = [m for m in g.members.values() if m.iid is not None]
        dynamics = [m for m in g.members.values() if m.iid is None and m.id != g.leader]
        roll = rng.random()
        if statics and roll < 0.4:
            self.at(t, g, A_STATIC_RETURN, self._process_of(rng.choice(statics)))
        elif dynamics and (roll < 0.7 or len(g.members) > 2 * g.size):
            self.at(t, g, A_LEAVE, rng.choice(dynamics))
        else:
            self.at(t, g, A_JOIN, self._new_process(g))

    def _assign(self, g: _Group) -> tuple[dict[str, list[int]], set[str]]:
        """The leader's assignment (member id -> partition codes) and, when cooperative, who must revoke."""
        members = list(g.members.values())
        if not g.coop:
            # Range: per topic, consecutive slices in MemberInfo order. The slices only depend on the topics and the
            # number of members, so they are computed once.
            slices = self.ranges.get((g.tkey, len(members)))
            if slices is None:
                slices = self.ranges[(g.tkey, len(members))] = _range_slices(g.parts, len(g.tnames), len(members))
            ordered = sorted(members, key=_Member.sort_key)
            by_id = {m.id: slices[i] for i, m in enumerate(ordered)}
            return {m.id: by_id[m.id] for m in members}, set()
        # Cooperative sticky: keep what each member owns up to its fair share, hand out the rest; a partition
        # that another live member still owns is only revoked this round (assigned to nobody).
        total = len(g.parts)
        q, r = divmod(total, len(members))
        owner = {c: m.id for m in members for c in m.owned}
        balanced = sum(1 for m in members if len(m.owned) == q + 1) == r
        if len(owner) == total and balanced and all(q <= len(m.owned) <= q + 1 for m in members):
            return {m.id: m.owned for m in members}, set()  # balanced and complete: nothing moves
        ordered = sorted(members, key=lambda m: -len(m.owned))
        ceil_left = r
        kept: dict[str, list[int]] = {}
        targets: dict[str, int] = {}
        for m in ordered:
            limit = q
            if len(m.owned) > q and ceil_left > 0:
                limit = q + 1
                ceil_left -= 1
            kept[m.id] = m.owned[:limit]
            targets[m.id] = limit
        for m in ordered:
            if ceil_left <= 0:
                break
            if targets[m.id] == q:
                targets[m.id] = q + 1
                ceil_left -= 1
        taken = {c for codes in kept.values() for c in codes}
        pool = [c for c in g.parts if c not in taken]
        revokers: set[str] = set()
        i = 0
        for m in sorted(ordered, key=lambda m: len(kept[m.id])):
            need = targets[m.id] - len(kept[m.id])
            if need <= 0:
                continue
            for c in pool[i : i + need]:
                was = owner.get(c)
                if was is not None and was != m.id:
                    revokers.add(was)
                else:
                    kept[m.id].append(c)
            i += need
        return {m.id: sorted(kept[m.id]) for m in members}, revokers

    def _render(self, g: _Group, assignment: dict[str, list[int]]) -> tuple[str, str, int]:
        """assignments and assignment_bytes as JSON, and how many partitions nobody owns."""
        cache = self.rendered
        tkey = g.tkey
        parts_js: list[str] = []
        sizes_js: list[str] = []
        owned = 0
        for member_id, codes in assignment.items():
            hit = cache.get((tkey, *codes))
            if hit is None:
                hit = cache[(tkey, *codes)] = _render_partitions(g.tnames, codes)
            owned += len(codes)
            parts_js.append(f'"{member_id}":{hit[0]}')
            sizes_js.append(f'"{member_id}":{hit[1]}')
        if len(cache) > 200_000:  # bounded: cooperative groups can make many distinct lists
            cache.clear()
        return "{" + ",".join(parts_js) + "}", "{" + ",".join(sizes_js) + "}", len(g.parts) - owned

    @staticmethod
    def _moved(g: _Group, assignment: dict[str, list[int]]) -> str:
        """The partitions whose owner changed since the last generation's assignment (none after Empty).

        Compared member by member: a member whose partitions are the same list costs one comparison.
        """
        before = g.view
        if before is None:
            return "[]"
        gained: dict[int, str] = {}
        lost: dict[int, str] = {}
        for member_id, codes in assignment.items():
            old = before.get(member_id)
            if old is None:
                gained.update(dict.fromkeys(codes, member_id))
            elif old != codes:
                new_set, old_set = set(codes), set(old)
                gained.update(dict.fromkeys(new_set - old_set, member_id))
                lost.update(dict.fromkeys(old_set - new_set, member_id))
        for member_id, old in before.items():
            if member_id not in assignment:
                lost.update(dict.fromkeys(old, member_id))
        if not gained and not lost:
            return "[]"
        tnames = g.tnames
        moves = []
        for c in sorted(gained.keys() | lost.keys()):
            frm = lost.get(c)
            to = gained.get(c)
            frm_js = "null" if frm is None else f'"{frm}"'
            to_js = "null" if to is None else f'"{to}"'
            moves.append(f'{{"topic":"{tnames[c >> 12]}","partition":{c & 4095},"from":{frm_js},"to":{to_js}}}')
        return "[" + ",".join(moves) + "]"

    # -- actions ----------------------------------------------------------------------------------------

    def _start(self, g: _Group, _: Any) -> None:
        """A deployment: the group's processes start within a few seconds of each other."""
        if g.members:
            return
        if not g.processes:
            g.processes = [self._new_process(g) for _ in range(g.size)]
        t = self.now
        for i, process in enumerate(g.processes):
            self.at(t if i == 0 else t + self.r(0, 2500), g, A_JOIN, process)

    def _new_process(self, g: _Group) -> _Process:
        n = g.next_client
        g.next_client += 1
        host = f"/10.{self.r(0, 256)}.{self.r(0, 256)}.{self.r(1, 255)}"
        if g.static:
            iid = f"{g.gid}-{n - 1}"
            return _Process(f"consumer-{g.gid}-{iid}", host, iid)
        return _Process(f"consumer-{g.gid}-{n}", host, None)

    @staticmethod
    def _process_of(m: _Member) -> _Process:
        return _Process(m.cid, m.host_js[1:-1], m.iid)

    def _uuid(self) -> str:
        x = self.rng.getrandbits(128)
        h = f"{x:032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[x & 3]}{h[17:20]}-{h[20:]}"

    def _join(self, g: _Group, process: _Process) -> None:
        """A JoinGroup with no member id (after KIP-394's MEMBER_ID_REQUIRED round trip)."""
        if not g.exists:
            g.reset()
            g.exists = True
            self.created += 1
            g.created = self.created
            self.emit("group_created", g, "")
        if process.iid is not None and process.iid in g.static_ids:
            self._replace_static(g, process)
            return
        member_id = f"{process.iid or process.cid}-{self._uuid()}"
        m = _Member(member_id, process.iid, process.cid, process.host)
        m.last_hb = self.now
        if g.state == PREPARING and g.prev_state == EMPTY:
            g.new_added = True
        if g.leader is None:
            g.leader = member_id
        g.members[member_id] = m
        if m.iid is not None:
            g.static_ids[m.iid] = member_id
        reason = f"need to re-join with the given member-id: {member_id}" if g.reason else None
        self.emit(
            "member_joined",
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},"client_host":{m.host_js},'
            f'"protocol_type":"consumer","protocols":{g.protocols_js},"session_timeout_ms":{g.session},'
            f'"rebalance_timeout_ms":{g.rto},"reason":{_js(reason)}',
        )
        if g.state in (STABLE, COMPLETING, EMPTY):
            self._prepare(
                g, "member_joined", member_id, f"new member {member_id} joined ({reason or 'no reason given'})"
            )
        else:
            self._maybe_complete_join(g)

    def _replace_static(self, g: _Group, process: _Process) -> None:
        """A static member's process came back (same group.instance.id, no member id): the old id is fenced."""
        assert process.iid is not None
        old = g.members[g.static_ids[process.iid]]
        old_id = old.id
        new_id = f"{process.iid}-{self._uuid()}"
        # The member keeps its client id, host and partitions, and moves to the end of the join order.
        del g.members[old_id]
        old.id = new_id
        old.js = f'"{new_id}"'
        old.alive = True
        if not old.awaiting:
            old.awaiting = True
            g.waiting -= 1
        old.stuck = False
        old.last_hb = self.now
        g.members[new_id] = old
        g.static_ids[process.iid] = new_id
        if g.leader == old_id:
            g.leader = new_id
        self.emit(
            "member_fenced",
            g,
            f',"member_id":"{old_id}","new_member_id":"{new_id}","group_instance_id":{old.iid_js},'
            f'"client_id":{old.cid_js},"cause":"static_member_replaced","reason":null',
        )
        if g.state == STABLE:
            old.awaiting = False  # the same protocol: it takes over the old assignment, no rebalance
            g.waiting += 1
            self._next_disturbance(g)
        elif g.state == COMPLETING:
            self._prepare(
                g, "static_member_replaced", new_id, f"static member {process.iid} replaced during CompletingRebalance"
            )
        else:
            self._maybe_complete_join(g)

    def _static_return(self, g: _Group, process: _Process) -> None:
        self._join(g, process)

    def _rejoin(self, g: _Group, arg: tuple[_Member, str]) -> None:
        m, why = arg
        if g.members.get(m.id) is not m or m.awaiting or not m.alive:
            return
        if g.state == PREPARING:
            m.awaiting = True
            g.waiting -= 1
            self.emit(
                "member_rejoined",
                g,
                f',"member_id":{m.js},"protocols":{g.protocols_js},"state":"{PREPARING}","reason":'
                f"{g.rejoin_js if why is REJOIN_REASON or not g.reason else _js(why)}",
            )
            if g.waiting == 0 and g.prev_state != EMPTY:
                self._complete_join(g)
        elif g.state == STABLE and why == REVOKE_REASON:
            # Its subscription now lists fewer owned partitions: new metadata, so a rebalance (KIP-429).
            m.awaiting = True
            g.waiting -= 1
            reason = why if g.reason else None
            self.emit(
                "member_rejoined",
                g,
                f',"member_id":{m.js},"protocols":{g.protocols_js},"state":"{STABLE}","reason":{_js(reason)}',
            )
            self._prepare(g, "member_rejoined", m.id, f"member {m.id} rejoined ({reason or 'no reason given'})")

    def _sync(self, g: _Group, gen: int) -> None:
        """The leader's SyncGroup: the assignment is stored and the group is Stable."""
        if g.state != COMPLETING or g.gen != gen:
            return
        assignment, revokers = self._assign(g)
        parts_js, sizes_js, unowned = self._render(g, assignment)
        moved = self._moved(g, assignment)
        self._transition(g, STABLE)
        self.emit(
            "sync_completed",
            g,
            f',"generation_id":{g.gen},"protocol":{g.proto_js},"assignments":{parts_js},"moved":{moved},'
            f'"unowned":{unowned},"rebalance_ms":{self.now - g.reb_start},"rebalance_protocol":{g.reb_proto_js},'
            f'"assignment_bytes":{sizes_js}',
        )
        # Only owners matter to the next generation's "moved" (as in the broker's referee).
        g.view = {member_id: codes for member_id, codes in assignment.items() if codes}
        for m in g.members.values():
            m.owned = assignment[m.id]
        if revokers:
            for member_id in sorted(revokers):
                self.at(self.now + self.r(5, 100), g, A_REJOIN, (g.members[member_id], REVOKE_REASON))
        else:
            self._next_disturbance(g)

    def _leave(self, g: _Group, m: _Member) -> None:
        if g.members.get(m.id) is not m:
            return
        self._remove(g, m)
        reason = CLOSE_REASON if g.reason else "not provided"
        self.emit(
            "member_left",
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},'
            f'"cause":"leave_group","reason":"{reason}"',
        )
        if g.state in (STABLE, COMPLETING):
            self._prepare(g, "member_left", m.id, f"members ['{m.id}'] left the group")
        elif g.state == PREPARING:
            self._maybe_complete_join(g)

    def _kill(self, g: _Group, m: _Member) -> None:
        """The process dies (SIGKILL, a crashed host): its heartbeats stop, the session timer will fire."""
        m.alive = False
        m.last_hb = self.now - self.r(0, g.hb)
        # The purgatory fires a few ms after the deadline.
        self.at(m.last_hb + g.session + self.r(0, 4), g, A_EXPIRE, (m, "session_timeout", m.last_hb))

    def _expire(self, g: _Group, arg: tuple[_Member, str, int]) -> None:
        """The member's session deadline: evicted down the expiry path (or kicked through the control API)."""
        m, cause, last_hb = arg
        if g.members.get(m.id) is not m:
            return
        if cause == "session_timeout" and (m.alive or m.last_hb != last_hb):
            return  # it came back (a static member's new process) since, or died again later
        silence = self.now - m.last_hb
        self._remove(g, m)
        self.emit(
            "member_expired",
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},'
            f'"since_last_heartbeat_ms":{silence},"session_timeout_ms":{g.session},"cause":"{cause}"',
        )
        if cause == "kicked":
            why, reason = "member_kicked", f"member {m.id} was kicked through the control API"
            # The consumer is alive: its next heartbeat gets UNKNOWN_MEMBER_ID and it joins again.
            self.at(self.now + self.r(100, g.hb + 200), g, A_JOIN, self._process_of(m))
        else:
            why, reason = "member_expired", f"member {m.id} sent no heartbeat for {silence} ms"
        if g.state in (STABLE, COMPLETING):
            self._prepare(g, why, m.id, reason)
        elif g.state == PREPARING:
            self._maybe_complete_join(g)

    def _initial_delay(self, g: _Group, arg: tuple[int, int, int]) -> None:
        epoch, delay, remaining = arg
        if g.epoch != epoch or g.state != PREPARING:
            return
        if g.new_added and remaining != 0:
            g.new_added = False
            new_delay = min(INITIAL_REBALANCE_DELAY_MS, remaining)
            self.at(self.now + new_delay, g, A_INITIAL_DELAY, (epoch, new_delay, max(remaining - delay, 0)))
        else:
            self._complete_join(g)

    def _join_deadline(self, g: _Group, epoch: int) -> None:
        if g.epoch == epoch and g.state == PREPARING:
            self._complete_join(g)

    def _sync_deadline(self, g: _Group, arg: tuple[int, _Member]) -> None:
        gen, m = arg
        if g.gen != gen or g.state not in (COMPLETING, STABLE) or g.members.get(m.id) is not m:
            return
        self._remove(g, m)
        self.emit(
            "member_left",
            g,
            f',"member_id":{m.js},"group_instance_id":{m.iid_js},"client_id":{m.cid_js},"cause":"sync_timeout",'
            '"reason":"sent no SyncGroup within the rebalance timeout"',
        )
        self._prepare(g, "sync_timeout", m.id, f"members ['{m.id}'] did not sync within the rebalance timeout")
        self.at(self.now + self.r(1000, 20_000), g, A_JOIN, self._process_of(m))

    def _next_disturbance(self, g: _Group) -> None:
        if not g.disturb_pending:
            g.disturb_pending = True
            wait = int(self.rng.expovariate(g.activity / MEAN_STABLE_MS)) + 1000
            self.at(self.now + wait, g, A_DISTURB)

    def _disturb(self, g: _Group, _: Any) -> None:
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
                    self.at(self.now + self.r(2000, 40_000), g, A_JOIN, self._process_of(m))
            self._next_disturbance(g)  # the group stays Stable until the expiry; other things may happen
        elif kind == LEAVE:
            self._leave(g, rng.choice(dynamics))
        elif kind == RESTART:
            m = rng.choice(dynamics)
            self._leave(g, m)
            self.at(self.now + self.r(2000, 20_000), g, A_JOIN, self._process_of(m))
        elif kind == SCALE_UP:
            self._join(g, self._new_process(g))
        elif kind == STATIC_BOUNCE:
            m = rng.choice(statics)
            self.at(self.now + self.r(500, min(g.session - 100, 8000)), g, A_STATIC_RETURN, self._process_of(m))
            self._next_disturbance(g)
        elif kind == STATIC_DOWN:
            m = rng.choice(statics)
            self._kill(g, m)
            self.at(self.now + g.session + self.r(5000, 300_000), g, A_STATIC_RETURN, self._process_of(m))
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

    def _empty_next(self, g: _Group, epoch: int) -> None:
        """An Empty group is deployed again, deleted, or outlives its offsets."""
        if not g.exists or g.state != EMPTY or g.members or g.epoch != epoch:
            return
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            self._start(g, None)
            return
        if roll < 0.85:
            reason = "deleted by DeleteGroups"
        else:
            self.emit("offsets_expired", g, "")
            reason = "empty group without offsets expired"
        self._transition(g, DEAD)
        self.emit("group_deleted", g, f',"reason":"{reason}"')
        g.reset()
        g.processes = []
        self.at(self.now + self.r(60_000, 7_200_000), g, A_START)


def _range_slices(parts: list[int], topics: int, members: int) -> list[list[int]]:
    """The range assignor's partitions for the i-th member (MemberInfo order) of ``members``."""
    out: list[list[int]] = [[] for _ in range(members)]
    for t in range(topics):
        codes = [c for c in parts if c >> 12 == t]
        q, r = divmod(len(codes), members)
        start = 0
        for i in range(members):
            take = q + (1 if i < r else 0)
            out[i].extend(codes[start : start + take])
            start += take
    return out


def _render_partitions(tnames: list[str], codes: list[int]) -> tuple[str, int]:
    """One member's partitions as JSON ({topic: [partition]}) and the size of its encoded assignment."""
    size = 10  # ConsumerProtocolAssignment: int16 version, int32 topic count, int32 user data length (null)
    if not codes:
        return "{}", size
    topics: list[str] = []
    current = codes[0] >> 12
    ps: list[str] = []
    for c in codes:
        t = c >> 12
        if t != current:
            topics.append(f'"{tnames[current]}":[{",".join(ps)}]')
            size += 6 + len(tnames[current]) + 4 * len(ps)  # int16 name length, name, int32 count, int32 each
            current = t
            ps = []
        ps.append(_PSTR[c & 4095])
    topics.append(f'"{tnames[current]}":[{",".join(ps)}]')
    size += 6 + len(tnames[current]) + 4 * len(ps)
    return "{" + ",".join(topics) + "}", size


def _js(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


def _group_ids(count: int, offset: int, stride: int) -> list[str]:
    return [f"{APPS[i % len(APPS)]}-{i:05d}" for i in range(offset, offset + count * stride, stride)]


def _generate_one(
    path: str, events: int, groups: int, seed: int, index: int, files: int, restarts: int, bad_lines: int, start_ms: int
) -> tuple[int, int, int, int]:
    rng = random.Random(f"{seed}:{index}")
    group_list = [_Group(gid, rng) for gid in _group_ids(groups, index, files)]
    broker = _Broker(Path(path), rng, group_list, events, restarts, bad_lines, start_ms)
    broker.run()
    return broker.count, broker.bad, broker.bytes, broker.runs


def generate(
    path: str | os.PathLike[str],
    events: int,
    groups: int | None = None,
    seed: int = 0,
    *,
    files: int = 1,
    restarts: int = 1,
    bad_lines: int = 0,
    start_ms: int = DEFAULT_START_MS,
    jobs: int = 1,
) -> GenerateResult:
    """Write a synthetic version-1 event log of about ``events`` events (it ends at a step boundary).

    With ``files`` 1, ``path`` is the file; otherwise it is a directory that gets ``events-00000.jsonl`` and on,
    each one broker's log with its share of the events and of the ``groups`` (default: one per 500 events,
    at least 3 per file). ``restarts`` is the number of broker restarts in each file (each starts a new run);
    ``bad_lines`` the number of malformed lines mixed into each file, for the reader's input report. ``jobs``
    writes that many files at once, in separate processes.
    """
    if events < 1:
        raise ValueError("events must be at least 1")
    if files < 1:
        raise ValueError("files must be at least 1")
    target = Path(path)
    if files == 1:
        target.parent.mkdir(parents=True, exist_ok=True)
        paths = [target]
    else:
        target.mkdir(parents=True, exist_ok=True)
        paths = [target / f"events-{k:05d}.jsonl" for k in range(files)]
    total_groups = groups if groups is not None else max(3 * files, min(20_000, events // 500))
    shares = [events * (k + 1) // files - events * k // files for k in range(files)]
    group_shares = [total_groups * (k + 1) // files - total_groups * k // files for k in range(files)]
    tasks = [
        (str(p), max(shares[k], 1), max(group_shares[k], 1), seed, k, files, restarts, bad_lines, start_ms)
        for k, p in enumerate(paths)
    ]
    started = time.perf_counter()
    if jobs > 1 and files > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, files)) as pool:
            results = list(pool.map(_generate_one_args, tasks))
    else:
        results = [_generate_one(*task) for task in tasks]
    seconds = time.perf_counter() - started
    return GenerateResult(
        paths=paths,
        events=sum(r[0] for r in results),
        bad_lines=sum(r[1] for r in results),
        bytes=sum(r[2] for r in results),
        seconds=seconds,
        runs=sum(r[3] for r in results),
        groups=total_groups,
    )


def _generate_one_args(task: tuple[str, int, int, int, int, int, int, int, int]) -> tuple[int, int, int, int]:
    return _generate_one(*task)


# -- command line -----------------------------------------------------------------------------------------


def add_options(parser: argparse.ArgumentParser) -> None:
    """The generator's tuning flags (what ``group-broker analyze --generate N`` adds to its own)."""
    parser.add_argument("--groups", type=int, default=None, help="groups in all (default: one per 500 events)")
    parser.add_argument("--seed", type=int, default=0, help="the same seed writes the same log (default 0)")
    parser.add_argument("--files", type=int, default=1, help="split into K files, one broker each (OUT is a directory)")
    parser.add_argument("--restarts", type=int, default=1, help="broker restarts in each file (default 1)")
    parser.add_argument("--bad-lines", type=int, default=0, help="malformed lines to mix into each file (default 0)")
    parser.add_argument("--start-ms", type=int, default=DEFAULT_START_MS, help="the logs' first timestamp")
    parser.add_argument("--jobs", type=int, default=1, help="write this many files at once (processes; default 1)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything ``run`` reads: OUT, ``--events`` and the options."""
    parser.add_argument("out", metavar="OUT", help="the log file, or the directory with --files > 1")
    parser.add_argument("--events", type=int, required=True, help="about this many events (ends at a step boundary)")
    add_options(parser)


def run(
    args: argparse.Namespace, out: str | os.PathLike[str] | None = None, events: int | None = None
) -> GenerateResult:
    """Generate from parsed arguments and say what was written on stderr.

    ``out`` and ``events`` default to ``args.out`` and ``args.events`` (what ``add_arguments`` adds); a command
    with flags of its own (``group-broker analyze --generate N``) passes them and adds only ``add_options``.
    """
    target = args.out if out is None else out
    result = generate(
        target,
        args.events if events is None else events,
        args.groups,
        args.seed,
        files=args.files,
        restarts=args.restarts,
        bad_lines=args.bad_lines,
        start_ms=args.start_ms,
        jobs=args.jobs,
    )
    where = str(result.paths[0]) if len(result.paths) == 1 else f"{len(result.paths)} files in {target}"
    print(
        f"wrote {result.events:,} events ({result.bad_lines} bad lines, {result.runs} runs, {result.groups} groups, "
        f"{result.bytes / 1e6:,.1f} MB) to {where} in {result.seconds:.1f} s: "
        f"{result.events_per_second:,.0f} events/s",
        file=sys.stderr,
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker.analytics.generate",
        description="Write a realistic synthetic group-event log (docs/events.md, version 1).",
    )
    add_arguments(parser)
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
