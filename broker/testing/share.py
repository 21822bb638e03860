"""Share groups (KIP-932, issue 28) in the control client: waits and checks on a share group's members, its
share-partitions and their records, mixed into ``BrokerControl`` (``control.py``)::

    broker.wait_for_share("jobs", members=2, partitions=1, poll=lambda: consumer.poll(0.1))
    with broker.expect_redelivery("jobs", cause="lock_expired") as check:
        ...  # a consumer holds its records past the lock
    assert check.redeliveries[0].offsets == (0, 1, 2)
    broker.assert_nothing_archived("jobs")

Everything is read from the broker's HTTP control API: the group's detail (``share_partitions``), the record view
(``GET /v1/groups/{g}/share-partitions``) and the group's events (docs/events.md, "Share groups"). A redelivery is a
``records_released`` event: records made available again (cause ``release``, ``lock_expired`` or
``session_closed``), whose next delivery counts one more. An archived record is one a member REJECTed
(``records_acknowledged``'s ``rejected_offsets``) or one that reached the delivery count limit
(``records_archived``): no consumer will see it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self

from broker.control.client import ControlError
from broker.coordinator.group_type import GroupType
from broker.events import names
from broker.testing.waits import JSON, POLL_S, RECENT_EVENTS, EventBlock, WaitTimeout, describe_event, threaded

if TYPE_CHECKING:
    from broker.control.client import ControlClient

__all__ = ["ArchiveCheck", "Archived", "AsyncShare", "Redelivery", "RedeliveryCheck", "ShareControl"]

_SHOWN_RUNS = 12  # in-flight runs a failure message lists per share-partition
_RECORD_FIELDS = ("state", "delivery_count", "member_id", "lock_expires_in_ms")


def _offsets_text(offsets: Iterable[int]) -> str:
    runs: list[list[int]] = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"offset {text}" if len(runs) == 1 and runs[0][0] == runs[0][1] else f"offsets {text}"


def _expand(ranges: Iterable[Iterable[int]]) -> tuple[int, ...]:
    offsets: list[int] = []
    for first, last in ranges:
        offsets.extend(range(first, last + 1))
    return tuple(offsets)


@dataclass(frozen=True, slots=True)
class Redelivery:
    """Records a share group made available again (a ``records_released`` event): their next delivery counts one
    more. ``cause``: ``release`` (the member RELEASEd them), ``lock_expired``, ``session_closed`` (the member closed,
    left, was kicked or its connection dropped)."""

    topic: str
    partition: int
    offsets: tuple[int, ...]
    cause: str
    member_id: str | None  # who held them
    seq: int

    def __str__(self) -> str:
        held = f", held by {self.member_id}" if self.member_id else ""
        return f"{self.topic}-{self.partition} {_offsets_text(self.offsets)} ({self.cause}{held})"


@dataclass(frozen=True, slots=True)
class Archived:
    """Records a share group archived: no consumer receives them again. ``cause``: ``rejected`` (a member's REJECT,
    or a GAP) or ``delivery_limit`` (delivered ``group.share.delivery.count.limit`` times, then released or timed
    out). ``delivery_count`` is the highest among them."""

    topic: str
    partition: int
    offsets: tuple[int, ...]  # empty from a broker whose records_acknowledged does not name them
    cause: str
    delivery_count: int | None  # None from a broker that does not say
    member_id: str | None
    seq: int
    records: int

    def __str__(self) -> str:
        by = f" by {self.member_id}" if self.member_id else ""
        why = f"rejected{by}" if self.cause == "rejected" else f"{self.cause}{', held' + by if by else ''}"
        which = _offsets_text(self.offsets) if self.offsets else f"{self.records} record(s)"
        count = f"delivery count {self.delivery_count}, " if self.delivery_count is not None else ""
        return f"{self.topic}-{self.partition} {which} ({count}{why})"


def redeliveries_in(events: Iterable[JSON]) -> list[Redelivery]:
    return [
        Redelivery(e["topic"], e["partition"], _expand(e["offsets"]), e["cause"], e.get("member_id"), int(e["seq"]))
        for e in events
        if e.get("event") == names.RECORDS_RELEASED
    ]


def archived_in(events: Iterable[JSON]) -> list[Archived]:
    found: list[Archived] = []
    for e in events:
        if e.get("event") == names.RECORDS_ARCHIVED:
            offsets, cause, count = _expand(e["offsets"]), str(e.get("cause", "delivery_limit")), e["delivery_count"]
            records = int(e.get("records", len(offsets)))
        elif e.get("event") == names.RECORDS_ACKNOWLEDGED and e.get("rejected"):
            offsets, cause, count = _expand(e.get("rejected_offsets", [])), "rejected", e.get("rejected_delivery_count")
            records = int(e["rejected"])
        else:
            continue
        delivery_count = None if count is None else int(count)
        where = (e["topic"], e["partition"])
        found.append(Archived(*where, offsets, cause, delivery_count, e.get("member_id"), int(e["seq"]), records))
    return found


def describe_share_partitions(partitions: Iterable[JSON]) -> str:
    """Each share-partition's offsets and counts, and (from the record view) its in-flight runs."""
    texts = []
    for p in partitions:
        text = (
            f"{p['topic']}-{p['partition']} SPSO {p['start_offset']} SPEO {p['end_offset']}: {p['acquired']} acquired, "
            f"{p['available']} available, {p['acknowledged']} acknowledged, {p['archived']} archived in flight"
        )
        runs = []
        for run in p.get("records", [])[:_SHOWN_RUNS]:
            span = _offsets_text(range(run["first_offset"], run["last_offset"] + 1))
            holder = f" by {run['member_id']}" if run.get("member_id") else ""
            lock = run.get("lock_expires_in_ms")
            expiry = f", lock expires in {lock} ms" if lock is not None else ""
            runs.append(f"{span} {run['state']}{holder} (delivery count {run['delivery_count']}{expiry})")
        if len(p.get("records", [])) > _SHOWN_RUNS:
            runs.append("...")
        texts.append(text + (f" [{'; '.join(runs)}]" if runs else ""))
    return "; ".join(texts) if texts else "no share-partitions (no member has fetched yet)"


