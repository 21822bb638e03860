"""Produce requests Kafka refuses: the partition's error, nothing stored, and the connection carries on.

Each bad batch is a real aiokafka batch, corrupted on purpose. With acks=-1 the
partition answers with Kafka's error code, a "produce refused" line is logged,
the log is unchanged (ListOffsets latest and Fetch) and the same connection
answers the next request. With acks=0 there is no response to carry an error,
so, as Kafka does, the broker closes the connection and says why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from broker.storage.records import restamp
from broker.storage.topics import LogDefaults
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import (
    ATTRIBUTES_AT,
    BATCH_LENGTH_AT,
    GZIP,
    LAST_OFFSET_DELTA_AT,
    MAGIC_AT,
    RECORDS_COUNT_AT,
    make_batch,
    patched,
)
from tests.wire.client import WireClient
from tests.wire.test_data_plane import (
    FETCH_V,
    LATEST,
    LIST_OFFSETS_V,
    TOPIC,
    fetch_partition,
    fetch_partitions,
    latest,
    list_offsets_request,
    produce_request,
    records_of,
    versions,
)

E = ErrorCode
Logs = list[MutableMapping[str, Any]]
CLIENT = "bad-producer"


def flipped_last_byte(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def short_whole_batch() -> bytes:
    """A complete magic-2 batch of 40 bytes: too short for the 61-byte header."""
    return patched(make_batch(1)[:40], BATCH_LENGTH_AT, ">i", 28, fix_crc=False)


def bytes_after_the_records() -> bytes:
    batch = make_batch(2) + b"\x00"
    return patched(batch, BATCH_LENGTH_AT, ">i", len(batch) - 12)


def header_patch(at: int, fmt: str, value: int, count: int = 1, *, fix_crc: bool = True) -> Callable[[], bytes]:
    return lambda: patched(make_batch(count), at, fmt, value, fix_crc=fix_crc)


def idempotent(**options: Any) -> Callable[[], bytes]:
    return lambda: make_batch(1, producer_id=4, producer_epoch=0, **options)


CORRUPT, INVALID = E.corrupt_message, E.invalid_record

# (name, the partition's records, Kafka's error)
BAD_BATCHES: list[tuple[str, Callable[[], bytes | None], ErrorCode]] = [
    ("bad crc", lambda: flipped_last_byte(make_batch(2)), CORRUPT),
    ("bad crc in a gzip batch", lambda: flipped_last_byte(make_batch(3, value=b"g" * 100, compression=GZIP)), CORRUPT),
    ("attributes changed under the crc", header_patch(ATTRIBUTES_AT, ">h", 1, fix_crc=False), CORRUPT),
    ("batch length 13", header_patch(BATCH_LENGTH_AT, ">i", 13, fix_crc=False), CORRUPT),
    ("batch length 0", header_patch(BATCH_LENGTH_AT, ">i", 0, fix_crc=False), CORRUPT),
    ("negative batch length", header_patch(BATCH_LENGTH_AT, ">i", -5, fix_crc=False), CORRUPT),
    ("whole batch shorter than its header", short_whole_batch, CORRUPT),
    ("magic 3", header_patch(MAGIC_AT, ">b", 3), CORRUPT),
    ("truncated batch", lambda: make_batch(2)[:-10], INVALID),
    ("only the first 16 bytes", lambda: make_batch(2)[:16], INVALID),
    ("no batch", lambda: b"", INVALID),
    ("null records", lambda: None, INVALID),
    ("two batches", lambda: make_batch(1) + make_batch(1), INVALID),
    ("magic 1", header_patch(MAGIC_AT, ">b", 1), INVALID),
    ("magic 0", header_patch(MAGIC_AT, ">b", 0), INVALID),
    ("base offset not 0", header_patch(0, ">q", 3), INVALID),
    ("count inconsistent with offsets", header_patch(RECORDS_COUNT_AT, ">i", 2, count=3), INVALID),
    ("negative last offset delta", header_patch(LAST_OFFSET_DELTA_AT, ">i", -1), INVALID),
    ("control batch", header_patch(ATTRIBUTES_AT, ">h", 0x20), INVALID),
    ("producer id without sequence", idempotent(), INVALID),
    ("bytes after the last record", bytes_after_the_records, INVALID),
    # Transactional data without a transactional id (transactions spec 2.10 step 1).
    ("transactional batch", idempotent(base_sequence=0, transactional=True), E.transactional_id_authorization_failed),
]
BAD_IDS = [case[0] for case in BAD_BATCHES]


@asynccontextmanager
async def running(**overrides: Any) -> AsyncIterator[BrokerServer]:
    """An in-process broker like the ``server`` fixture, with other settings."""
    broker = BrokerServer(broker_settings(**overrides))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def lines(logs: Logs, event: str) -> Logs:
    return [entry for entry in logs if entry.get("event") == event]


async def seeded(server: BrokerServer) -> tuple[WireClient, bytes]:
    """A connection that has stored one good batch in partition 0 of "topic"."""
    client = await WireClient.connect(server.port, CLIENT)
    good = make_batch(1, value=b"good")
    response = await client.call(produce_request(11, [(0, good)]))
    assert response.responses[0].partition_responses[0].error_code is E.none
    return client, good


async def assert_unchanged(client: WireClient, server: BrokerServer, good: bytes) -> None:
    """Only the seeded batch is stored, and ``client``'s connection still answers."""
    assert await latest(client, 0) == 1
    (fetched,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 0, 0)])
    assert records_of(fetched) == restamp(good, 0, 0)


