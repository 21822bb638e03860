"""The KIP-932 share-group requests of the load generator, encoded by hand, and the answers it reads.

As in benchmarks/wire.py (struct, no kio), so that the generator stays cheap next to the system it measures:
ShareGroupHeartbeat v1, ShareFetch v1 and ShareAcknowledge v1 exactly as librdkafka 2.16 sends them
(docs/spec/share-groups.md sections 2.1-2.4, 12.2-12.3), plus the untimed set-up: Produce v7 with hand-built v2
record batches (the records are pre-produced) and IncrementalAlterConfigs v0 on a GROUP resource
(``share.auto.offset.reset=earliest``, section 12.7 trap 10). tests/test_benchmarks.py checks every frame against
kio's encoding and every answer parsed here against kio's encoding of it.

A ShareFetch answer is walked without copying its Records: the generator counts what was acquired
(AcquiredRecords) and acknowledges it, as a client that hands every acquired record to its application does.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

from benchmarks import wire
from benchmarks.wire import ParseError, array_length, string

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RANGE = struct.Struct(">qqh")  # AcquiredRecords: FirstOffset, LastOffset, DeliveryCount
_BATCH = struct.Struct(">qqh")  # AcknowledgementBatch: FirstOffset, LastOffset, then the types array

ACCEPT = 1  # AcknowledgeType (section 2.3)
RESOURCE_GROUP = 32  # ConfigResource type of a group (KIP-848's group configs, KIP-932's share.* ones)

Acks = Sequence[tuple[int, int]]  # (first offset, last offset) ranges, each ACCEPTed as a whole


# -- requests -------------------------------------------------------------------------------------------------------


def share_heartbeat_body(
    group_id: str, member_id: str, member_epoch: int, topics: Sequence[str] | None = None, rack_id: str | None = None
) -> bytes:
    """ShareGroupHeartbeat v1 (section 2.1): a join carries epoch 0 and the topics; a steady heartbeat the epoch, a
    null rack and null topics (section 12.2); a leave epoch -1."""
    names = b"\x00" if topics is None else array_length(len(topics), True) + b"".join(string(t, True) for t in topics)
    head = string(group_id, True) + string(member_id, True) + _I32.pack(member_epoch)
    return head + string(rack_id, True) + names + b"\x00"


def _ack_batches(acks: Acks) -> bytes:
    """AcknowledgementBatches: one type per range (ACCEPT), as librdkafka coalesces them (section 12.3)."""
    out = [array_length(len(acks), True)]
    for first, last in acks:
        out.append(_I64.pack(first) + _I64.pack(last) + b"\x02" + _I8.pack(ACCEPT) + b"\x00")
    return b"".join(out)


def share_fetch_body(
    group_id: str,
    member_id: str,
    epoch: int,
    topic_id: bytes,
    partition: int,
    *,
    add: bool = False,
    acks: Acks = (),
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    max_bytes: int = 0x7FFFFFFF,
    max_records: int = 500,
    batch_size: int = 500,
) -> bytes:
    """ShareFetch v1 (section 2.3) on one partition. ``add``: the partition joins the session (the first request);
    ``acks``: ranges ACCEPTed piggy-backed; with neither the Topics array is empty (the session remembers it).
    librdkafka's defaults: MaxWaitMs 500, MinBytes 1, MaxRecords = BatchSize = max.poll.records (500)."""
    out = [
        string(group_id, True),
        string(member_id, True),
        _I32.pack(epoch),
        _I32.pack(max_wait_ms),
        _I32.pack(min_bytes),
        _I32.pack(max_bytes),
        _I32.pack(max_records),
        _I32.pack(batch_size),
    ]
    if add or acks:
        out.append(b"\x02" + topic_id + b"\x02" + _I32.pack(partition) + _ack_batches(acks) + b"\x00\x00")
    else:
        out.append(b"\x01")
    out.append(b"\x01\x00")  # ForgottenTopicsData [], tags
    return b"".join(out)


