"""The verdict of ``chaos run --group-protocol share``: a pure function of what the share workers recorded.

KIP-932 (docs/spec/share-groups.md, the spec's sections 6.3-6.8) promises, per record of a share-partition:

- each acquisition is one delivery to one member under one acquisition lock, and raises the record's delivery
  count by one (``SharePartition.acquire``): two deliveries with the same delivery count are the same lock given
  to two members (or to one twice), which is never right;
- a record is acquired again only once it is AVAILABLE again: its holder RELEASEd it, its lock expired
  (``releaseAcquisitionLockOnTimeout``: a SIGSTOPped holder), or its holder's share session ended (the final
  epoch, or the connection closing: a SIGKILLed or closed holder, ``releaseAcquiredRecords``);
- an accepted record (ACKNOWLEDGED) is finished: it is never delivered again;
- a record released with its delivery count at ``group.share.delivery.count.limit`` is ARCHIVED instead.

``judge`` holds the deliveries and acknowledgements the workers wrote (``share_consumer``) against the members'
lives (when each was SIGKILLed, SIGSTOPped and SIGCONTed, closed) and the lock duration, and says which produced
records were lost (never delivered), delivered but never accepted, archived; every redelivery with its cause; and
every violation: ``same_lock`` (one delivery count twice), ``overlap`` (a delivery while the previous holder's
lock could not have expired and nothing released it), ``after_accept`` (a delivery after an accepted one).

An acknowledgement the broker answered without an error does not always mean its delivery was accepted: Kafka
ignores acknowledged offsets already below the share-partition's start offset (``SharePartition.acknowledge``,
spec 6.5), so a SIGSTOPped member that acknowledges, after its SIGCONT, a record whose lock expired meanwhile and
which another member has since accepted hears success. An acknowledgement accepts a delivery only while that is the
record's latest delivery; one that comes after a later delivery of the record is counted as ``moot_acks``.

Times are one machine's wall clock. A delivery's acquisition lies between the worker's ``polled_at`` (the poll that
returned it began) and its ``at`` (the poll returned), so the previous holder's lock ran at least until its
``polled_at`` + the lock: a later delivery ``at`` before that, less ``TOLERANCE_S``, is an overlap for sure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

JSON = dict[str, Any]

#: Allowance for the timestamps (the broker's timer wheel, the worker's clock read around its poll), as the share
#: consumer tests allow (tests/clients/test_share_consumer.py EARLY_S).
TOLERANCE_S = 0.25
#: The causes a redelivery can have, in the order they are checked.
#: ``unrecorded``: the delivery before the first one a worker wrote down went to a worker killed before it wrote.
CAUSES = ("killed", "exited", "closed", "stopped", "lock_expired", "unrecorded")
LISTED = 50  # how many keys, records or violations the report lists at most


@dataclass(frozen=True)
class Delivery:
    """One record as a worker's poll returned it."""

    member: str  # the worker's client id (chaos-<slot>-<incarnation>)
    partition: int
    offset: int
    key: str | None
    delivery_count: int | None  # Message.delivery_count() (librdkafka 2.16: spec 12.1)
    polled_at: float  # the poll that returned it began
    at: float  # it returned

    def json(self) -> JSON:
        return {
            "member": self.member, "delivery_count": self.delivery_count,
            "polled_at": round(self.polled_at, 3), "at": round(self.at, 3),
        }  # fmt: skip


@dataclass(frozen=True)
class Ack:
    """An acknowledgement result of one partition (the commit callback): ``error`` None when it was applied."""

    member: str
    partition: int
    offsets: tuple[int, ...]
    at: float
    error: str | None = None


@dataclass(frozen=True)
class Member:
    """One worker process's life, as the runner made it: signals and their times."""

    client_id: str
    killed_at: float | None = None  # SIGKILL: its connection closes, the broker releases what it held (spec 7)
    exited_at: float | None = None  # it exited by itself (crashed): the same
    closed_at: float | None = None  # SIGTERM: it closed (ShareAcknowledge epoch -1, spec 12.6)
    stops: tuple[tuple[float, float | None], ...] = ()  # SIGSTOP .. SIGCONT (None: never continued)

    def ended_between(self, start: float, end: float) -> str | None:
        """How its share session ended between ``start`` and ``end``, if it did: the cause of a release."""
        for cause, at in (("killed", self.killed_at), ("exited", self.exited_at), ("closed", self.closed_at)):
            if at is not None and start - TOLERANCE_S <= at <= end:
                return cause
        return None

    def stopped_between(self, start: float, end: float) -> bool:
        return any(stop <= end and (resume is None or resume >= start) for stop, resume in self.stops)


