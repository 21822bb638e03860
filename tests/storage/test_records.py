"""Record batch headers, Kafka's checks on a client batch, restamping and record timestamps."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from broker.storage.records import (
    HEADER_SIZE,
    InvalidBatch,
    read_header,
    record_timestamps,
    restamp,
    split_batches,
    validate_client_batch,
)
from tests.storage import (
    ATTRIBUTES_AT,
    BASE_TIMESTAMP,
    BATCH_LENGTH_AT,
    GZIP,
    LAST_OFFSET_DELTA_AT,
    LEADER_EPOCH_AT,
    MAGIC_AT,
    MAX_TIMESTAMP_AT,
    RECORDS_COUNT_AT,
    base_offset_of,
    crc_is_valid,
    make_batch,
    patched,
)

E = ErrorCode
MAX = 1_048_588


def refused(records: bytes, max_message_bytes: int = MAX) -> InvalidBatch:
    """The InvalidBatch Kafka's checks raise for ``records`` (split, then validate the single batch)."""
    with pytest.raises(InvalidBatch) as caught:
        batches = split_batches(records)
        assert len(batches) == 1, batches
        validate_client_batch(*batches[0], max_message_bytes)
    return caught.value


def accepted(records: bytes, max_message_bytes: int = MAX) -> None:
    (batch,) = split_batches(records)
    validate_client_batch(*batch, max_message_bytes)


# -- header ----------------------------------------------------------------------------------------


def test_header_fields_of_an_idempotent_batch() -> None:
    batch = make_batch(3, timestamps=[5_000, 9_000, 7_000], producer_id=42, producer_epoch=3, base_sequence=17)
    header = read_header(batch)
    assert header.base_offset == 0
    assert header.batch_length == len(batch) - 12
    assert header.size == len(batch)
    assert header.partition_leader_epoch == -1
    assert header.magic == 2
    assert header.crc == struct.unpack_from(">I", batch, 17)[0]
    assert header.compression == 0
    assert not header.is_transactional and not header.is_control
    assert header.last_offset_delta == 2
    assert header.records_count == 3
    assert (header.base_timestamp, header.max_timestamp) == (5_000, 9_000)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.has_producer_id
    assert header.last_sequence == 19


def test_header_of_a_plain_gzip_transactional_batch() -> None:
    batch = make_batch(4, value=b"z" * 300, compression=GZIP, transactional=True)
    header = read_header(batch)
    assert header.compression == GZIP
    assert header.size == len(batch) < 4 * 300  # really compressed
    assert header.is_transactional
    assert not header.has_producer_id
    assert header.last_sequence == -1


def test_header_at_a_position() -> None:
    first, second = make_batch(1), make_batch(2, timestamps=[1, 2])
    header = read_header(first + second, len(first))
    assert (header.records_count, header.base_timestamp) == (2, 1)


def test_last_sequence_wraps_around_int32() -> None:
    header = read_header(make_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 0  # 2**31-2, 2**31-1, 0
    header = read_header(make_batch(1, producer_id=1, producer_epoch=0, base_sequence=2**31 - 1))
    assert header.last_sequence == 2**31 - 1


# -- splitting -------------------------------------------------------------------------------------


def test_split_one_batch_returns_its_exact_bytes() -> None:
    batch = make_batch(2)
    ((header, data),) = split_batches(batch)
    assert data == batch
    assert header == read_header(batch)


def test_split_two_batches() -> None:
    first, second = make_batch(1), make_batch(3)
    split = split_batches(first + second)
    assert [data for _, data in split] == [first, second]
    assert [h.records_count for h, _ in split] == [1, 3]


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 40, 60, 61])
def test_a_truncated_batch_ends_the_iteration(cut: int) -> None:
    batch = make_batch(2)
    assert split_batches(batch[:-cut] if cut < len(batch) else b"") == []
    # A partial batch after a whole one is dropped too.
    assert [d for _, d in split_batches(batch + batch[: len(batch) - cut])] == [batch]


def test_nothing_at_all() -> None:
    assert split_batches(b"") == []
    assert split_batches(b"\x00" * 11) == []


@pytest.mark.parametrize("length", [13, 0, -1, -(2**31)])
def test_batch_length_below_the_v0_overhead_is_corrupt(length: int) -> None:
    batch = patched(make_batch(1), BATCH_LENGTH_AT, ">i", length, fix_crc=False)
    with pytest.raises(InvalidBatch) as caught:
        split_batches(batch)
    assert caught.value.error is E.corrupt_message
    # Even as the second batch, even with only the 12-byte log overhead present.
    with pytest.raises(InvalidBatch) as caught:
        split_batches(make_batch(1) + batch[:12])
    assert caught.value.error is E.corrupt_message


@pytest.mark.parametrize("magic", [0, 1])
def test_older_magic_is_an_invalid_record(magic: int) -> None:
    assert refused(patched(make_batch(1), MAGIC_AT, ">b", magic)).error is E.invalid_record


@pytest.mark.parametrize("magic", [3, 127, -1])
def test_a_magic_no_version_has_is_corrupt(magic: int) -> None:
    """ByteBufferLogInputStream.nextBatchSize: "Invalid magic found in record"."""
    assert refused(patched(make_batch(1), MAGIC_AT, ">b", magic)).error is E.corrupt_message


def test_a_whole_batch_shorter_than_its_header_is_corrupt() -> None:
    """Kafka iterates it as a batch, then DefaultRecordBatch.isValid fails on its size."""
    batch = make_batch(1)
    short = patched(batch[:40], BATCH_LENGTH_AT, ">i", 28, fix_crc=False)
    ((header, data),) = split_batches(short)
    assert data == short
    assert header.size == 40 < HEADER_SIZE
    with pytest.raises(InvalidBatch) as caught:
        validate_client_batch(header, data, MAX)
    assert caught.value.error is E.corrupt_message


