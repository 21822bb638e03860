"""Transactions in the partition log: markers, the last stable offset, the aborted-transaction index.

docs/spec/transactions.md section 4 and the "Log, LSO, Fetch, ListOffsets" items of its section 9
checklist (cited as item N), at the storage level: the Fetch and ListOffsets APIs are not wired to them yet.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER, ControlRecord  # type: ignore[import-untyped]
from aiokafka.record.default_records import DefaultRecordBatch  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode

from broker.storage.control import Marker, MarkerType, build_marker, parse_marker
from broker.storage.partition_log import PartitionLog, StorageBudget
from broker.storage.records import InvalidBatch, read_header, split_batches, validate_client_batch
from broker.storage.transactions import AbortedTxn
from tests.storage import BASE_TIMESTAMP, crc_is_valid, make_batch

E = ErrorCode
ALL = 1 << 30
A, B = 1000, 2000
NOW = BASE_TIMESTAMP + 60_000


def append(log: PartitionLog, batch: bytes) -> int:
    ((header, data),) = split_batches(batch)
    return log.append(header, data, validate_client_batch(header, data, 1_048_588))


def txn(count: int, sequence: int, *, producer_id: int = A, epoch: int = 0) -> bytes:
    return make_batch(count, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, transactional=True)


def commit(log: PartitionLog, producer_id: int = A, epoch: int = 0, **kwargs: int) -> int:
    return log.append_marker(Marker(MarkerType.COMMIT, producer_id, epoch, 0), NOW, **kwargs)


def abort(log: PartitionLog, producer_id: int = A, epoch: int = 0, **kwargs: int) -> int:
    return log.append_marker(Marker(MarkerType.ABORT, producer_id, epoch, 0), NOW, **kwargs)


def refused(log: PartitionLog, action: Callable[[], object]) -> ErrorCode:
    before = (log.next_offset, log.last_stable_offset, log.read(0, ALL, at_least_one=True))
    with pytest.raises(InvalidBatch) as caught:
        action()
    assert (log.next_offset, log.last_stable_offset, log.read(0, ALL, at_least_one=True)) == before, "nothing stored"
    return caught.value.error


def offsets_of(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in a fetch answer."""
    return [(h.base_offset, h.base_offset + h.last_offset_delta) for h, _ in split_batches(records)]


@pytest.fixture
def log() -> PartitionLog:
    return PartitionLog(StorageBudget(-1))


# -- the marker batch (section 4.1) -----------------------------------------------------------------


def test_commit_marker_bytes_are_kafkas() -> None:
    """Item 65."""
    batch = build_marker(MarkerType.COMMIT, 42, 3, 0, NOW)
    header = read_header(batch)
    assert len(batch) == header.size == 78  # 61 bytes of header, one 17-byte record
    assert header.attributes == 0x30 and header.is_transactional and header.is_control
    assert (header.base_offset, header.magic, header.last_offset_delta, header.records_count) == (0, 2, 0, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    assert header.base_timestamp == header.max_timestamp == NOW
    assert crc_is_valid(batch)
    # The one record: length 16, attributes 0, timestamp and offset deltas 0, key (4 bytes), value (6), no headers.
    assert batch[61:] == bytes([32, 0, 0, 0, 8]) + b"\x00\x00\x00\x01" + bytes([12]) + b"\x00\x00" + bytes(4) + b"\x00"


def test_abort_marker_key_and_coordinator_epoch() -> None:
    batch = build_marker(MarkerType.ABORT, 42, 3, 7, NOW)
    assert batch[66:70] == b"\x00\x00\x00\x00"
    assert batch[71:77] == b"\x00\x00" + struct.pack(">i", 7)
    assert parse_marker(batch) == Marker(MarkerType.ABORT, 42, 3, 7)


@pytest.mark.parametrize(("kind", "expected"), [(MarkerType.COMMIT, COMMIT_MARKER), (MarkerType.ABORT, ABORT_MARKER)])
def test_a_client_reads_the_marker_as_kafkas(kind: MarkerType, expected: ControlRecord) -> None:
    batch = DefaultRecordBatch(build_marker(kind, 42, 3, 5, NOW))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, -1)
    (record,) = list(batch)
    assert ControlRecord.parse(record.key) == expected
    assert record.value == struct.pack(">hi", 0, 5)
    assert record.headers == []


