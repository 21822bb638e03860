"""One partition's transaction state: open transactions, coordinator epochs and the aborted-transaction index.

Kafka keeps the first two in ``ProducerStateManager`` (``ProducerStateEntry.currentTxnFirstOffset`` and
``coordinatorEpoch``, the ``ongoingTxns`` map that gives the first unstable offset) and the third in
``TransactionIndex`` (one per segment). docs/spec/transactions.md sections 4.2, 4.4 and 4.5. The producer's
epoch and sequences stay in partition_log.py's producer entries: this module only knows which producers have a
transaction open here, from which offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.storage.control import Marker, MarkerType
from broker.storage.records import BatchHeader, InvalidBatch

NO_COORDINATOR_EPOCH = -1


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An entry of the aborted-transaction index (Kafka's ``AbortedTxn``): section 4.5."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO once this transaction ended (ProducerStateManager.lastStableOffset)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended here (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """One producer's state on a partition, read-only, as DescribeProducers reports it (section 6.3)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 when no batch of the current epoch is remembered
    last_timestamp: int  # of its last batch or marker here
    coordinator_epoch: int  # -1 before any marker
    current_txn_start_offset: int  # the first offset of its open transaction here, -1 when none is open


class TransactionState:
    """Which producers have a transaction open on the partition, and the aborted ones, in ABORT-marker order."""

    def __init__(self) -> None:
        # pid -> first offset of its open transaction. Few producers write one partition at a time, so the oldest
        # is found by a scan where Kafka keeps a TreeMap by first offset.
        self._open: dict[int, int] = {}
        self._coordinator_epochs: dict[int, int] = {}
        self._aborted: list[AbortedTxn] = []

    def open_first_offset(self, producer_id: int) -> int | None:
        """The first offset of the producer's open transaction here (``UnifiedLog.hasOngoingTransaction``)."""
        return self._open.get(producer_id)

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of the producer's last marker here, -1 before any (``ProducerStateEntry``)."""
        return self._coordinator_epochs.get(producer_id, NO_COORDINATOR_EPOCH)

    def current_txn_start_offset(self, producer_id: int) -> int:
        """``ProducerStateEntry.currentTxnFirstOffset`` as DescribeProducers reports it: -1 when none is open."""
        return self._open.get(producer_id, -1)

    def check_data(self, header: BatchHeader) -> None:
        """ProducerAppendInfo.appendDataBatch, after the epoch and sequence checks: a producer with a transaction
        open here may only write transactional batches (section 4.2; checklist item 27)."""
        if header.producer_id in self._open and not header.is_transactional:
            raise InvalidBatch(
                ErrorCode.invalid_txn_state,
                f"expected transactional write from producer {header.producer_id} at offset "
                f"{self._open[header.producer_id]}",
            )

    def data_appended(self, header: BatchHeader, base_offset: int) -> None:
        """A transactional batch opens the producer's transaction here unless one is open (section 4.2)."""
        if header.is_transactional and header.producer_id not in self._open:
            self._open[header.producer_id] = base_offset

    def check_marker(self, producer_id: int, coordinator_epoch: int) -> None:
        """ProducerAppendInfo.appendEndTxnMarker: a marker from an older coordinator is fenced (section 4.2)."""
        stored = self._coordinator_epochs.get(producer_id, NO_COORDINATOR_EPOCH)
        if coordinator_epoch < stored:
            raise InvalidBatch(
                ErrorCode.transaction_coordinator_fenced,
                f"invalid coordinator epoch for producer {producer_id}: {coordinator_epoch} "
                f"(zombie), {stored} (current)",
            )

    def marker_appended(self, marker: Marker, offset: int) -> CompletedTxn | None:
        """Close the producer's transaction at the marker's ``offset``; an ABORT goes into the index with the LSO
        that follows it. A marker with no open transaction here ends nothing (section 4.2, checklist item 32)."""
        self._coordinator_epochs[marker.producer_id] = marker.coordinator_epoch
        first = self._open.pop(marker.producer_id, None)
        if first is None:
            return None
        aborted = marker.type == MarkerType.ABORT
        if aborted:
            # ProducerStateManager.lastStableOffset(CompletedTxn): the oldest other open transaction, else past
            # the marker (section 4.4).
            others = self.first_unstable_offset()
            lso = others if others is not None else offset + 1
            self._aborted.append(AbortedTxn(marker.producer_id, first, offset, lso))
        return CompletedTxn(marker.producer_id, first, offset, aborted)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (``ProducerStateManager.firstUnstableOffset``)."""
        return min(self._open.values()) if self._open else None

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions a fetch of [fetch_offset, upper_bound) overlaps, in index order
        (``TransactionIndex.collectAbortedTxns``: last offset at or after the fetch offset, first offset below
        the upper bound; section 4.6)."""
        return [txn for txn in self._aborted if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound]

    def truncate_before(self, log_start_offset: int) -> None:
        """Drop index entries wholly below the log start offset, as deleting segments drops their index
        (section 4.5)."""
        if self._aborted and self._aborted[0].last_offset < log_start_offset:
            self._aborted = [txn for txn in self._aborted if txn.last_offset >= log_start_offset]
