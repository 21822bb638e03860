"""The data plane through a real socket: Produce, Fetch, ListOffsets and InitProducerId at every version.

Batches are real magic-2 batches built by aiokafka. What a Produce stores, a Fetch
returns byte for byte, with only the base offset and partition leader epoch
restamped (both outside the CRC). Long polls are timed on the event loop's clock
against a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, ProducerId
from kio.static.primitive import i8, i16, i32, i64

from broker.server.broker import BrokerServer
from broker.storage.records import restamp
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.storage import BASE_TIMESTAMP, make_batch
from tests.wire.client import Connect, WireClient, part, request

E = ErrorCode

TOPIC = "topic"  # created with 3 partitions by the server fixture
TIMEOUT = datetime.timedelta(seconds=5)
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1
PRODUCE_V, FETCH_V, LIST_OFFSETS_V = 11, 16, 10  # the newest, where a test is about another API's versions


def versions(api: ApiKey, low: int | None = None) -> list[int]:
    first, last = SUPPORTED_VERSIONS[api]
    return list(range(max(first, low if low is not None else first), last + 1))








# -- request builders ------------------------------------------------------------------------------


def produce_request(
    version: int,
    partitions: Sequence[tuple[int, bytes | None]],
    *,
    topic: str = TOPIC,
    acks: int = -1,
    transactional_id: str | None = None,
) -> Any:
    return request(
        ApiKey.PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=i16(acks),
        timeout=TIMEOUT,
        topic_data=(
            part(
                ApiKey.PRODUCE,
                version,
                "TopicProduceData",
                name=topic,
                partition_data=tuple(
                    part(ApiKey.PRODUCE, version, "PartitionProduceData", index=i32(index), records=records)
                    for index, records in partitions
                ),
            ),
        ),
    )


def fetch_partition(
    version: int, partition: int, offset: int, max_bytes: int = 1 << 20, *, leader_epoch: int = -1
) -> Any:
    return part(
        ApiKey.FETCH,
        version,
        "FetchPartition",
        partition=i32(partition),
        current_leader_epoch=i32(leader_epoch),
        fetch_offset=i64(offset),
        last_fetched_epoch=i32(-1),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(max_bytes),
    )


def fetch_request(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[Any]]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    isolation_level: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
) -> Any:
    """``topics`` are names below v13 and ids from v13; partitions come from ``fetch_partition``."""
    key = "topic_id" if version >= 13 else "topic"
    return request(
        ApiKey.FETCH,
        version,
        cluster_id=None,
        replica_id=BrokerId(-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes),
        max_bytes=i32(max_bytes),
        isolation_level=i8(isolation_level),
        session_id=i32(session_id),
        session_epoch=i32(session_epoch),
        topics=tuple(
            part(ApiKey.FETCH, version, "FetchTopic", **{key: topic}, partitions=tuple(partitions))
            for topic, partitions in topics
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_request(
    version: int,
    partitions: Sequence[tuple[int, int]],
    *,
    topic: str = TOPIC,
    isolation_level: int = 0,
    leader_epoch: int = -1,
) -> Any:
    return request(
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=BrokerId(-1),
        isolation_level=i8(isolation_level),
        timeout=TIMEOUT,
        topics=(
            part(
                ApiKey.LIST_OFFSETS,
                version,
                "ListOffsetsTopic",
                name=topic,
                partitions=tuple(
                    part(
                        ApiKey.LIST_OFFSETS,
                        version,
                        "ListOffsetsPartition",
                        partition_index=i32(index),
                        current_leader_epoch=i32(leader_epoch),
                        timestamp=i64(timestamp),
                    )
                    for index, timestamp in partitions
                ),
            ),
        ),
    )


def init_producer_id_request(version: int, transactional_id: str | None) -> Any:
    return request(
        ApiKey.INIT_PRODUCER_ID,
        version,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
    )


# -- shorthands ------------------------------------------------------------------------------------


def topic_key(server: BrokerServer, version: int, name: str = TOPIC) -> str | uuid.UUID:
    """How a Fetch of ``version`` names the topic: by name, or by id from v13."""
    if version < 13:
        return name
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def produce(client: WireClient, partition: int, batch: bytes, version: int = PRODUCE_V) -> Any:
    """One batch to one partition of "topic"; returns the partition's response."""
    response = await client.call(produce_request(version, [(partition, batch)]))
    (topic,) = response.responses
    assert topic.name == TOPIC
    (answer,) = topic.partition_responses
    assert answer.index == partition
    return answer


