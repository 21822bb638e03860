"""One partition's log: stored batches, offsets, retention and idempotent-producer state.

Batches are kept whole, as the producer sent them, so a Fetch answers with the
bytes a Produce stored. With a single replica the high watermark and the log end
offset are the same number; the last stable offset is too unless a transaction is
open (transactions.py, docs/spec/transactions.md section 4.4).
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.storage.control import Marker, build_marker, read_marker
from broker.storage.records import (
    NO_SEQUENCE,
    BatchHeader,
    InvalidBatch,
    TimestampIndex,
    read_header,
    read_index,
    restamp,
    validate_client_batch,
)
from broker.storage.transactions import AbortedTxn, ActiveProducer, TransactionState

# Kafka keeps the metadata of the last five batches per producer to answer retries (ProducerStateEntry).
_RETAINED_BATCHES = 5
_NO_EPOCH = -1
LEADER_EPOCH = 0
_INT32_MAX = 2**31 - 1


@dataclass(slots=True, frozen=True)
class StoredBatch:
    """A batch as stored: its bytes and its header, both restamped with the broker's base offset, and for a
    compressed batch the timestamp index its validation left (ListOffsets never decompresses a stored batch)."""

    data: bytes
    header: BatchHeader
    index: TimestampIndex | None = None

    @property
    def charge(self) -> int:
        """What it holds against the storage budget: its bytes and its index."""
        return len(self.data) + (self.index.nbytes if self.index is not None else 0)

    def timestamps(self) -> TimestampIndex | None:
        """Its timestamp index: kept for a compressed batch, read in place for an uncompressed one."""
        return self.index if self.index is not None else read_index(self.header, self.data)

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    # What a share-partition asks of a batch (coordinator/modern/share/partition.py ``LoggedBatch``).
    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def producer_id(self) -> int:
        return self.header.producer_id


@dataclass(slots=True, frozen=True)
class _SequenceRange:
    first_sequence: int
    last_sequence: int
    base_offset: int


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int = _NO_EPOCH
    last_timestamp: int = -1  # ProducerStateEntry.lastTimestamp: DescribeProducers reports it (section 6.3)
    batches: collections.deque[_SequenceRange] = field(
        default_factory=lambda: collections.deque(maxlen=_RETAINED_BATCHES)
    )

    def duplicate_of(self, header: BatchHeader) -> _SequenceRange | None:
        if header.producer_epoch != self.epoch:
            return None
        for stored in self.batches:
            if stored.first_sequence == header.base_sequence and stored.last_sequence == header.last_sequence:
                return stored
        return None

    def check(self, header: BatchHeader) -> None:
        """ProducerAppendInfo's epoch and sequence checks for a client append."""
        if header.producer_epoch < self.epoch:
            raise InvalidBatch(
                ErrorCode.invalid_producer_epoch,
                f"epoch {header.producer_epoch} of producer {header.producer_id} is smaller than "
                f"the last seen epoch {self.epoch}",
            )
        first = header.base_sequence
        if header.producer_epoch != self.epoch:
            if first != 0 and self.epoch != _NO_EPOCH:
                raise InvalidBatch(
                    ErrorCode.out_of_order_sequence_number,
                    f"invalid sequence number for new epoch of producer {header.producer_id}: {first} (expected 0)",
                )
            return
        last = self.batches[-1].last_sequence if self.batches else NO_SEQUENCE
        # With no retained state (all its batches gone to retention) Kafka accepts any sequence.
        if self.batches and not (first == last + 1 or (first == 0 and last == _INT32_MAX)):
            raise InvalidBatch(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence number for producer {header.producer_id}: {first} (incoming), "
                f"{last} (current end sequence)",
            )

    def record(self, header: BatchHeader, base_offset: int) -> None:
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.batches.append(_SequenceRange(header.base_sequence, header.last_sequence, base_offset))
        self.last_timestamp = header.max_timestamp


class StorageFull(Exception):
    """The broker-wide cap on stored bytes would be exceeded."""


