"""Issue 14's data-plane bombs over a real socket: partition bombs, corrupt or inflating compressed batches, and a
topic name too long to quote.

Each reproducer gets Kafka's error code; nothing is created or stored (Metadata and ListOffsets show the topic as
it was); a line names the client and the reason; and the broker keeps serving: another connection is answered
within a second while the reproducer is handled and after it, and the reproducer's own connection carries on.

What Kafka answers, from its source (apache/kafka, metadata/ and core/):
- More than QuorumController.MAX_RECORDS_PER_USER_OP (10,000) metadata records in one CreateTopics: the records
  go to a BoundedList whose BoundedListTooLongException fails the whole operation; EventHandlerExceptionInfo makes
  it a PolicyViolationException("Unable to perform excessively large batch operation."), and ControllerApis
  answers it for every topic of the request. A topic is one TopicRecord, a ConfigRecord per config and a
  PartitionRecord per partition. CreatePartitions counts its PartitionRecords the same way.
- A compressed batch its codec cannot read: LogValidator's KafkaException, which ReplicaManager answers
  UNKNOWN_SERVER_ERROR for that partition (it is no ApiException, so not CORRUPT_MESSAGE).
"""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import AsyncIterator, Awaitable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32

from broker.server.broker import BrokerServer
from broker.storage.records import INFLATION_FACTOR
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import ATTRIBUTES_AT, BASE_TIMESTAMP, HEADER_SIZE, ZSTD, make_batch, patched
from tests.storage.test_compressed_batches import CODEC_IDS, CODECS, bomb, compress, with_payload
from tests.wire.client import WireClient, part, request
from tests.wire.test_data_plane import (
    LATEST,
    LIST_OFFSETS_V,
    TOPIC,
    list_offsets_request,
    produce_request,
    versions,
)
from tests.wire.test_topic_admin import grow_request as topic_admin_grow_request

E = ErrorCode
Logs = list[MutableMapping[str, Any]]
CLIENT = "bomber"
EXCESSIVE = "Unable to perform excessively large batch operation."
INT32_MAX = 2**31 - 1
TIMEOUT = datetime.timedelta(seconds=30)
METADATA_V = 12
MIB = 1 << 20
ONE = i32(1)


# -- the broker and what must hold around every reproducer ---------------------------------------------


@asynccontextmanager
async def running(**overrides: Any) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(**overrides))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def rss() -> int:
    """This process's resident memory now (the broker runs in it)."""
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def probe(server: BrokerServer) -> float:
    """Seconds another client waits for an ApiVersions answer."""
    client = await WireClient.connect(server.port, "bystander")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await client.call(
            request(ApiKey.API_VERSIONS, 3, client_software_name="probe", client_software_version="1"), timeout=10
        )
        assert answer.error_code is E.none
        return loop.time() - started
    finally:
        await client.close()


async def answered_alongside(server: BrokerServer, reproducer: Awaitable[Any]) -> Any:
    """The reproducer's answer, checking that another connection is answered within a second during and after,
    and that the broker's memory did not balloon."""
    before = rss()
    answer, during = await asyncio.gather(reproducer, probe(server))
    after = await probe(server)
    assert during < 1.0, f"another client waited {during:.2f}s while the reproducer was handled"
    assert after < 1.0, f"another client waited {after:.2f}s after it"
    grown = rss() - before
    assert grown < 100 * MIB, f"the broker grew {grown >> 20} MiB"
    return answer


def lines(logs: Logs, event: str) -> Logs:
    return [entry for entry in logs if entry.get("event") == event]


def refusal_line(logs: Logs, event: str) -> MutableMapping[str, Any]:
    (line,) = lines(logs, event)
    assert (line["client_id"], line["host"], line["log_level"]) == (CLIENT, "/127.0.0.1", "warning")
    assert lines(logs, "closing connection") == []
    return line


