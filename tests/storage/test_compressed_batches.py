"""Compressed batches: every codec a producer uses is read, anything else is refused, and nothing inflates freely.

Kafka's LogValidator decompresses each compressed batch a producer sends and walks its records. A payload its
codec cannot read is a KafkaException there, which ReplicaManager answers UNKNOWN_SERVER_ERROR (it is no
ApiException); a record stream that runs out before the declared count is the same (an EOFException, wrapped); a
record that does not parse, or bytes left after the count, is INVALID_RECORD. What a batch may inflate to is ours
(records.InflationBudget): past it, MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import cramjam
import pytest
from kio.schema.errors import ErrorCode

from broker.storage import codecs
from broker.storage.partition_log import PartitionLog, StorageBudget
from broker.storage.records import (
    INFLATION_FACTOR,
    MIN_RECORD_SIZE,
    REQUEST_FACTOR,
    InflationBudget,
    InvalidBatch,
    TimestampIndex,
    read_header,
    record_timestamps,
    split_batches,
    validate_client_batch,
)
from tests.storage import (
    ATTRIBUTES_AT,
    BASE_TIMESTAMP,
    GZIP,
    HEADER_SIZE,
    LZ4,
    MAX_TIMESTAMP_AT,
    SNAPPY,
    ZSTD,
    make_batch,
    patched,
    with_payload,
)

E = ErrorCode
MAX = 1_048_588
ROOT = Path(__file__).resolve().parents[2]
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
CODEC_IDS = ["gzip", "snappy", "lz4", "zstd"]
# The smallest record: length 6, then attributes, timestamp delta, offset delta, key -1, value -1, no headers.
MINIMAL_RECORD = bytes([0x0C, 0, 0, 0, 0x01, 0x01, 0])
assert len(MINIMAL_RECORD) == MIN_RECORD_SIZE


def compress(codec: int, data: bytes) -> bytes:
    """``data`` as a producer's codec writes it (snappy: raw, as librdkafka sends it; aiokafka frames it)."""
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    return bytes(cramjam.zstd.compress(data))


def recompressed(codec: int, count: int = 3, **options: object) -> bytes:
    """A batch of ``count`` records whose records section is compressed with ``codec``."""
    plain = make_batch(count, **options)  # type: ignore[arg-type]
    return with_payload(plain, compress(codec, plain[HEADER_SIZE:]), attributes=codec)


def validated(batch: bytes, max_message_bytes: int = MAX, budget: InflationBudget | None = None) -> TimestampIndex:
    ((header, data),) = split_batches(batch)
    index = validate_client_batch(header, data, max_message_bytes, budget)
    assert index is not None
    return index


def refused(batch: bytes, max_message_bytes: int = MAX, budget: InflationBudget | None = None) -> InvalidBatch:
    ((header, data),) = split_batches(batch)
    with pytest.raises(InvalidBatch) as caught:
        validate_client_batch(header, data, max_message_bytes, budget)
    return caught.value


def append(log: PartitionLog, batch: bytes) -> int:
    ((header, data),) = split_batches(batch)
    return log.append(header, data, validate_client_batch(header, data, MAX))


# -- what producers send -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_every_codec_is_read_and_indexed(codec: int) -> None:
    """aiokafka's own batches (snappy in xerial's framing): ListOffsets finds the record, not just the batch."""
    t = BASE_TIMESTAMP
    log = PartitionLog(StorageBudget(-1))
    for stamps in ([t, t + 10], [t + 30, t + 20, t + 40], [t + 50]):
        append(log, make_batch(len(stamps), timestamps=stamps, value=b"v" * 80, compression=codec))
    assert read_header(log.read(2, 1 << 20, at_least_one=True)).compression == codec
    assert log.offset_for_timestamp(t + 1) == (1, t + 10)
    assert log.offset_for_timestamp(t + 21) == (2, t + 30)  # the first in offset order, not the closest
    assert log.offset_for_timestamp(t + 31) == (4, t + 40)
    assert log.offset_for_timestamp(t + 51) is None
    assert log.max_timestamp_offset() == (5, t + 50)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_a_payload_compressed_by_other_libraries_is_read(codec: int) -> None:
    """Raw snappy (librdkafka), the standard library's gzip, cramjam's lz4 frame and zstd."""
    index = validated(recompressed(codec, 3, timestamps=[BASE_TIMESTAMP + 5, BASE_TIMESTAMP, BASE_TIMESTAMP + 9]))
    assert (list(index.deltas), list(index.timestamps)) == ([0, 2], [BASE_TIMESTAMP + 5, BASE_TIMESTAMP + 9])


def test_concatenated_gzip_members_and_trailing_bytes_are_read_as_java_does() -> None:
    plain = make_batch(4)
    records = plain[HEADER_SIZE:]
    members = gzip.compress(records[:10]) + gzip.compress(records[10:]) + b"\x00 trailing bytes"
    assert len(validated(with_payload(plain, members, attributes=GZIP)).deltas) == 4