class StorageBudget:
    """Bytes stored across every partition, against the broker-wide cap."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0

    def reserve(self, size: int) -> None:
        if self.max_bytes >= 0 and self.used + size > self.max_bytes:
            raise StorageFull(
                f"storing {size} more bytes would exceed the broker's cap of {self.max_bytes} "
                f"({self.used} stored); lower retention or raise --storage-max-bytes"
            )
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size


class PartitionDisk(Protocol):
    """Where a durable partition's batches and log start offset go (``topics.py`` wires the data directory's)."""

    def appended(self, base_offset: int, data: bytes) -> None: ...

    def start_moved(self, log_start_offset: int) -> None: ...


class PartitionLog:
    def __init__(self, budget: StorageBudget) -> None:
        self._budget = budget
        # Issue 27: the data directory's side of this partition; None for memory only (nothing more to do then).
        self.disk: PartitionDisk | None = None
        self._batches: list[StoredBatch] = []
        # Parallel to _batches: last offsets to find a batch by bisection, and where each batch starts in
        # the log's byte stream (positions never reused, so bytes past any batch are one subtraction).
        self._last_offsets: list[int] = []
        self._starts: list[int] = []
        self._end = 0
        self._producers: dict[int, _ProducerEntry] = {}
        self._transactions = TransactionState()
        self._charged = 0  # against the budget: size_bytes and the compressed batches' timestamp indexes
        self.log_start_offset = 0
        self.next_offset = 0
        self.size_bytes = 0
        # The leader epoch every batch appended now is stamped with (Partition's leaderEpoch, which
        # UnifiedLog.appendAsLeader writes into partitionLeaderEpoch): 0 on one node, the layout's on several
        # (broker/cluster/layout.py stamps it at each election).
        self.leader_epoch = LEADER_EPOCH

    @property
    def high_watermark(self) -> int:
        return self.next_offset

    @property
    def last_stable_offset(self) -> int:
        """transactions.md section 4.4: the oldest open transaction's first offset, bounded by the high watermark
        and never below the log start offset; the high watermark when no transaction is open."""
        first_unstable = self._transactions.first_unstable_offset()
        if first_unstable is None:
            return self.next_offset
        return max(self.log_start_offset, min(first_unstable, self.high_watermark))

    def append(self, header: BatchHeader, batch: bytes, index: TimestampIndex | None = None) -> int:
        """Store a validated client batch and return its base offset (an earlier one for a duplicate retry).

        ``index``: what validate_client_batch returned for it (a compressed batch's timestamp index).
        """
        entry: _ProducerEntry | None = None
        if header.has_producer_id:
            entry = self._producers.get(header.producer_id)
            if entry is not None:
                duplicate = entry.duplicate_of(header)
                if duplicate is not None:
                    return duplicate.base_offset
                entry.check(header)
            self._transactions.check_data(header)
        base_offset = self._store(header, batch, index)
        if header.has_producer_id:
            if entry is None:
                entry = self._producers[header.producer_id] = _ProducerEntry()
            entry.record(header, base_offset)
            self._transactions.data_appended(header, base_offset)
        return base_offset

    def _index_of(self, offset: int) -> int:
        """The index of the batch holding ``offset`` (or the first one after it)."""
        return bisect.bisect_left(self._last_offsets, offset)

    def bytes_from(self, offset: int) -> int:
        """Bytes a fetch at ``offset`` could return now (what a delayed fetch counts toward min_bytes)."""
        index = self._index_of(offset)
        return self._end - self._starts[index] if index < len(self._starts) else 0

    def read(self, offset: int, max_bytes: int, *, at_least_one: bool) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``.

        ``at_least_one`` is KIP-74: the first partition of a response returns its
        first batch even when it is larger than the limit, so a consumer can
        always make progress.
        """
        chunks: list[bytes] = []
        total = 0
        batches = self._batches
        for index in range(self._index_of(offset), len(batches)):
            stored = batches[index]
            size = len(stored.data)
            if total + size > max_bytes and not (at_least_one and not chunks):
                break
            chunks.append(stored.data)
            total += size
        return b"".join(chunks)

    def batches_from(self, offset: int) -> Iterator[StoredBatch]:
        """The stored batches from the one holding ``offset`` on (a share-partition's acquisition, section 6.4 of
        docs/spec/share-groups.md)."""
        batches = self._batches
        for index in range(self._index_of(offset), len(batches)):
            yield batches[index]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is at least ``timestamp``."""
        for stored in self._batches:
            if stored.max_timestamp < timestamp:
                continue
            index = stored.timestamps()
            if index is None:  # records that do not parse (never stored): the batch is the best it can say
                return stored.base_offset, stored.max_timestamp
            found = index.first_at_or_after(stored.base_offset, timestamp)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record carrying the largest timestamp."""
        best: StoredBatch | None = None
        for stored in self._batches:
            if best is None or stored.max_timestamp > best.max_timestamp:
                best = stored
        if best is None:
            return None
        index = best.timestamps()
        found = index.first_at_or_after(best.base_offset, best.max_timestamp) if index is not None else None
        if found is None or found[1] != best.max_timestamp:
            return best.last_offset, best.max_timestamp
        return found

    def enforce_retention(self, now_ms: int, retention_ms: int, retention_bytes: int) -> int:
        """Drop whole batches from the front as Kafka drops segments (a prefix only); returns how many went."""
        dropped = 0
        remaining = self.size_bytes
        freed = 0
        for stored in self._batches:
            too_big = retention_bytes >= 0 and remaining - len(stored.data) >= retention_bytes
            too_old = retention_ms >= 0 and now_ms - stored.max_timestamp > retention_ms
            if not (too_big or too_old):
                break
            remaining -= len(stored.data)
            freed += stored.charge
            dropped += 1
        if dropped:
            del self._batches[:dropped], self._last_offsets[:dropped], self._starts[:dropped]
            self._budget.release(freed)
            self._charged -= freed
            self.size_bytes = remaining
            # Never backward: DeleteRecords may have moved it into the middle of the first batch left.
            first = self._batches[0].base_offset if self._batches else self.next_offset
            self.log_start_offset = max(self.log_start_offset, first)
            self._forget_producers_without_batches()
            if self.disk is not None:
                self.disk.start_moved(self.log_start_offset)
        return dropped

    def _forget_producers_without_batches(self) -> None:
        # Kafka removes a producer's state once none of its batches is left in the log.
        for producer_id, entry in list(self._producers.items()):
            if entry.batches and entry.batches[-1].base_offset < self.log_start_offset:
                del self._producers[producer_id]
        self._transactions.truncate_before(self.log_start_offset)

    def release(self) -> None:
        """Give every stored byte back to the budget (the topic is being deleted)."""
        self._budget.release(self._charged)
        self._charged = 0
        self._batches.clear()
        self._last_offsets.clear()
        self._starts.clear()
        self.size_bytes = 0

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (Kafka's
        ``UnifiedLog.maybeIncrementLogStartOffset``, never backward) and drop the batches wholly below it, as Kafka
        deletes the segments the new start leaves behind. The caller checks ``offset`` against the high watermark.
        Returns the log start offset, the answer's low watermark."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            dropped = bisect.bisect_left(self._last_offsets, offset)  # batches whose last offset is below it
            if dropped:
                freed = sum(stored.charge for stored in self._batches[:dropped])
                self.size_bytes -= sum(len(stored.data) for stored in self._batches[:dropped])
                del self._batches[:dropped], self._last_offsets[:dropped], self._starts[:dropped]
                self._budget.release(freed)
                self._charged -= freed
            self._forget_producers_without_batches()
            if self.disk is not None:
                self.disk.start_moved(self.log_start_offset)
        return self.log_start_offset

    # -- transactions (docs/spec/transactions.md section 4) ----------------------------------------

    def _store(self, header: BatchHeader, batch: bytes, index: TimestampIndex | None) -> int:
        """Put a checked batch at the log end, restamped with its offset and the leader epoch; its base offset."""
        base_offset = self.next_offset
        stored = StoredBatch(
            restamp(batch, base_offset, self.leader_epoch),
            replace(header, base_offset=base_offset, partition_leader_epoch=self.leader_epoch),
            index,
        )
        self._budget.reserve(stored.charge)
        if self.disk is not None:  # written before it is stored or answered (cluster-and-durability.md 3.4)
            try:
                self.disk.appended(base_offset, stored.data)
            except BaseException:
                self._budget.release(stored.charge)
                raise
        self._charged += stored.charge
        self._batches.append(stored)
        self._last_offsets.append(stored.last_offset)
        self._starts.append(self._end)
        self._end += len(batch)
        self.next_offset = stored.last_offset + 1
        self.size_bytes += len(batch)
        return base_offset

    def recover(self, batches: Iterable[bytes], log_start_offset: int) -> None:
        """Rebuild this (empty, diskless) log from its stored batches, through the code that appended them: the
        producers' sequences and epochs, open transactions, the last stable offset and the aborted index come out
        as they were (cluster-and-durability.md 3.5 step 2)."""
        for data in batches:
            header = read_header(data)
            if not self._batches:
                self.log_start_offset = header.base_offset
            self.next_offset = header.base_offset  # the same offset it had: _store stamps it again
            # ... and the epoch it had: a recovered batch keeps the leader epoch it was appended in.
            self.leader_epoch = max(header.partition_leader_epoch, LEADER_EPOCH)
            marker = read_marker(header, data) if header.is_control else None
            try:
                if marker is not None:
                    self.append_marker(marker, header.max_timestamp)
                else:
                    index = None if header.compression == 0 else validate_client_batch(header, data, _INT32_MAX)
                    self.append(header, data, index)
            except InvalidBatch:
                self._store(header, data, None)  # what was stored stays stored, whatever a check now says
        if log_start_offset > self.log_start_offset:
            self.delete_records_before(log_start_offset)
        elif not self._batches:
            self.log_start_offset = self.next_offset = max(self.next_offset, log_start_offset)

    def epoch_starts(self) -> list[tuple[int, int]]:
        """(epoch, first offset) of each leader epoch the stored batches carry, oldest first: the leader-epoch cache
        UnifiedLog rebuilds from its segments when it has no checkpoint (a recovered log on several nodes)."""
        starts: list[tuple[int, int]] = []
        for stored in self._batches:
            epoch = stored.header.partition_leader_epoch
            if epoch >= 0 and (not starts or epoch > starts[-1][0]):
                starts.append((epoch, stored.base_offset))
        return starts

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """UnifiedLog.hasOngoingTransaction: what Produce-time verification asks (section 4.3)."""
        return self._transactions.open_first_offset(producer_id) is not None

    def append_marker(self, marker: Marker, timestamp_ms: int, *, transaction_version: int = 1) -> int:
        """Append the COMMIT or ABORT marker that ends ``marker.producer_id``'s transaction here; its offset.

        ProducerAppendInfo.appendEndTxnMarker's checks, in its order (section 4.2): the producer epoch (TV1: not
        below the stored one; TV2: above it, an equal epoch with no open transaction being a retried marker),
        then the coordinator epoch. The marker takes one offset even when no transaction is open here (item 32).
        Raises InvalidBatch (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) and stores nothing then.
        """
        producer_id, epoch = marker.producer_id, marker.producer_epoch
        entry = self._producers.get(producer_id)
        stored_epoch = entry.epoch if entry is not None else _NO_EPOCH
        ongoing = self.has_ongoing_transaction(producer_id)
        if epoch < stored_epoch or (transaction_version >= 2 and epoch == stored_epoch and ongoing):
            raise InvalidBatch(
                ErrorCode.invalid_producer_epoch,
                f"epoch {epoch} of the marker for producer {producer_id} is "
                f"{'not above' if transaction_version >= 2 else 'below'} the last seen epoch {stored_epoch}",
            )
        self._transactions.check_marker(producer_id, marker.coordinator_epoch)
        data = build_marker(marker.type, producer_id, epoch, marker.coordinator_epoch, timestamp_ms)
        offset = self._store(read_header(data), data, None)
        if entry is None:
            entry = self._producers[producer_id] = _ProducerEntry()
        if entry.epoch != epoch:
            # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch forgets the batches, and the producer's
            # next batch must start at sequence 0 (known "no sequence yet" at this epoch, unlike an entry whose
            # batches all went to retention, which accepts any sequence).
            entry.epoch = epoch
            entry.batches.clear()
            entry.batches.append(_SequenceRange(NO_SEQUENCE, NO_SEQUENCE, offset))
        entry.last_timestamp = timestamp_ms
        self._transactions.marker_appended(marker, offset)
        return offset

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this partition keeps state for, idempotent and transactional, by producer id: what
        DescribeProducers reports (``UnifiedLog.activeProducers``, transactions spec section 6.3)."""
        return [
            ActiveProducer(
                producer_id,
                entry.epoch,
                entry.batches[-1].last_sequence if entry.batches else NO_SEQUENCE,
                entry.last_timestamp,
                self._transactions.coordinator_epoch(producer_id),
                self._transactions.current_txn_start_offset(producer_id),
            )
            for producer_id, entry in sorted(self._producers.items())
        ]

    def marker_at(self, offset: int) -> Marker | None:
        """The marker stored at ``offset``, or None if no marker is there (read back with the batch reader)."""
        index = self._index_of(offset)
        if index >= len(self._batches) or self._batches[index].base_offset != offset:
            return None
        stored = self._batches[index]
        return read_marker(stored.header, stored.data)

    def last_fetchable_offset(self, *, read_committed: bool) -> int:
        """Where a fetch or ListOffsets LATEST stops: the LSO for READ_COMMITTED, else the high watermark
        (sections 4.6 and 4.7)."""
        return self.last_stable_offset if read_committed else self.high_watermark

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), in ABORT-marker order (section 4.6)."""
        return self._transactions.aborted_between(fetch_offset, upper_bound)

    def read_committed(self, offset: int, max_bytes: int, *, at_least_one: bool) -> tuple[bytes, list[AbortedTxn]]:
        """A READ_COMMITTED fetch (LocalLog.read with FetchIsolation.TXN_COMMITTED, section 4.6): whole batches
        from the one holding ``offset``, none at or past the LSO (a batch boundary), and the aborted transactions
        those batches overlap. Records are returned unfiltered, aborted data and markers included: clients filter.
        """
        lso = self.last_stable_offset
        chunks: list[bytes] = []
        total = 0
        upper_bound = offset  # the offset just after the returned data
        batches = self._batches
        for index in range(self._index_of(offset), len(batches)):
            stored = batches[index]
            if stored.base_offset >= lso:
                break
            size = len(stored.data)
            if total + size > max_bytes and not (at_least_one and not chunks):
                break
            chunks.append(stored.data)
            total += size
            upper_bound = stored.last_offset + 1
        return b"".join(chunks), self._transactions.aborted_between(offset, upper_bound)
