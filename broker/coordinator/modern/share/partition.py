"""One share-partition: the record states of one (group, topic, partition), Kafka's ``SharePartition`` (section 6 of
``docs/spec/share-groups.md``).

Offsets below the SPSO are finished; offsets from the SPSO to the SPEO are in flight, each with a state (AVAILABLE,
ACQUIRED, ACKNOWLEDGED, ARCHIVED), a delivery count and, while ACQUIRED, the member holding it and the acquisition
whose lock covers it. State is kept by runs of offsets sharing it (``inflight.py``, Kafka's ``InFlightBatch``): at
most ``group.share.partition.max.record.locks`` offsets are in flight. Acknowledgements commit at once (no two-phase
persister write), but a failing batch leaves the partition unchanged: every batch is checked before any is applied.

Pure state: the log is read through ``ShareLog`` (storage's ``PartitionLog`` answers it), lock timers are armed by
the caller (``partitions.py``) through the purgatory, and what happened is returned, not emitted.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.modern.share.acknowledgements import AckBatch, AcknowledgeType, validate_batches
from broker.coordinator.modern.share.inflight import (
    Acquisition,
    RecordState,
    RecordsView,
    Run,
    cut,
    index_from,
    split,
)
from broker.coordinator.modern.share.share_log import AbortedRange, LoggedBatch, ShareLog

__all__ = [
    "AbortedRange",
    "AckBatch",
    "AcknowledgeType",
    "Acquisition",
    "LoggedBatch",
    "RecordState",
    "ShareLog",
    "SharePartition",
    "validate_batches",
]


_FINISHED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_INT32_MAX = 2**31 - 1
_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."


@dataclass(slots=True)
class Change:
    """What one operation did, for the events and the waiters (``partitions.py``)."""

    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count) ranges
    released: list[int] = field(default_factory=list)  # offsets made AVAILABLE again
    archived: list[tuple[int, int]] = field(default_factory=list)  # (offset, delivery count) archived at the limit
    accepted: int = 0
    rejected: int = 0
    rejected_records: list[tuple[int, int]] = field(default_factory=list)  # (offset, delivery count) REJECT or GAP
    renewed: list[tuple[int, int]] = field(default_factory=list)  # (first, last) ranges to renew
    bytes_read: int = 0  # what an acquisition read of the log (MaxBytes, section 8.3)


class SharePartition:
    def __init__(self, group_id: str, topic_id: object, partition: int) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.start_offset = -1  # SPSO; -1 until the first fetch initialises it (section 6.2)
        self.next_offset = -1  # SPEO + 1: the first offset never acquired
        # Every offset from the SPSO up to next_offset while in flight, as runs in offset order (inflight.py); below
        # the SPSO only ACQUIRED runs a moved log start left locked (6.9).
        self.runs: list[Run] = []
        self.available = 0  # AVAILABLE records in ``runs``: the next fetch looks there first
        self.delivered = 0  # deliveries ever made (first deliveries and redeliveries)
        self.redelivered = 0
        self.archived_total = 0
        self.leader_epoch = 0

    # -- reading the state -----------------------------------------------------------------------------------

    @property
    def initialised(self) -> bool:
        return self.start_offset >= 0

    @property
    def end_offset(self) -> int:
        """SPEO: the last offset ever acquired (SPSO - 1 when nothing is in flight)."""
        return self.next_offset - 1

    @property
    def records(self) -> RecordsView:
        """Each in-flight offset mapped to its run (what one record looks like)."""
        return RecordsView(self.runs)

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset if self.initialised else 0

    def counts(self) -> dict[str, int]:
        tally = dict.fromkeys(("available", "acquired", "acknowledged", "archived"), 0)
        for run in self.runs:
            tally[run.state.name.lower()] += run.last - run.first + 1
        return tally

    def held(self) -> Iterator[tuple[int, Run]]:
        """The in-flight offsets with their runs, in offset order (a step per offset: for tests and tools)."""
        return iter(self.records.items())

    def fetch_offset(self) -> int:
        """Where the next fetch reads the log: the first AVAILABLE in-flight offset, else SPEO + 1."""
        if self.available:
            start = self.start_offset
            for run in self.runs:
                if run.state is RecordState.AVAILABLE and run.last >= start:
                    return max(run.first, start)
        return self.next_offset

    def finished_above_start(self) -> int:
        start = self.start_offset
        return sum(
            run.last - max(run.first, start) + 1 for run in self.runs if run.state in _FINISHED and run.last >= start
        )

    def holds(self, acquisition: Acquisition) -> bool:
        """Whether any record is still locked by ``acquisition``: a bisection per range it was given."""
        runs = self.runs
        count = len(runs)
        for first, last in acquisition.ranges:
            index = index_from(runs, first)
            while index < count and runs[index].first <= last:
                if runs[index].lock is acquisition:
                    return True
                index += 1
        return False

    # -- initialisation (section 6.2) and the log start (6.9) --------------------------------------------------

    def initialise(self, log: ShareLog, reset: str, now_ms: int) -> None:
        if reset == "earliest":
            start = log.log_start_offset
        elif reset.startswith("by_duration:"):
            found = log.offset_for_timestamp(now_ms - _duration_ms(reset.removeprefix("by_duration:")))
            start = found[0] if found is not None else log.high_watermark
        else:
            start = log.high_watermark
        self.reset_to(start)

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets (section 10.3): a new SPSO, every in-flight state and delivery count dropped."""
        self.start_offset = self.next_offset = offset
        self.runs.clear()
        self.available = 0

    def follow_log_start(self, log: ShareLog, change: Change) -> None:
        """SharePartition.updateCacheAndOffsets: the log start moved past the SPSO. The AVAILABLE records below it
        are archived and the SPSO becomes the log start; ACQUIRED records below it stay locked (below the SPSO: an
        acknowledgement of them is ignored) and are archived when their lock expires or their session ends."""
        log_start = log.log_start_offset
        if self.start_offset >= log_start:
            return
        runs = self.runs
        split(runs, log_start)  # no run straddles the new SPSO
        below = index_from(runs, log_start)
        kept: list[Run] = []
        for run in runs[:below]:
            if run.state is RecordState.ACQUIRED:
                kept.append(run)
            elif run.state is RecordState.AVAILABLE:
                size = run.last - run.first + 1
                self.available -= size
                self.archived_total += size
        runs[:below] = kept
        self.start_offset = log_start
        self.next_offset = max(self.next_offset, log_start)
        self._advance()

    # -- acquisition (section 6.4) -----------------------------------------------------------------------------

    def acquire(
        self,
        log: ShareLog,
        member_id: str,
        max_records: int,
        batch_size: int,
        *,
        record_limit: bool,
        read_committed: bool,
        max_locks: int,
        acquisition: Acquisition,
        max_bytes: int = _INT32_MAX,
        at_least_one: bool = True,
    ) -> tuple[Change, list[LoggedBatch]]:
        """Acquire up to about ``max_records`` for ``member_id`` under ``acquisition``'s lock; the batches that hold
        them are returned for the response's Records.

        Only what the fetch reads can be acquired (DelayedShareFetch, ReplicaManager.readFromLog): whole stored
        batches from the next fetch offset within ``max_bytes``, at least one when ``at_least_one``; the bytes read
        are in ``change.bytes_read``."""
        change = Change()
        self.follow_log_start(log, change)
        taken: list[tuple[int, int, int]] = []  # (first, last, delivery count), ascending
        budget = max_records
        read, window_end, counted_until = 0, self.next_offset, self.fetch_offset()
        for batch in log.batches_from(counted_until):
            base = batch.base_offset
            if base >= self.next_offset:
                break
            size = len(batch.data)
            if read + size > max_bytes and not (at_least_one and read == 0):
                window_end = base  # the bytes ran out inside the in-flight window
                break
            read += size
            counted_until = batch.last_offset + 1
        runs = self.runs
        acquired = RecordState.ACQUIRED
        if self.available:  # redeliveries: the AVAILABLE runs of the window, a run (or its head) at a time
            index = index_from(runs, self.start_offset)
            while index < len(runs) and budget > 0:
                run = runs[index]
                if run.first >= window_end:
                    break
                if run.state is RecordState.AVAILABLE:
                    last = min(run.last, window_end - 1, run.first + budget - 1)
                    if last < run.last:
                        split(runs, last + 1)
                    size = last - run.first + 1
                    run.state = acquired
                    run.delivery_count += 1
                    run.member_id = member_id
                    run.lock = acquisition
                    self.available -= size
                    self.redelivered += size
                    self.delivered += size
                    budget -= size
                    taken.append((run.first, last, run.delivery_count))
                index += 1
        upper = log.last_stable_offset if read_committed else log.high_watermark
        redelivered = bool(taken)
        batches: list[LoggedBatch] = []  # the new records' batches (those returned when nothing is redelivered)
        new_first = self.next_offset
        if budget > 0 and window_end == self.next_offset < upper and self.in_flight() < max_locks:
            aborted = self._aborted_ranges(log, upper) if read_committed else ()
            lock_end = self.start_offset + max_locks  # the SPSO stays put in this loop: in flight < max_locks
            next_offset = self.next_offset  # kept in step with self.next_offset, written back per batch
            for batch in log.batches_from(next_offset):
                base = batch.base_offset
                if base >= upper or budget <= 0 or next_offset >= lock_end:
                    break
                if base >= counted_until:  # not read yet (a batch split by record-limit mode was)
                    size = len(batch.data)
                    if read + size > max_bytes and not (at_least_one and read == 0):
                        break
                    read += size
                first = base if base > next_offset else next_offset
                last = batch.last_offset
                skip = batch.is_control or (
                    bool(aborted) and batch.is_transactional and any(
                        a.producer_id == batch.producer_id and a.first_offset <= base <= a.last_offset
                        for a in aborted
                    )
                )  # fmt: skip
                if record_limit and not skip:  # a skipped batch is archived whole: cut, it left a hole in flight
                    last = min(last, first + budget - 1)
                tail = runs[-1] if runs and runs[-1].last + 1 == first else None  # the run just below, if any
                if skip:  # control records and aborted data are never delivered
                    if tail is not None and tail.state is RecordState.ARCHIVED and tail.delivery_count == 0:
                        tail.last = last
                    else:
                        runs.append(Run(first, last, RecordState.ARCHIVED))
                    self.archived_total += last - first + 1
                else:  # a new batch extends the fetch's run (Kafka's InFlightBatch per acquired batch)
                    if tail is not None and tail.lock is acquisition and tail.delivery_count == 1:
                        tail.last = last
                    else:
                        runs.append(Run(first, last, acquired, 1, member_id, acquisition))
                    if taken and taken[-1][1] + 1 == first and taken[-1][2] == 1:
                        taken[-1] = (taken[-1][0], last, 1)
                    else:
                        taken.append((first, last, 1))
                    budget -= last - first + 1
                    self.delivered += last - first + 1
                    batches.append(batch)
                next_offset = self.next_offset = last + 1
        # Which stored batches to return: those holding an acquired offset (redeliveries may sit far below; new
        # records only: the batches just read for them).
        if taken:
            acquisition.ranges.extend((first, last) for first, last, _ in taken)
            if redelivered:
                batches = _covering(log, taken)
            change.acquired = _ranges(taken, batch_size, batches)
        if self.next_offset > new_first:
            self._advance()  # archived offsets (markers, aborted data) may lead: the SPSO moves over them
        change.bytes_read = read
        return change, batches

    def _aborted_ranges(self, log: ShareLog, upper: int) -> Sequence[AbortedRange]:
        return log.aborted_transactions(self.next_offset, upper)

    # -- acknowledgement (section 6.5) ---------------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AckBatch], delivery_limit: int
    ) -> tuple[ErrorCode, str | None, Change]:
        """Check every batch, then apply them all (or none): the partition's AcknowledgeErrorCode and message."""
        change = Change()
        runs = self.runs
        acquired = RecordState.ACQUIRED
        plan: list[tuple[int, int, AckBatch]] = []  # (first, last, batch): every batch checked before any applies
        for batch in batches:
            if batch.last_offset < self.start_offset or not self.initialised:
                continue  # already finished (below the SPSO)
            # SharePartition's messages (its per-offset path).
            if batch.last_offset >= self.next_offset:
                which = "first" if batch.first_offset >= self.next_offset else "last"
                return ErrorCode.invalid_request, f"Batch record not found. The {which} offset in request is past " \
                    "acquired records.", change  # fmt: skip
            first = max(batch.first_offset, self.start_offset)
            index, count = index_from(runs, first), len(runs)
            while index < count and runs[index].first <= batch.last_offset:  # the runs in order: the first bad one
                run = runs[index]
                if run.state is not acquired:
                    return ErrorCode.invalid_record_state, _NOT_ACQUIRED, change
                if run.member_id != member_id:
                    return ErrorCode.invalid_record_state, "Member is not the owner of offset", change
                index += 1
            plan.append((first, batch.last_offset, batch))
        for first, last, batch in plan:
            types = batch.types
            if len(types) == 1:  # the common case, one type for the range
                self._apply(first, last, types[0], delivery_limit, change)
                continue
            base, index = batch.first_offset, first - batch.first_offset
            while index <= last - base:  # per-offset types: a stretch of one type at a time
                kind, end = types[index], index
                while end < last - base and types[end + 1] == kind:
                    end += 1
                self._apply(base + index, base + end, kind, delivery_limit, change)
                index = end + 1
        self._advance()
        return ErrorCode.none, None, change

    def _apply(self, first: int, last: int, kind: int, delivery_limit: int, change: Change) -> None:
        """One acknowledgement type for ``[first, last]`` (checked: every offset ACQUIRED by the member)."""
        if kind == AcknowledgeType.RENEW:
            change.renewed.append((first, last))
            return
        runs = self.runs
        start, end = cut(runs, first, last)
        if kind == AcknowledgeType.ACCEPT:
            change.accepted += last - first + 1
            if first == self.start_offset:  # in order: finished and at the SPSO, so gone at once (section 6.7)
                del runs[start:end]
                self.start_offset = last + 1
                return
            for run in runs[start:end]:
                run.state = RecordState.ACKNOWLEDGED
                run.member_id = None
                run.lock = None
        elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
            for run in runs[start:end]:
                size = run.last - run.first + 1
                count = run.delivery_count
                change.rejected_records.extend((offset, count) for offset in range(run.first, run.last + 1))
                change.rejected += size
                self.archived_total += size
                run.state = RecordState.ARCHIVED
                run.member_id = None
                run.lock = None
        else:  # RELEASE
            for run in runs[start:end]:
                self._release(run, delivery_limit, change)

    # -- releases: lock expiry (6.6), a session's end (6.8) -----------------------------------------------------

    def expire(self, acquisition: Acquisition, delivery_limit: int) -> Change:
        """The lock of ``acquisition`` ran out: what it still holds becomes available (or archived at the limit)."""
        change = Change()
        runs = self.runs
        split(runs, self.start_offset)
        count = len(runs)
        for first, last in acquisition.ranges:
            index = index_from(runs, first)
            while index < count and runs[index].first <= last:
                run = runs[index]
                if run.lock is acquisition and run.state is RecordState.ACQUIRED:
                    self._release(run, delivery_limit, change)
                index += 1
        self._advance()
        return change

    def release_member(self, member_id: str, delivery_limit: int) -> tuple[Change, set[Acquisition]]:
        """Every record ``member_id`` holds goes back (its share session ended); the locks it held are returned."""
        change = Change()
        locks: set[Acquisition] = set()
        split(self.runs, self.start_offset)
        for run in self.runs:
            if run.state is RecordState.ACQUIRED and run.member_id == member_id:
                if run.lock is not None:
                    locks.add(run.lock)
                self._release(run, delivery_limit, change)
        self._advance()
        return change, locks

    def renew(self, ranges: Iterable[tuple[int, int]], acquisition: Acquisition) -> None:
        runs = self.runs
        for first, last in ranges:
            start, end = cut(runs, first, last)
            for run in runs[start:end]:
                run.lock = acquisition
            acquisition.ranges.append((first, last))

    def _release(self, run: Run, delivery_limit: int, change: Change) -> None:
        """An ACQUIRED run goes back (its structure unchanged: ``_advance`` drops what is left below the SPSO)."""
        run.member_id = None
        run.lock = None
        size = run.last - run.first + 1
        if run.last < self.start_offset:  # left below the SPSO by a moved log start (6.9): finished, not redelivered
            run.state = RecordState.ARCHIVED
            self.archived_total += size
        elif run.delivery_count >= delivery_limit:
            run.state = RecordState.ARCHIVED
            self.archived_total += size
            change.archived.extend((offset, run.delivery_count) for offset in range(run.first, run.last + 1))
        else:
            run.state = RecordState.AVAILABLE
            self.available += size
            change.released.extend(range(run.first, run.last + 1))

    def _advance(self) -> None:
        """Section 6.7: the SPSO moves over the finished runs at its start; below it only ACQUIRED runs stay."""
        runs = self.runs
        start = self.start_offset
        below = index_from(runs, start)
        if below and any(run.state is not RecordState.ACQUIRED for run in runs[:below]):
            runs[:below] = [run for run in runs[:below] if run.state is RecordState.ACQUIRED]
            below = index_from(runs, start)
        end = below
        acknowledged, archived = RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
        while end < len(runs):
            run = runs[end]
            if run.first != start or (run.state is not acknowledged and run.state is not archived):
                break
            start = run.last + 1
            end += 1
        if end > below:
            del runs[below:end]
        self.start_offset = start