async def assert_unchanged_for_a_new_connection(server: BrokerServer, good: bytes) -> None:
    """After a connection was closed on a client: the broker still serves, and stored nothing more."""
    fresh = await WireClient.connect(server.port, "fresh")
    try:
        await assert_unchanged(fresh, server, good)
    finally:
        await fresh.close()


async def assert_closed(client: WireClient, logs: Logs, reason: str) -> None:
    assert await client.closed_by_peer(), "the broker should close the connection"
    host, port = client.writer.get_extra_info("sockname")[:2]
    (line,) = [entry for entry in lines(logs, "closing connection") if entry.get("peer") == f"{host}:{port}"]
    assert line["client_id"] == CLIENT
    assert line["log_level"] == "warning"
    assert reason in line["reason"], line


async def refused_answer(
    client: WireClient, version: int, partitions: list[tuple[int, bytes | None]], **kw: Any
) -> Any:
    response = await client.call(produce_request(version, partitions, **kw))
    (topic,) = response.responses
    return topic.partition_responses


# -- bad batches, acks=-1 --------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
@pytest.mark.parametrize(("name", "records", "error"), BAD_BATCHES, ids=BAD_IDS)
async def test_bad_batch_is_refused_and_nothing_is_stored(
    server: BrokerServer, name: str, records: Callable[[], bytes | None], error: ErrorCode, version: int
) -> None:
    client, good = await seeded(server)
    try:
        with structlog.testing.capture_logs() as logs:
            (answer,) = await refused_answer(client, version, [(0, records())])
        assert (answer.index, answer.error_code, answer.base_offset) == (0, error, -1)
        if version >= 5:
            assert answer.log_start_offset == -1
        if version >= 8:
            assert answer.error_message
        (line,) = lines(logs, "produce refused")
        assert (line["topic"], line["partition"], line["error"]) == (TOPIC, 0, error.name)
        assert line["client_id"] == CLIENT
        assert line["log_level"] == "warning"
        assert lines(logs, "closing connection") == []
        await assert_unchanged(client, server, good)
    finally:
        await client.close()


@pytest.mark.parametrize(("name", "records", "error"), BAD_BATCHES, ids=BAD_IDS)
async def test_bad_batch_with_acks_zero_closes_the_connection(
    server: BrokerServer, name: str, records: Callable[[], bytes | None], error: ErrorCode
) -> None:
    client, good = await seeded(server)
    with structlog.testing.capture_logs() as logs:
        await client.send_raw(client.encode(produce_request(11, [(0, records())], acks=0)))
        # A request behind it on the same connection is never answered.
        await client.send_raw(client.encode(list_offsets_request(LIST_OFFSETS_V, [(0, LATEST)])))
        await assert_closed(client, logs, f"acks=0 produce to {TOPIC}-0 failed with {error.name}")
    await client.close()
    await assert_unchanged_for_a_new_connection(server, good)


async def test_a_bad_partition_does_not_spoil_the_good_ones(server: BrokerServer) -> None:
    client, good = await seeded(server)
    try:
        ok = make_batch(2)
        answers = await refused_answer(client, 9, [(1, ok), (0, flipped_last_byte(make_batch(1))), (2, ok)])
        assert [(a.index, a.error_code, a.base_offset) for a in answers] == [
            (1, E.none, 0),
            (0, E.corrupt_message, -1),
            (2, E.none, 0),
        ]
        await assert_unchanged(client, server, good)
        assert (await latest(client, 1), await latest(client, 2)) == (2, 2)
    finally:
        await client.close()


