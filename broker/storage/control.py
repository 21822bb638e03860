"""Transaction markers: the control batches that end a producer's transaction on a partition.

The layout is Kafka's (``MemoryRecords.withEndTransactionMarker``, ``ControlRecordType``, ``EndTransactionMarker``;
docs/spec/transactions.md section 4.1): a magic-2 batch, uncompressed, CREATE_TIME, attributes
transactional + control (0x30), the marker's producer id and epoch, base sequence -1, one record whose key is
(int16 version 0, int16 type) and whose value is (int16 version 0, int32 coordinator epoch), no headers. The CRC is
CRC-32C over everything from the attributes on, as for every other batch, so the batch reader (records.py) and
every client read it like any batch. Only the broker writes these: a client's control batch is refused
(records.validate_client_batch).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from broker.storage.records import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    BatchHeader,
    crc32c,
    read_header,
)
from protocol.varint import encode_uvarint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAGIC = 2
# RecordBatch.NO_PARTITION_LEADER_EPOCH: the leader's append stamps its own (PartitionLog restamps every batch).
_NO_PARTITION_LEADER_EPOCH = -1

MARKER_ATTRIBUTES = TRANSACTIONAL_MASK | CONTROL_MASK
CONTROL_KEY_VERSION = 0  # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION
MARKER_VALUE_VERSION = 0  # EndTransactionMarker.CURRENT_END_TXN_MARKER_VERSION


class MarkerType(enum.IntEnum):
    """ControlRecordType's two transaction markers (2-6 are KRaft's, never in a data partition)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Marker:
    """What a marker batch says: which end, for which producer, from which coordinator epoch."""

    type: MarkerType
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def _zigzag(value: int) -> bytes:
    """A signed varint, as record fields are written (ByteUtils.writeVarint): zigzag, then the unsigned varint."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def _read_zigzag(data: bytes | memoryview, position: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("varint runs past the record")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def build_marker(
    marker_type: MarkerType, producer_id: int, producer_epoch: int, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A marker batch at base offset 0, as the transaction coordinator's WriteTxnMarkers carries it.

    ``timestamp_ms`` is the time the marker is written: both the first and the max timestamp of the batch.
    """
    key = _KEY.pack(CONTROL_KEY_VERSION, int(marker_type))
    value = _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _zigzag(0)  # timestamp delta
        + _zigzag(0)  # offset delta
        + _zigzag(len(key))
        + key
        + _zigzag(len(value))
        + value
        + _zigzag(0)  # no headers
    )
    record = _zigzag(len(body)) + body
    batch = bytearray(
        _HEADER.pack(
            0,  # base offset
            HEADER_SIZE - LOG_OVERHEAD + len(record),
            _NO_PARTITION_LEADER_EPOCH,
            _MAGIC,
            0,  # CRC, filled in below
            MARKER_ATTRIBUTES,
            0,  # last offset delta: one record
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            NO_SEQUENCE,
            1,
        )
    )
    batch += record
    struct.pack_into(">I", batch, _CRC_OFFSET, crc32c(bytes(batch[_ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def read_marker(header: BatchHeader, batch: bytes | memoryview) -> Marker | None:
    """The marker in a stored control batch, or None if it is not a well-formed transaction marker.

    Like Kafka's EndTransactionMarker.deserialize, a value version above ours is read for the fields we know.
    """
    if not header.is_control or header.records_count != 1 or header.compression != 0:
        return None
    try:
        length, position = _read_zigzag(batch, HEADER_SIZE)
        end = position + length
        if end > len(batch):
            return None
        position += 1  # attributes
        _, position = _read_zigzag(batch, position)  # timestamp delta
        _, position = _read_zigzag(batch, position)  # offset delta
        key_length, position = _read_zigzag(batch, position)
        if key_length != _KEY.size:
            return None
        key_version, key_type = _KEY.unpack_from(batch, position)
        position += key_length
        value_length, position = _read_zigzag(batch, position)
        if value_length < _VALUE.size or position + value_length > end:
            return None
        _, coordinator_epoch = _VALUE.unpack_from(batch, position)
    except (ValueError, struct.error):
        return None
    # ControlRecordType.parse: a negative key version is invalid, a newer one is read for the fields it knows.
    if key_version < 0 or key_type not in (MarkerType.ABORT, MarkerType.COMMIT):
        return None
    return Marker(MarkerType(key_type), header.producer_id, header.producer_epoch, coordinator_epoch)


def parse_marker(batch: bytes) -> Marker | None:
    """read_marker on a batch's bytes alone (its header read with the batch reader)."""
    if len(batch) < HEADER_SIZE:
        return None
    return read_marker(read_header(batch), batch)