def test_the_batch_reader_parses_a_marker_back() -> None:
    batch = build_marker(MarkerType.COMMIT, 42, 3, 0, NOW)
    ((header, data),) = split_batches(batch + make_batch(1)[:20])  # a trailing partial batch is ignored
    assert data == batch and header.is_control
    assert parse_marker(data) == Marker(MarkerType.COMMIT, 42, 3, 0)
    assert parse_marker(make_batch(1)) is None  # not a control batch


def test_a_client_may_not_write_a_marker() -> None:
    """Item 28 at the storage level: the broker's markers are its own."""
    ((header, data),) = split_batches(build_marker(MarkerType.COMMIT, 42, 3, 0, NOW))
    with pytest.raises(InvalidBatch) as caught:
        validate_client_batch(header, data, 1_048_588)
    assert caught.value.error == E.invalid_record


# -- no transactional data: what existing clients see stays the same ---------------------------------------


def test_no_transactional_data_keeps_lso_at_the_high_watermark(log: PartitionLog) -> None:
    append(log, make_batch(3))
    append(log, make_batch(2, producer_id=5, producer_epoch=0, base_sequence=0))
    assert log.last_stable_offset == log.high_watermark == 5
    assert log.last_fetchable_offset(read_committed=True) == log.last_fetchable_offset(read_committed=False) == 5
    records, aborted = log.read_committed(0, ALL, at_least_one=False)
    assert records == log.read(0, ALL, at_least_one=False)
    assert aborted == [] and log.aborted_transactions(0, 5) == []
    assert not log.has_ongoing_transaction(5)


# -- the last stable offset (section 4.4) ----------------------------------------------------------


def test_an_open_transaction_holds_the_lso_until_its_marker(log: PartitionLog) -> None:
    """Item 66."""
    append(log, make_batch(10))
    assert append(log, txn(5, 0)) == 10
    assert (log.last_stable_offset, log.high_watermark) == (10, 15)
    assert log.has_ongoing_transaction(A)
    assert commit(log) == 15
    assert log.last_stable_offset == log.high_watermark == 16
    assert not log.has_ongoing_transaction(A)
    assert log.marker_at(15) == Marker(MarkerType.COMMIT, A, 0, 0)
    assert log.marker_at(10) is None


def test_later_batches_of_an_open_transaction_do_not_move_its_first_offset(log: PartitionLog) -> None:
    append(log, txn(2, 0))
    append(log, make_batch(1))
    append(log, txn(2, 2))
    assert log.last_stable_offset == 0


def test_the_oldest_open_transaction_bounds_the_lso(log: PartitionLog) -> None:
    """Item 67."""
    append(log, make_batch(5))
    append(log, txn(3, 0, producer_id=A))  # 5-7
    append(log, txn(2, 0, producer_id=B))  # 8-9
    assert log.last_stable_offset == 5
    commit(log, B)
    assert log.last_stable_offset == 5
    commit(log, A)
    assert log.last_stable_offset == log.high_watermark == 12


def test_a_marker_with_no_open_transaction_takes_an_offset_and_nothing_else(log: PartitionLog) -> None:
    """Item 32: the partition was added to the transaction but never written."""
    append(log, make_batch(3))
    assert abort(log) == 3
    assert log.last_stable_offset == log.high_watermark == 4
    assert log.aborted_transactions(0, 4) == []


def test_a_duplicate_transactional_batch_returns_its_offset_and_opens_nothing(log: PartitionLog) -> None:
    batch = txn(2, 0)
    append(log, batch)
    commit(log)
    assert append(log, batch) == 0  # a retry of a batch still in the producer's retained metadata
    assert not log.has_ongoing_transaction(A)
    assert log.last_stable_offset == log.high_watermark == 3


# -- producer state at the marker (section 4.2) ----------------------------------------------------


def test_a_non_transactional_batch_of_a_producer_with_an_open_transaction(log: PartitionLog) -> None:
    """Item 27."""
    append(log, txn(2, 0))
    batch = make_batch(1, producer_id=A, producer_epoch=0, base_sequence=2)
    assert refused(log, lambda: append(log, batch)) == E.invalid_txn_state


def test_tv1_sequences_continue_across_transactions_of_one_epoch(log: PartitionLog) -> None:
    """Item 30, TV1."""
    append(log, txn(2, 0))
    commit(log)
    assert append(log, txn(3, 2)) == 3
    commit(log)
    assert log.last_stable_offset == log.high_watermark == 7