def _covering(log: ShareLog, ranges: list[tuple[int, int, int]]) -> list[LoggedBatch]:
    """The stored batches holding any offset of ``ranges`` (ascending), each once: a step per batch."""
    found: list[LoggedBatch] = []
    index, count = 0, len(ranges)
    for batch in log.batches_from(ranges[0][0]):
        while index < count and ranges[index][1] < batch.base_offset:
            index += 1
        if index >= count:
            break
        if ranges[index][0] <= batch.last_offset:
            found.append(batch)
    return found


def _ranges(
    taken: list[tuple[int, int, int]], batch_size: int, batches: list[LoggedBatch]
) -> list[tuple[int, int, int]]:
    """AcquiredRecords: contiguous offsets of one delivery count, cut after about ``batch_size`` records at a log
    batch boundary (section 6.4 step 3)."""
    joined: list[tuple[int, int, int]] = []
    for first, last, count in taken:
        if joined and joined[-1][1] + 1 == first and joined[-1][2] == count:
            joined[-1] = (joined[-1][0], last, count)
        else:
            joined.append((first, last, count))
    ends = [batch.last_offset for batch in batches]  # ascending
    ranges: list[tuple[int, int, int]] = []
    for first, last, count in joined:
        if batch_size > 0:
            index = bisect_left(ends, first)
            while index < len(ends) and ends[index] < last:
                end = ends[index]
                if end - first + 1 >= batch_size:
                    ranges.append((first, end, count))
                    first = end + 1
                index += 1
        ranges.append((first, last, count))
    return ranges


def _duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS)."""
    match = re.fullmatch(
        r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d{0,9})?)S)?)?",
        text.strip().upper(),
    )
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text}")
    sign, days, hours, minutes, seconds = match.groups()
    total = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + round(float(seconds or 0) * 1000)
    )
    return -total if sign == "-" else total


duration_ms = _duration_ms