async def produced(client: WireClient, partition: int, batch: bytes) -> int:
    answer = await produce(client, partition, batch)
    assert answer.error_code is E.none, answer
    return int(answer.base_offset)


async def fetch_partitions(
    client: WireClient, server: BrokerServer, version: int, partitions: Sequence[Any], **options: Any
) -> list[Any]:
    """A Fetch of some partitions of "topic"; returns the partition answers, checking the envelope."""
    response = await client.call(fetch_request(version, [(topic_key(server, version), partitions)], **options))
    if version >= 7:
        assert (response.error_code, response.session_id) == (E.none, 0)
    (topic,) = response.responses
    assert (topic.topic_id if version >= 13 else topic.topic) == topic_key(server, version)
    return list(topic.partitions)


async def latest(client: WireClient, partition: int, topic: str = TOPIC) -> int:
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(partition, LATEST)], topic=topic))
    (answer,) = response.topics[0].partitions
    assert answer.error_code is E.none
    return int(answer.offset)


def records_of(answer: Any) -> bytes:
    return bytes(answer.records or b"")


# -- Produce then Fetch ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_produce_then_fetch_returns_the_same_bytes(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    first = make_batch(2, value=b"first")
    second = make_batch(3, value=b"second" * 40, compression=1)
    answers = []
    for batch in (first, second):
        answers.append(await produce(client, 1, batch, version))
    for answer, base_offset in zip(answers, (0, 2), strict=True):
        assert answer.error_code is E.none
        assert answer.base_offset == base_offset
        assert answer.log_append_time is None  # CreateTime: -1 on the wire
        if version >= 5:
            assert answer.log_start_offset == 0
        if version >= 8:
            assert (answer.record_errors, answer.error_message) == ((), None)
    (fetched,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 1, 0)])
    assert fetched.error_code is E.none
    assert records_of(fetched) == restamp(first, 0, 0) + restamp(second, 2, 0)
    assert (fetched.high_watermark, fetched.last_stable_offset, fetched.log_start_offset) == (5, 5, 0)
    assert await latest(client, 1) == 5
    assert await latest(client, 0) == 0  # the other partitions are untouched


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_returns_what_produce_stored(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    first, second = make_batch(1, value=b"a"), make_batch(2, value=b"b")
    assert await produced(client, 2, first) == 0
    assert await produced(client, 2, second) == 1
    (whole,) = await fetch_partitions(client, server, version, [fetch_partition(version, 2, 0)])
    assert (whole.partition_index, whole.error_code) == (2, E.none)
    assert records_of(whole) == restamp(first, 0, 0) + restamp(second, 1, 0)
    assert (whole.high_watermark, whole.last_stable_offset) == (3, 3)
    assert whole.aborted_transactions is None  # read_uncommitted: null
    if version >= 5:
        assert whole.log_start_offset == 0
    if version >= 11:
        assert whole.preferred_read_replica == -1
    # From an offset inside the log: the batch holding it and everything after.
    (tail,) = await fetch_partitions(client, server, version, [fetch_partition(version, 2, 2)])
    assert records_of(tail) == restamp(second, 1, 0)
    # At the high watermark: nothing, and no error.
    (end,) = await fetch_partitions(client, server, version, [fetch_partition(version, 2, 3)])
    assert (end.error_code, records_of(end), end.high_watermark) == (E.none, b"", 3)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_every_requested_partition_is_answered(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    batch = make_batch(1)
    await produced(client, 1, batch)
    wanted = [fetch_partition(version, p, 0) for p in (2, 0, 1)]
    answers = await fetch_partitions(client, server, version, wanted)
    assert [a.partition_index for a in answers] == [2, 0, 1]
    assert [a.error_code for a in answers] == [E.none] * 3
    assert [records_of(a) for a in answers] == [b"", b"", restamp(batch, 0, 0)]
    assert [a.high_watermark for a in answers] == [0, 0, 1]


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_size_limits(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    batches = [make_batch(1, value=bytes([65 + i]) * 200) for i in range(3)]
    size = len(batches[0])
    for batch in batches:
        await produced(client, 0, batch)
    other = make_batch(1, value=b"o" * 200)
    await produced(client, 1, other)
    stored = [restamp(b, i, 0) for i, b in enumerate(batches)]

    async def fetch(max_bytes: int, partition_max_bytes: int) -> list[bytes]:
        wanted = [fetch_partition(version, p, 0, partition_max_bytes) for p in (0, 1)]
        answers = await fetch_partitions(client, server, version, wanted, max_bytes=max_bytes)
        return [records_of(a) for a in answers]

    # partition_max_bytes caps each partition in whole batches.
    assert await fetch(1 << 20, 2 * size) == [stored[0] + stored[1], restamp(other, 0, 0)]
    assert await fetch(1 << 20, 2 * size - 1) == [stored[0], restamp(other, 0, 0)]
    # max_bytes caps the response: what the first partition took is gone for the second.
    assert await fetch(3 * size, 1 << 20) == [b"".join(stored), b""]
    assert await fetch(3 * size + len(other), 1 << 20) == [b"".join(stored), restamp(other, 0, 0)]
    # KIP-74: the first batch of the first partition with data comes back whatever the limits.
    assert await fetch(1, 1) == [stored[0], b""]
    assert await fetch(1 << 20, 1) == [stored[0], b""]


# -- Fetch errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_past_the_high_watermark(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await produced(client, 0, make_batch(2))
    wanted = [fetch_partition(version, 0, 3), fetch_partition(version, 0, -1), fetch_partition(version, 1, 0)]
    beyond, negative, fine = await fetch_partitions(client, server, version, wanted)
    for answer in (beyond, negative):
        assert answer.error_code is E.offset_out_of_range
        assert (answer.high_watermark, answer.last_stable_offset) == (-1, -1)
        if version >= 5:
            assert answer.log_start_offset == -1
        assert records_of(answer) == b""
    assert (fine.error_code, fine.high_watermark) == (E.none, 0)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH, 5))
async def test_fetch_below_the_log_start_after_retention(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    first, second = make_batch(2), make_batch(1)
    await produced(client, 0, first)
    await produced(client, 0, second)
    topic = server.topics.get(TOPIC)
    assert topic is not None
    assert topic.logs[0].enforce_retention(BASE_TIMESTAMP, -1, len(second)) == 1  # what the retention timer does
    old, start = await fetch_partitions(
        client, server, version, [fetch_partition(version, 0, 1), fetch_partition(version, 0, 2)]
    )
    assert (old.error_code, old.log_start_offset) == (E.offset_out_of_range, -1)
    assert (start.error_code, start.log_start_offset, records_of(start)) == (E.none, 2, restamp(second, 2, 0))


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_unknown_topic(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    missing: str | uuid.UUID = uuid.uuid4() if version >= 13 else "no-such-topic"
    response = await client.call(fetch_request(version, [(missing, [fetch_partition(version, 0, 0)])]))
    (topic,) = response.responses
    assert (topic.topic_id if version >= 13 else topic.topic) == missing
    (answer,) = topic.partitions
    assert answer.error_code is (E.unknown_topic_id if version >= 13 else E.unknown_topic_or_partition)
    assert answer.high_watermark == -1
    assert server.topics.get("no-such-topic") is None  # Fetch creates nothing


@pytest.mark.parametrize("version", versions(ApiKey.FETCH, 13))
async def test_fetch_by_topic_id(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    batch = make_batch(1)
    await produced(client, 0, batch)
    topic = server.topics.get(TOPIC)
    assert topic is not None
    metadata = await client.call(
        request(
            ApiKey.METADATA,
            12,
            topics=(part(ApiKey.METADATA, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert metadata.topics[0].topic_id == topic.topic_id  # the id a client learns from Metadata
    response = await client.call(
        fetch_request(
            version,
            [(topic.topic_id, [fetch_partition(version, 0, 0)]), (uuid.uuid4(), [fetch_partition(version, 0, 0)])],
        )
    )
    known, unknown = response.responses
    assert known.topic_id == topic.topic_id
    assert records_of(known.partitions[0]) == restamp(batch, 0, 0)
    assert unknown.partitions[0].error_code is E.unknown_topic_id


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_fetch_unknown_partition(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    (answer,) = await fetch_partitions(client, server, version, [fetch_partition(version, 3, 0)])
    assert answer.error_code is E.unknown_topic_or_partition


@pytest.mark.parametrize("version", versions(ApiKey.FETCH, 9))
async def test_fetch_current_leader_epoch(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    answers = await fetch_partitions(
        client,
        server,
        version,
        [fetch_partition(version, 0, 0, leader_epoch=epoch) for epoch in (-1, 0, 1, -2)],
    )
    assert [a.error_code for a in answers] == [E.none, E.none, E.unknown_leader_epoch, E.fenced_leader_epoch]


@pytest.mark.parametrize("version", versions(ApiKey.FETCH, 7))
async def test_incremental_fetch_session_is_not_found(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    for session_id, epoch in ((0, 1), (12345, 1), (12345, 7)):
        response = await client.call(
            fetch_request(
                version,
                [(topic_key(server, version), [fetch_partition(version, 0, 0)])],
                session_id=session_id,
                session_epoch=epoch,
            )
        )
        assert (response.error_code, response.session_id, response.responses) == (
            E.fetch_session_id_not_found,
            0,
            (),
        )
    # A full fetch (epoch 0, or -1 to close) is answered sessionless.
    for epoch in (0, -1):
        response = await client.call(
            fetch_request(
                version, [(topic_key(server, version), [fetch_partition(version, 0, 0)])], session_epoch=epoch
            )
        )
        assert (response.error_code, response.session_id, len(response.responses)) == (E.none, 0, 1)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_read_committed(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await produced(client, 0, make_batch(3))
    (committed,) = await fetch_partitions(
        client, server, version, [fetch_partition(version, 0, 0)], isolation_level=READ_COMMITTED
    )
    assert committed.aborted_transactions == ()  # an empty list, not null
    assert committed.last_stable_offset == committed.high_watermark == 3
    assert records_of(committed)
    (uncommitted,) = await fetch_partitions(client, server, version, [fetch_partition(version, 0, 0)])
    assert uncommitted.aborted_transactions is None


# -- long polls ------------------------------------------------------------------------------------


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.002)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_long_poll_is_answered_when_data_arrives(server: BrokerServer, connect: Connect, version: int) -> None:
    waiting, producer = await connect("waiting"), await connect("producer")
    loop = asyncio.get_running_loop()
    request_ = fetch_request(
        version, [(topic_key(server, version), [fetch_partition(version, 2, 0)])], max_wait_ms=2000
    )
    started = loop.time()
    await waiting.send_raw(waiting.encode(request_, 41))
    await eventually(lambda: len(server.fetches) == 1)  # parked
    batch = make_batch(2)
    assert await produced(producer, 2, batch) == 0
    answered, response = waiting.decode(ApiKey.FETCH, version, await waiting.read_frame(timeout=1.5))
    elapsed = loop.time() - started
    assert answered == 41
    assert elapsed < 1.0, f"the parked fetch took {elapsed:.3f}s: it waited for max_wait instead of the data"
    (answer,) = response.responses[0].partitions
    assert (answer.error_code, records_of(answer), answer.high_watermark) == (E.none, restamp(batch, 0, 0), 2)
    assert len(server.fetches) == 0


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
async def test_empty_long_poll_waits_for_max_wait(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    loop = asyncio.get_running_loop()
    started = loop.time()
    (answer,) = await fetch_partitions(client, server, version, [fetch_partition(version, 0, 0)], max_wait_ms=200)
    elapsed = loop.time() - started
    assert 0.195 <= elapsed < 1.0, elapsed
    assert (answer.error_code, records_of(answer), answer.high_watermark) == (E.none, b"", 0)


async def test_long_poll_holds_back_the_next_request_on_its_connection(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    parked = fetch_request(FETCH_V, [(topic_key(server, FETCH_V), [fetch_partition(FETCH_V, 0, 0)])], max_wait_ms=150)
    await client.send_raw(
        client.encode(parked, 1) + client.encode(list_offsets_request(LIST_OFFSETS_V, [(0, LATEST)]), 2)
    )
    first, _ = client.decode(ApiKey.FETCH, FETCH_V, await client.read_frame())
    second, _ = client.decode(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, await client.read_frame())
    assert (first, second) == (1, 2)


async def test_min_bytes_counts_across_appends(server: BrokerServer, connect: Connect) -> None:
    waiting, producer = await connect("waiting"), await connect("producer")
    small, large = make_batch(1, value=b"s"), make_batch(1, value=b"l" * 400)
    await waiting.send_raw(
        waiting.encode(
            fetch_request(
                FETCH_V,
                [(topic_key(server, FETCH_V), [fetch_partition(FETCH_V, 0, 0), fetch_partition(FETCH_V, 1, 0)])],
                max_wait_ms=5000,
                min_bytes=len(small) + 100,
            ),
            9,
        )
    )
    await eventually(lambda: len(server.fetches) == 1)
    await produced(producer, 0, small)
    assert len(server.fetches) == 1  # not enough yet
    await produced(producer, 1, large)
    answered, response = waiting.decode(ApiKey.FETCH, FETCH_V, await waiting.read_frame(timeout=1.0))
    assert answered == 9
    assert [records_of(p) for p in response.responses[0].partitions] == [restamp(small, 0, 0), restamp(large, 0, 0)]


async def test_parked_fetch_on_a_deleted_topic_answers_at_once(server: BrokerServer, connect: Connect) -> None:
    waiting, admin = await connect("waiting"), await connect("admin")
    loop = asyncio.get_running_loop()
    await waiting.send_raw(
        waiting.encode(
            fetch_request(12, [(TOPIC, [fetch_partition(12, 0, 0), fetch_partition(12, 1, 0)])], max_wait_ms=3000), 5
        )
    )
    await eventually(lambda: len(server.fetches) == 1)
    started = loop.time()
    deleted = await admin.call(request(ApiKey.DELETE_TOPICS, 4, topic_names=(TOPIC,), timeout=TIMEOUT))
    assert deleted.responses[0].error_code is E.none
    answered, response = waiting.decode(ApiKey.FETCH, 12, await waiting.read_frame(timeout=1.5))
    assert answered == 5
    assert loop.time() - started < 1.0
    errors = [p.error_code for p in response.responses[0].partitions]
    assert errors == [E.unknown_topic_or_partition] * 2
    assert [p.high_watermark for p in response.responses[0].partitions] == [-1, -1]


async def test_parked_fetch_overtaken_by_retention(server: BrokerServer, connect: Connect) -> None:
    """Retention moved the log start past a parked fetch's offset: it answers OFFSET_OUT_OF_RANGE, as Kafka re-reads."""
    client = await connect()
    first, second = make_batch(1), make_batch(1)
    await produced(client, 0, first)
    await produced(client, 0, second)
    await client.send_raw(
        client.encode(
            fetch_request(
                FETCH_V,
                [(topic_key(server, FETCH_V), [fetch_partition(FETCH_V, 0, 0)])],
                max_wait_ms=200,
                min_bytes=1 << 20,
            ),
            3,
        )
    )
    await eventually(lambda: len(server.fetches) == 1)
    topic = server.topics.get(TOPIC)
    assert topic is not None
    assert topic.logs[0].enforce_retention(BASE_TIMESTAMP, -1, len(second)) == 1
    answered, response = client.decode(ApiKey.FETCH, FETCH_V, await client.read_frame())
    (answer,) = response.responses[0].partitions
    assert (answered, answer.error_code, records_of(answer)) == (3, E.offset_out_of_range, b"")


# -- acks=0 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_acks_zero_gets_no_response(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    batch = make_batch(2)
    await client.send_raw(client.encode(produce_request(version, [(1, batch)], acks=0), 100))
    await client.send_raw(client.encode(list_offsets_request(LIST_OFFSETS_V, [(1, LATEST)]), 101))
    answered, response = client.decode(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, await client.read_frame())
    assert answered == 101  # nothing was sent for 100
    assert response.topics[0].partitions[0].offset == 2  # but the batch was stored
    (fetched,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 1, 0)])
    assert records_of(fetched) == restamp(batch, 0, 0)


@pytest.mark.parametrize("acks", [1, -1])
async def test_acks_one_and_all(server: BrokerServer, connect: Connect, acks: int) -> None:
    client = await connect()
    response = await client.call(produce_request(PRODUCE_V, [(0, make_batch(1)), (2, make_batch(4))], acks=acks))
    answers = response.responses[0].partition_responses
    assert [(a.index, a.error_code, a.base_offset) for a in answers] == [(0, E.none, 0), (2, E.none, 0)]
    assert (await latest(client, 0), await latest(client, 2)) == (1, 4)


# -- ListOffsets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
async def test_list_offsets(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    t = BASE_TIMESTAMP
    await produced(client, 0, make_batch(2, timestamps=[t, t + 10]))
    await produced(client, 0, make_batch(3, timestamps=[t + 20, t + 30, t + 25], value=b"c" * 100, compression=1))
    await produced(client, 0, make_batch(1, timestamps=[t + 30]))
    lookups = [(EARLIEST, 0, -1), (LATEST, 6, -1), (t + 15, 2, t + 20), (t + 26, 3, t + 30), (t + 31, -1, -1)]
    if version >= 7:
        lookups.append((MAX_TIMESTAMP, 3, t + 30))  # the earliest record with the largest timestamp
    for timestamp, offset, found in lookups:
        response = await client.call(list_offsets_request(version, [(0, timestamp)]))
        (topic,) = response.topics
        assert topic.name == TOPIC
        (answer,) = topic.partitions
        assert (answer.partition_index, answer.error_code) == (0, E.none)
        assert (answer.offset, answer.timestamp) == (offset, found), timestamp
        if version >= 4:
            assert answer.leader_epoch == (0 if offset >= 0 else -1)


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
async def test_list_offsets_of_several_partitions(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await produced(client, 1, make_batch(4))
    response = await client.call(list_offsets_request(version, [(0, LATEST), (1, LATEST), (1, EARLIEST), (7, LATEST)]))
    answers = response.topics[0].partitions
    # (1, LATEST) and (1, EARLIEST) name partition 1 twice: Kafka refuses both.
    assert [(a.partition_index, a.error_code) for a in answers] == [
        (0, E.none),
        (1, E.invalid_request),
        (1, E.invalid_request),
        (7, E.unknown_topic_or_partition),
    ]
    assert answers[0].offset == 0
    response = await client.call(list_offsets_request(version, [(1, LATEST)], topic="no-such-topic"))
    assert response.topics[0].partitions[0].error_code is E.unknown_topic_or_partition
    assert server.topics.get("no-such-topic") is None


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS, 2))
async def test_list_offsets_read_committed(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await produced(client, 0, make_batch(3))
    response = await client.call(list_offsets_request(version, [(0, LATEST)], isolation_level=READ_COMMITTED))
    assert response.topics[0].partitions[0].offset == 3  # the last stable offset is the high watermark


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS, 4))
async def test_list_offsets_current_leader_epoch(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    for epoch, error in ((0, E.none), (1, E.unknown_leader_epoch), (-2, E.fenced_leader_epoch)):
        response = await client.call(list_offsets_request(version, [(0, LATEST)], leader_epoch=epoch))
        assert response.topics[0].partitions[0].error_code is error


async def test_list_offsets_after_retention(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    first, second = make_batch(2, timestamps=[1, 2]), make_batch(1, timestamps=[3])
    await produced(client, 0, first)
    await produced(client, 0, second)
    topic = server.topics.get(TOPIC)
    assert topic is not None
    topic.logs[0].enforce_retention(BASE_TIMESTAMP, -1, len(second))
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(0, EARLIEST)]))
    assert response.topics[0].partitions[0].offset == 2
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(0, 0)]))
    assert (response.topics[0].partitions[0].offset, response.topics[0].partitions[0].timestamp) == (2, 3)


# -- InitProducerId and idempotent produce ---------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
async def test_init_producer_id(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    for expected in (0, 1, 2):
        response = await client.call(init_producer_id_request(version, None))
        assert (response.error_code, response.producer_id, response.producer_epoch) == (E.none, expected, 0)
    empty = await client.call(init_producer_id_request(version, ""))
    assert (empty.error_code, empty.producer_id, empty.producer_epoch) == (E.invalid_request, -1, -1)
    after = await client.call(init_producer_id_request(version, None))
    assert after.producer_id == 3  # the refusal took no id
    # A transactional id goes to the transaction coordinator (tests/wire/test_transactions_api.py), whose
    # producer ids come from the same allocator.
    transactional = await client.call(init_producer_id_request(version, "my-transaction"))
    assert (transactional.error_code, transactional.producer_id, transactional.producer_epoch) == (E.none, 4, 0)


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_idempotent_produce(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    init = await client.call(init_producer_id_request(4, None))
    pid, epoch = int(init.producer_id), int(init.producer_epoch)

    def batch(count: int, sequence: int, producer_epoch: int = epoch) -> bytes:
        return make_batch(count, producer_id=pid, producer_epoch=producer_epoch, base_sequence=sequence)

    await produced(client, 0, make_batch(1))
    first = await produce(client, 0, batch(2, 0), version)
    assert (first.error_code, first.base_offset) == (E.none, 1)
    retry = await produce(client, 0, batch(2, 0), version)
    assert (retry.error_code, retry.base_offset) == (E.none, 1)  # a duplicate: the original offset
    assert await latest(client, 0) == 3  # and nothing more stored
    gap = await produce(client, 0, batch(1, 5), version)
    assert (gap.error_code, gap.base_offset) == (E.out_of_order_sequence_number, -1)
    following = await produce(client, 0, batch(1, 2), version)
    assert (following.error_code, following.base_offset) == (E.none, 3)
    wrong_start = await produce(client, 0, batch(1, 3, epoch + 1), version)
    assert wrong_start.error_code is E.out_of_order_sequence_number  # a new epoch starts at sequence 0
    bumped = await produce(client, 0, batch(1, 0, epoch + 1), version)
    assert (bumped.error_code, bumped.base_offset) == (E.none, 4)
    fenced = await produce(client, 0, batch(1, 3), version)
    assert fenced.error_code is E.invalid_producer_epoch
    assert await latest(client, 0) == 5