async def partition_counts(client: WireClient) -> dict[str, int]:
    """Every topic's partition count, as an all-topics Metadata answers it."""
    response = await client.call(
        request(
            ApiKey.METADATA,
            METADATA_V,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    return {t.name: len(t.partitions) for t in response.topics}


# -- request builders -----------------------------------------------------------------------------------


def new_topic(
    version: int,
    name: str,
    partitions: int = 1,
    *,
    configs: dict[str, str] | None = None,
    assignments: int = 0,
) -> Any:
    return part(
        ApiKey.CREATE_TOPICS,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=i32(-1 if assignments else partitions),
        replication_factor=i16(-1 if assignments else 1),
        assignments=tuple(
            part(
                ApiKey.CREATE_TOPICS,
                version,
                "CreatableReplicaAssignment",
                partition_index=i32(i),
                broker_ids=(i32(1),),
            )
            for i in range(assignments)
        ),
        configs=tuple(
            part(ApiKey.CREATE_TOPICS, version, "CreatableTopicConfig", name=key, value=value)
            for key, value in (configs or {}).items()
        ),
    )


def create_request(version: int, *topics: Any, validate_only: bool = False) -> Any:
    return request(ApiKey.CREATE_TOPICS, version, topics=topics, timeout=TIMEOUT, validate_only=validate_only)


def grow_request(version: int, *topics: tuple[str, int], validate_only: bool = False) -> Any:
    """CreatePartitions to new counts, with no replica assignments."""
    return topic_admin_grow_request(
        version, *((name, count, None) for name, count in topics), validate_only=validate_only
    )


async def connected(server: BrokerServer) -> WireClient:
    return await WireClient.connect(server.port, CLIENT)


# -- defect 2: partition bombs ---------------------------------------------------------------------------


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
async def test_create_partitions_bomb(server: BrokerServer, version: int, validate_only: bool) -> None:
    """The fuzzer's CreatePartitions v3 raising a topic to 3,000,000 partitions, then to 2^31-1."""
    client = await connected(server)
    try:
        before = await partition_counts(client)
        for count in (3_000_000, INT32_MAX):  # the second only once the first was refused
            with structlog.testing.capture_logs() as logs:
                response = await answered_alongside(
                    server, client.call(grow_request(version, (TOPIC, count), validate_only=validate_only))
                )
            assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
                (TOPIC, E.policy_violation, EXCESSIVE)
            ]
            assert "max.partitions.per.request (10000)" in refusal_line(logs, "topic change refused")["reason"]
            assert await partition_counts(client) == before
        # The same connection carries on, and a reasonable growth goes through.
        response = await client.call(grow_request(version, (TOPIC, 5)))
        assert response.results[0].error_code is E.none
        assert (await partition_counts(client))[TOPIC] == 5
    finally:
        await client.close()


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_bomb(server: BrokerServer, version: int, validate_only: bool) -> None:
    """A huge num_partitions fails the whole request, as Kafka's controller does: nothing is created."""
    client = await connected(server)
    try:
        before = await partition_counts(client)
        for count in (3_000_000, INT32_MAX):
            topics = [
                new_topic(version, name, n) for name, n in (("small", 1), ("bomb", count), ("dup", 1), ("dup", 1))
            ]
            with structlog.testing.capture_logs() as logs:
                response = await answered_alongside(
                    server, client.call(create_request(version, *topics, validate_only=validate_only))
                )
            # getErrorResponse: every topic of the request, in its order, duplicates included.
            assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
                (name, E.policy_violation, EXCESSIVE) for name in ("small", "bomb", "dup", "dup")
            ]
            if version >= 5:
                assert {(r.num_partitions, r.replication_factor, r.configs) for r in response.topics} == {(-1, -1, ())}
            refusal_line(logs, "topic change refused")
            assert await partition_counts(client) == before
    finally:
        await client.close()


async def test_a_huge_replica_assignment(server: BrokerServer) -> None:
    """20,000 manual assignments, each valid: 20,001 records, so the whole request is refused."""
    client = await connected(server)
    try:
        before = await partition_counts(client)
        with structlog.testing.capture_logs() as logs:
            response = await answered_alongside(
                server,
                client.call(create_request(7, new_topic(7, "fine"), new_topic(7, "assigned", assignments=20_000))),
            )
        assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
            ("fine", E.policy_violation, EXCESSIVE),
            ("assigned", E.policy_violation, EXCESSIVE),
        ]
        refusal_line(logs, "topic change refused")
        assert await partition_counts(client) == before
        # 9,999 of them are 10,000 records: created.
        response = await client.call(create_request(7, new_topic(7, "assigned", assignments=9_999)))
        assert response.topics[0].error_code is E.none
        assert (await partition_counts(client))["assigned"] == 9_999
    finally:
        await client.close()