def test_tv2_markers_bump_the_epoch_and_restart_sequences(log: PartitionLog) -> None:
    """Items 30 (TV2) and 31."""
    append(log, txn(2, 0, epoch=4))
    commit(log, epoch=5, transaction_version=2)
    late = txn(1, 2, epoch=4)
    assert refused(log, lambda: append(log, late)) == E.invalid_producer_epoch
    out_of_order = txn(1, 2, epoch=5)
    assert refused(log, lambda: append(log, out_of_order)) == E.out_of_order_sequence_number
    assert append(log, txn(1, 0, epoch=5)) == 3
    assert log.last_stable_offset == 3


def test_tv2_marker_at_the_stored_epoch_with_an_open_transaction(log: PartitionLog) -> None:
    append(log, txn(2, 0, epoch=4))
    assert refused(log, lambda: commit(log, epoch=4, transaction_version=2)) == E.invalid_producer_epoch
    assert commit(log, epoch=5, transaction_version=2) == 2
    assert commit(log, epoch=5, transaction_version=2) == 3  # a retried marker: nothing open, accepted


def test_tv1_marker_below_the_stored_epoch(log: PartitionLog) -> None:
    append(log, txn(2, 0, epoch=4))
    assert refused(log, lambda: commit(log, epoch=3)) == E.invalid_producer_epoch
    assert log.has_ongoing_transaction(A)


def test_a_marker_from_an_older_coordinator_is_fenced(log: PartitionLog) -> None:
    append(log, txn(1, 0))
    log.append_marker(Marker(MarkerType.COMMIT, A, 0, 3), NOW)
    append(log, txn(1, 1))
    stale = Marker(MarkerType.ABORT, A, 0, 2)
    assert refused(log, lambda: log.append_marker(stale, NOW)) == E.transaction_coordinator_fenced
    log.append_marker(Marker(MarkerType.ABORT, A, 0, 3), NOW)
    assert not log.has_ongoing_transaction(A)


def test_a_marker_for_an_unknown_producer_sets_its_epoch(log: PartitionLog) -> None:
    commit(log, epoch=2)
    assert refused(log, lambda: append(log, txn(1, 0, epoch=1))) == E.invalid_producer_epoch
    assert refused(log, lambda: append(log, txn(1, 4, epoch=2))) == E.out_of_order_sequence_number
    assert append(log, txn(1, 0, epoch=2)) == 1


# -- READ_COMMITTED fetch and the aborted index (sections 4.5, 4.6) ---------------------------------------


def test_read_committed_stops_below_the_lso(log: PartitionLog) -> None:
    """Items 68 and 69."""
    append(log, make_batch(4))  # 0-3
    append(log, make_batch(6))  # 4-9
    append(log, txn(5, 0))  # 10-14
    assert (log.last_stable_offset, log.high_watermark) == (10, 15)
    records, aborted = log.read_committed(0, ALL, at_least_one=False)
    assert offsets_of(records) == [(0, 3), (4, 9)]
    assert aborted == []
    assert log.read_committed(12, ALL, at_least_one=True) == (b"", [])
    assert log.read_committed(10, ALL, at_least_one=True) == (b"", [])
    assert offsets_of(log.read(12, ALL, at_least_one=True)) == [(10, 14)]  # read_uncommitted sees it


def test_read_committed_honours_max_bytes_and_kip_74(log: PartitionLog) -> None:
    first, second = make_batch(3), make_batch(3)
    append(log, first)
    append(log, second)
    assert log.read_committed(0, len(first) - 1, at_least_one=False) == (b"", [])
    records, _ = log.read_committed(0, len(first) - 1, at_least_one=True)
    assert offsets_of(records) == [(0, 2)]


def aborted_20_to_24(log: PartitionLog) -> None:
    append(log, make_batch(20))  # 0-19
    append(log, txn(5, 0))  # 20-24
    assert abort(log) == 25
    append(log, make_batch(2))  # 26-27


def test_an_aborted_transaction_is_listed_with_its_data_and_marker(log: PartitionLog) -> None:
    """Item 70."""
    aborted_20_to_24(log)
    records, aborted = log.read_committed(0, ALL, at_least_one=False)
    assert offsets_of(records) == [(0, 19), (20, 24), (25, 25), (26, 27)]
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(A, 20)]
    assert aborted == [AbortedTxn(A, 20, 25, 26)]
    assert records == log.read(0, ALL, at_least_one=False)  # unfiltered: the client filters


def test_a_fetch_inside_an_aborted_transaction_still_lists_it(log: PartitionLog) -> None:
    """Item 71."""
    aborted_20_to_24(log)
    records, aborted = log.read_committed(22, ALL, at_least_one=False)
    assert offsets_of(records)[0] == (20, 24)
    assert aborted == [AbortedTxn(A, 20, 25, 26)]


