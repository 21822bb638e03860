"""Valid requests of every API and version, built per kio's schema and encoded with kio.

Field values come from small pools where a handler looks them up (group ids, topics, member ids, protocol
names), so that a request reaches past "unknown group" into the coordinator: the fuzz worker hands out member ids
``<client id>-u1``, ``-u2``... (a deterministic ``new_uuid``), and those are in the pool. Other values are mostly
small and plausible, now and then an extreme of their type (a partition count of 2^31-1 is a valid request too).

The encoder is kio's own ``entity_writer``, writing into a buffer that notes the byte range of every primitive
write (a length prefix, an int, a string's bytes, a varint byte, a tag buffer): the mutations aim at those.
"""

from __future__ import annotations

import datetime
import io
import random
import struct
import uuid
from collections.abc import Sequence
from dataclasses import MISSING, Field, dataclass, fields
from functools import cache
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional
from kio.static.primitive import i16, i32

from protocol.apis import SUPPORTED_VERSIONS, ApiKey

CLIENT_ID = "fuzz"
GROUPS = ("g0", "g1")
TOPICS = ("topic", "t1")  # the worker and the live broker create "topic" (3 partitions); "t1" is made by requests
MEMBERS = ("", f"{CLIENT_ID}-u1", f"{CLIENT_ID}-u2", "inst-u1", "m-unknown")
INSTANCES = (None, "inst")
PROTOCOLS = ("range", "roundrobin")
ALL_VERSIONS: tuple[tuple[int, int], ...] = tuple(
    (int(api), version) for api, (low, high) in SUPPORTED_VERSIONS.items() for version in range(low, high + 1)
)
# The group APIs come up more often: they build the state the other requests then meet.
_WEIGHTS = {
    ApiKey.JOIN_GROUP: 6,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.OFFSET_COMMIT: 3,
    ApiKey.OFFSET_FETCH: 2,
    ApiKey.PRODUCE: 2,
    ApiKey.FETCH: 2,
}
_APIS = tuple(int(api) for api in SUPPORTED_VERSIONS)
_API_WEIGHTS = tuple(_WEIGHTS.get(ApiKey(api), 1) for api in _APIS)

_INT_BOUNDS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_UINT_BOUNDS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


@dataclass(frozen=True, slots=True)
class Frame:
    """One request as the broker's FrameReader hands it on: header and body, no size prefix.

    ``tokens`` are the (offset, length) of every primitive write kio made, in order.
    """

    api_key: int
    api_version: int
    payload: bytes
    tokens: tuple[tuple[int, int], ...]

    def sized(self) -> bytes:
        return struct.pack(">i", len(self.payload)) + self.payload