async def test_records_are_counted_as_kafka_counts_them(server: BrokerServer) -> None:
    """A topic is a TopicRecord, a ConfigRecord per config and a PartitionRecord each: 10,000 in all at most."""
    client = await connected(server)
    try:
        config = {"retention.ms": "1000"}
        for topics, refused in (
            ([new_topic(7, "t1", 10_000)], True),
            ([new_topic(7, "t1", 9_998, configs=config | {"retention.bytes": "5"})], True),
            ([new_topic(7, "t1", 5_000), new_topic(7, "t2", 4_999)], True),
            ([new_topic(7, "t1", 4_000, configs=config), new_topic(7, "t2", 5_996, configs=config)], False),
        ):
            response = await client.call(create_request(7, *topics, validate_only=True))
            expected = E.policy_violation if refused else E.none
            assert [r.error_code for r in response.topics] == [expected] * len(topics), topics
        # Refused topics do not count: only what would be created does.
        response = await client.call(
            create_request(7, new_topic(7, "bad name!", 9_000), new_topic(7, TOPIC, 9_000), new_topic(7, "ok", 9_999))
        )
        assert [r.error_code for r in response.topics] == [E.invalid_topic_exception, E.topic_already_exists, E.none]
        assert (await partition_counts(client))["ok"] == 9_999
    finally:
        await client.close()


async def test_per_topic_limit(server: BrokerServer) -> None:
    server.topics.max_partitions_per_topic = 5
    client = await connected(server)
    try:
        with structlog.testing.capture_logs():
            response = await client.call(create_request(7, new_topic(7, "six", 6), new_topic(7, "five", 5)))
        six, five = response.topics
        assert (six.error_code, six.error_message, six.num_partitions) == (
            E.policy_violation,
            "Topic 'six' would have 6 partitions, more than max.partitions.per.topic (5).",
            -1,
        )
        assert (five.error_code, five.num_partitions) == (E.none, 5)
        response = await client.call(grow_request(3, (TOPIC, 6), ("five", 6)))
        assert [(r.error_code, r.error_message) for r in response.results] == [
            (E.policy_violation, f"Topic '{TOPIC}' would have 6 partitions, more than max.partitions.per.topic (5)."),
            (E.policy_violation, "Topic 'five' would have 6 partitions, more than max.partitions.per.topic (5)."),
        ]
        assert (await partition_counts(client))[TOPIC] == 3
        assert (await client.call(grow_request(3, (TOPIC, 5)))).results[0].error_code is E.none
    finally:
        await client.close()


async def test_create_partitions_counts_across_the_request(server: BrokerServer) -> None:
    """Past the limit, the topic that crosses it and every later one that adds partitions are refused whole."""
    server.topics.max_partitions_per_request = 10
    client = await connected(server)
    try:
        for name in ("a", "b", "c"):
            assert (await client.call(create_request(7, new_topic(7, name)))).topics[0].error_code is E.none
        with structlog.testing.capture_logs() as logs:
            response = await client.call(grow_request(3, ("a", 7), ("b", 7), ("missing", 2), ("c", 2)))
        assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
            ("a", E.none, None),
            ("b", E.policy_violation, EXCESSIVE),
            ("missing", E.unknown_topic_or_partition, None),
            ("c", E.policy_violation, EXCESSIVE),
        ]
        refusal_line(logs, "topic change refused")
        counts = await partition_counts(client)
        assert (counts["a"], counts["b"], counts["c"]) == (7, 1, 1)
        # More distinct topics than the limit: the whole request, as Kafka's bounded results list does.
        many = [(f"t{i}", 2) for i in range(12)] + [("t0", 3)]  # 11 distinct names besides the duplicated one
        response = await client.call(grow_request(3, *many))
        assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
            (name, E.policy_violation, EXCESSIVE) for name, _ in many
        ]
    finally:
        await client.close()


async def test_the_limits_default_to_kafkas() -> None:
    async with running() as server:
        assert (server.topics.max_partitions_per_request, server.topics.max_partitions_per_topic) == (10_000, 10_000)


async def test_the_limits_come_from_the_settings() -> None:
    async with running(max_partitions_per_request=7, max_partitions_per_topic=5) as server:
        client = await connected(server)
        try:
            response = await client.call(create_request(7, new_topic(7, "six", 6), new_topic(7, "five", 5)))
            assert [r.error_code for r in response.topics] == [E.policy_violation, E.none]
            response = await client.call(create_request(7, new_topic(7, "four", 4), new_topic(7, "four-more", 4)))
            assert [r.error_code for r in response.topics] == [E.policy_violation, E.policy_violation]
        finally:
            await client.close()