class ShareControl:
    """The share-group calls of ``BrokerControl``."""

    if TYPE_CHECKING:

        @property
        def client(self) -> ControlClient: ...

        def events(self, group: str | None = None, since_seq: int = 0) -> list[JSON]: ...

        def last_seq(self, group: str) -> int: ...

    # -- reading --------------------------------------------------------------------------------------------

    def share_partitions(self, group: str) -> list[JSON]:
        """The share group's share-partitions, sorted by topic and partition: ``topic``, ``partition``,
        ``start_offset`` (SPSO), ``end_offset`` (SPEO), the in-flight counts (``in_flight``, ``available``,
        ``acquired``, ``acknowledged``, ``archived``), ``delivered_total``, ``redelivered_total``, ``archived_total``
        and ``records``: the in-flight runs (``first_offset``, ``last_offset``, ``state``, ``delivery_count``,
        ``member_id``, ``lock_deadline_ms``, ``lock_expires_in_ms``). ControlError(404) if it is no share group."""
        partitions: list[JSON] = self.client.share_partitions(group)["partitions"]
        return partitions

    def share_records(self, group: str, topic: str | None = None, partition: int | None = None) -> list[JSON]:
        """One row per in-flight record (between the SPSO and the SPEO) of the group's share-partitions (of one
        topic or partition, if given): ``topic``, ``partition``, ``offset``, ``state`` ("available", "acquired",
        "acknowledged", "archived"), ``delivery_count``, ``member_id`` (the holder), ``lock_expires_in_ms``."""
        rows: list[JSON] = []
        for p in self.share_partitions(group):
            if (topic is not None and p["topic"] != topic) or (partition is not None and p["partition"] != partition):
                continue
            for run in p["records"]:
                for offset in range(run["first_offset"], run["last_offset"] + 1):
                    row = {"topic": p["topic"], "partition": p["partition"], "offset": offset}
                    rows.append(row | {key: run[key] for key in _RECORD_FIELDS})
        return rows

    def redeliveries(self, group: str, since_seq: int = 0) -> list[Redelivery]:
        """The records the group made available again after ``since_seq`` (buffered ``records_released`` events)."""
        return redeliveries_in(self.events(group, since_seq))

    def archived(self, group: str, since_seq: int = 0) -> list[Archived]:
        """The records the group archived after ``since_seq``: REJECTed, or at the delivery count limit."""
        return archived_in(self.events(group, since_seq))

    # -- waiting --------------------------------------------------------------------------------------------

    def wait_for_share(
        self,
        group: str,
        members: int | None = None,
        partitions: int | None = None,
        acknowledged_through: int | Mapping[tuple[str, int], int] | None = None,
        timeout: float = 30.0,
        poll: Callable[[], object] | None = None,
    ) -> JSON:
        """The share group's detail (with ``share_partitions``) once every condition holds (none: once it exists).

        ``members``: that many members, each told its assignment. ``partitions``: that many share-partitions, which
        a member's first ShareFetch creates (produce after it when the group starts at the latest offset, Kafka's
        default ``share.auto.offset.reset``). ``acknowledged_through``: every record up to this offset is finished
        (the SPSO moved past it: acknowledged, or archived), of every share-partition (an int; at least one must
        exist) or of each ``{(topic, partition): offset}``. ``poll`` is called over and over meanwhile, as for
        ``wait_for``: a ShareConsumer acknowledges and fetches only inside its poll(). Raises WaitTimeout saying what
        the group and its share-partitions looked like and its latest events."""
        conditions = {"members": members, "partitions": partitions, "acknowledged_through": acknowledged_through}
        deadline = time.monotonic() + timeout
        detail: JSON | None = None
        while True:
            if poll is not None:
                poll()
            detail = self._share_detail(group)
            if detail is not None and not _unmet(detail, members, partitions, acknowledged_through):
                return detail
            if time.monotonic() >= deadline:
                break
            if poll is None:
                time.sleep(POLL_S)
        wanted = ", ".join(f"{name}={value}" for name, value in conditions.items() if value is not None)
        message = f"share group {group!r} did not reach {wanted or 'existence'} within {timeout:g} s"
        if detail is None:
            raise WaitTimeout(f"{message}: the broker has no such group")
        missing = "; ".join(_unmet(detail, members, partitions, acknowledged_through))
        ids = [m["member_id"] for m in detail["members"]]
        message += f" ({missing}): it is {detail['state']}, epoch {detail.get('group_epoch')}"
        message += f", {len(ids)} member(s) {ids}"
        message += "; share-partitions: " + self._partitions_text(group, detail)
        recent = self.events(group)[-RECENT_EVENTS:]
        if recent:
            message += "; latest events: " + "; ".join(describe_event(record) for record in recent)
        raise WaitTimeout(message)

    def _share_detail(self, group: str) -> JSON | None:
        try:
            detail = self.client.group(group)
        except ControlError as error:
            if error.status == 404:
                return None
            raise
        if detail.get("group_type") != GroupType.SHARE:
            raise ValueError(f"group {group!r} is a {detail.get('group_type')} group, not a share group")
        return detail

    def _partitions_text(self, group: str, detail: JSON | None = None) -> str:
        try:
            view = self.client.share_partitions(group)
        except ControlError:
            return describe_share_partitions(detail["share_partitions"] if detail else [])
        return describe_share_partitions(view["partitions"])

    # -- checks ---------------------------------------------------------------------------------------------

    def assert_nothing_archived(self, group: str) -> ArchiveCheck:
        """Fail at once if the share group has archived a record (a REJECT, or the delivery count limit), naming
        each with its offsets and delivery count, as far back as the group's buffered events go. ``with`` (or
        ``async with``) it to check again at the end of the block. A group that does not exist archived nothing."""
        self._share_detail(group)  # another type of group: ValueError, not a check that cannot fail
        check = ArchiveCheck(self, group)
        check.verify()
        return check

    def expect_redelivery(
        self, group: str, cause: str | None = None, offsets: Iterable[int] | None = None, timeout: float = 5.0
    ) -> RedeliveryCheck:
        """``with``/``async with``: fail unless the share group makes records available again (of this cause; each
        of these offsets, of any share-partition) during the block or within ``timeout`` seconds after it. Causes:
        ``release``, ``lock_expired``, ``session_closed``. ``.redeliveries`` holds what it saw."""
        if cause is not None and cause not in names.RELEASE_CAUSES:
            raise ValueError(f"no redelivery has cause {cause!r}: the causes are {', '.join(names.RELEASE_CAUSES)}")
        wanted = None if offsets is None else frozenset(offsets)
        return RedeliveryCheck(self, group, expect=True, cause=cause, offsets=wanted, timeout=timeout)

    def no_redelivery(self, group: str) -> RedeliveryCheck:
        """``with``/``async with``: fail if the share group makes any record available again during the block."""
        return RedeliveryCheck(self, group, expect=False)