def share_acknowledge_body(
    group_id: str, member_id: str, epoch: int, topic_id: bytes, partition: int, acks: Acks
) -> bytes:
    """ShareAcknowledge v1 (section 2.4): what a client flushes when it has acknowledgements and nothing to fetch."""
    topic = b"\x02" + topic_id + b"\x02" + _I32.pack(partition) + _ack_batches(acks) + b"\x00\x00"
    return string(group_id, True) + string(member_id, True) + _I32.pack(epoch) + topic + b"\x00"


def _zigzag(value: int) -> bytes:
    return wire._uvarint((value << 1) ^ (value >> 63))


def record_batch(count: int, value_size: int, timestamp_ms: int | None = None) -> bytes:
    """A v2 record batch (magic 2, no compression, no producer id) of ``count`` records with ``value_size``-byte values
    and null keys, base offset 0 (the broker assigns offsets); the CRC-32C covers attributes to the end."""
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    value = b"v" * value_size
    records = []
    for delta in range(count):
        # attributes, timestamp delta, offset delta, key length -1, value, no headers
        body = b"\x00" + _zigzag(0) + _zigzag(delta) + _zigzag(-1) + _zigzag(value_size) + value + _zigzag(0)
        records.append(_zigzag(len(body)) + body)
    after_crc = (
        struct.pack(">hiqqqhii", 0, count - 1, stamp, stamp, -1, -1, -1, count) + b"".join(records)
    )  # attributes, last offset delta, first and max timestamp, producer id and epoch, base sequence, count
    head = struct.pack(">ib", -1, 2)  # partition leader epoch, magic
    crc = struct.pack(">I", crc32c.crc32c(after_crc))
    batch = head + crc + after_crc
    return _I64.pack(0) + _I32.pack(len(batch)) + batch


def produce_body(topic: str, partition: int, batch: bytes, acks: int = 1, timeout_ms: int = 30_000) -> bytes:
    """Produce v7 (not flexible): no transactional id, one topic, one partition, ``batch`` as its records."""
    return (
        _I16.pack(-1)
        + _I16.pack(acks)
        + _I32.pack(timeout_ms)
        + _I32.pack(1)
        + string(topic, False)
        + _I32.pack(1)
        + _I32.pack(partition)
        + _I32.pack(len(batch))
        + batch
    )


def alter_group_config_body(group_id: str, name: str, value: str) -> bytes:
    """IncrementalAlterConfigs v0 (not flexible): SET ``name`` = ``value`` on the GROUP resource ``group_id``."""
    config = string(name, False) + _I8.pack(0) + string(value, False)
    resource = _I8.pack(RESOURCE_GROUP) + string(group_id, False) + _I32.pack(1) + config
    return _I32.pack(1) + resource + b"\x00"  # validate_only false


# -- answers --------------------------------------------------------------------------------------------------------


def parse_share_heartbeat(body: bytes, strict: bool = True) -> wire.ConsumerHeartbeatAnswer:
    """A whole ShareGroupHeartbeat v1 answer: ThrottleTimeMs, ErrorCode, ErrorMessage, MemberId, MemberEpoch,
    HeartbeatIntervalMs, Assignment (a nullable struct of TopicPartitions): field for field ConsumerGroupHeartbeat's
    answer (section 2.1 against docs/spec/consumer-groups.md 2.1), so it is read by the same parser.

    ``strict`` False allows zero bytes after the answer's last tagged-field section: librdkafka 2.16's mock writes
    one more 0 byte after every ShareGroupHeartbeat answer (its clients ignore trailing bytes)."""
    try:
        return wire.parse_consumer_heartbeat(body)
    except ParseError:
        if strict or not body.endswith(b"\x00"):
            raise
    return parse_share_heartbeat(body[:-1], strict)


def share_heartbeat_error_offset() -> int:
    """Where the error code sits in a ShareGroupHeartbeat answer frame (the same place as ConsumerGroupHeartbeat's)."""
    return wire.consumer_heartbeat_error_offset()


class FetchedPartition(NamedTuple):
    topic_id: bytes
    partition: int
    error: int
    ack_error: int  # AcknowledgeErrorCode: the result of the acknowledgements the request carried
    acquired: tuple[tuple[int, int, int], ...]  # (first offset, last offset, delivery count)
    records_bytes: int  # size of Records (-1: null)


class ShareFetchAnswer(NamedTuple):
    error: int
    message: str | None
    lock_timeout_ms: int
    partitions: tuple[FetchedPartition, ...]