@dataclass
class Verdict:
    """What ``judge`` found; ``json`` is the report's ``share`` section."""

    produced: int = 0
    deliveries: int = 0
    records: int = 0
    accepted: int = 0
    lost: list[str] = field(default_factory=list)
    unaccepted: list[tuple[int, int]] = field(default_factory=list)
    archived: list[tuple[int, int]] = field(default_factory=list)
    redeliveries: Counter[str] = field(default_factory=Counter)
    unseen: int = 0
    failed_acks: int = 0
    moot_acks: int = 0
    accepted_unrecorded: int = 0
    violations: list[JSON] = field(default_factory=list)
    accepted_deliveries: set[Delivery] = field(default_factory=set)  # not in the report: for the per-kill rows

    @property
    def ok(self) -> bool:
        return self.produced > 0 and not self.lost and not self.unaccepted and not self.violations

    def json(self) -> JSON:
        kinds = Counter(v["kind"] for v in self.violations)
        return {
            "ok": self.ok,
            "produced": self.produced,
            "deliveries": self.deliveries,
            "records_delivered": self.records,
            "accepted": self.accepted,
            "accepted_unrecorded": self.accepted_unrecorded,
            "lost": len(self.lost),
            "unaccepted": len(self.unaccepted),
            "archived": len(self.archived),
            "redelivered": sum(self.redeliveries.values()),
            "redeliveries_by_cause": {cause: self.redeliveries[cause] for cause in CAUSES},
            "unseen_deliveries": self.unseen,
            "failed_acks": self.failed_acks,
            "moot_acks": self.moot_acks,
            "violations": {kind: kinds[kind] for kind in ("same_lock", "overlap", "after_accept")},
            "lost_keys": self.lost[:LISTED],
            "unaccepted_records": [f"{p}:{o}" for p, o in self.unaccepted[:LISTED]],
            "archived_records": [f"{p}:{o}" for p, o in self.archived[:LISTED]],
            "violation_list": self.violations[:LISTED],
        }


@dataclass
class Acceptance:
    """What the acknowledgements did: the deliveries they accepted, how many were refused, how many were moot."""

    accepted: set[Delivery] = field(default_factory=set)
    failed: int = 0
    moot: int = 0


def accepted_deliveries(deliveries: Iterable[Delivery], acks: Iterable[Ack]) -> Acceptance:
    """The deliveries an applied acknowledgement accepted (see the module docstring).

    An acknowledgement of offset o by member m is of m's latest delivery of o before it (the worker writes each
    batch before the poll or commit that acknowledges it); it accepts that delivery unless a later delivery of o
    (a higher delivery count, to anyone) came before the acknowledgement: the record was no longer m's then, and
    the broker refused or ignored it."""
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_record[(delivery.partition, delivery.offset)].append(delivery)
    for found in by_record.values():
        found.sort(key=lambda d: d.at)
    result = Acceptance()
    for ack in acks:
        if ack.error is not None:
            result.failed += 1
            continue
        for offset in ack.offsets:
            found = by_record.get((ack.partition, offset), [])
            mine = [d for d in found if d.member == ack.member and d.at <= ack.at + TOLERANCE_S]
            if not mine:
                continue
            acked = mine[-1]
            superseded = any(
                (d.delivery_count or 0) > (acked.delivery_count or 0) and d.at <= ack.at for d in found
            )  # fmt: skip
            if superseded:
                result.moot += 1
            else:
                result.accepted.add(acked)
    return result


def redelivery_cause(previous: Delivery, current: Delivery, members: Mapping[str, Member], lock_s: float) -> str | None:
    """Why ``current`` could acquire the record ``previous`` had: the previous holder's session ended (killed,
    exited, closed) before it, or its lock had run out (``stopped`` if the holder was SIGSTOPped meanwhile); None
    when nothing released it."""
    holder = members.get(previous.member, Member(previous.member))
    ended = holder.ended_between(previous.polled_at, current.at)
    if ended is not None:
        return ended
    if current.at >= previous.polled_at + lock_s - TOLERANCE_S:
        return "stopped" if holder.stopped_between(previous.polled_at, current.at) else "lock_expired"
    return None


