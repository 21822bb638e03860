"""The few Kafka requests the load generator sends, encoded by hand, and the answers it reads.

Encoding by hand (struct, no kio) keeps the generator cheap enough to stay out of the measurement:
JoinGroup and SyncGroup are built while a formation is being timed, ConsumerGroupHeartbeats while a
consumer group forms. tests/test_benchmarks.py checks every frame built here against kio's encoding,
version by version, and every answer parsed here against kio's encoding of it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

API_VERSIONS = 18
JOIN_GROUP = 11
HEARTBEAT = 12
SYNC_GROUP = 14
CREATE_TOPICS = 19
CONSUMER_GROUP_HEARTBEAT = 68
# The share-group scenarios (benchmarks/share_wire.py): KIP-932's APIs and the untimed set-up around them.
PRODUCE = 0
INCREMENTAL_ALTER_CONFIGS = 44
SHARE_GROUP_HEARTBEAT = 76
SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79

# First flexible version (compact strings and arrays, tagged fields) of each API. KIP-848's APIs are flexible
# from v0 (docs/spec/consumer-groups.md section 2).
FLEXIBLE_FROM = {
    API_VERSIONS: 3,
    JOIN_GROUP: 6,
    HEARTBEAT: 4,
    SYNC_GROUP: 4,
    CREATE_TOPICS: 5,
    CONSUMER_GROUP_HEARTBEAT: 0,
    PRODUCE: 9,
    INCREMENTAL_ALTER_CONFIGS: 1,
    SHARE_GROUP_HEARTBEAT: 0,  # KIP-932's APIs are flexible from v0 too (docs/spec/share-groups.md section 2)
    SHARE_FETCH: 0,
    SHARE_ACKNOWLEDGE: 0,
}

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
TOPIC_ALREADY_EXISTS = 36
FENCED_MEMBER_EPOCH = 110

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def blob(value: bytes | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return (_uvarint(len(value) + 1) if flexible else _I32.pack(len(value))) + value


def array_length(count: int, flexible: bool) -> bytes:
    return _uvarint(count + 1) if flexible else _I32.pack(count)


def frame(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    """Size, request header (v1, or v2 with empty tags when flexible), body."""
    header = _HEADER.pack(api_key, version, correlation_id) + string(client_id, False)
    if version >= FLEXIBLE_FROM[api_key]:
        header += b"\x00"
    return _I32.pack(len(header) + len(body)) + header + body


def api_versions_request(correlation_id: int = 1, client_id: str = "bench") -> bytes:
    return frame(API_VERSIONS, 0, correlation_id, client_id, b"")


def join_body(
    version: int,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: Sequence[tuple[str, bytes]],
    protocol_type: str = "consumer",
) -> bytes:
    flex = version >= FLEXIBLE_FROM[JOIN_GROUP]
    out = [string(group_id, flex), _I32.pack(session_timeout_ms)]
    if version >= 1:
        out.append(_I32.pack(rebalance_timeout_ms))
    out.append(string(member_id, flex))
    if version >= 5:
        out.append(string(instance_id, flex))
    out.append(string(protocol_type, flex))
    out.append(array_length(len(protocols), flex))
    for name, metadata in protocols:
        out.append(string(name, flex) + blob(metadata, flex) + (b"\x00" if flex else b""))
    if version >= 8:
        out.append(string(None, flex))  # reason
    if flex:
        out.append(b"\x00")
    return b"".join(out)


def sync_body(
    version: int,
    group_id: str,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    assignments: Iterable[tuple[str, bytes]],
    protocol_type: str = "consumer",
    protocol_name: str = "range",
) -> bytes:
    flex = version >= FLEXIBLE_FROM[SYNC_GROUP]
    out = [string(group_id, flex), _I32.pack(generation_id), string(member_id, flex)]
    if version >= 3:
        out.append(string(instance_id, flex))
    if version >= 5:
        out.append(string(protocol_type, flex) + string(protocol_name, flex))
    items = [string(m, flex) + blob(a, flex) + (b"\x00" if flex else b"") for m, a in assignments]
    out.append(array_length(len(items), flex))
    out.extend(items)
    if flex:
        out.append(b"\x00")
    return b"".join(out)


def heartbeat_body(version: int, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> bytes:
    flex = version >= FLEXIBLE_FROM[HEARTBEAT]
    out = string(group_id, flex) + _I32.pack(generation_id) + string(member_id, flex)
    if version >= 3:
        out += string(instance_id, flex)
    return out + (b"\x00" if flex else b"")


def subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: what a consumer puts in its JoinGroup protocol metadata."""
    return _I16.pack(0) + _I32.pack(len(topics)) + b"".join(string(t, False) for t in topics) + _I32.pack(-1)


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0: what the leader hands each member in SyncGroup."""
    owned = _I32.pack(len(partitions)) + b"".join(_I32.pack(p) for p in partitions)
    return _I16.pack(0) + _I32.pack(1) + string(topic, False) + owned + _I32.pack(-1)


# -- KIP-848 consumer groups ------------------------------------------------------------------------

# One member's partitions as ConsumerGroupHeartbeat carries them: (topic id, 16 raw bytes; partitions), sorted.
Owned = tuple[tuple[bytes, tuple[int, ...]], ...]

_I8 = struct.Struct(">b")


def topic_partitions(owned: Owned) -> bytes:
    """A compact array of {TopicId uuid, Partitions []int32, tags} (docs/spec/consumer-groups.md section 2.1)."""
    out = [array_length(len(owned), True)]
    for topic_id, partitions in owned:
        out.append(topic_id + array_length(len(partitions), True) + b"".join(_I32.pack(p) for p in partitions))
        out.append(b"\x00")
    return b"".join(out)


def consumer_heartbeat_body(
    version: int,
    group_id: str,
    member_id: str,
    member_epoch: int,
    *,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    topic_names: Sequence[str] | None = None,
    topic_regex: str | None = None,
    server_assignor: str | None = None,
    owned: Owned | None = None,
) -> bytes:
    """A ConsumerGroupHeartbeat body, v0 or v1 (section 2.1): every optional field null (or -1) unless given.

    The defaults are the steady heartbeat of section 12.3; a join sets the epoch to 0, the rebalance timeout,
    the names, the regex ("" from v1, as librdkafka sends it) and ``owned=()``; an acknowledgement sets ``owned``.
    """
    out = [
        string(group_id, True),
        string(member_id, True),
        _I32.pack(member_epoch),
        string(instance_id, True),
        string(rack_id, True),
        _I32.pack(rebalance_timeout_ms),
    ]
    if topic_names is None:
        out.append(b"\x00")
    else:
        out.append(array_length(len(topic_names), True) + b"".join(string(t, True) for t in topic_names))
    if version >= 1:
        out.append(string(topic_regex, True))
    out.append(string(server_assignor, True))
    out.append(b"\x00" if owned is None else topic_partitions(owned))
    out.append(b"\x00")
    return b"".join(out)


def create_topics_body(name: str, partitions: int, timeout_ms: int = 30_000) -> bytes:
    """CreateTopics v2 (not flexible): one topic, ``partitions`` partitions, replication factor 1, no configs."""
    topic = string(name, False) + _I32.pack(partitions) + _I16.pack(1) + _I32.pack(0) + _I32.pack(0)
    return _I32.pack(1) + topic + _I32.pack(timeout_ms) + b"\x00"


# -- answers ----------------------------------------------------------------------------------


class ParseError(Exception):
    pass


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def i16(self) -> int:
        (value,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def i32(self) -> int:
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def i8(self) -> int:
        (value,) = _I8.unpack_from(self.data, self.pos)
        self.pos += 1
        return int(value)

    def raw(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise ParseError("field runs past the end of the answer")
        value = self.data[self.pos : end]
        self.pos = end
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def string(self) -> str | None:
        size = self.length(False)
        if size < 0:
            return None
        end = self.pos + size
        if end > len(self.data):
            raise ParseError("string runs past the end of the answer")
        value = self.data[self.pos : end].decode()
        self.pos = end
        return value

    def blob(self) -> bytes | None:
        size = self.length(True)
        if size < 0:
            return None
        end = self.pos + size
        if end > len(self.data):
            raise ParseError("bytes run past the end of the answer")
        value = self.data[self.pos : end]
        self.pos = end
        return value

    def array(self) -> int:
        return self.length(True)

    def tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ParseError(f"{len(self.data) - self.pos} bytes left over in the answer")


def _reader(api_key: int, version: int, body: bytes) -> _Reader:
    """A reader past the response header (correlation id, plus tags when flexible)."""
    flexible = version >= FLEXIBLE_FROM[api_key]
    reader = _Reader(body, 4, flexible)
    if flexible and api_key != API_VERSIONS:
        reader.tags()
    return reader


def correlation_of(body: bytes) -> int:
    return int(_I32.unpack_from(body, 0)[0])


def parse_api_versions(body: bytes) -> dict[int, tuple[int, int]]:
    """An ApiVersions v0 answer (after the size prefix): {api key: (min, max)}."""
    reader = _reader(API_VERSIONS, 0, body)
    error = reader.i16()
    if error:
        raise ParseError(f"ApiVersions answered error {error}")
    versions = {}
    for _ in range(reader.array()):
        key, low, high = reader.i16(), reader.i16(), reader.i16()
        versions[key] = (low, high)
    reader.end()
    return versions


class JoinAnswer(NamedTuple):
    error: int
    generation_id: int
    leader: str
    member_id: str
    members: tuple[str, ...]  # only the leader gets the member list


def parse_join(version: int, body: bytes) -> JoinAnswer:
    """A whole JoinGroup answer, strictly: every byte must be accounted for."""
    try:
        reader = _reader(JOIN_GROUP, version, body)
        if version >= 2:
            reader.i32()  # throttle
        code = reader.i16()
        generation = reader.i32()
        if version >= 7:
            reader.string()  # protocol type
        reader.string()  # protocol name
        leader = reader.string() or ""
        if version >= 9:
            reader.pos += 1  # skip assignment
        member_id = reader.string() or ""
        members = []
        for _ in range(max(reader.array(), 0)):
            members.append(reader.string() or "")
            if version >= 5:
                reader.string()  # group instance id
            reader.blob()  # metadata
            reader.tags()
        reader.tags()
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"JoinGroup v{version} answer does not parse: {error!r}") from error
    return JoinAnswer(code, generation, leader, member_id, tuple(members))


def parse_sync(version: int, body: bytes) -> int:
    """The error code of a SyncGroup answer, parsed strictly."""
    try:
        reader = _reader(SYNC_GROUP, version, body)
        if version >= 1:
            reader.i32()  # throttle
        code = reader.i16()
        if version >= 5:
            reader.string()
            reader.string()
        reader.blob()
        reader.tags()
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"SyncGroup v{version} answer does not parse: {error!r}") from error
    return code


class ConsumerHeartbeatAnswer(NamedTuple):
    error: int
    message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Owned | None  # None: "no change" (the marker byte -1); () is an empty assignment


def parse_consumer_heartbeat(body: bytes) -> ConsumerHeartbeatAnswer:
    """A whole ConsumerGroupHeartbeat answer (v0 and v1 are the same, section 2.1), strictly.

    The Assignment is a nullable struct: a marker byte (-1 null, 1 present), then its TopicPartitions and tags.
    Partitions come back sorted by topic id, then partition, so two answers naming one set compare equal.
    """
    try:
        reader = _reader(CONSUMER_GROUP_HEARTBEAT, 0, body)
        reader.i32()  # throttle
        code = reader.i16()
        message = reader.string()
        member_id = reader.string()
        epoch = reader.i32()
        interval = reader.i32()
        assignment: Owned | None = None
        marker = reader.i8()
        if marker >= 0:
            topics = []
            for _ in range(max(reader.array(), 0)):
                topic_id = reader.raw(16)
                partitions = tuple(sorted(reader.i32() for _ in range(max(reader.array(), 0))))
                reader.tags()
                topics.append((topic_id, partitions))
            reader.tags()
            assignment = tuple(sorted(topics))
        elif marker != -1:
            raise ParseError(f"Assignment marker {marker}")
        reader.tags()
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"ConsumerGroupHeartbeat answer does not parse: {error!r}") from error
    return ConsumerHeartbeatAnswer(code, message, member_id, epoch, interval, assignment)


def consumer_heartbeat_error_offset() -> int:
    """Where the error code sits in a ConsumerGroupHeartbeat answer frame (size prefix, correlation id, header
    tags, throttle)."""
    return 4 + 4 + 1 + 4


def parse_create_topics(body: bytes) -> list[tuple[str, int, str | None]]:
    """A CreateTopics v2 answer: (name, error code, message) per topic."""
    try:
        reader = _reader(CREATE_TOPICS, 2, body)
        reader.i32()  # throttle
        topics = [(reader.string() or "", reader.i16(), reader.string()) for _ in range(max(reader.array(), 0))]
        reader.end()
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ParseError(f"CreateTopics v2 answer does not parse: {error!r}") from error
    return topics


def heartbeat_answer(version: int, correlation_id: int, error: int = 0) -> bytes:
    """The exact bytes of a Heartbeat answer frame (size prefix included): throttle 0, ``error``."""
    flexible = version >= FLEXIBLE_FROM[HEARTBEAT]
    body = _I32.pack(correlation_id) + (b"\x00" if flexible else b"")
    if version >= 1:
        body += _I32.pack(0)
    body += _I16.pack(error) + (b"\x00" if flexible else b"")
    return _I32.pack(len(body)) + body


def heartbeat_error_offset(version: int) -> int:
    """Where the error code sits in a Heartbeat answer frame, counting the size prefix."""
    flexible = version >= FLEXIBLE_FROM[HEARTBEAT]
    return 4 + 4 + (1 if flexible else 0) + (4 if version >= 1 else 0)
