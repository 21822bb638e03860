"""The steady ShareFetch's fast path (``RequestPipeline._share_fetch``: ``protocol/share_fetch_requests.py`` and
``broker/api/share_fetch.py`` ``share_fetch_steady``) answers what the generic kio path answers, byte for byte.

Two brokers live through the same seeded scenario, each on a manual clock: one as it runs, one with a fault rule
armed that matches nothing (every frame then takes the generic path). Three share consumers send ShareFetches of
many shapes (the steady poll with the previous answer's acknowledgements, partial, RELEASE, REJECT, GAP, several
types, out of range or descending batches, someone else's offsets, a wrong, initial or final session epoch, an
unknown member, topic or partition, tight MaxRecords and MaxBytes, a long poll that parks until a produce wakes it,
lock expiry) and every answer frame of the two brokers must be the same (the brokers' random topic ids swapped)."""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

import broker.server.pipeline as pipeline_module
from benchmarks import share_wire, wire
from broker.api.base import ApiContext, BrokerIdentity
from broker.server.broker import BrokerServer
from broker.timing.clock import ManualClock
from protocol.share_fetch_requests import decode_steady_share_fetch
from tests.conftest import broker_settings
from tests.protocol.test_share_fetch_requests import frame_of
from tests.server.test_pipeline import FakeIO
from tests.wire.share_client import SHARE_GROUP_CONFIG

GROUP = "sg"
LOCK_MS = SHARE_GROUP_CONFIG.share_record_lock_duration_ms


class Node:
    """One broker and its connections, driven with bytes alone."""

    def __init__(self, generic: bool) -> None:
        self.clock = ManualClock()
        self.server = BrokerServer(broker_settings(group=SHARE_GROUP_CONFIG, topics=(("t", 2),)), self.clock)
        self.clock.attach(self.server.purgatory)
        if generic:  # any armed rule sends every frame the generic way; this one matches nothing
            self.server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 1, "client_id": "nobody"})
        info = self.server.topics.get("t")
        assert info is not None
        self.topic_id: uuid.UUID = info.topic_id
        self.producer = self.connect()
        self.send(self.producer, wire.frame(wire.INCREMENTAL_ALTER_CONFIGS, 0, 1, "p",
                  share_wire.alter_group_config_body(GROUP, "share.auto.offset.reset", "earliest")))  # fmt: skip

    def connect(self) -> FakeIO:
        server = self.server
        api = ApiContext(server.coordinator, server.topics, BrokerIdentity(1, "127.0.0.1", 9092, "c"),
                         server.fetches, settings=server.settings, transactions=server.transactions)  # fmt: skip
        io = FakeIO()
        io.pipeline = pipeline_module.RequestPipeline(server, api, io)
        io.pipeline.connected("127.0.0.1:1", "127.0.0.1", io.write)
        return io

    def send(self, io: FakeIO, frame: bytes) -> None:
        io.pipeline.receive(frame)


class Twins:
    """The fast and the generic broker, fed the same frames (each with its own topic id)."""

    def __init__(self) -> None:
        self.fast, self.generic = Node(False), Node(True)
        self.connections: list[tuple[FakeIO, FakeIO]] = []

    def connect(self) -> int:
        self.connections.append((self.fast.connect(), self.generic.connect()))
        return len(self.connections) - 1

    def send(self, connection: int, build: Any) -> None:
        """``build(topic_id bytes)`` makes the frame for each broker."""
        fast_io, generic_io = self.connections[connection]
        self.fast.send(fast_io, build(self.fast.topic_id.bytes))
        self.generic.send(generic_io, build(self.generic.topic_id.bytes))

    def produce(self, partition: int, batches: int) -> None:
        batch = share_wire.record_batch(10, 20, 1_700_000_000_000)
        for node in (self.fast, self.generic):
            for _ in range(batches):
                node.send(node.producer, wire.frame(0, 7, 9, "p", share_wire.produce_body("t", partition, batch)))

    def advance(self, ms: int) -> None:
        self.fast.clock.advance(ms)
        self.generic.clock.advance(ms)
        for fast_io, generic_io in self.connections:  # a parked answer's completion runs the pass "soon"
            fast_io.pipeline.run()
            generic_io.pipeline.run()

    def answers(self, connection: int) -> tuple[list[bytes], list[bytes]]:
        fast_io, generic_io = self.connections[connection]
        fast, generic = fast_io.answers(), generic_io.answers()
        swapped = [a.replace(self.generic.topic_id.bytes, self.fast.topic_id.bytes) for a in generic]
        return fast, swapped


@pytest.fixture
def fast_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The correlation id of every frame the fast path's decoder read (the generic broker never calls it)."""
    reads: list[int] = []

    def counted(frame: bytes) -> Any:
        decoded = decode_steady_share_fetch(frame)
        if decoded is not None:
            reads.append(decoded[0])
        return decoded

    monkeypatch.setattr(pipeline_module, "decode_steady_share_fetch", counted)
    yield reads


def _member(rng: random.Random) -> str:
    return base64.b64encode(rng.randbytes(16)).decode().rstrip("=")