# -- CreateTopics with a 32,767-character name ----------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_a_name_too_long_to_quote(server: BrokerServer, version: int) -> None:
    """Topic.validate's message quotes the name; a STRING holds 32,767 bytes, so the quote is cut."""
    client = await connected(server)
    try:
        name = "x" * 32_767
        with structlog.testing.capture_logs() as logs:
            response = await client.call(create_request(version, new_topic(version, name)))
        (result,) = response.topics
        assert (result.name, result.error_code) == (name, E.invalid_topic_exception)
        assert result.error_message.startswith("Topic name is invalid: the length of 'xxx")
        assert result.error_message.endswith("...(32767 characters)' is longer than the max allowed length 249")
        assert lines(logs, "closing connection") == [] and lines(logs, "connection failed") == []
        assert await probe(server) < 1.0
        assert name not in await partition_counts(client)  # the same connection carries on
    finally:
        await client.close()


# -- defect 6: compressed batches ------------------------------------------------------------------------


async def stored_offsets(client: WireClient) -> list[int]:
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(p, LATEST) for p in range(3)]))
    return [p.offset for p in response.topics[0].partitions]


async def produce_answers(client: WireClient, version: int, partitions: list[tuple[int, bytes]]) -> list[Any]:
    response = await client.call(produce_request(version, partitions))
    return list(response.responses[0].partition_responses)


async def by_timestamp(client: WireClient, partition: int, timestamp: int) -> tuple[Any, int, int]:
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(partition, timestamp)]))
    (answer,) = response.topics[0].partitions
    return answer.error_code, answer.offset, answer.timestamp


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE, low=7))
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
async def test_records_under_a_codec_flag_they_are_not(server: BrokerServer, codec: int, version: int) -> None:
    """The fuzzer's reproducer: plain records flagged gzip (or any codec), CRC valid. Kafka cannot decompress
    them and answers UNKNOWN_SERVER_ERROR; nothing is stored, and ListOffsets by timestamp still answers."""
    client = await connected(server)
    try:
        good = make_batch(2, value=b"good", compression=codec)
        assert [a.error_code for a in await produce_answers(client, version, [(0, good)])] == [E.none]
        bad = patched(make_batch(3), ATTRIBUTES_AT, ">h", codec)
        with structlog.testing.capture_logs() as logs:
            (answer,) = await answered_alongside(server, produce_answers(client, version, [(1, bad)]))
        assert (answer.error_code, answer.base_offset) == (E.unknown_server_error, -1)
        line = refusal_line(logs, "produce refused")
        assert (line["topic"], line["partition"], line["error"]) == (TOPIC, 1, "unknown_server_error")
        assert "Failed to decompress" in line["reason"]
        assert await stored_offsets(client) == [2, 0, 0]
        assert await by_timestamp(client, 1, BASE_TIMESTAMP) == (E.none, -1, -1)
        assert await by_timestamp(client, 0, BASE_TIMESTAMP + 1) == (E.none, 1, BASE_TIMESTAMP + 1)
    finally:
        await client.close()


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
async def test_a_decompression_bomb(server: BrokerServer, codec: int) -> None:
    """A small payload that inflates to 128 MiB: refused at the limit (16 MiB), in milliseconds, memory kept."""
    client = await connected(server)
    try:
        batch = bomb(codec, 128 * MIB)  # lz4 inflates 250-fold at most: 128 MiB takes 550 kB of it
        with structlog.testing.capture_logs() as logs:
            (answer,) = await answered_alongside(server, produce_answers(client, 11, [(0, batch)]))
        assert (answer.error_code, answer.base_offset) == (E.message_too_large, -1)
        assert (
            f"inflates to more than {INFLATION_FACTOR * 1_048_588} bytes"
            in refusal_line(logs, "produce refused")["reason"]
        )
        assert await stored_offsets(client) == [0, 0, 0]
    finally:
        await client.close()


async def test_many_bombs_in_one_request_cost_one_budget(server: BrokerServer) -> None:
    """A request of 200 partitions of bombs: the first exhausts the request's budget, the rest are not inflated."""
    client = await connected(server)
    try:
        assert (await client.call(create_request(7, new_topic(7, "wide", 200)))).topics[0].error_code is E.none
        batch = bomb(ZSTD, 64 * MIB)
        partitions = [(p, batch) for p in range(200)]
        started = asyncio.get_running_loop().time()
        response = await answered_alongside(server, client.call(produce_request(11, partitions, topic="wide")))
        assert asyncio.get_running_loop().time() - started < 1.0
        assert {a.error_code for a in response.responses[0].partition_responses} == {E.message_too_large}
        # A small compressed batch in a request of its own goes through.
        response = await client.call(produce_request(11, [(0, make_batch(2, compression=ZSTD))], topic="wide"))
        assert response.responses[0].partition_responses[0].error_code is E.none
    finally:
        await client.close()


