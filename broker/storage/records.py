"""Record batches (magic 2) as Produce sends them: parse the header, validate, restamp.

The broker stores batches as the client sent them, compressed or not. It reads
only the 61-byte header, checks what Kafka's log layer checks on a client
append, and rewrites the two fields Kafka rewrites (base offset and partition
leader epoch), which lie outside the CRC.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c
from kio.schema.errors import ErrorCode

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base offset + batch length
_MIN_BATCH_LENGTH = 14  # Kafka's RECORD_OVERHEAD_V0: anything shorter is corrupt whatever the magic
_MAGIC_OFFSET = 16
_HEADER_SIZE_UP_TO_MAGIC = 17
_CURRENT_MAGIC = 2
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE = struct.Struct(">qi")  # base offset, partition leader epoch are rewritten through this and _EPOCH
_EPOCH = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class InvalidBatch(Exception):
    """A Produce partition Kafka refuses; carries the error code it answers with."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Kafka's wrap-around: sequences run 0..Int.MAX and start again at 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(data: bytes | memoryview, position: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(data, position))


def split_batches(records: bytes) -> list[tuple[BatchHeader, bytes]]:
    """The whole batches in a Produce partition's records, as Kafka's batch iterator sees them.

    Like ByteBufferLogInputStream, a trailing partial batch ends the iteration
    rather than failing it; a declared length below the v0 record overhead, or
    a magic byte no version has, is corrupt. A whole batch too short for its
    own header is kept (its header zero-padded): Kafka refuses it later, in
    validation, as corrupt.
    """
    batches: list[tuple[BatchHeader, bytes]] = []
    position = 0
    end = len(records)
    while end - position >= LOG_OVERHEAD:
        (batch_length,) = struct.unpack_from(">i", records, position + 8)
        if batch_length < _MIN_BATCH_LENGTH:
            raise InvalidBatch(
                ErrorCode.corrupt_message,
                f"record batch size {batch_length} is smaller than the minimum allowed ({_MIN_BATCH_LENGTH})",
            )
        if end - position < _HEADER_SIZE_UP_TO_MAGIC:
            break
        (magic,) = struct.unpack_from(">b", records, position + _MAGIC_OFFSET)
        if not 0 <= magic <= _CURRENT_MAGIC:
            raise InvalidBatch(ErrorCode.corrupt_message, f"Invalid magic found in record: {magic}")
        size = LOG_OVERHEAD + batch_length
        if end - position < size:
            break
        if magic != _CURRENT_MAGIC:
            raise InvalidBatch(
                ErrorCode.invalid_record,
                "Produce requests with version 3 and above are only allowed to contain record batches "
                "with magic version 2",
            )
        batch = records[position : position + size]
        batches.append((read_header(batch.ljust(HEADER_SIZE, b"\x00")), batch))
        position += size
    return batches


def validate_client_batch(header: BatchHeader, batch: bytes, max_message_bytes: int) -> None:
    """What UnifiedLog.analyzeAndValidateRecords and LogValidator check on a client's batch, in their order."""
    if header.base_offset != 0:
        raise InvalidBatch(
            ErrorCode.invalid_record, f"the base offset of a client record batch must be 0, not {header.base_offset}"
        )
    if header.size > max_message_bytes:
        raise InvalidBatch(
            ErrorCode.message_too_large,
            f"the record batch is {header.size} bytes, larger than max.message.bytes {max_message_bytes}",
        )
    if header.size < HEADER_SIZE:  # DefaultRecordBatch.isValid: shorter than the batch overhead
        raise InvalidBatch(
            ErrorCode.corrupt_message,
            f"record batch is {header.size} bytes, smaller than the minimum allowed overhead {HEADER_SIZE}",
        )
    computed = crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:])
    if computed != header.crc:
        raise InvalidBatch(
            ErrorCode.corrupt_message,
            f"record batch CRC is {header.crc}, computed {computed}: the batch is corrupt",
        )
    if header.last_offset_delta < 0:
        raise InvalidBatch(ErrorCode.invalid_record, "Batch has an invalid offset range")
    if header.records_count <= 0:
        raise InvalidBatch(ErrorCode.invalid_record, "Invalid reported count for record batch")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidBatch(ErrorCode.invalid_record, "Inconsistent batch offset range and record count")
    if header.is_control:
        raise InvalidBatch(ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidBatch(ErrorCode.invalid_record, "Invalid sequence number")
    if header.compression == 0:
        _check_record_structure(batch, header.records_count)


def restamp(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The batch with the broker's base offset and leader epoch (both outside the CRC)."""
    stamped = bytearray(batch)
    struct.pack_into(">q", stamped, 0, base_offset)
    _EPOCH.pack_into(stamped, 12, leader_epoch)
    return bytes(stamped)


# -- records inside a batch (needed for timestamp lookups and structure checks) ----------


def _varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """A zig-zag varint and the position after it."""
    shift = 0
    raw = 0
    while True:
        if position >= len(data):
            raise IndexError("varint runs past the end")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), position


def _records(body: bytes | memoryview, count: int) -> Iterator[tuple[int, int]]:
    """(offset delta, timestamp delta) of each record in an uncompressed records section."""
    position = 0
    for _ in range(count):
        length, position = _varint(body, position)
        end = position + length
        if length < 0 or end > len(body):
            raise IndexError("record length runs past the batch")
        position += 1  # attributes
        timestamp_delta, position = _varint(body, position)
        offset_delta, position = _varint(body, position)
        if position > end:
            raise IndexError("record header runs past its length")
        yield offset_delta, timestamp_delta
        position = end
    if position != len(body):
        raise ValueError("records still remaining after the declared count")


def _check_record_structure(batch: bytes, count: int) -> None:
    """DefaultRecordBatch's iterator: each record fits, and the count matches (offset deltas are not checked)."""
    try:
        for _ in _records(memoryview(batch)[HEADER_SIZE:], count):
            pass
    except (IndexError, ValueError) as error:
        raise InvalidBatch(ErrorCode.invalid_record, f"Found invalid record structure: {error}") from None


def record_timestamps(header: BatchHeader, batch: bytes) -> list[tuple[int, int]] | None:
    """(offset, timestamp) of every record, or None when the codec is not one the broker can read.

    Only ListOffsets by timestamp needs this; batches are never decompressed on the produce or fetch paths.
    """
    body: bytes | memoryview
    if header.compression == 0:
        body = memoryview(batch)[HEADER_SIZE:]
    elif header.compression == 1:
        body = gzip.decompress(batch[HEADER_SIZE:])
    else:
        return None
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return [(header.base_offset + delta, header.max_timestamp) for delta, _ in _records(body, header.records_count)]
    return [
        (header.base_offset + delta, header.base_timestamp + ts) for delta, ts in _records(body, header.records_count)
    ]
