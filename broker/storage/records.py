"""Record batches (magic 2) as Produce sends them: parse the header, validate, restamp.

The broker stores batches as the client sent them, compressed or not. It checks
what Kafka's log layer checks on a client append (a compressed batch is
decompressed and its records walked, as LogValidator does: broker/storage/codecs.py),
and rewrites the two fields Kafka rewrites (base offset and partition leader
epoch), which lie outside the CRC.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.storage import codecs

_native_crc32c: Callable[[bytes | memoryview], int] | None = None


def crc32c(data: bytes | memoryview) -> int:
    """The CRC-32C of a batch (DefaultRecordBatch's checksum), with the crc32c package imported at first use:
    importing it reads its own version with importlib.metadata, ~20 ms of start-up that nothing before the first
    Produce or transaction marker needs (issue 17)."""
    global _native_crc32c
    if _native_crc32c is None:
        from crc32c import crc32c as native

        _native_crc32c = native
    return _native_crc32c(data)


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


def validate_client_batch(
    header: BatchHeader, batch: bytes, max_message_bytes: int, budget: InflationBudget | None = None
) -> TimestampIndex | None:
    """What UnifiedLog.analyzeAndValidateRecords and LogValidator check on a client's batch, in their order.

    A compressed batch is decompressed and its records walked, as LogValidator does, within ``budget`` (the
    Produce request's, or one of its own); what ListOffsets by timestamp needs from it is returned, to be stored
    with it, so nothing ever decompresses a stored batch again. None for an uncompressed batch, whose records
    are read in place.
    """
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
    if header.compression not in codecs.NAMES:
        # CompressionType.forId's IllegalArgumentException: no ApiException, so KafkaApis answers it with
        # UNKNOWN_SERVER_ERROR (ReplicaManager.appendToLocalLog's catch-all), and stores nothing.
        raise InvalidBatch(ErrorCode.unknown_server_error, f"Unknown compression type id: {header.compression}")
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
    if header.compression == codecs.NONE:
        _check_record_structure(batch, header.records_count)
        return None
    return _validate_compressed(header, batch, budget or InflationBudget(max_message_bytes))


def restamp(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The batch with the broker's base offset and leader epoch (both outside the CRC)."""
    stamped = bytearray(batch)
    struct.pack_into(">q", stamped, 0, base_offset)
    _EPOCH.pack_into(stamped, 12, leader_epoch)
    return bytes(stamped)


# -- records inside a batch (structure checks, and the timestamps ListOffsets looks up) ----------


class _Truncated(Exception):
    """The records section ends inside a record."""


class _Malformed(Exception):
    """A record does not parse, or bytes remain after the declared count."""


def _varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """A zig-zag varint and the position after it."""
    shift = 0
    raw = 0
    while True:
        if position >= len(data):
            raise _Truncated("varint runs past the end")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise _Malformed("varint too long")
    return (raw >> 1) ^ -(raw & 1), position


def _records(body: bytes | memoryview, count: int) -> Iterator[tuple[int, int]]:
    """(offset delta, timestamp delta) of each record in an uncompressed records section."""
    position = 0
    size = len(body)
    for _ in range(count):
        # One-byte varints inline: the common case, and what keeps a million-record batch well under a second.
        byte = body[position] if position < size else 0x80
        if byte < 0x80:
            length, position = (byte >> 1) ^ -(byte & 1), position + 1
        else:
            length, position = _varint(body, position)
        end = position + length
        if length < 0:
            raise _Malformed(f"record length {length}")
        if end > size:
            raise _Truncated("record length runs past the batch")
        position += 1  # attributes
        byte = body[position] if position < end else 0x80
        if byte < 0x80:
            timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
        else:
            timestamp_delta, position = _varint(body, position)
        byte = body[position] if position < end else 0x80
        if byte < 0x80:
            offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
        else:
            offset_delta, position = _varint(body, position)
        if position > end:
            raise _Malformed("record header runs past its length")
        yield offset_delta, timestamp_delta
        position = end
    if position != size:
        raise _Malformed("records still remaining after the declared count")


def _check_record_structure(batch: bytes, count: int) -> None:
    """DefaultRecordBatch's iterator: each record fits, and the count matches (offset deltas are not checked)."""
    try:
        for _ in _records(memoryview(batch)[HEADER_SIZE:], count):
            pass
    except (_Truncated, _Malformed) as error:
        raise InvalidBatch(ErrorCode.invalid_record, f"Found invalid record structure: {error}") from None


# A compressed batch may inflate to this many times message.max.bytes (16 MiB by default): the memory it may take.
INFLATION_FACTOR = 16
# A Produce request's compressed batches together may do this many times what one batch may: the event loop time
# they may take (about a second at most with the defaults: 128 MiB to decompress, 1.2 million records to walk).
REQUEST_FACTOR = 8
# A record's length varint, attributes, timestamp and offset deltas, key and value lengths, header count: 1 byte each.
MIN_RECORD_SIZE = 7
# Kafka's message.max.bytes default: what record_timestamps allows a batch to inflate to, INFLATION_FACTOR times.
_DEFAULT_MESSAGE_MAX_BYTES = 1_048_588


class InflationBudget:
    """What one Produce request's compressed batches may decompress to: each, and all together.

    Ours, not Kafka's. Kafka streams a compressed batch's records on one of its request handler threads and holds
    none of them; this broker inflates a batch whole, on its one event loop. So a few kilobytes of zstd that claim
    a million records or inflate to gigabytes must be bounded, in memory and in loop time, while what real
    producers send passes (a producer's batch is at most about 1 MB before compression: batch.size in librdkafka,
    aiokafka and kafka-python; Java's counts compressed bytes, with a ratio estimate):
    - one batch may inflate to INFLATION_FACTOR times message.max.bytes (``batch_limit``), and
    - the request's compressed batches together to REQUEST_FACTOR times that, holding REQUEST_FACTOR times as many
      records as an uncompressed batch of message.max.bytes could (one record is at least MIN_RECORD_SIZE bytes).
    message.max.bytes is the broker's (a client may raise a topic's max.message.bytes, not this). A batch past
    any of these answers MESSAGE_TOO_LARGE, on which Kafka's Java producer splits the batch and sends it again.
    """

    __slots__ = ("batch_limit", "bytes_left", "records_left")

    def __init__(self, message_max_bytes: int) -> None:
        self.batch_limit = INFLATION_FACTOR * max(message_max_bytes, HEADER_SIZE)
        self.bytes_left = REQUEST_FACTOR * self.batch_limit
        self.records_left = REQUEST_FACTOR * max(1, (message_max_bytes - HEADER_SIZE) // MIN_RECORD_SIZE)


class TimestampIndex:
    """What ListOffsets by timestamp needs from a compressed batch, kept from its one decompression on Produce.

    The records where the running maximum timestamp rises, in offset order: the first record whose timestamp is
    at least T is the first of these at or above T, and the last of them is the first record with the batch's
    largest timestamp. Usually a handful (a producer stamps a batch within its linger time).
    """

    __slots__ = ("deltas", "timestamps")

    def __init__(self, deltas: array[int], timestamps: array[int]) -> None:
        self.deltas = deltas
        self.timestamps = timestamps

    @property
    def nbytes(self) -> int:
        """What it costs to keep, charged to the storage budget with the batch."""
        return _INDEX_OVERHEAD + (len(self.deltas) + len(self.timestamps)) * self.deltas.itemsize

    def first_at_or_after(self, base_offset: int, timestamp: int) -> tuple[int, int] | None:
        at = bisect.bisect_left(self.timestamps, timestamp)
        if at == len(self.timestamps):
            return None
        return base_offset + self.deltas[at], self.timestamps[at]


_INDEX_OVERHEAD = 64


def _index(body: bytes | memoryview, header: BatchHeader) -> TimestampIndex:
    deltas, timestamps = array("q"), array("q")
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    highest: int | None = None
    for offset_delta, timestamp_delta in _records(body, header.records_count):
        # LogAppendTime batches: every record carries the batch's max timestamp (DefaultRecordBatch's iterator).
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        if highest is None or timestamp > highest:
            highest = timestamp
            deltas.append(offset_delta)
            timestamps.append(timestamp)
    return TimestampIndex(deltas, timestamps)


def _validate_compressed(header: BatchHeader, batch: bytes, budget: InflationBudget) -> TimestampIndex:
    """LogValidator.validateMessagesAndAssignOffsetsCompressed: decompress, then walk the declared records.

    Kafka's codecs throw a KafkaException on a payload they cannot read, and a stream that ends inside the
    records is an EOFException wrapped the same way ("Failed to decompress record stream"): neither is an
    ApiException, so ReplicaManager answers UNKNOWN_SERVER_ERROR. A record that does not parse, or bytes left
    after the declared count, is an InvalidRecordException: INVALID_RECORD.
    """
    codec = codecs.NAMES[header.compression]
    limit = min(budget.batch_limit, budget.bytes_left)
    if limit < MIN_RECORD_SIZE or budget.records_left <= 0:
        raise InvalidBatch(
            ErrorCode.message_too_large,
            f"the {codec} record batch is not decompressed: this request's earlier compressed batches used up what "
            f"they may inflate to together ({REQUEST_FACTOR * budget.batch_limit} bytes)",
        )
    if header.records_count > budget.records_left or header.records_count * MIN_RECORD_SIZE > limit:
        # Refused before anything is inflated: that many records cannot fit in what the batch may inflate to.
        raise InvalidBatch(
            ErrorCode.message_too_large,
            f"the {codec} record batch declares {header.records_count} records, more than this request's "
            f"compressed batches may still hold ({min(budget.records_left, limit // MIN_RECORD_SIZE)})",
        )
    try:
        body = codecs.inflate(header.compression, memoryview(batch)[HEADER_SIZE:], limit)
    except codecs.TooLarge:
        budget.bytes_left -= limit  # the work done
        raise InvalidBatch(
            ErrorCode.message_too_large,
            f"the {codec} record batch inflates to more than {limit} bytes: "
            + (
                f"{INFLATION_FACTOR} times message.max.bytes is the most a batch may"
                if limit == budget.batch_limit
                else f"this request's compressed batches may inflate to {REQUEST_FACTOR * budget.batch_limit} "
                "bytes together"
            ),
        ) from None
    except codecs.CorruptPayload as error:
        raise InvalidBatch(
            ErrorCode.unknown_server_error, f"Failed to decompress the {codec} record stream: {error}"
        ) from None
    except codecs.Unsupported as error:
        # Refused, never stored unread: Kafka's error for a codec it will not take (KIP-110's, for zstd).
        raise InvalidBatch(ErrorCode.unsupported_compression_type, f"{codec}: {error}") from None
    budget.bytes_left -= len(body)
    budget.records_left -= header.records_count
    try:
        return _index(body, header)
    except _Truncated as error:
        raise InvalidBatch(
            ErrorCode.unknown_server_error, f"Failed to decompress the {codec} record stream: {error}"
        ) from None
    except _Malformed as error:
        raise InvalidBatch(ErrorCode.invalid_record, f"Found invalid record structure: {error}") from None


def read_index(header: BatchHeader, batch: bytes) -> TimestampIndex | None:
    """The timestamp index of an uncompressed stored batch, read in place; None if its records do not parse.

    Stored batches passed validate_client_batch, so None does not happen; a reader must not raise all the same.
    """
    if header.compression != codecs.NONE:
        return None
    try:
        return _index(memoryview(batch)[HEADER_SIZE:], header)
    except (_Truncated, _Malformed):
        return None


def record_timestamps(header: BatchHeader, batch: bytes) -> list[tuple[int, int]] | None:
    """(offset, timestamp) of every record, or None when the records cannot be read. Never raises."""
    body: bytes | memoryview
    try:
        if header.compression == codecs.NONE:
            body = memoryview(batch)[HEADER_SIZE:]
        else:
            limit = InflationBudget(_DEFAULT_MESSAGE_MAX_BYTES).batch_limit
            body = codecs.inflate(header.compression, memoryview(batch)[HEADER_SIZE:], limit)
        records = list(_records(body, header.records_count))
    except (codecs.CorruptPayload, codecs.TooLarge, codecs.Unsupported, _Truncated, _Malformed):
        return None
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return [(header.base_offset + delta, header.max_timestamp) for delta, _ in records]
    return [(header.base_offset + delta, header.base_timestamp + ts) for delta, ts in records]
