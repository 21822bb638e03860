"""Share groups (KIP-932, issue 28) in a synthetic log: members that fetch, process and acknowledge records.

What the share tables read (docs/events.md, "Share groups"; ``broker/coordinator/modern/share/events.py`` writes the
same fields in the same order): ``group_created`` and ``share_member_joined`` (``group_type`` "share"), then per
fetch a ``records_acquired`` (``[first, last, delivery count]`` ranges under one lock) and its end:

- mostly the member processes the batch and acknowledges it: ``records_acknowledged`` (accepted, rejected), then
  the records it RELEASEd (``records_released``, cause ``release``): now and then a record at random, and every
  time the partition's poison records (one offset in ``POISON_EVERY``), which come back until the delivery limit
  archives them (``records_archived``);
- a member that stalls longer than the lock: ``records_released`` with cause ``lock_expired`` when the lock runs
  out; it comes back later (its acknowledgements would be refused: nothing is written);
- a member that closes or dies: ``records_released`` with cause ``session_closed``; a new member joins later.

Each member holds one batch at a time and acknowledges it before fetching again, as the clients do: the order the
analysis assumes for acknowledgements, which name no offset. The group's other events (epoch bumps, targets,
reconciliations) are not written: the rebalance tables do not model share groups. Its own random source, so that a
log without share groups is the same as before them (``generate``'s ``share_groups`` 0).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.events.names import (
    GROUP_CREATED,
    RECORDS_ACKNOWLEDGED,
    RECORDS_ACQUIRED,
    RECORDS_ARCHIVED,
    RECORDS_RELEASED,
    SHARE_MEMBER_JOINED,
)

LOCK_MS = 30_000  # group.share.record.lock.duration.ms, the broker's default
DELIVERY_LIMIT = 5  # group.share.delivery.count.limit
MAX_RECORDS = 500  # the clients' max.poll.records
POISON_EVERY = 997  # one offset in this many is released on every delivery
P_RELEASE = 0.0005  # a record the application RELEASEs
P_REJECT = 0.001
P_STALL = 0.01  # a batch whose member stalls past the lock
P_CLOSE = 0.005  # a batch whose member closes or dies before acknowledging it
_GROUP_TYPE = ',"group_type":"share"'

#: What the simulation writes with: ``emit(event, group_js, rest)`` and the clock (``now``), the simulated
#: broker's (``lines.LogWriter``).
Emit = Callable[[str, str, str], None]


@dataclass
class SharePartition:
    topic: str
    partition: int
    next_offset: int = 0
    available: dict[int, int] = field(default_factory=dict)  # released offset -> its last delivery count


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    host: str
    holding: tuple[SharePartition, list[tuple[int, int]]] | None = None  # (partition, [(offset, count)])
    gone: bool = False


@dataclass
class ShareGroup:
    gid: str
    topic: str
    partitions: list[SharePartition]
    size: int
    members: list[ShareMember] = field(default_factory=list)
    clients: int = 0
    created: bool = False

    @property
    def js(self) -> str:
        return f'"{self.gid}"'


def runs(offsets: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Sorted (offset, delivery count) pairs as ``[first, last, count]`` ranges of consecutive offsets and one
    count (the AcquiredRecords of a ShareFetch answer)."""
    ranges: list[tuple[int, int, int]] = []
    for offset, count in sorted(offsets):
        if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == count:
            ranges[-1] = (ranges[-1][0], offset, count)
        else:
            ranges.append((offset, offset, count))
    return ranges


def render_ranges(ranges: list[tuple[int, int, int]]) -> str:
    return "[" + ",".join(f"[{a},{b},{c}]" for a, b, c in ranges) + "]"


def render_runs(offsets: list[int]) -> str:
    return "[" + ",".join(f"[{a},{b}]" for a, b, _ in runs([(o, 0) for o in offsets])) + "]"