async def test_a_trailing_partial_batch_is_trimmed(server: BrokerServer) -> None:
    """Kafka's batch iterator stops at a partial batch and the log trims those bytes: one batch, stored whole."""
    client = await WireClient.connect(server.port, CLIENT)
    try:
        batch = make_batch(2)
        (answer,) = await refused_answer(client, 11, [(0, batch + make_batch(1)[:30])])
        assert (answer.error_code, answer.base_offset) == (E.none, 0)
        (fetched,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 0, 0)])
        assert records_of(fetched) == restamp(batch, 0, 0)
        assert server.topics.budget.used == len(batch)
    finally:
        await client.close()


# -- partitions and topics that do not exist -------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
@pytest.mark.parametrize("partition", [3, 100, -1])
async def test_partition_out_of_range(server: BrokerServer, version: int, partition: int) -> None:
    client, good = await seeded(server)
    try:
        (answer,) = await refused_answer(client, version, [(partition, make_batch(1))])
        assert (answer.index, answer.error_code, answer.base_offset) == (partition, E.unknown_topic_or_partition, -1)
        topic = server.topics.get(TOPIC)
        assert topic is not None and topic.partitions == 3
        await assert_unchanged(client, server, good)
    finally:
        await client.close()


async def test_partition_out_of_range_with_acks_zero(server: BrokerServer) -> None:
    client, good = await seeded(server)
    with structlog.testing.capture_logs() as logs:
        await client.send_raw(client.encode(produce_request(11, [(3, make_batch(1))], acks=0)))
        await client.send_raw(client.encode(list_offsets_request(LIST_OFFSETS_V, [(0, LATEST)])))
        await assert_closed(
            client, logs, f"acks=0 produce to {TOPIC}-3 failed with {E.unknown_topic_or_partition.name}"
        )
    await client.close()
    await assert_unchanged_for_a_new_connection(server, good)


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_unknown_topic_without_auto_creation(version: int) -> None:
    async with running(auto_create_topics=False) as server:
        client, good = await seeded(server)
        try:
            response = await client.call(produce_request(version, [(0, make_batch(1))], topic="not-there"))
            (topic,) = response.responses
            assert topic.name == "not-there"
            (answer,) = topic.partition_responses
            assert (answer.error_code, answer.base_offset) == (E.unknown_topic_or_partition, -1)
            assert server.topics.get("not-there") is None
            listed = await client.call(list_offsets_request(LIST_OFFSETS_V, [(0, LATEST)], topic="not-there"))
            assert listed.topics[0].partitions[0].error_code is E.unknown_topic_or_partition
            await assert_unchanged(client, server, good)
        finally:
            await client.close()


async def test_unknown_topic_without_auto_creation_acks_zero() -> None:
    async with running(auto_create_topics=False) as server:
        client, _ = await seeded(server)
        with structlog.testing.capture_logs() as logs:
            await client.send_raw(client.encode(produce_request(11, [(0, make_batch(1))], topic="not-there", acks=0)))
            await assert_closed(
                client, logs, f"acks=0 produce to not-there-0 failed with {E.unknown_topic_or_partition.name}"
            )
        await client.close()
        assert server.topics.get("not-there") is None


async def test_unknown_topic_is_created_when_auto_creation_is_on(server: BrokerServer) -> None:
    """The contrast: the default broker creates the topic (num.partitions=1) and stores the batch."""
    client = await WireClient.connect(server.port, CLIENT)
    try:
        batch = make_batch(1)
        (answer,) = await refused_answer(client, 11, [(0, batch)], topic="fresh-topic")
        assert (answer.error_code, answer.base_offset) == (E.none, 0)
        created = server.topics.get("fresh-topic")
        assert created is not None and created.partitions == 1
        assert await latest(client, 0, topic="fresh-topic") == 1
        (answer,) = await refused_answer(client, 11, [(0, batch)], topic="bad name!")
        assert answer.error_code is E.unknown_topic_or_partition
        assert server.topics.get("bad name!") is None
    finally:
        await client.close()


# -- size limits -----------------------------------------------------------------------------------

MAX_MESSAGE_BYTES = 300


