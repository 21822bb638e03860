"""One share-partition: the record states of one (group, topic, partition), Kafka's ``SharePartition`` (section 6 of
``docs/spec/share-groups.md``).

Offsets below the SPSO are finished; offsets from the SPSO to the SPEO are in flight, each with a state (AVAILABLE,
ACQUIRED, ACKNOWLEDGED, ARCHIVED), a delivery count and, while ACQUIRED, the member holding it and the acquisition
whose lock covers it. State is kept per offset (section 14 allows it): at most
``group.share.partition.max.record.locks`` offsets are in flight. Acknowledgements commit at once (no two-phase
persister write), but a failing batch leaves the partition unchanged: every batch is checked before any is applied.

Pure state: the log is read through ``ShareLog`` (storage's ``PartitionLog`` answers it), lock timers are armed by
the caller (``partitions.py``) through the purgatory, and what happened is returned, not emitted.
"""

from __future__ import annotations

import enum
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

__all__ = [
    "AckBatch",
    "AcknowledgeType",
    "Acquisition",
    "RecordState",
    "ShareLog",
    "SharePartition",
    "validate_batches",
]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` with its persisted ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


_FINISHED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_INT32_MAX = 2**31 - 1
_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch/ShareAcknowledge v2 with IsRenewAck (KIP-1222)


class LoggedBatch(Protocol):
    """A stored record batch, as ``PartitionLog`` keeps it."""

    @property
    def data(self) -> bytes: ...

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def is_control(self) -> bool: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def is_transactional(self) -> bool: ...


class AbortedRange(Protocol):
    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


class ShareLog(Protocol):
    """What a share-partition reads of its partition's log."""

    log_start_offset: int

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def batches_from(self, offset: int) -> Iterator[LoggedBatch]: ...

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> Sequence[AbortedRange]: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def bytes_from(self, offset: int) -> int: ...


@dataclass(slots=True, eq=False)
class Acquisition:
    """The records one fetch acquired for one member, under one lock (a RENEW moves records to a new one)."""

    number: int
    member_id: str
    offsets: list[int]
    deadline_ms: int


@dataclass(slots=True, eq=False)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock: Acquisition | None = None


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]


def validate_batches(batches: Sequence[AckBatch], renew_allowed: bool) -> str | None:
    """KafkaApis.validateAcknowledgementBatches (section 8.4): why the partition's batches are INVALID_REQUEST."""
    previous_last = -1
    highest = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            return "First offset of acknowledgement batch is greater than its last offset"
        if batch.first_offset <= previous_last:
            return "Acknowledgement batches are not in ascending order or overlap"
        if not batch.types:
            return "Acknowledgement types are empty"
        if len(batch.types) > 1 and len(batch.types) != batch.last_offset - batch.first_offset + 1:
            return "Acknowledgement types count does not match the number of records in the batch"
        for kind in batch.types:
            if not 0 <= kind <= highest:
                return f"Invalid acknowledge type: {kind}"
        previous_last = batch.last_offset
    return None


@dataclass(slots=True)
class Change:
    """What one operation did, for the events and the waiters (``partitions.py``)."""

    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count) ranges
    released: list[int] = field(default_factory=list)  # offsets made AVAILABLE again
    archived: list[tuple[int, int]] = field(default_factory=list)  # (offset, delivery count) archived at the limit
    accepted: int = 0
    rejected: int = 0
    rejected_records: list[tuple[int, int]] = field(default_factory=list)  # (offset, delivery count) REJECT or GAP
    renewed: list[int] = field(default_factory=list)
    bytes_read: int = 0  # what an acquisition read of the log (MaxBytes, section 8.3)


class SharePartition:
    def __init__(self, group_id: str, topic_id: object, partition: int) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.start_offset = -1  # SPSO; -1 until the first fetch initialises it (section 6.2)
        self.next_offset = -1  # SPEO + 1: the first offset never acquired
        self.records: dict[int, InFlightRecord] = {}  # every offset from the SPSO up to next_offset, while in flight
        self.available = 0  # AVAILABLE records in ``records``: the next fetch looks there first
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

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset if self.initialised else 0

    def counts(self) -> dict[str, int]:
        tally = dict.fromkeys(("available", "acquired", "acknowledged", "archived"), 0)
        for record in self.records.values():
            tally[record.state.name.lower()] += 1
        return tally

    def held(self) -> Iterator[tuple[int, InFlightRecord]]:
        """The in-flight offsets with their records, in offset order."""
        return iter(sorted(self.records.items()))

    def fetch_offset(self) -> int:
        """Where the next fetch reads the log: the first AVAILABLE in-flight offset, else SPEO + 1."""
        if self.available:
            for offset in range(self.start_offset, self.next_offset):
                if self.records[offset].state is RecordState.AVAILABLE:
                    return offset
        return self.next_offset

    def finished_above_start(self) -> int:
        return sum(1 for r in self.records.values() if r.state in _FINISHED)

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
        self.records.clear()
        self.available = 0

    def follow_log_start(self, log: ShareLog, change: Change) -> None:
        """SharePartition.updateCacheAndOffsets: the log start moved past the SPSO. The AVAILABLE records below it
        are archived and the SPSO becomes the log start; ACQUIRED records below it stay locked (below the SPSO: an
        acknowledgement of them is ignored) and are archived when their lock expires or their session ends."""
        log_start = log.log_start_offset
        if self.start_offset >= log_start:
            return
        for offset in range(self.start_offset, min(log_start, self.next_offset)):
            record = self.records.get(offset)
            if record is None or record.state is RecordState.ACQUIRED:
                continue
            if record.state is RecordState.AVAILABLE:
                self._finish(record, RecordState.ARCHIVED)
            del self.records[offset]
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
        offsets = acquisition.offsets
        budget = max_records
        read, window_end, counted_until = 0, self.next_offset, self.fetch_offset()
        for batch in log.batches_from(counted_until):
            if batch.base_offset >= self.next_offset:
                break
            size = len(batch.data)
            if read + size > max_bytes and not (at_least_one and read == 0):
                window_end = batch.base_offset  # the bytes ran out inside the in-flight window
                break
            read += size
            counted_until = batch.last_offset + 1
        if self.available:
            for offset in range(self.start_offset, window_end):
                if budget <= 0:
                    break
                record = self.records[offset]
                if record.state is RecordState.AVAILABLE:
                    self._take(record, member_id, acquisition)
                    offsets.append(offset)
                    budget -= 1
        upper = log.last_stable_offset if read_committed else log.high_watermark
        batches: list[LoggedBatch] = []
        new_first = self.next_offset
        if budget > 0 and window_end == self.next_offset < upper and self.in_flight() < max_locks:
            aborted = self._aborted_ranges(log, upper) if read_committed else ()
            for batch in log.batches_from(self.next_offset):
                if batch.base_offset >= upper or budget <= 0 or self.in_flight() >= max_locks:
                    break
                if batch.base_offset >= counted_until:  # not read yet (a batch split by record-limit mode was)
                    size = len(batch.data)
                    if read + size > max_bytes and not (at_least_one and read == 0):
                        break
                    read += size
                first = max(batch.base_offset, self.next_offset)
                last = batch.last_offset
                if record_limit and not batch.is_control:
                    last = min(last, first + budget - 1)
                skip = batch.is_control or (
                    batch.is_transactional and any(
                        a.producer_id == batch.producer_id and a.first_offset <= batch.base_offset <= a.last_offset
                        for a in aborted
                    )
                )  # fmt: skip
                records = self.records
                if skip:  # control records and aborted data are never delivered
                    for offset in range(first, last + 1):
                        records[offset] = InFlightRecord(RecordState.ARCHIVED)
                    self.archived_total += last - first + 1
                else:  # what _take does to a new record, a batch at a time (the per-record cost of a fetch)
                    acquired = RecordState.ACQUIRED
                    for offset in range(first, last + 1):
                        records[offset] = InFlightRecord(acquired, 1, member_id, acquisition)
                    offsets.extend(range(first, last + 1))
                    budget -= last - first + 1
                    self.delivered += last - first + 1
                self.next_offset = last + 1
        # Which stored batches to return: those holding an acquired offset (redeliveries may sit far below).
        if offsets:
            wanted = sorted(offsets)
            batches = _covering(log, wanted)
            change.acquired = _ranges(wanted, self.records, batch_size, batches)
        if self.next_offset > new_first:
            self._advance()  # archived offsets (markers, aborted data) may lead: the SPSO moves over them
        change.bytes_read = read
        return change, batches

    def _take(self, record: InFlightRecord, member_id: str, acquisition: Acquisition, *, new: bool = False) -> None:
        if not new:
            self.available -= 1
            self.redelivered += 1
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member_id = member_id
        record.lock = acquisition
        self.delivered += 1

    def _aborted_ranges(self, log: ShareLog, upper: int) -> Sequence[AbortedRange]:
        return log.aborted_transactions(self.next_offset, upper)

    # -- acknowledgement (section 6.5) ---------------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AckBatch], delivery_limit: int
    ) -> tuple[ErrorCode, str | None, Change]:
        """Check every batch, then apply them all (or none): the partition's AcknowledgeErrorCode and message."""
        change = Change()
        records = self.records
        acquired = RecordState.ACQUIRED
        plan: list[tuple[int, int, AckBatch]] = []  # (first, last, batch): every batch checked before any applies
        for batch in batches:
            if batch.last_offset < self.start_offset or not self.initialised:
                continue  # already finished (below the SPSO)
            # SharePartition's messages (its per-offset path: state is kept per offset here).
            if batch.last_offset >= self.next_offset:
                which = "first" if batch.first_offset >= self.next_offset else "last"
                return ErrorCode.invalid_request, f"Batch record not found. The {which} offset in request is past " \
                    "acquired records.", change  # fmt: skip
            first = max(batch.first_offset, self.start_offset)
            for offset in range(first, batch.last_offset + 1):
                record = records[offset]
                if record.state is not acquired:
                    return ErrorCode.invalid_record_state, _NOT_ACQUIRED, change
                if record.member_id != member_id:
                    return ErrorCode.invalid_record_state, "Member is not the owner of offset", change
            plan.append((first, batch.last_offset, batch))
        for first, last, batch in plan:
            types = batch.types
            if len(types) == 1 and types[0] == AcknowledgeType.ACCEPT:  # the common case, one type for the range
                change.accepted += last - first + 1
                if first == self.start_offset:  # in order: finished and at the SPSO, so gone at once (section 6.7)
                    for offset in range(first, last + 1):
                        del records[offset]
                    self.start_offset = last + 1
                    continue
                for offset in range(first, last + 1):
                    record = records[offset]  # ACQUIRED (checked above): what _finish does to it
                    record.state = RecordState.ACKNOWLEDGED
                    record.member_id = None
                    record.lock = None
                continue
            for offset in range(first, last + 1):
                record = records[offset]
                kind = types[0] if len(types) == 1 else types[offset - batch.first_offset]
                if kind == AcknowledgeType.ACCEPT:
                    self._finish(record, RecordState.ACKNOWLEDGED)
                    change.accepted += 1
                elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                    change.rejected_records.append((offset, record.delivery_count))
                    self._finish(record, RecordState.ARCHIVED)
                    change.rejected += 1
                elif kind == AcknowledgeType.RELEASE:
                    self._release(record, offset, delivery_limit, change)
                else:
                    change.renewed.append(offset)
        self._advance()
        return ErrorCode.none, None, change

    # -- releases: lock expiry (6.6), a session's end (6.8) -----------------------------------------------------

    def expire(self, acquisition: Acquisition, delivery_limit: int) -> Change:
        """The lock of ``acquisition`` ran out: what it still holds becomes available (or archived at the limit)."""
        change = Change()
        for offset in acquisition.offsets:
            record = self.records.get(offset)
            if record is not None and record.lock is acquisition and record.state is RecordState.ACQUIRED:
                self._release(record, offset, delivery_limit, change)
        self._advance()
        return change

    def release_member(self, member_id: str, delivery_limit: int) -> tuple[Change, set[Acquisition]]:
        """Every record ``member_id`` holds goes back (its share session ended); the locks it held are returned."""
        change = Change()
        locks: set[Acquisition] = set()
        for offset, record in list(self.records.items()):
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                if record.lock is not None:
                    locks.add(record.lock)
                self._release(record, offset, delivery_limit, change)
        self._advance()
        return change, locks

    def renew(self, offsets: Iterable[int], acquisition: Acquisition) -> None:
        for offset in offsets:
            record = self.records[offset]
            record.lock = acquisition
            acquisition.offsets.append(offset)

    def _release(self, record: InFlightRecord, offset: int, delivery_limit: int, change: Change) -> None:
        record.member_id = None
        record.lock = None
        if offset < self.start_offset:  # left below the SPSO by a moved log start (6.9): finished, not redelivered
            self._finish(record, RecordState.ARCHIVED)
            del self.records[offset]
        elif record.delivery_count >= delivery_limit:
            self._finish(record, RecordState.ARCHIVED)
            change.archived.append((offset, record.delivery_count))
        else:
            record.state = RecordState.AVAILABLE
            self.available += 1
            change.released.append(offset)

    def _finish(self, record: InFlightRecord, state: RecordState) -> None:
        if record.state is RecordState.AVAILABLE:
            self.available -= 1
        record.state = state
        record.member_id = None
        record.lock = None
        if state is RecordState.ARCHIVED:
            self.archived_total += 1

    def _advance(self) -> None:
        """Section 6.7: the SPSO moves over the finished run at its start."""
        records = self.records
        start, end = self.start_offset, self.next_offset
        get, acknowledged, archived = records.get, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
        while start < end:
            record = get(start)
            if record is None or (record.state is not acknowledged and record.state is not archived):
                break  # _FINISHED, by identity (the per-record cost of every acknowledgement)
            del records[start]
            start += 1
        self.start_offset = start


def _covering(log: ShareLog, offsets: list[int]) -> list[LoggedBatch]:
    """The stored batches holding any of ``offsets`` (ascending), each once; a bisection per batch, not a step per
    offset."""
    found: list[LoggedBatch] = []
    index, count = 0, len(offsets)
    for batch in log.batches_from(offsets[0]):
        index = bisect_left(offsets, batch.base_offset, index)
        if index >= count:
            break
        if offsets[index] <= batch.last_offset:
            found.append(batch)
            index = bisect_right(offsets, batch.last_offset, index)
    return found


def _ranges(
    offsets: list[int], records: dict[int, InFlightRecord], batch_size: int, batches: list[LoggedBatch]
) -> list[tuple[int, int, int]]:
    """AcquiredRecords: contiguous offsets of one delivery count, cut after about ``batch_size`` records at a log
    batch boundary (section 6.4 step 3)."""
    ends = {batch.last_offset for batch in batches}
    ranges: list[tuple[int, int, int]] = []
    first = previous = offsets[0]
    count = records[first].delivery_count
    for offset in offsets[1:]:
        delivery = records[offset].delivery_count
        cut = batch_size > 0 and previous - first + 1 >= batch_size and previous in ends
        if offset != previous + 1 or delivery != count or cut:
            ranges.append((first, previous, count))
            first, count = offset, delivery
        previous = offset
    ranges.append((first, previous, count))
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
