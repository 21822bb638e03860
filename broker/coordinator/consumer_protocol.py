"""The embedded ``consumer`` protocol: what JoinGroup metadata and SyncGroup assignments carry.

Pure decoding and encoding, no I/O. The layouts are Kafka's
``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment`` (versions 0-3, never
flexible): an int16 version, then int16-length strings, int32-length arrays and int32-length
nullable bytes (-1 is null).

Like Kafka's ``ConsumerProtocol.deserializeSubscription``/``deserializeAssignment``, a negative
version is an error, a version newer than 3 is read by its version-3 prefix, and bytes after the
last known field are ignored (newer clients append fields older readers do not know). The
``version`` of a decoded value is the one on the wire, so a v4 subscription decodes with
``version=4`` and the v3 fields.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

# The classic protocol type of the embedded consumer protocol (JoinGroup ProtocolType): not a group type.
CONSUMER_PROTOCOL_TYPE = "consumer"

T = TypeVar("T")
TopicPartitionList = tuple[tuple[str, tuple[int, ...]], ...]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """The bytes are not a (complete, well-formed) consumer protocol payload."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None

    def by_topic(self) -> dict[str, list[int]]:
        """Partitions per topic, sorted and without repeats, topics in name order (a topic may be listed twice)."""
        merged: dict[str, set[int]] = {}
        for topic, partitions in self.partitions:
            merged.setdefault(topic, set()).update(partitions)
        return {topic: sorted(merged[topic]) for topic in sorted(merged)}


# -- decoding ---------------------------------------------------------------------------


class _Reader:
    __slots__ = ("_data", "_offset")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._offset = 0

    def _remaining(self) -> int:
        return len(self._data) - self._offset

    def int16(self) -> int:
        if self._remaining() < 2:
            raise ConsumerProtocolError("truncated int16")
        (value,) = _INT16.unpack_from(self._data, self._offset)
        self._offset += 2
        return int(value)

    def int32(self) -> int:
        if self._remaining() < 4:
            raise ConsumerProtocolError("truncated int32")
        (value,) = _INT32.unpack_from(self._data, self._offset)
        self._offset += 4
        return int(value)

    def _take(self, length: int, what: str) -> bytes:
        if length > self._remaining():
            raise ConsumerProtocolError(f"truncated {what}: {length} bytes announced, {self._remaining()} left")
        start = self._offset
        self._offset += length
        return self._data[start : self._offset]

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        if length < 0:
            raise ConsumerProtocolError(f"negative string length {length}")
        raw = self._take(length, "string")
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ConsumerProtocolError("null string where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        if length == -1:
            return None
        if length < 0:
            raise ConsumerProtocolError(f"negative bytes length {length}")
        return self._take(length, "bytes")

    def _count(self, min_item_size: int) -> int:
        count = self.int32()
        if count < 0:
            raise ConsumerProtocolError(f"negative array length {count}")
        # Every element needs at least min_item_size bytes: reject absurd counts before looping.
        if count * min_item_size > self._remaining():
            raise ConsumerProtocolError(f"truncated array: {count} elements announced, {self._remaining()} bytes left")
        return count

    def array(self, read: Callable[[], T], min_item_size: int) -> tuple[T, ...]:
        return tuple(read() for _ in range(self._count(min_item_size)))

    def int32_array(self) -> tuple[int, ...]:
        count = self._count(4)
        values = struct.unpack_from(f">{count}i", self._data, self._offset)
        self._offset += 4 * count
        return values

    def topic_partitions(self) -> tuple[str, tuple[int, ...]]:
        topic = self.string()
        return topic, self.int32_array()


def _version(reader: _Reader) -> int:
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"negative version {version}")
    return version


# Decoded subscriptions by their bytes: a group's members mostly send the same subscription, and each one is decoded
# at least twice a generation (the group's subscribed topics, the referee's verdict). A Subscription is immutable, so
# equal bytes may share one; bounded, emptied when full (issue 17: forming 100,000 members).
_DECODED: dict[bytes, Subscription] = {}
_DECODED_MAX = 1024


def decode_subscription(data: bytes) -> Subscription:
    """A JoinGroup member's ``consumer`` protocol metadata (ConsumerProtocolSubscription)."""
    key = data if type(data) is bytes else bytes(data)
    known = _DECODED.get(key)
    if known is not None:
        return known
    decoded = _decode_subscription(key)
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[key] = decoded
    return decoded


def _decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = _version(reader)
    topics = reader.array(reader.string, 2)
    user_data = reader.nullable_bytes()
    if version < 1:
        return Subscription(version, topics, user_data)
    owned = reader.array(reader.topic_partitions, 6)
    if version < 2:
        return Subscription(version, topics, user_data, owned)
    generation_id = reader.int32()
    if version < 3:
        return Subscription(version, topics, user_data, owned, generation_id)
    return Subscription(version, topics, user_data, owned, generation_id, reader.nullable_string())


def decode_assignment(data: bytes) -> Assignment:
    """A SyncGroup ``consumer`` protocol assignment (ConsumerProtocolAssignment).

    Empty bytes are the empty assignment: that is what the broker hands members the leader
    left out, and what clients treat as "nothing assigned".
    """
    if not data:
        return Assignment(0, (), None)
    reader = _Reader(bytes(data))
    version = _version(reader)
    partitions = reader.array(reader.topic_partitions, 6)
    return Assignment(version, partitions, reader.nullable_bytes())


# -- encoding ---------------------------------------------------------------------------


def _check_version(version: int) -> None:
    if not 0 <= version <= 0x7FFF:
        raise ConsumerProtocolError(f"version {version} is not a non-negative int16")


def _string(value: str | None) -> bytes:
    if value is None:
        return _INT16.pack(-1)
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ConsumerProtocolError(f"string of {len(raw)} bytes does not fit an int16 length")
    return _INT16.pack(len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _INT32.pack(-1)
    return _INT32.pack(len(value)) + value


def _topic_partitions(entries: TopicPartitionList) -> bytes:
    out = [_INT32.pack(len(entries))]
    for topic, partitions in entries:
        out.append(_string(topic))
        try:
            out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
        except struct.error as exc:
            raise ConsumerProtocolError(f"partitions of {topic!r} do not fit int32: {exc}") from None
    return b"".join(out)


def encode_subscription(subscription: Subscription) -> bytes:
    """The wire form of ``subscription`` at its ``version``.

    Fields the version does not have are dropped, as Kafka does for these ignorable fields; a
    version above 3 is written with the v3 fields (the prefix such a client would send).
    """
    version = subscription.version
    _check_version(version)
    out = [_INT16.pack(version), _INT32.pack(len(subscription.topics))]
    out.extend(_string(topic) for topic in subscription.topics)
    out.append(_bytes(subscription.user_data))
    if version >= 1:
        out.append(_topic_partitions(subscription.owned_partitions))
    if version >= 2:
        try:
            out.append(_INT32.pack(subscription.generation_id))
        except struct.error as exc:
            raise ConsumerProtocolError(f"generation id does not fit int32: {exc}") from None
    if version >= 3:
        out.append(_string(subscription.rack_id))
    return b"".join(out)


def encode_assignment(assignment: Assignment) -> bytes:
    """The wire form of ``assignment`` (every version has the same layout)."""
    _check_version(assignment.version)
    return b"".join(
        (_INT16.pack(assignment.version), _topic_partitions(assignment.partitions), _bytes(assignment.user_data))
    )