def batch_of_size(size: int) -> bytes:
    """A one-record batch of exactly ``size`` bytes (the value pads it)."""
    for length in range(size):
        batch = make_batch(1, value=b"a" * length)
        if len(batch) == size:
            return batch
    raise AssertionError(f"no batch of {size} bytes")


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_batch_above_max_message_bytes(version: int) -> None:
    async with running(log=LogDefaults(max_message_bytes=MAX_MESSAGE_BYTES)) as server:
        client, good = await seeded(server)
        try:
            at_limit, too_big = batch_of_size(MAX_MESSAGE_BYTES), batch_of_size(MAX_MESSAGE_BYTES + 1)
            assert (len(at_limit), len(too_big)) == (MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES + 1)
            with structlog.testing.capture_logs() as logs:
                (answer,) = await refused_answer(client, version, [(0, too_big)])
            assert (answer.error_code, answer.base_offset) == (E.message_too_large, -1)
            (line,) = lines(logs, "produce refused")
            assert line["error"] == E.message_too_large.name
            await assert_unchanged(client, server, good)
            (answer,) = await refused_answer(client, version, [(1, at_limit)])
            assert answer.error_code is E.none
        finally:
            await client.close()


async def test_batch_above_max_message_bytes_acks_zero() -> None:
    async with running(log=LogDefaults(max_message_bytes=MAX_MESSAGE_BYTES)) as server:
        client, good = await seeded(server)
        with structlog.testing.capture_logs() as logs:
            await client.send_raw(client.encode(produce_request(11, [(0, make_batch(1, value=b"b" * 400))], acks=0)))
            await assert_closed(client, logs, f"failed with {E.message_too_large.name}")
        await client.close()
        await assert_unchanged_for_a_new_connection(server, good)


def storage_batch(letter: bytes) -> bytes:
    return make_batch(1, value=letter * 200)


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_storage_cap(version: int) -> None:
    size = len(storage_batch(b"x"))
    async with running(storage_max_bytes=2 * size) as server:
        client = await WireClient.connect(server.port, CLIENT)
        try:
            first, second = storage_batch(b"1"), storage_batch(b"2")
            assert [a.error_code for a in await refused_answer(client, version, [(0, first), (1, second)])] == [
                E.none,
                E.none,
            ]
            assert server.topics.budget.used == 2 * size  # exactly at the cap
            with structlog.testing.capture_logs() as logs:
                (answer,) = await refused_answer(client, version, [(2, storage_batch(b"3"))])
            assert (answer.error_code, answer.base_offset) == (E.kafka_storage_error, -1)
            (line,) = lines(logs, "produce refused")
            assert (line["error"], line["topic"], line["partition"]) == (E.kafka_storage_error.name, TOPIC, 2)
            assert "storage-max-bytes" in line["reason"]
            assert server.topics.budget.used == 2 * size
            assert [await latest(client, p) for p in (0, 1, 2)] == [1, 1, 0]
            (fetched,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 0, 0)])
            assert records_of(fetched) == restamp(first, 0, 0)
        finally:
            await client.close()


async def test_storage_cap_acks_zero() -> None:
    size = len(storage_batch(b"x"))
    async with running(storage_max_bytes=size) as server:
        client = await WireClient.connect(server.port, CLIENT)
        assert (await refused_answer(client, 11, [(0, storage_batch(b"1"))]))[0].error_code is E.none
        with structlog.testing.capture_logs() as logs:
            await client.send_raw(client.encode(produce_request(11, [(1, storage_batch(b"2"))], acks=0)))
            await assert_closed(client, logs, f"failed with {E.kafka_storage_error.name}")
            assert len(lines(logs, "produce refused")) == 1
        await client.close()
        assert server.topics.budget.used == size


# -- acks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
@pytest.mark.parametrize("acks", [2, -2, 100])
async def test_invalid_required_acks(server: BrokerServer, version: int, acks: int) -> None:
    client, good = await seeded(server)
    try:
        answers = await refused_answer(client, version, [(0, make_batch(1)), (1, make_batch(1)[:-3])], acks=acks)
        # Kafka checks the batch shape first, then acks.
        assert [(a.error_code, a.base_offset) for a in answers] == [
            (E.invalid_required_acks, -1),
            (E.invalid_record, -1),
        ]
        await assert_unchanged(client, server, good)
        assert await latest(client, 1) == 0
    finally:
        await client.close()