def test_a_fetch_past_or_before_an_aborted_transaction_does_not_list_it(log: PartitionLog) -> None:
    aborted_20_to_24(log)
    assert log.read_committed(26, ALL, at_least_one=False)[1] == []
    first, _ = split_batches(log.read(0, ALL, at_least_one=False))[0]
    records, aborted = log.read_committed(0, first.size, at_least_one=False)  # only offsets 0-19
    assert offsets_of(records) == [(0, 19)] and aborted == []


def test_read_uncommitted_returns_aborted_data_and_markers(log: PartitionLog) -> None:
    """Item 72 at the storage level (the API answers AbortedTransactions null)."""
    aborted_20_to_24(log)
    headers = [h for h, _ in split_batches(log.read(0, ALL, at_least_one=False))]
    assert [(h.base_offset, h.is_transactional, h.is_control) for h in headers] == [
        (0, False, False),
        (20, True, False),
        (25, True, True),
        (26, False, False),
    ]


def test_only_aborted_transactions_are_listed_in_marker_order(log: PartitionLog) -> None:
    """Item 73: B's abort comes first, though A's transaction started first; A's commit is never listed."""
    append(log, txn(2, 0, producer_id=A))  # 0-1
    append(log, txn(2, 0, producer_id=B))  # 2-3
    abort(log, B)  # 4: A still open, so the LSO after it is A's first offset
    abort(log, A)  # 5
    append(log, txn(1, 2, producer_id=A))  # 6
    commit(log, A)  # 7
    _, aborted = log.read_committed(0, ALL, at_least_one=False)
    assert aborted == [AbortedTxn(B, 2, 4, 0), AbortedTxn(A, 0, 5, 6)]
    assert log.last_stable_offset == log.high_watermark == 8


def test_aborted_then_committed_transactions_of_one_producer(log: PartitionLog) -> None:
    """Item 78's broker side: both markers are in the answer, so a client drops only the aborted records."""
    append(log, txn(2, 0))  # 0-1
    abort(log)  # 2
    append(log, txn(2, 2))  # 3-4
    commit(log)  # 5
    records, aborted = log.read_committed(0, ALL, at_least_one=False)
    assert offsets_of(records) == [(0, 1), (2, 2), (3, 4), (5, 5)]
    assert aborted == [AbortedTxn(A, 0, 2, 3)]


# -- ListOffsets (section 4.7) ---------------------------------------------------------------------


def test_last_fetchable_offset_by_isolation(log: PartitionLog) -> None:
    """Item 75: LATEST is the LSO under READ_COMMITTED, the high watermark otherwise; EARLIEST is unaffected."""
    append(log, make_batch(4))
    append(log, txn(2, 0))
    assert log.last_fetchable_offset(read_committed=True) == 4
    assert log.last_fetchable_offset(read_committed=False) == 6
    assert log.log_start_offset == 0


def test_a_timestamp_match_at_or_past_the_lso(log: PartitionLog) -> None:
    """Item 76 at the storage level: the match is at or past the last fetchable offset, which the API turns
    into offset -1 under READ_COMMITTED."""
    append(log, make_batch(2, timestamps=[BASE_TIMESTAMP, BASE_TIMESTAMP + 1]))
    append(log, make_batch(1, producer_id=A, producer_epoch=0, base_sequence=0, transactional=True,
                           timestamps=[BASE_TIMESTAMP + 10]))  # fmt: skip
    found = log.offset_for_timestamp(BASE_TIMESTAMP + 5)
    assert found == (2, BASE_TIMESTAMP + 10)
    assert found[0] >= log.last_fetchable_offset(read_committed=True)
    assert found[0] < log.last_fetchable_offset(read_committed=False)


# -- retention and DeleteRecords -----------------------------------------------------------------


def test_delete_records_drops_aborted_entries_below_the_log_start(log: PartitionLog) -> None:
    aborted_20_to_24(log)
    log.delete_records_before(25)
    assert log.aborted_transactions(0, 100) == [AbortedTxn(A, 20, 25, 26)]  # its marker is still there
    log.delete_records_before(26)
    assert log.aborted_transactions(0, 100) == []


def test_the_lso_never_falls_below_the_log_start(log: PartitionLog) -> None:
    append(log, txn(2, 0))  # 0-1, open
    append(log, make_batch(3))  # 2-4
    log.delete_records_before(3)
    assert log.last_stable_offset == 3
    commit(log)
    assert log.last_stable_offset == log.high_watermark == 6