async def test_a_claimed_record_count_is_refused_before_inflating(server: BrokerServer) -> None:
    client = await connected(server)
    try:
        plain = make_batch(1)
        lying = with_payload(plain, compress(ZSTD, plain[HEADER_SIZE:]), attributes=ZSTD, count=INT32_MAX)
        (answer,) = await answered_alongside(server, produce_answers(client, 11, [(0, lying)]))
        assert answer.error_code is E.message_too_large
        assert await stored_offsets(client) == [0, 0, 0]
    finally:
        await client.close()


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_zstd_needs_produce_v7(server: BrokerServer, version: int) -> None:
    """KIP-110: ProduceRequest.validateRecords refuses zstd below v7 with UNSUPPORTED_COMPRESSION_TYPE."""
    client = await connected(server)
    try:
        (answer,) = await produce_answers(client, version, [(0, make_batch(1, compression=ZSTD))])
        expected = E.none if version >= 7 else E.unsupported_compression_type
        assert answer.error_code is expected
        assert await stored_offsets(client) == [1 if version >= 7 else 0, 0, 0]
    finally:
        await client.close()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
async def test_a_codec_no_kafka_has(server: BrokerServer, codec_id: int) -> None:
    client = await connected(server)
    try:
        (answer,) = await produce_answers(client, 11, [(0, patched(make_batch(1), ATTRIBUTES_AT, ">h", codec_id))])
        assert (answer.error_code, answer.error_message) == (
            E.unknown_server_error,
            f"Unknown compression type id: {codec_id}",
        )
        assert await stored_offsets(client) == [0, 0, 0]
    finally:
        await client.close()


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
async def test_listoffsets_by_timestamp_finds_the_record_in_every_codec(server: BrokerServer, codec: int) -> None:
    client = await connected(server)
    try:
        t = BASE_TIMESTAMP
        for stamps in ([t, t + 10], [t + 30, t + 20, t + 40]):
            batch = make_batch(len(stamps), timestamps=stamps, compression=codec)
            assert [a.error_code for a in await produce_answers(client, 11, [(0, batch)])] == [E.none]
        assert await by_timestamp(client, 0, t + 21) == (E.none, 2, t + 30)
        assert await by_timestamp(client, 0, t + 31) == (E.none, 4, t + 40)
        assert await by_timestamp(client, 0, -3) == (E.none, 4, t + 40)  # MAX_TIMESTAMP (KIP-734)
    finally:
        await client.close()


# -- real clients' compressed batches are all accepted --------------------------------------------------


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_aiokafka_round_trip(server: BrokerServer, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    bootstrap = f"127.0.0.1:{server.port}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(TOPIC, b"v%d" % i * 50, partition=2, timestamp_ms=BASE_TIMESTAMP + i) for i in range(5)
        ]
        offsets = [(await future).offset for future in sent]
    finally:
        await producer.stop()
    assert offsets == list(range(5))
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partition = TopicPartition(TOPIC, 2)
        consumer.assign([partition])
        found = await consumer.offsets_for_times({partition: BASE_TIMESTAMP + 3})
        assert found[partition] is not None and found[partition].offset == 3
        consumer.seek(partition, 0)
        values = []
        while len(values) < 5:
            batches = await consumer.getmany(partition, timeout_ms=2000)
            values += [message.value for message in batches.get(partition, [])]
        assert values == [b"v%d" % i * 50 for i in range(5)]
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_librdkafka_batches_are_accepted(server: BrokerServer, codec: str) -> None:
    """confluent-kafka's producer (librdkafka's own codecs: raw snappy, its lz4 frames)."""
    import confluent_kafka

    def send() -> list[Any]:
        delivered: list[Any] = []
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": f"127.0.0.1:{server.port}", "compression.type": codec, "linger.ms": 5}
        )
        for i in range(5):
            producer.produce(TOPIC, b"w%d" % i * 60, partition=1, on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        return delivered

    errors = await asyncio.get_running_loop().run_in_executor(None, send)
    assert errors == [None] * 5
    client = await connected(server)
    try:
        assert (await stored_offsets(client))[1] == 5
    finally:
        await client.close()