def _unmet(
    detail: JSON,
    members: int | None,
    partitions: int | None,
    acknowledged_through: int | Mapping[tuple[str, int], int] | None,
) -> list[str]:
    """What keeps the wait going, one phrase per condition not met."""
    unmet: list[str] = []
    found = detail.get("members", [])
    if members is not None:
        if len(found) != members:
            unmet.append(f"{len(found)} member(s), not {members}")
        waiting = [m["member_id"] for m in found if m.get("assignment") != m.get("target")]
        if waiting:
            unmet.append(f"not yet assigned: {waiting}")
    shares = detail.get("share_partitions", [])
    if partitions is not None and len(shares) != partitions:
        unmet.append(f"{len(shares)} share-partition(s), not {partitions}")
    if acknowledged_through is not None:
        starts = {(p["topic"], p["partition"]): int(p["start_offset"]) for p in shares}
        if isinstance(acknowledged_through, Mapping):
            targets = dict(acknowledged_through)
        else:
            targets = dict.fromkeys(starts, acknowledged_through)
            if not starts:
                unmet.append("no share-partition yet")
        for (topic, partition), offset in sorted(targets.items()):
            start = starts.get((topic, partition))
            if start is None:
                unmet.append(f"no share-partition {topic}-{partition} yet")
            elif start <= offset:
                unmet.append(f"{topic}-{partition} not finished through {offset}: its SPSO is {start}")
    return unmet