def test_the_index_is_what_listoffsets_needs_and_is_charged_to_the_budget() -> None:
    batch = recompressed(ZSTD, 6, timestamps=[BASE_TIMESTAMP + d for d in (3, 1, 3, 7, 7, 2)])
    index = validated(batch)
    assert (list(index.deltas), list(index.timestamps)) == ([0, 3], [BASE_TIMESTAMP + 3, BASE_TIMESTAMP + 7])
    budget = StorageBudget(-1)
    log = PartitionLog(budget)
    append(log, batch)
    assert budget.used == len(batch) + index.nbytes
    assert log.size_bytes == len(batch)  # retention.bytes counts the batch alone
    log.enforce_retention(now_ms=BASE_TIMESTAMP, retention_ms=-1, retention_bytes=0)
    assert budget.used == 0


def test_log_append_time_records_carry_the_batch_max_timestamp() -> None:
    batch = recompressed(LZ4, 2, timestamps=[10, 20])
    batch = patched(patched(batch, MAX_TIMESTAMP_AT, ">q", 99), ATTRIBUTES_AT, ">h", 0x08 | LZ4)
    index = validated(batch)
    assert (list(index.deltas), list(index.timestamps)) == ([0], [99])


# -- payloads that are not what their flag says (issue 14, defect 6) ------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_plain_records_under_a_codec_flag_are_refused(codec: int) -> None:
    """The fuzzer's reproducer: an uncompressed batch whose attributes say gzip, its CRC made valid."""
    batch = patched(make_batch(3), ATTRIBUTES_AT, ">h", codec)
    error = refused(batch)
    assert error.error is E.unknown_server_error
    assert f"Failed to decompress the {codecs.NAMES[codec]} record stream" in str(error)
    assert record_timestamps(read_header(batch), batch) is None  # the reader says so, it does not raise


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("payload", [b"", b"\x00" * 40, b"\x1f\x8b\x08" + b"\xff" * 30], ids=["empty", "zeros", "junk"])
def test_junk_is_refused(codec: int, payload: bytes) -> None:
    assert refused(with_payload(make_batch(2), payload, attributes=codec)).error is E.unknown_server_error


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_a_truncated_stream_is_refused(codec: int) -> None:
    plain = make_batch(3, value=b"t" * 200)
    whole = compress(codec, plain[HEADER_SIZE:])
    assert refused(with_payload(plain, whole[: len(whole) // 2], attributes=codec)).error is E.unknown_server_error


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_fewer_records_than_declared_is_a_stream_that_ends_early(codec: int) -> None:
    plain = make_batch(2)
    error = refused(with_payload(plain, compress(codec, plain[HEADER_SIZE:]), attributes=codec, count=3))
    assert error.error is E.unknown_server_error


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_bytes_after_the_declared_records_are_an_invalid_record(codec: int) -> None:
    plain = make_batch(2)
    error = refused(with_payload(plain, compress(codec, plain[HEADER_SIZE:] + b"\x00"), attributes=codec))
    assert error.error is E.invalid_record


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_a_codec_no_kafka_version_has(codec_id: int) -> None:
    """CompressionType.forId's IllegalArgumentException: UNKNOWN_SERVER_ERROR, after the CRC check."""
    batch = patched(make_batch(2), ATTRIBUTES_AT, ">h", codec_id)
    error = refused(batch)
    assert (error.error, str(error)) == (E.unknown_server_error, f"Unknown compression type id: {codec_id}")
    assert refused(batch[:-1] + bytes([batch[-1] ^ 1])).error is E.corrupt_message
    assert record_timestamps(read_header(batch), batch) is None


# -- decompression bombs -------------------------------------------------------------------------------


def bomb(codec: int, size: int, *, count: int = 1) -> bytes:
    """A batch declaring ``count`` records whose tiny payload inflates to ``size`` zero bytes."""
    zeros = b"\x00" * (1 << 20)
    if codec == GZIP:
        member = cramjam.gzip.Compressor()
    elif codec == LZ4:
        member = cramjam.lz4.Compressor()
    elif codec == ZSTD:
        member = cramjam.zstd.Compressor()
    else:
        # A raw snappy block declares its length first: the bomb need not hold the blocks that would fill it.
        varint = bytearray()
        value = size
        while value >= 0x80:
            varint.append(value & 0x7F | 0x80)
            value >>= 7
        varint.append(value)
        return with_payload(make_batch(1), bytes(varint) + b"\x00\x00", attributes=codec, count=count)
    for _ in range(size >> 20):
        member.compress(zeros)
    return with_payload(make_batch(1), bytes(member.finish()), attributes=codec, count=count)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_a_bomb_is_refused_at_the_limit(codec: int) -> None:
    batch = bomb(codec, 64 << 20)
    assert len(batch) < (64 << 20) // 200  # lz4 inflates 250-fold at most, the others far more
    budget = InflationBudget(MAX)
    assert (budget.batch_limit, budget.bytes_left) == (INFLATION_FACTOR * MAX, REQUEST_FACTOR * INFLATION_FACTOR * MAX)
    error = refused(batch, budget=budget)
    assert error.error is E.message_too_large
    assert f"inflates to more than {INFLATION_FACTOR * MAX} bytes" in str(error)
    assert budget.bytes_left == (REQUEST_FACTOR - 1) * budget.batch_limit  # charged with the work done
    validated(recompressed(codec), budget=budget)  # the request's other batches are still read
    for _ in range(REQUEST_FACTOR - 1):
        assert refused(batch, budget=budget).error is E.message_too_large
    error = refused(recompressed(codec), budget=budget)  # now the request has spent what it may
    assert (error.error, "is not decompressed" in str(error)) == (E.message_too_large, True)


def test_a_topic_max_message_bytes_does_not_raise_the_limit() -> None:
    """A client may set a topic's max.message.bytes; the request's budget comes from the broker's."""
    assert refused(bomb(ZSTD, 32 << 20), max_message_bytes=2**31 - 1, budget=InflationBudget(MAX)).error is (
        E.message_too_large
    )


def test_the_declared_count_is_checked_before_anything_is_inflated() -> None:
    budget = InflationBudget(MAX)
    count = budget.records_left + 1
    junk = with_payload(make_batch(1), b"junk that would not decompress", attributes=ZSTD, count=count)
    error = refused(junk, budget=budget)
    assert error.error is E.message_too_large
    assert f"declares {count} records" in str(error)


def test_the_budget_is_shared_by_a_request_and_charged_for_what_was_read() -> None:
    budget = InflationBudget(1000)
    assert budget.records_left == REQUEST_FACTOR * ((1000 - HEADER_SIZE) // MIN_RECORD_SIZE)
    records = budget.records_left * 2 // 5
    batch = with_payload(make_batch(1), compress(LZ4, MINIMAL_RECORD * records), attributes=LZ4, count=records)
    validated(batch, budget=budget)
    validated(batch, budget=budget)
    assert budget.bytes_left == REQUEST_FACTOR * INFLATION_FACTOR * 1000 - 2 * records * MIN_RECORD_SIZE
    error = refused(batch, budget=budget)  # a third does not fit in the records left
    assert (error.error, f"declares {records} records" in str(error)) == (E.message_too_large, True)
    validated(recompressed(LZ4, 2), budget=budget)  # a small one still does
    validated(batch, budget=InflationBudget(1000))  # and a fresh request takes the big one again


def test_uncompressed_batches_do_not_spend_the_budget() -> None:
    budget = InflationBudget(MAX)
    before = (budget.bytes_left, budget.records_left)
    ((header, data),) = split_batches(make_batch(50))
    assert validate_client_batch(header, data, MAX, budget) is None
    assert (budget.bytes_left, budget.records_left) == before


def test_memory_stays_bounded_whatever_the_bombs_claim() -> None:
    """In a fresh process: 512 MiB bombs of every codec, ten of each, leave the peak RSS within the limit."""
    script = textwrap.dedent(
        """
        import resource
        from tests.storage.test_compressed_batches import CODECS, bomb
        from broker.storage.records import InflationBudget, InvalidBatch, split_batches, validate_client_batch

        bombs = [bomb(codec, 512 << 20) for codec in CODECS]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for batch in bombs * 10:
            ((header, data),) = split_batches(batch)
            try:
                validate_client_batch(header, data, 1_048_588, InflationBudget(1_048_588))
            except InvalidBatch as error:
                assert error.error.name == "message_too_large", error
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    grown = int(done.stdout.split()[-1])
    assert grown < 2 * INFLATION_FACTOR * MAX, f"peak RSS grew {grown} bytes"


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_readers_never_raise_on_a_stored_batch(codec: int) -> None:
    """Produce stores only batches that decompress; a reader handed one that does not still answers."""
    log = PartitionLog(StorageBudget(-1))
    ((header, data),) = split_batches(patched(make_batch(3), ATTRIBUTES_AT, ">h", codec))
    log.append(header, data)  # as a broker without the validation stored it
    assert log.offset_for_timestamp(BASE_TIMESTAMP + 1) == (0, BASE_TIMESTAMP + 2)  # the batch: all it can say
    assert log.max_timestamp_offset() == (2, BASE_TIMESTAMP + 2)


@pytest.mark.parametrize("codec", [SNAPPY, LZ4, ZSTD], ids=CODEC_IDS[1:])
def test_without_cramjam_these_codecs_are_refused_not_stored(codec: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "_load_cramjam", lambda: None)
    batch = make_batch(2, compression=codec)
    error = refused(batch)
    assert error.error is E.unsupported_compression_type
    assert "cramjam" in str(error)
    assert record_timestamps(read_header(batch), batch) is None
    validated(make_batch(2, compression=GZIP))  # gzip is the standard library's