def parse_share_fetch(body: bytes) -> ShareFetchAnswer:
    """A whole ShareFetch v1 answer (section 2.3), strictly; Records are skipped, not copied."""
    try:
        reader = wire._reader(wire.SHARE_FETCH, 1, body)
        reader.i32()  # throttle
        code = reader.i16()
        message = reader.string()
        lock = reader.i32()
        partitions = []
        for _ in range(max(reader.array(), 0)):
            topic_id = reader.raw(16)
            for _ in range(max(reader.array(), 0)):
                index, error = reader.i32(), reader.i16()
                reader.string()
                ack_error = reader.i16()
                reader.string()
                reader.i32(), reader.i32()  # CurrentLeader
                reader.tags()
                size = reader.uvarint() - 1  # Records: compact nullable bytes, skipped
                if reader.pos + max(size, 0) > len(body):
                    raise ParseError("Records run past the end of the answer")
                reader.pos += max(size, 0)
                ranges = []
                for _ in range(max(reader.array(), 0)):
                    ranges.append(_RANGE.unpack_from(body, reader.pos))
                    reader.pos += _RANGE.size
                    reader.tags()
                reader.tags()
                partitions.append(FetchedPartition(topic_id, index, error, ack_error, tuple(ranges), size))
            reader.tags()
        for _ in range(max(reader.array(), 0)):  # NodeEndpoints
            reader.i32(), reader.string(), reader.i32(), reader.string()
            reader.tags()
        reader.tags()
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"ShareFetch v1 answer does not parse: {error!r}") from error
    return ShareFetchAnswer(code, message, lock, tuple(partitions))


class AcknowledgeAnswer(NamedTuple):
    error: int
    message: str | None
    partitions: tuple[tuple[bytes, int, int], ...]  # (topic id, partition, error code)


def parse_share_acknowledge(body: bytes) -> AcknowledgeAnswer:
    """A whole ShareAcknowledge v1 answer (section 2.4; AcquisitionLockTimeoutMs is v2+), strictly."""
    try:
        reader = wire._reader(wire.SHARE_ACKNOWLEDGE, 1, body)
        reader.i32()  # throttle
        code = reader.i16()
        message = reader.string()
        partitions = []
        for _ in range(max(reader.array(), 0)):
            topic_id = reader.raw(16)
            for _ in range(max(reader.array(), 0)):
                index, error = reader.i32(), reader.i16()
                reader.string()
                reader.i32(), reader.i32()  # CurrentLeader
                reader.tags()
                reader.tags()
                partitions.append((topic_id, index, error))
            reader.tags()
        for _ in range(max(reader.array(), 0)):
            reader.i32(), reader.string(), reader.i32(), reader.string()
            reader.tags()
        reader.tags()
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"ShareAcknowledge v1 answer does not parse: {error!r}") from error
    return AcknowledgeAnswer(code, message, tuple(partitions))


def parse_produce(body: bytes) -> list[tuple[int, int]]:
    """A Produce v7 answer: (error code, base offset) per partition."""
    try:
        reader = wire._reader(wire.PRODUCE, 7, body)
        out = []
        for _ in range(max(reader.array(), 0)):
            reader.string()
            for _ in range(max(reader.array(), 0)):
                reader.i32()
                code = reader.i16()
                (base,) = _I64.unpack_from(body, reader.pos)
                reader.pos += 24  # base offset, log append time, log start offset
                out.append((code, base))
        reader.i32()  # throttle
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"Produce v7 answer does not parse: {error!r}") from error
    return out


def parse_alter_configs(body: bytes) -> list[tuple[int, str | None]]:
    """An IncrementalAlterConfigs v0 answer: (error code, message) per resource."""
    try:
        reader = wire._reader(wire.INCREMENTAL_ALTER_CONFIGS, 0, body)
        reader.i32()  # throttle
        out = []
        for _ in range(max(reader.array(), 0)):
            code, message = reader.i16(), reader.string()
            reader.i8(), reader.string()  # resource type and name
            out.append((code, message))
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"IncrementalAlterConfigs v0 answer does not parse: {error!r}") from error
    return out