def _acks(rng: random.Random, acquired: list[tuple[int, int]]) -> list[tuple[int, int, list[int]]]:
    """The previous answer's ranges as the next request acknowledges them, now and then bent out of shape."""
    choice = rng.random()
    ranges = [(first, last, [1]) for first, last in acquired]
    if choice < 0.55 or not ranges:
        return ranges  # the steady poll: ACCEPT all
    first, last, _ = ranges[0]
    if choice < 0.65:
        middle = (first + last) // 2
        return [(first, middle, [rng.choice([1, 2, 3])])]  # a part, released or rejected: the rest stays held
    if choice < 0.72:
        return [(first, last, [rng.choice([0, 1, 2, 3]) for _ in range(last - first + 1)])] if last - first < 8 else [
            (first, last, [2])
        ]
    if choice < 0.78:
        return [(last, first, [1])] if last > first else [(first, last + 5000, [1])]  # descending, out of range
    if choice < 0.84:
        return [(first, last, [rng.choice([5, -1, 4])])]  # an acknowledge type Kafka refuses
    if choice < 0.9:
        return [(max(0, first - 50), first + 3, [1])]  # offsets someone else holds, or nobody
    return [*ranges, (last + 1, last + 3, [1])]


def _join(client_id: str, member: str, topic_id: bytes) -> bytes:
    return wire.frame(76, 1, 1, client_id, share_wire.share_heartbeat_body(GROUP, member, 0, ["t"]))


def _fetch(
    client_id: str,
    member: str,
    limits: tuple[int, int, int, int, int, int],
    listed: tuple[bytes | None, int, list[tuple[int, int, list[int]]]] | None,
    topic_id: bytes,
) -> bytes:
    """A ShareFetch v1 frame, size prefix included; ``listed``: (another topic id or None, partition, acks)."""
    topics = [] if listed is None else [(uuid.UUID(bytes=listed[0] or topic_id), [(listed[1], listed[2])])]
    frame = frame_of(1, client_id, GROUP, member, limits, topics, [])
    return len(frame).to_bytes(4, "big") + frame


@pytest.mark.parametrize("seed", range(12))
def test_the_fast_path_answers_the_generic_bytes_over_many_shapes(seed: int, fast_reads: list[int]) -> None:
    rng = random.Random(seed)
    twins = Twins()
    twins.produce(0, 30)
    twins.produce(1, 5)
    consumers = []
    for index in range(3):
        connection = twins.connect()
        member = _member(rng)
        twins.send(connection, partial(_join, f"c{index}", member))
        consumers.append({"connection": connection, "member": member, "epoch": 0, "acquired": [], "added": False})
    step = 0
    for _ in range(60):
        step = rng.random()
        if step < 0.06:
            twins.produce(rng.choice([0, 0, 1]), rng.randint(1, 20))
            continue
        if step < 0.09:
            twins.advance(rng.choice([10, LOCK_MS + 1]))
            continue
        consumer = rng.choice(consumers)
        connection = consumer["connection"]
        before = len(twins.answers(connection)[0])
        acks = _acks(rng, consumer["acquired"]) if consumer["added"] else []
        epoch = consumer["epoch"]
        shape = rng.random()
        member, partition, topic = consumer["member"], 0, None
        if shape < 0.04:
            epoch = epoch + 7  # a session epoch mismatch
        elif shape < 0.07:
            epoch = -1  # the final epoch: the session closes
        elif shape < 0.09:
            member = _member(rng)  # no session
        elif shape < 0.12:
            partition = rng.choice([1, 5])
        elif shape < 0.14:
            topic = uuid.UUID(int=rng.getrandbits(128)).bytes
        send_topic = not consumer["added"] or bool(acks) or partition != 0 or topic is not None
        limits = (
            epoch,
            rng.choice([0, 0, 0, 500]),
            1,
            rng.choice([0x7FFFFFFF, 0x7FFFFFFF, 300]),
            rng.choice([500, 500, 37, 1]),
            rng.choice([500, 10]),
        )
        step += 1  # the assertions' message: which step differed

        listed = (topic, partition, acks) if send_topic else None
        twins.send(connection, partial(_fetch, f"client-{connection}", member, limits, listed))
        twins.advance(0)
        fast, generic = twins.answers(connection)
        assert fast == generic, (seed, step)
        if len(fast) == before:  # parked: a produce or the wait's end answers it
            twins.produce(0, 2)
            twins.advance(600)
            fast, generic = twins.answers(connection)
            assert fast == generic, (seed, step)
        answer = share_wire.parse_share_fetch(fast[-1])
        if member != consumer["member"] or answer.error:
            continue
        consumer["added"] = epoch != -1
        consumer["epoch"] = 0 if epoch == -1 else (1 if epoch == 0 else epoch + 1)
        consumer["acquired"] = [
            (first, last) for p in answer.partitions if p.partition == 0 for first, last, _ in p.acquired
        ]
    assert len(fast_reads) > 40  # the fast broker read nearly every ShareFetch by hand