@dataclass(frozen=True)
class Context:
    """What every record is judged against."""

    accepted: set[Delivery]
    members: Mapping[str, Member]
    lock_s: float
    delivery_limit: int
    finished: Mapping[int, int]  # partition -> the broker's share-partition start offset (SPSO) at the end


def judge(
    produced_keys: Iterable[str],
    deliveries: Iterable[Delivery],
    acks: Iterable[Ack],
    members: Mapping[str, Member],
    lock_s: float,
    delivery_limit: int,
    finished: Mapping[int, int] | None = None,
) -> Verdict:
    """The verdict on one run (see the module docstring): records are told apart by (partition, offset), the
    produced ones by their keys (an idempotent producer writes each key once).

    ``finished``: each partition's share-partition start offset at the end, as the broker says (every record below
    it is ACKNOWLEDGED or ARCHIVED: spec 6.7). A record no worker saw accepted, last delivered to a worker that was
    SIGKILLed (or crashed) after that delivery, and below it, was accepted by an acknowledgement whose answer died
    with the worker (the broker applied it; the worker never wrote it down): ``accepted_unrecorded``, not a failure.
    """
    deliveries = list(deliveries)
    wanted = set(produced_keys)
    verdict = Verdict(produced=len(wanted), deliveries=len(deliveries))
    acceptance = accepted_deliveries(deliveries, acks)
    verdict.accepted_deliveries = acceptance.accepted
    verdict.failed_acks, verdict.moot_acks = acceptance.failed, acceptance.moot
    verdict.lost = sorted(wanted - {d.key for d in deliveries if d.key is not None})
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_record[(delivery.partition, delivery.offset)].append(delivery)
    verdict.records = len(by_record)
    context = Context(acceptance.accepted, members, lock_s, delivery_limit, finished or {})
    for (partition, offset), found in sorted(by_record.items()):
        found.sort(key=lambda d: (d.delivery_count or 0, d.at))
        judge_record(verdict, partition, offset, found, context)
    return verdict


def judge_record(verdict: Verdict, partition: int, offset: int, found: list[Delivery], context: Context) -> None:
    """One record's deliveries, in delivery-count order, into ``verdict``."""

    def violation(kind: str, previous: Delivery, current: Delivery) -> None:
        verdict.violations.append({
            "kind": kind, "partition": partition, "offset": offset, "key": current.key,
            "first": previous.json(), "second": current.json(),
        })  # fmt: skip

    accepted = context.accepted
    counts = [d.delivery_count for d in found if d.delivery_count is not None]
    # A delivery count that skips a value is an acquisition no worker wrote down (killed between the poll and
    # the write): a redelivery all the same, of cause "unrecorded".
    if counts:
        unseen = counts[0] - 1 + sum(b - a - 1 for a, b in pairwise(counts) if b > a)
        verdict.unseen += unseen
        verdict.redeliveries["unrecorded"] += unseen
    accepted_once: Delivery | None = None
    for previous, current in pairwise(found):
        if accepted_once is None and previous in accepted:
            accepted_once = previous
        if previous.delivery_count is not None and previous.delivery_count == current.delivery_count:
            violation("same_lock", previous, current)
            continue
        if accepted_once is not None:
            violation("after_accept", accepted_once, current)
            continue
        cause = redelivery_cause(previous, current, context.members, context.lock_s)
        if cause is None:
            violation("overlap", previous, current)
        else:
            verdict.redeliveries[cause] += 1
    last = found[-1]
    holder = context.members.get(last.member, Member(last.member))
    died = holder.ended_between(last.polled_at, float("inf")) in ("killed", "exited")
    if any(d in accepted for d in found):
        verdict.accepted += 1
    elif (last.delivery_count or 0) >= context.delivery_limit:
        verdict.archived.append((partition, offset))  # released at the limit: ARCHIVED (spec 6.3)
    elif died and offset < context.finished.get(partition, 0):
        verdict.accepted_unrecorded += 1
    else:
        verdict.unaccepted.append((partition, offset))
