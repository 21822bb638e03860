"""PartitionLog: offsets, reads, timestamp lookups, retention, the storage budget and idempotent producers."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.storage.partition_log import PartitionLog, StorageBudget, StorageFull
from broker.storage.records import InvalidBatch, read_header, restamp, split_batches, validate_client_batch
from tests.storage import BASE_TIMESTAMP, GZIP, base_offset_of, crc_is_valid, make_batch

E = ErrorCode
INT32_MAX = 2**31 - 1


def append(log: PartitionLog, batch: bytes) -> int:
    """What Produce does with one partition's records (a compressed batch's timestamp index stored with it)."""
    ((header, data),) = split_batches(batch)
    index = validate_client_batch(header, data, 1_048_588)
    return log.append(header, data, index)


def refused(log: PartitionLog, batch: bytes) -> ErrorCode:
    before = (log.next_offset, log.size_bytes, log.read(0, 1 << 30, at_least_one=True))
    with pytest.raises(InvalidBatch) as caught:
        append(log, batch)
    assert (log.next_offset, log.size_bytes, log.read(0, 1 << 30, at_least_one=True)) == before, "nothing stored"
    return caught.value.error


def idempotent(count: int, sequence: int, *, producer_id: int = 1, epoch: int = 0) -> bytes:
    return make_batch(count, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


@pytest.fixture
def log() -> PartitionLog:
    return PartitionLog(StorageBudget(-1))


# -- offsets and reads -----------------------------------------------------------------------------


def test_offsets_are_assigned_consecutively_across_batches(log: PartitionLog) -> None:
    batches = [make_batch(1), make_batch(3), make_batch(2)]
    assert [append(log, b) for b in batches] == [0, 1, 4]
    assert log.next_offset == log.high_watermark == log.last_stable_offset == 6
    assert log.log_start_offset == 0
    assert log.size_bytes == sum(map(len, batches))
    stored = log.read(0, 1 << 20, at_least_one=False)
    assert stored == b"".join(restamp(b, o, 0) for b, o in zip(batches, [0, 1, 4], strict=True))


def test_stored_batches_are_restamped_with_a_valid_crc(log: PartitionLog) -> None:
    append(log, make_batch(2))
    batch = make_batch(1)
    append(log, batch)
    stored = log.read(2, 1 << 20, at_least_one=False)
    assert base_offset_of(stored) == 2
    assert crc_is_valid(stored)
    assert stored == restamp(batch, 2, 0)


def test_read_starts_at_the_batch_holding_the_offset(log: PartitionLog) -> None:
    first, second = make_batch(3), make_batch(3)
    append(log, first)
    append(log, second)
    for offset in (3, 4, 5):
        assert log.read(offset, 1 << 20, at_least_one=False) == restamp(second, 3, 0)
    assert log.read(2, 1 << 20, at_least_one=False) == restamp(first, 0, 0) + restamp(second, 3, 0)
    assert log.read(6, 1 << 20, at_least_one=True) == b""  # at the high watermark
    assert log.bytes_from(0) == len(first) + len(second)
    assert log.bytes_from(4) == len(second)
    assert log.bytes_from(6) == 0


def test_read_honours_max_bytes_with_whole_batches(log: PartitionLog) -> None:
    batches = [make_batch(1, value=b"x" * 100) for _ in range(3)]
    for batch in batches:
        append(log, batch)
    size = len(batches[0])
    assert all(len(b) == size for b in batches)
    assert len(log.read(0, 2 * size, at_least_one=False)) == 2 * size
    assert len(log.read(0, 2 * size - 1, at_least_one=False)) == size
    assert len(log.read(0, 3 * size + 1000, at_least_one=False)) == 3 * size
    assert log.read(0, size - 1, at_least_one=False) == b""
    assert log.read(0, 0, at_least_one=False) == b""


def test_at_least_one_returns_a_first_batch_larger_than_max_bytes(log: PartitionLog) -> None:
    big = make_batch(5, value=b"y" * 500)
    append(log, big)
    append(log, make_batch(1))
    assert log.read(0, 10, at_least_one=True) == restamp(big, 0, 0)  # only the first batch
    assert log.read(0, 10, at_least_one=False) == b""
    assert log.read(0, 0, at_least_one=True) == restamp(big, 0, 0)


# -- timestamps ------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, GZIP])
def test_offset_for_timestamp_answers_with_the_record(log: PartitionLog, compression: int) -> None:
    t = BASE_TIMESTAMP
    for stamps in ([t, t + 10], [t + 20, t + 30, t + 40], [t + 50]):
        append(log, make_batch(len(stamps), timestamps=stamps, value=b"v" * 80, compression=compression))
    assert read_header(log.read(2, 1 << 20, at_least_one=True)).compression == compression
    assert log.offset_for_timestamp(0) == (0, t)
    assert log.offset_for_timestamp(t) == (0, t)
    assert log.offset_for_timestamp(t + 1) == (1, t + 10)
    assert log.offset_for_timestamp(t + 25) == (3, t + 30)  # inside the second batch, stored at offset 2
    assert log.offset_for_timestamp(t + 40) == (4, t + 40)
    assert log.offset_for_timestamp(t + 41) == (5, t + 50)
    assert log.offset_for_timestamp(t + 51) is None


def test_offset_for_timestamp_takes_the_first_record_in_offset_order(log: PartitionLog) -> None:
    append(log, make_batch(1, timestamps=[100]))
    append(log, make_batch(3, timestamps=[300, 150, 200]))
    assert log.offset_for_timestamp(160) == (1, 300)  # not (3, 200): offsets, not timestamps, are searched in order
    assert log.offset_for_timestamp(101) == (1, 300)


def test_offset_for_timestamp_on_an_empty_log(log: PartitionLog) -> None:
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None


@pytest.mark.parametrize("compression", [0, GZIP])
def test_max_timestamp_offset_is_the_earliest_record_with_the_largest_timestamp(
    log: PartitionLog, compression: int
) -> None:
    append(log, make_batch(2, timestamps=[10, 20], compression=compression))
    append(log, make_batch(3, timestamps=[40, 50, 50], value=b"m" * 80, compression=compression))
    append(log, make_batch(2, timestamps=[50, 30], compression=compression))
    assert log.max_timestamp_offset() == (3, 50)


def test_max_timestamp_offset_when_the_largest_is_last(log: PartitionLog) -> None:
    append(log, make_batch(2, timestamps=[10, 20]))
    append(log, make_batch(2, timestamps=[5, 60]))
    assert log.max_timestamp_offset() == (3, 60)


# -- retention -------------------------------------------------------------------------------------


def test_retention_by_bytes_drops_whole_batches_from_the_front() -> None:
    budget = StorageBudget(-1)
    log = PartitionLog(budget)
    batches = [make_batch(2, value=b"r" * 100) for _ in range(3)]
    for batch in batches:
        append(log, batch)
    size = len(batches[0])
    # Like Kafka's size retention, a batch goes only if what remains is still at least retention.bytes.
    assert log.enforce_retention(BASE_TIMESTAMP, -1, 3 * size) == 0
    assert log.enforce_retention(BASE_TIMESTAMP, -1, 2 * size + 1) == 0
    assert log.enforce_retention(BASE_TIMESTAMP, -1, 2 * size) == 1
    assert log.log_start_offset == 2
    assert log.size_bytes == budget.used == 2 * size
    assert log.read(0, 1 << 20, at_least_one=False) == restamp(batches[1], 2, 0) + restamp(batches[2], 4, 0)
    assert log.enforce_retention(BASE_TIMESTAMP, -1, 2 * size) == 0
    assert log.enforce_retention(BASE_TIMESTAMP, -1, size) == 1
    assert log.log_start_offset == 4
    assert log.enforce_retention(BASE_TIMESTAMP, -1, 0) == 1
    assert (log.log_start_offset, log.next_offset, log.size_bytes, budget.used) == (6, 6, 0, 0)
    assert log.read(6, 1 << 20, at_least_one=True) == b""
    assert append(log, make_batch(1)) == 6  # offsets carry on


def test_retention_by_time_uses_each_batch_max_timestamp(log: PartitionLog) -> None:
    t = BASE_TIMESTAMP
    append(log, make_batch(2, timestamps=[t, t + 100]))
    append(log, make_batch(1, timestamps=[t + 500]))
    retention = 1000
    assert log.enforce_retention(t + 100 + retention, retention, -1) == 0  # not older than retention yet
    assert log.enforce_retention(t + 100 + retention + 1, retention, -1) == 1
    assert log.log_start_offset == 2
    assert log.offset_for_timestamp(0) == (2, t + 500)
    assert log.enforce_retention(t + 10**9, -1, -1) == 0  # -1: no limit
    assert log.enforce_retention(t + 500 + retention + 1, retention, -1) == 1
    assert log.log_start_offset == log.next_offset == 3


# -- the broker-wide storage budget ----------------------------------------------------------------


def test_storage_full_refuses_and_stores_nothing() -> None:
    batch = make_batch(1, value=b"s" * 50)
    size = len(batch)
    budget = StorageBudget(2 * size)
    first, second = PartitionLog(budget), PartitionLog(budget)
    append(first, batch)
    append(second, batch)  # exactly at the cap
    assert budget.used == 2 * size
    with pytest.raises(StorageFull):
        append(first, batch)
    assert (first.next_offset, first.size_bytes, budget.used) == (1, size, 2 * size)


def test_retention_gives_bytes_back_to_the_budget() -> None:
    batch = make_batch(1, value=b"s" * 50)
    budget = StorageBudget(len(batch))
    log = PartitionLog(budget)
    append(log, batch)
    with pytest.raises(StorageFull):
        append(log, batch)
    log.enforce_retention(BASE_TIMESTAMP, -1, 0)
    assert budget.used == 0
    assert append(log, batch) == 1


def test_release_gives_every_byte_back() -> None:
    batch = make_batch(1, value=b"s" * 50)
    budget = StorageBudget(3 * len(batch))
    doomed, kept = PartitionLog(budget), PartitionLog(budget)
    append(doomed, batch)
    append(doomed, batch)
    append(kept, batch)
    doomed.release()
    assert budget.used == len(batch)
    doomed.release()  # twice gives nothing more back
    assert budget.used == len(batch)
    append(kept, batch)
    append(kept, batch)
    assert budget.used == 3 * len(batch)


def test_no_cap() -> None:
    budget = StorageBudget(-1)
    log = PartitionLog(budget)
    for _ in range(20):
        append(log, make_batch(1, value=b"u" * 1000))
    assert budget.used == log.size_bytes > 20_000


# -- idempotent producers --------------------------------------------------------------------------


def test_duplicate_retry_returns_the_original_offset_and_stores_nothing() -> None:
    budget = StorageBudget(-1)
    log = PartitionLog(budget)
    append(log, make_batch(2))  # a plain batch first, so the idempotent one is not at offset 0
    assert append(log, idempotent(3, 0)) == 2
    assert append(log, idempotent(2, 3)) == 5
    stored = (log.next_offset, log.size_bytes, budget.used, log.read(0, 1 << 20, at_least_one=False))
    assert append(log, idempotent(3, 0)) == 2
    assert append(log, idempotent(2, 3)) == 5
    assert (log.next_offset, log.size_bytes, budget.used, log.read(0, 1 << 20, at_least_one=False)) == stored
    assert append(log, idempotent(1, 5)) == 7


def test_a_duplicate_is_answered_even_when_storage_is_full() -> None:
    batch = idempotent(1, 0)
    log = PartitionLog(StorageBudget(len(batch)))
    assert append(log, batch) == 0
    assert append(log, batch) == 0
    with pytest.raises(StorageFull):
        append(log, idempotent(1, 1))


def test_only_the_last_five_batches_are_recognised_as_duplicates(log: PartitionLog) -> None:
    for sequence in range(6):
        assert append(log, idempotent(1, sequence)) == sequence
    assert append(log, idempotent(1, 1)) == 1  # still retained
    assert refused(log, idempotent(1, 0)) is E.out_of_order_sequence_number


def test_a_partial_overlap_is_not_a_duplicate(log: PartitionLog) -> None:
    append(log, idempotent(3, 0))
    assert refused(log, idempotent(2, 0)) is E.out_of_order_sequence_number


@pytest.mark.parametrize("sequence", [4, 2, 1, 0, INT32_MAX])
def test_sequence_gap_or_rewind_is_out_of_order(log: PartitionLog, sequence: int) -> None:
    append(log, idempotent(3, 0))  # sequences 0..2, next is 3
    assert refused(log, idempotent(1, sequence)) is E.out_of_order_sequence_number
    assert append(log, idempotent(1, 3)) == 3


def test_an_older_epoch_is_fenced(log: PartitionLog) -> None:
    append(log, idempotent(1, 0, epoch=5))
    assert refused(log, idempotent(1, 1, epoch=4)) is E.invalid_producer_epoch
    assert refused(log, idempotent(1, 0, epoch=0)) is E.invalid_producer_epoch


def test_a_new_epoch_must_start_at_sequence_zero(log: PartitionLog) -> None:
    append(log, idempotent(2, 0, epoch=0))
    assert refused(log, idempotent(1, 2, epoch=1)) is E.out_of_order_sequence_number
    assert append(log, idempotent(1, 0, epoch=1)) == 2
    # The bump forgets the old epoch: its retry is fenced, not a duplicate.
    assert refused(log, idempotent(2, 0, epoch=0)) is E.invalid_producer_epoch
    assert append(log, idempotent(1, 1, epoch=1)) == 3


def test_an_unknown_producer_may_start_at_any_sequence(log: PartitionLog) -> None:
    assert append(log, idempotent(2, 1000, producer_id=9, epoch=3)) == 0
    assert refused(log, idempotent(1, 1003, producer_id=9, epoch=3)) is E.out_of_order_sequence_number
    assert append(log, idempotent(1, 1002, producer_id=9, epoch=3)) == 2


def test_producers_are_independent(log: PartitionLog) -> None:
    append(log, idempotent(2, 0, producer_id=1))
    append(log, idempotent(1, 0, producer_id=2))
    assert append(log, idempotent(1, 2, producer_id=1)) == 3
    assert append(log, idempotent(1, 1, producer_id=2)) == 4
    assert append(log, idempotent(1, 0, producer_id=2)) == 2  # duplicate of producer 2's first batch


def test_sequence_wraps_around_after_int32_max(log: PartitionLog) -> None:
    append(log, idempotent(2, INT32_MAX - 1))  # INT32_MAX-1, INT32_MAX
    assert refused(log, idempotent(1, 1)) is E.out_of_order_sequence_number
    assert append(log, idempotent(3, 0)) == 2  # 0, 1, 2
    assert append(log, idempotent(1, 3)) == 5


def test_a_batch_spanning_the_wrap(log: PartitionLog) -> None:
    append(log, idempotent(3, INT32_MAX - 1))  # INT32_MAX-1, INT32_MAX, 0
    assert refused(log, idempotent(1, 0)) is E.out_of_order_sequence_number
    assert append(log, idempotent(3, INT32_MAX - 1)) == 0  # the retry is recognised
    assert append(log, idempotent(1, 1)) == 3


def test_producer_state_is_forgotten_once_its_batches_are_gone(log: PartitionLog) -> None:
    append(log, idempotent(1, 0))
    last = make_batch(1)
    append(log, last)
    assert refused(log, idempotent(1, 7)) is E.out_of_order_sequence_number
    assert log.enforce_retention(BASE_TIMESTAMP, -1, len(last)) == 1  # drops the producer's only batch
    assert log.log_start_offset == 1
    assert append(log, idempotent(1, 7)) == 2  # no state left: any sequence is accepted


def test_producer_state_survives_while_a_batch_remains(log: PartitionLog) -> None:
    append(log, idempotent(1, 0))
    last = idempotent(1, 1)
    append(log, last)
    assert log.enforce_retention(BASE_TIMESTAMP, -1, len(last)) == 1
    assert log.log_start_offset == 1
    assert refused(log, idempotent(1, 7)) is E.out_of_order_sequence_number
    assert append(log, idempotent(1, 2)) == 2