class ArchiveCheck:
    """``assert_nothing_archived``'s check, again at the end of a ``with`` block. ``archived`` holds what it found."""

    def __init__(self, control: ShareControl, group: str) -> None:
        self._control = control
        self.group = group
        self.archived: list[Archived] = []

    def verify(self) -> None:
        self.archived = self._control.archived(self.group)
        if self.archived:
            count = sum(a.records for a in self.archived)
            listed = "; ".join(str(a) for a in self.archived)
            raise AssertionError(f"share group {self.group!r} archived {count} record(s): {listed}")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.verify()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await asyncio.to_thread(self.verify)


class RedeliveryCheck(EventBlock):
    """The ``expect_redelivery``/``no_redelivery`` block. ``redeliveries`` holds every redelivery seen during it
    (and, for ``expect_redelivery``, up to the match after it), ``events`` the group's events of that time."""

    def __init__(
        self,
        control: ShareControl,
        group: str,
        *,
        expect: bool,
        cause: str | None = None,
        offsets: frozenset[int] | None = None,
        timeout: float = 0.0,
    ) -> None:
        super().__init__(control, group, timeout if expect else 0.0)
        self._share = control
        self._expect = expect
        self._cause = cause
        self._offsets = offsets
        self._timeout = timeout if expect else 0.0
        self.redeliveries: list[Redelivery] = []

    def matching(self) -> list[Redelivery]:
        """The redeliveries of the cause asked for (all of them without one)."""
        return [r for r in self.redeliveries if self._cause is None or r.cause == self._cause]

    def _missing(self) -> frozenset[int]:
        seen = {offset for r in self.matching() for offset in r.offsets}
        return (self._offsets or frozenset()) - seen

    def _collect(self) -> bool:
        """Read the events since the block began; True once the outcome can no longer change."""
        self.events = self._control.events(self.group, since_seq=self._since)
        self.redeliveries = redeliveries_in(self.events)
        if not self._expect:
            return True
        return bool(self.matching()) and not self._missing()

    def _verdict(self) -> None:
        seen = "; ".join(str(r) for r in self.redeliveries)
        if not self._expect:
            if self.redeliveries:
                raise AssertionError(f"share group {self.group!r} redelivered records during the block: {seen}")
            return
        if self.matching() and not self._missing():
            return
        wanted = []
        if self._cause is not None:
            wanted.append(f"cause {self._cause!r}")
        if self._offsets is not None:
            wanted.append(_offsets_text(self._offsets))
        of = f" ({', '.join(wanted)})" if wanted else ""
        found = f"saw only {seen}" if seen else "saw none"
        if self.matching() and self._missing():
            found += f", not {_offsets_text(self._missing())}"
        state = self._share._partitions_text(self.group)
        raise AssertionError(
            f"expected share group {self.group!r} to redeliver records{of} during the block (or {self._timeout:g} s "
            f"after it); {found}; share-partitions now: {state}"
        )


class AsyncShare:
    """The share-group calls of ``AsyncControl``: coroutines, each run in a worker thread."""

    def __init__(self, control: ShareControl) -> None:
        self.share_partitions = threaded(control.share_partitions)
        self.share_records = threaded(control.share_records)
        self.redeliveries = threaded(control.redeliveries)
        self.archived = threaded(control.archived)
        self.wait_for_share = threaded(control.wait_for_share)
        self.assert_nothing_archived = threaded(control.assert_nothing_archived)