class _Recorder(io.BytesIO):
    """A buffer that notes where each write went."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[tuple[int, int]] = []

    def write(self, data: Any) -> int:
        self.tokens.append((self.tell(), len(data)))
        return super().write(data)


def pick_api(r: random.Random) -> tuple[int, int]:
    """An (api, version) the broker supports, the group APIs weighted up."""
    api = r.choices(_APIS, _API_WEIGHTS)[0]
    low, high = SUPPORTED_VERSIONS[api]
    return api, r.randint(low, high)


def build_request(r: random.Random, api_key: int, api_version: int) -> Any:
    """A kio request entity of that api and version with values drawn from ``r``."""
    return _entity(r, load_request_schema(api_key, api_version), "")


def encode(request: Any, correlation_id: int = 1, client_id: str | None = CLIENT_ID) -> Frame:
    """The frame of a kio request (with the request header of its version), its writes noted."""
    header_cls = type(request).__header_schema__
    header = header_cls(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = _Recorder()
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(request))(buffer, request)
    return Frame(int(request.__api_key__), int(request.__version__), buffer.getvalue(), tuple(buffer.tokens))


def valid_frame(r: random.Random, api_key: int, api_version: int, correlation_id: int = 1) -> Frame:
    return encode(build_request(r, api_key, api_version), correlation_id)


# -- values per field ---------------------------------------------------------------------------------------------


@cache
def _fields(cls: type) -> tuple[Field[Any], ...]:
    return fields(cls)


def _entity(r: random.Random, cls: type, owner: str) -> Any:
    values: dict[str, Any] = {}
    for f in _fields(cls):
        if "tag" in f.metadata and r.random() < 0.8:
            values[f.name] = _tag_default(f)  # usually left out of the tag buffer, as clients send it
            continue
        values[f.name] = _field(r, f, cls.__name__)
    return cls(**values)


def _tag_default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return get_tagged_field_default(f)


def _field(r: random.Random, f: Field[Any], owner: str) -> Any:
    kind = classify_field(f)
    nullable = is_optional(f) and "tag" not in f.metadata
    if isinstance(kind, EntityField):
        return None if nullable and r.random() < 0.2 else _entity(r, kind.type_, kind.type_.__name__)
    if isinstance(kind, EntityTupleField | PrimitiveTupleField):
        if nullable and r.random() < 0.05:
            return None
        count = r.choice((0, 1, 1, 1, 2, 3)) if r.random() < 0.97 else r.randint(4, 40)
        if isinstance(kind, EntityTupleField):
            return tuple(_entity(r, kind.type_, kind.type_.__name__) for _ in range(count))
        return tuple(_primitive(r, f, owner, False) for _ in range(count))
    return _primitive(r, f, owner, nullable)


def _primitive(r: random.Random, f: Field[Any], owner: str, nullable: bool) -> Any:
    kafka_type = f.metadata["kafka_type"]
    name = f.name
    if kafka_type == "string":
        # A transactional id makes this broker refuse a Produce outright: usually none, as consumers send it.
        if nullable and r.random() < (0.9 if name == "transactional_id" else 0.1):
            return None
        return _string(r, name, owner)
    if kafka_type in ("bytes", "records"):
        if nullable and r.random() < 0.1:
            return None
        return _records(r) if kafka_type == "records" else _bytes(r, name)
    if kafka_type in _INT_BOUNDS:
        bits = _INT_BOUNDS[kafka_type]
        value = _integer(r, name) if r.random() < 0.92 else r.choice((-(2**bits), 2**bits - 1, -1, 0))
        return max(-(2**bits), min(2**bits - 1, value))
    if kafka_type in _UINT_BOUNDS:
        return r.choice((0, 1, 2 ** _UINT_BOUNDS[kafka_type] - 1))
    if kafka_type == "bool":
        return r.random() < 0.5
    if kafka_type == "float64":
        return r.choice((0.0, 1.5, -1.0, 1e308))
    if kafka_type == "uuid":
        return uuid.UUID(int=0) if r.random() < 0.7 else uuid.UUID(int=r.getrandbits(128))
    if kafka_type == "error_code":
        return r.choice(list(ErrorCode))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=_millis(r, name))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(1_700_000_000 + r.randint(0, 1000), tz=datetime.UTC)
    raise TypeError(f"{owner}.{name}: no values for kafka type {kafka_type!r}")


def _string(r: random.Random, name: str, owner: str) -> str:
    if r.random() < 0.12:
        return _odd_text(r)
    if name in ("group_id", "groups", "groups_names"):
        return r.choice(GROUPS)
    if name == "member_id":
        return r.choice(MEMBERS)
    if name == "group_instance_id":
        return r.choice(INSTANCES) or "inst"
    if name == "protocol_type":
        return "consumer" if r.random() < 0.9 else ""
    if name == "protocol_name" or (name == "name" and "Protocol" in owner):
        return r.choice(PROTOCOLS)
    if name in ("name", "topic", "topics", "topic_names"):
        return r.choice(TOPICS)
    if (name == "key" and "Coordinator" in owner) or name == "coordinator_keys":
        return r.choice(GROUPS)
    return r.choice(("", "x", "fuzz", "1.0"))


def _odd_text(r: random.Random) -> str:
    return r.choice(
        (
            "",
            "\x00",
            "é☃𝄞",
            ".",
            "..",
            "a/b",
            "x" * r.randint(200, 300),
            "y" * 249,
            "z" * (0x7FFF if r.random() < 0.1 else 3000),
        )
    )


def _bytes(r: random.Random, name: str) -> bytes:
    if r.random() < 0.8:
        if name == "metadata":
            return subscription(r.sample(TOPICS, r.randint(1, len(TOPICS))))
        if name == "assignment":
            return assignment({TOPICS[0]: [0, 1, 2]} if r.random() < 0.5 else {})
    return r.randbytes(r.choice((0, 1, 4, 16, 64)))


def _integer(r: random.Random, name: str) -> int:
    if name in ("partition_index", "partition", "index", "partition_indexes"):
        return r.choice((0, 0, 1, 2, -1, 3, 99))
    if name.startswith("generation_id") or name == "member_epoch":
        return r.choice((-1, 0, 1, 1, 2, 3))
    if name in ("num_partitions", "count"):  # partitions to create: now and then a bomb (issue 14, item 2)
        return r.choice((1, 2, 3, 4, 5, -1, 0)) if r.random() < 0.85 else r.choice((10_001, 100_000, 3_000_000))
    if name == "replication_factor":
        return r.choice((-1, 1, 1, 3))
    if name == "acks":
        return r.choice((-1, -1, 1, 0, 2))
    if name == "isolation_level":
        return r.choice((0, 0, 1, 2))
    if name in ("max_bytes", "partition_max_bytes"):
        return r.choice((1_048_576, 65_536, 0, 100))
    if name in ("fetch_offset", "committed_offset", "log_start_offset", "timestamp"):
        return r.choice((0, 1, 5, -1, -2, -3, 10**6))
    if "leader_epoch" in name or name == "last_fetched_epoch":  # -1: "no epoch", what most clients send
        return r.choice((-1, -1, 0, 5))
    if name in ("producer_id", "producer_epoch", "replica_id", "broker_id", "session_epoch"):
        return r.choice((-1, 0, 1))
    return r.choice((0, 1, 2, -1, 100))


def _millis(r: random.Random, name: str) -> int:
    if r.random() < 0.05:
        return r.choice((-1, 0, 2**31 - 1))
    if name == "session_timeout":
        return r.choice((1000, 6000, 10_000, 30_000))
    if name == "rebalance_timeout":
        return r.choice((1000, 10_000, 60_000))
    return r.choice((0, 10, 100, 500))


def _records(r: random.Random) -> bytes:
    if r.random() < 0.1:
        return r.randbytes(r.choice((0, 10, 61, 70)))
    return record_batch(r.randint(1, 3), compression=r.choice((0, 0, 0, 1)))


# -- payloads that have their own format --------------------------------------------------------------------------


def record_batch(count: int, compression: int = 0) -> bytes:
    """A magic-2 batch as a producer sends it, built by aiokafka's own builder (CRC included)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for index in range(count):
        builder.append(index, timestamp=1_700_000_000_000 + index, key=None, value=b"v%d" % index, headers=[])
    return bytes(builder.build())


def subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocol Subscription v0 (what a Java consumer puts in JoinGroup's protocol metadata)."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocol Assignment v0."""
    out = struct.pack(">hi", 0, len(partitions))
    for topic, indexes in partitions.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(indexes))
        out += b"".join(struct.pack(">i", index) for index in indexes)
    return out + struct.pack(">i", -1)


def aimed_at(entity: Any, topic: str, partition: int, timestamp: int | None = None) -> Any:
    """The same request with one topic and one partition, these (and a ListOffsets timestamp, when given): a
    read aimed at what a Produce just wrote, or a Produce aimed where the reads will look."""
    values: dict[str, Any] = {}
    cls: type = type(entity)
    for f in _fields(cls):
        value = getattr(entity, f.name)
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField) and not value:  # an empty list of topics aims at nothing: fill it
            value = (_entity(random.Random(0), kind.type_, kind.type_.__name__),)
        if isinstance(value, tuple) and value and hasattr(value[0], "__dataclass_fields__"):
            value = (aimed_at(value[0], topic, partition, timestamp),)  # one: the same partition twice is refused
        elif hasattr(value, "__dataclass_fields__"):
            value = aimed_at(value, topic, partition, timestamp)
        elif f.name in ("name", "topic") and isinstance(value, str) and "Topic" in type(entity).__name__:
            value = topic
        elif f.name in ("partition_index", "partition", "index") and isinstance(value, int):
            value = partition
        elif f.name == "timestamp" and timestamp is not None:
            value = timestamp
        values[f.name] = value
    return type(entity)(**values)
