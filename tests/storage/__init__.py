"""Record batches for the storage and data-plane tests, built by aiokafka's own batch builder."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]
from crc32c import crc32c

NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
BASE_TIMESTAMP = 1_700_000_000_000


def make_batch(
    count: int = 1,
    *,
    timestamps: list[int] | None = None,
    value: bytes = b"value",
    compression: int = NO_COMPRESSION,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A magic-2 batch as a producer sends it: base offset 0, records 0..count-1, CRC valid."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 24,
    )
    stamps = timestamps if timestamps is not None else [BASE_TIMESTAMP + i for i in range(count)]
    assert len(stamps) == count
    for index, timestamp in enumerate(stamps):
        builder.append(index, timestamp=timestamp, key=b"key-%d" % index, value=value, headers=[])
    return bytes(builder.build())


# Offsets of header fields inside a batch.
BATCH_LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35
RECORDS_COUNT_AT = 57
HEADER_SIZE = 61


def patched(batch: bytes, at: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    """``batch`` with one header field overwritten; the CRC recomputed unless told otherwise."""
    data = bytearray(batch)
    struct.pack_into(fmt, data, at, value)
    return with_crc(bytes(data)) if fix_crc else bytes(data)


def with_payload(batch: bytes, payload: bytes, *, attributes: int | None = None, count: int | None = None) -> bytes:
    """``batch`` with its records section replaced by ``payload`` (and its attributes or record count, if given):
    the lengths made consistent and the CRC valid, so only what the payload holds can be wrong."""
    data = bytearray(batch[:HEADER_SIZE] + payload)
    struct.pack_into(">i", data, BATCH_LENGTH_AT, len(data) - 12)
    if attributes is not None:
        struct.pack_into(">h", data, ATTRIBUTES_AT, attributes)
    if count is not None:
        struct.pack_into(">i", data, LAST_OFFSET_DELTA_AT, count - 1)
        struct.pack_into(">i", data, RECORDS_COUNT_AT, count)
    return with_crc(bytes(data))


def with_crc(batch: bytes) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">I", data, CRC_AT, crc32c(bytes(data[ATTRIBUTES_AT:])))
    return bytes(data)


def crc_is_valid(batch: bytes) -> bool:
    (stored,) = struct.unpack_from(">I", batch, CRC_AT)
    return bool(stored == crc32c(batch[ATTRIBUTES_AT:]))


def base_offset_of(batch: bytes) -> int:
    return int(struct.unpack_from(">q", batch, 0)[0])