class ShareTraffic:
    """The share groups of one broker: their own queue of timed actions, merged into the broker's by time."""

    FETCH, ACK, EXPIRE, CLOSE, JOIN = range(5)

    def __init__(self, rng: random.Random, group_ids: list[str], topics: list[tuple[str, int]], emit: Emit) -> None:
        self.rng = rng
        self.emit = emit
        self.now = 0
        self.heap: list[tuple[int, int, int, ShareGroup, ShareMember | None]] = []
        self._order = itertools.count().__next__
        self.groups = []
        for gid in group_ids:
            topic, count = rng.choice(topics)
            parts = [SharePartition(topic, p) for p in range(min(count, rng.choice((1, 2, 4))))]
            self.groups.append(ShareGroup(gid, topic, parts, rng.choice((1, 2, 3, 5))))

    @property
    def next_t(self) -> int | None:
        return self.heap[0][0] if self.heap else None

    def _r(self, low: int, high: int) -> int:
        return low + int(self.rng.random() * (high - low))

    def _at(self, t: int, action: int, g: ShareGroup, m: ShareMember | None = None) -> None:
        heapq.heappush(self.heap, (t, self._order(), action, g, m))

    def start(self, now: int) -> None:
        """The broker (re)started at ``now``: every group forms again, its members join within a minute."""
        self.now = now
        self.heap.clear()
        for g in self.groups:
            for m in g.members:  # what they held is available again, its counts kept (the durable state)
                if m.holding is not None:
                    partition, held = m.holding
                    partition.available.update((o, c) for o, c in held if c < DELIVERY_LIMIT)  # the rest: archived
                m.gone = True
            g.members = []
            g.created = False
            first = now + self._r(0, 60_000)
            for i in range(g.size):
                self._at(first + (0 if i == 0 else self._r(0, 3000)), self.JOIN, g)

    def step(self) -> int:
        """Run the next action; its time (the caller's clock)."""
        t, _, action, g, m = heapq.heappop(self.heap)
        self.now = t
        if action == self.JOIN:
            self._join(g)
        elif m is not None and not m.gone:
            (self._fetch, self._ack, self._expire, self._close)[action](g, m)
        return t

    # -- members ----------------------------------------------------------------------------------------------

    def _join(self, g: ShareGroup) -> None:
        if not g.created:  # the first member of this run creates the group (it stays, Empty, between members)
            g.created = True
            self.emit(GROUP_CREATED, g.js, _GROUP_TYPE)
        g.clients += 1
        member_id = f"{self.rng.getrandbits(64):016x}S{g.clients}"
        m = ShareMember(member_id, f"{g.gid}-worker-{g.clients}", f"/10.8.{self._r(0, 256)}.{self._r(1, 255)}")
        g.members.append(m)
        self.emit(
            SHARE_MEMBER_JOINED, g.js,
            f',"member_id":"{member_id}","client_id":"{m.client_id}","client_host":"{m.host}",'
            f'"protocol_type":"share","subscribed_topic_names":["{g.topic}"]{_GROUP_TYPE}',
        )  # fmt: skip
        self._at(self.now + self._r(5, 50), self.FETCH, g, m)

    def _fetch(self, g: ShareGroup, m: ShareMember) -> None:
        partition = self.rng.choice(g.partitions)
        wanted = self._r(1, MAX_RECORDS + 1)
        taken = sorted(partition.available.items())[:wanted]
        for offset, _ in taken:
            del partition.available[offset]
        held = [(offset, count + 1) for offset, count in taken]
        fresh = min(wanted - len(held), self._r(0, MAX_RECORDS // 4))  # what the producers wrote meanwhile
        held += [(partition.next_offset + i, 1) for i in range(max(fresh, 0))]
        partition.next_offset += max(fresh, 0)
        if not held:
            self._at(self.now + self._r(200, 5000), self.FETCH, g, m)  # the long poll came back empty
            return
        ranges = runs(held)
        redelivered = sum(1 for _, count in held if count > 1)
        self.emit(
            RECORDS_ACQUIRED, g.js,
            f',"member_id":"{m.member_id}","topic":"{partition.topic}","partition":{partition.partition},'
            f'"ranges":{render_ranges(ranges)},"records":{len(held)},"redelivered":{redelivered},'
            f'"lock_duration_ms":{LOCK_MS}{_GROUP_TYPE}',
        )  # fmt: skip
        m.holding = (partition, held)
        fate = self.rng.random()
        if fate < P_STALL:
            self._at(self.now + LOCK_MS + self._r(0, 5), self.EXPIRE, g, m)
        elif fate < P_STALL + P_CLOSE:
            self._at(self.now + self._r(10, 5000), self.CLOSE, g, m)
        else:
            # processing: at most 20.5 s, within the lock (an acknowledgement after it would be refused)
            self._at(self.now + self._r(50, 500 + 40 * len(held)), self.ACK, g, m)

    def _ack(self, g: ShareGroup, m: ShareMember) -> None:
        if m.holding is None:
            return
        partition, held = m.holding
        m.holding = None
        rnd = self.rng.random
        back = [(o, c) for o, c in held if o % POISON_EVERY == POISON_EVERY - 1 or rnd() < P_RELEASE]
        released = {o for o, _ in back}
        rejected = sum(1 for o, _ in held if o not in released and rnd() < P_REJECT)
        accepted = len(held) - len(back) - rejected
        if accepted or rejected:
            self.emit(
                RECORDS_ACKNOWLEDGED, g.js,
                f',"member_id":"{m.member_id}","topic":"{partition.topic}","partition":{partition.partition},'
                f'"accepted":{accepted},"rejected":{rejected}{_GROUP_TYPE}',
            )  # fmt: skip
        self._give_back(g, m, partition, back, "release")
        self._at(self.now + self._r(0, 3000), self.FETCH, g, m)

    def _expire(self, g: ShareGroup, m: ShareMember) -> None:
        if m.holding is not None:
            partition, held = m.holding
            m.holding = None
            self._give_back(g, m, partition, held, "lock_expired")
        self._at(self.now + self._r(1000, 20_000), self.FETCH, g, m)  # it comes back

    def _close(self, g: ShareGroup, m: ShareMember) -> None:
        if m.holding is not None:
            partition, held = m.holding
            m.holding = None
            self._give_back(g, m, partition, held, "session_closed")
        m.gone = True
        g.members.remove(m)
        self._at(self.now + self._r(1000, 30_000), self.JOIN, g)  # a replacement

    def _give_back(
        self, g: ShareGroup, m: ShareMember, partition: SharePartition, held: list[tuple[int, int]], cause: str
    ) -> None:
        """Records available again (``cause``), or archived at the delivery limit: the broker's ``_report``."""
        released = [o for o, c in held if c < DELIVERY_LIMIT]
        archived = [(o, c) for o, c in held if c >= DELIVERY_LIMIT]
        head = f',"member_id":"{m.member_id}","topic":"{partition.topic}","partition":{partition.partition}'
        if released:
            self.emit(
                RECORDS_RELEASED, g.js,
                f'{head},"cause":"{cause}","offsets":{render_runs(released)},"records":{len(released)}{_GROUP_TYPE}',
            )  # fmt: skip
            partition.available.update((o, c) for o, c in held if c < DELIVERY_LIMIT)
        if archived:
            highest = max(c for _, c in archived)
            self.emit(
                RECORDS_ARCHIVED, g.js,
                f'{head},"cause":"delivery_limit","offsets":{render_runs([o for o, _ in archived])},'
                f'"records":{len(archived)},"delivery_count":{highest}{_GROUP_TYPE}',
            )  # fmt: skip