# -- validation ------------------------------------------------------------------------------------


def test_valid_batches_pass() -> None:
    accepted(make_batch(1))
    accepted(make_batch(5, producer_id=3, producer_epoch=0, base_sequence=0))
    accepted(make_batch(5, value=b"g" * 200, compression=GZIP))


def test_non_zero_base_offset_is_an_invalid_record() -> None:
    batch = patched(make_batch(1), 0, ">q", 5)  # the base offset is outside the CRC anyway
    assert refused(batch).error is E.invalid_record


def test_above_max_message_bytes() -> None:
    batch = make_batch(3)
    accepted(batch, max_message_bytes=len(batch))  # exactly at the limit is fine
    error = refused(batch, max_message_bytes=len(batch) - 1)
    assert error.error is E.message_too_large


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(make_batch(2))
    batch[-1] ^= 0x01  # a byte of the last record's value
    assert refused(bytes(batch)).error is E.corrupt_message


def test_a_changed_attribute_breaks_the_crc() -> None:
    batch = patched(make_batch(2), ATTRIBUTES_AT + 1, ">b", GZIP, fix_crc=False)
    assert refused(batch).error is E.corrupt_message


def test_checks_run_in_kafkas_order() -> None:
    corrupt = bytearray(make_batch(2))
    corrupt[-1] ^= 0x01
    # The base offset comes first, then the size, then the CRC.
    assert refused(patched(bytes(corrupt), 0, ">q", 1, fix_crc=False)).error is E.invalid_record
    assert refused(bytes(corrupt), max_message_bytes=HEADER_SIZE).error is E.message_too_large


def test_negative_last_offset_delta() -> None:
    batch = patched(make_batch(1), LAST_OFFSET_DELTA_AT, ">i", -1)
    assert "invalid offset range" in str(refused(batch))


def test_zero_record_count() -> None:
    batch = patched(make_batch(1), RECORDS_COUNT_AT, ">i", 0)
    error = refused(batch)
    assert error.error is E.invalid_record
    assert "count" in str(error)


def test_count_inconsistent_with_offset_range() -> None:
    batch = patched(make_batch(3), RECORDS_COUNT_AT, ">i", 2)
    error = refused(batch)
    assert error.error is E.invalid_record
    assert "Inconsistent" in str(error)


def test_control_batch_from_a_client() -> None:
    batch = patched(make_batch(1), ATTRIBUTES_AT, ">h", 0x20)
    error = refused(batch)
    assert error.error is E.invalid_record
    assert "control" in str(error)


def test_producer_id_without_a_sequence() -> None:
    error = refused(make_batch(1, producer_id=7, producer_epoch=0, base_sequence=-1))
    assert error.error is E.invalid_record
    assert "sequence" in str(error)


def test_fewer_records_than_the_count_says() -> None:
    batch = patched(patched(make_batch(2), RECORDS_COUNT_AT, ">i", 3), LAST_OFFSET_DELTA_AT, ">i", 2)
    error = refused(batch)
    assert error.error is E.invalid_record
    assert "record structure" in str(error)


def test_bytes_left_after_the_last_record() -> None:
    batch = make_batch(2) + b"\x00\x00"
    batch = patched(batch, BATCH_LENGTH_AT, ">i", len(batch) - 12)
    error = refused(batch)
    assert error.error is E.invalid_record
    assert "remaining" in str(error)


# -- restamp ---------------------------------------------------------------------------------------


def test_restamp_sets_offset_and_epoch_and_keeps_the_crc_valid() -> None:
    batch = make_batch(3, producer_id=1, producer_epoch=0, base_sequence=0)
    stamped = restamp(batch, 1234, 0)
    assert base_offset_of(stamped) == 1234
    assert struct.unpack_from(">i", stamped, LEADER_EPOCH_AT)[0] == 0
    assert stamped[:LEADER_EPOCH_AT][8:] == batch[8:LEADER_EPOCH_AT]  # the batch length is untouched
    assert stamped[LEADER_EPOCH_AT + 4 :] == batch[LEADER_EPOCH_AT + 4 :]
    assert crc_is_valid(stamped)
    validate_client_batch(read_header(restamp(stamped, 0, -1)), restamp(stamped, 0, -1), MAX)
    assert restamp(stamped, 0, -1) == batch
    assert base_offset_of(batch) == 0  # the input is not modified


# -- record timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, GZIP])
def test_record_timestamps(compression: int) -> None:
    stamps = [BASE_TIMESTAMP + 30, BASE_TIMESTAMP + 10, BASE_TIMESTAMP + 20]
    batch = restamp(make_batch(3, timestamps=stamps, value=b"q" * 100, compression=compression), 50, 0)
    header = read_header(batch)
    assert header.compression == compression
    assert record_timestamps(header, batch) == [(50, stamps[0]), (51, stamps[1]), (52, stamps[2])]


def test_log_append_time_batches_carry_the_max_timestamp() -> None:
    batch = make_batch(2, timestamps=[10, 20])
    batch = patched(patched(batch, MAX_TIMESTAMP_AT, ">q", 99, fix_crc=False), ATTRIBUTES_AT, ">h", 0x08)
    assert crc_is_valid(batch)
    header = read_header(batch)
    assert record_timestamps(header, batch) == [(0, 99), (1, 99)]


def test_a_codec_the_broker_cannot_read() -> None:
    batch = patched(make_batch(2), ATTRIBUTES_AT, ">h", 2)  # snappy
    assert record_timestamps(read_header(batch), batch) is None
