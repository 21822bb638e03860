"""CreateTopics, DeleteTopics and CreatePartitions over a real socket, every supported version.

What each answer must hold is Kafka 4's controller (ControllerApis and ReplicationControlManager):
duplicates are answered once per name, names are checked before existence, existence before
configs, configs before replication factor, replication factor before partition count. The
effects are checked through the other APIs: Metadata (partitions, stable topic ids), Produce and
Fetch on new partitions, OffsetFetch and ListGroups after a delete, and a parked Fetch.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from protocol.codec import has_field
from tests.conftest import broker_settings
from tests.wire.client import Connect, WireClient, part, request
from tests.wire.test_versions import (
    commit_errors,
    commit_request,
    fetch_request,
    fetched,
    stable_group,
    versions,
)

E = ErrorCode

ZERO_UUID = uuid.UUID(int=0)
TIMEOUT = datetime.timedelta(seconds=30)
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
DEFAULT_CONFIGS = {
    "max.message.bytes": ("1048588", DEFAULT_CONFIG),
    "retention.bytes": ("-1", DEFAULT_CONFIG),
    "retention.ms": ("604800000", DEFAULT_CONFIG),
}
DUPLICATE = "Duplicate topic name."
METADATA_VERSION = 12  # topic ids, lookups by name




# -- request builders ---------------------------------------------------------------------------


def new_topic(
    version: int,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    *,
    configs: dict[str, str | None] | None = None,
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = (),
) -> Any:
    return part(
        ApiKey.CREATE_TOPICS,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=i32(partitions),
        replication_factor=i16(replication),
        assignments=tuple(
            part(
                ApiKey.CREATE_TOPICS,
                version,
                "CreatableReplicaAssignment",
                partition_index=i32(index),
                broker_ids=tuple(i32(b) for b in brokers),
            )
            for index, brokers in assignments
        ),
        configs=tuple(
            part(ApiKey.CREATE_TOPICS, version, "CreatableTopicConfig", name=key, value=value)
            for key, value in (configs or {}).items()
        ),
    )


def create_request(version: int, *topics: Any, validate_only: bool = False) -> Any:
    return request(ApiKey.CREATE_TOPICS, version, topics=topics, timeout=TIMEOUT, validate_only=validate_only)


def delete_request(version: int, *topics: str | uuid.UUID | tuple[str | None, uuid.UUID | None]) -> Any:
    """DeleteTopics by name (v1+) or, from v6, by id or by an explicit (name, id) pair."""
    if version < 6:
        assert all(isinstance(t, str) for t in topics)
        return request(ApiKey.DELETE_TOPICS, version, topic_names=topics, timeout=TIMEOUT)
    states = []
    for t in topics:
        name, topic_id = (t, None) if isinstance(t, str) else (None, t) if isinstance(t, uuid.UUID) else t
        states.append(part(ApiKey.DELETE_TOPICS, version, "DeleteTopicState", name=name, topic_id=topic_id))
    return request(ApiKey.DELETE_TOPICS, version, topics=tuple(states), timeout=TIMEOUT)


def grow_request(
    version: int, *topics: tuple[str, int, tuple[tuple[int, ...], ...] | None], validate_only: bool = False
) -> Any:
    return request(
        ApiKey.CREATE_PARTITIONS,
        version,
        topics=tuple(
            part(
                ApiKey.CREATE_PARTITIONS,
                version,
                "CreatePartitionsTopic",
                name=name,
                count=i32(count),
                assignments=None
                if assignments is None
                else tuple(
                    part(
                        ApiKey.CREATE_PARTITIONS,
                        version,
                        "CreatePartitionsAssignment",
                        broker_ids=tuple(i32(b) for b in brokers),
                    )
                    for brokers in assignments
                ),
            )
            for name, count, assignments in topics
        ),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


def metadata_request(*topics: str | uuid.UUID, version: int = METADATA_VERSION, auto_create: bool = False) -> Any:
    return request(
        ApiKey.METADATA,
        version,
        topics=tuple(
            part(
                ApiKey.METADATA,
                version,
                "MetadataRequestTopic",
                name=t if isinstance(t, str) else None,
                topic_id=t if isinstance(t, uuid.UUID) else None,
            )
            for t in topics
        ),
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


async def described(client: WireClient, name: str, version: int = METADATA_VERSION) -> Any:
    response = await client.call(metadata_request(name, version=version))
    (topic,) = response.topics
    return topic


def record_batch(*values: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, partition: int, records: bytes, version: int = 11) -> Any:
    return request(
        ApiKey.PRODUCE,
        version,
        transactional_id=None,
        acks=i16(-1),
        timeout=TIMEOUT,
        topic_data=(
            part(
                ApiKey.PRODUCE,
                version,
                "TopicProduceData",
                name=topic,
                partition_data=(
                    part(ApiKey.PRODUCE, version, "PartitionProduceData", index=i32(partition), records=records),
                ),
            ),
        ),
    )


def data_fetch_request(
    version: int,
    topic: str | uuid.UUID,
    partitions: list[int],
    *,
    offset: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
) -> Any:
    """Fetch by name (v4-12) or by topic id (v13+), sessionless."""
    key = {"topic_id": topic} if version >= 13 else {"topic": topic}
    return request(
        ApiKey.FETCH,
        version,
        replica_id=i32(-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            part(
                ApiKey.FETCH,
                version,
                "FetchTopic",
                **key,
                partitions=tuple(
                    part(
                        ApiKey.FETCH,
                        version,
                        "FetchPartition",
                        partition=i32(p),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(offset),
                        last_fetched_epoch=i32(-1),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    )
                    for p in partitions
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def results_by_name(results: Any) -> dict[str | None, list[Any]]:
    found: dict[str | None, list[Any]] = {}
    for result in results:
        found.setdefault(result.name, []).append(result)
    return found


async def eventually(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


# -- CreateTopics --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    name = f"created-v{version}"
    configs: dict[str, str | None] = {"retention.ms": "1000", "cleanup.policy": "delete"}
    response = await client.call(create_request(version, new_topic(version, name, 4, 1, configs=configs)))
    assert response.throttle_time == datetime.timedelta(0)
    (result,) = response.topics
    assert (result.name, result.error_code, result.error_message) == (name, E.none, None)
    registered = server.topics.get(name)
    assert registered is not None and registered.partitions == 4
    assert registered.retention_ms == 1000
    assert has_field(type(result), "num_partitions") == (version >= 5)
    if version >= 5:
        assert (result.topic_config_error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)
        reported = {c.name: (c.value, c.config_source) for c in result.configs}
        assert reported == DEFAULT_CONFIGS | {
            "retention.ms": ("1000", DYNAMIC_TOPIC_CONFIG),
            "cleanup.policy": ("delete", DYNAMIC_TOPIC_CONFIG),
        }
        assert [c.name for c in result.configs] == sorted(reported)
        assert not any(c.read_only or c.is_sensitive for c in result.configs)
    assert has_field(type(result), "topic_id") == (version >= 7)
    if version >= 7:
        assert result.topic_id == registered.topic_id != ZERO_UUID

    topic = await described(client, name)
    assert (topic.error_code, topic.topic_id) == (E.none, registered.topic_id)
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (i, 1, (1,), (1,)) for i in range(4)
    ]

    # A manual assignment naming this broker: numPartitions and replicationFactor must be -1.
    manual = f"manual-v{version}"
    response = await client.call(
        create_request(version, new_topic(version, manual, -1, -1, assignments=((1, (1,)), (0, (1,)))))
    )
    (result,) = response.topics
    assert (result.name, result.error_code) == (manual, E.none)
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 1)
    assert len((await described(client, manual)).partitions) == 2


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_defaults_to_num_partitions(version: int) -> None:
    broker = BrokerServer(broker_settings(num_partitions=5))
    await broker.start()
    client = await WireClient.connect(broker.port)
    try:
        response = await client.call(create_request(version, new_topic(version, "defaulted", -1, -1)))
        (result,) = response.topics
        assert result.error_code is E.none
        if version >= 5:
            assert (result.num_partitions, result.replication_factor) == (5, 1)
        registered = broker.topics.get("defaulted")
        assert registered is not None and registered.partitions == 5
        assert len((await described(client, "defaulted")).partitions) == 5
    finally:
        await client.close()
        await broker.stop()


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_errors(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    before = {t.name for t in server.topics.all()}
    refused = [
        (new_topic(version, "dup"), E.invalid_request),
        (new_topic(version, "bad name!"), E.invalid_topic_exception),
        (new_topic(version, ""), E.invalid_topic_exception),
        (new_topic(version, ".."), E.invalid_topic_exception),
        (new_topic(version, "x" * 250), E.invalid_topic_exception),
        (new_topic(version, "topic"), E.topic_already_exists),
        (new_topic(version, "zero-partitions", 0), E.invalid_partitions),
        (new_topic(version, "negative-partitions", -2), E.invalid_partitions),
        (new_topic(version, "zero-replicas", 1, 0), E.invalid_replication_factor),
        (new_topic(version, "negative-replicas", 1, -2), E.invalid_replication_factor),
        (new_topic(version, "three-replicas", 1, 3), E.invalid_replication_factor),
        (new_topic(version, "other-broker", -1, -1, assignments=((0, (1,)), (1, (2,)))), E.invalid_replica_assignment),
        (new_topic(version, "no-replicas", -1, -1, assignments=((0, ()),)), E.invalid_replica_assignment),
        (new_topic(version, "twice", -1, -1, assignments=((0, (1, 1)),)), E.invalid_replica_assignment),
        (new_topic(version, "gap", -1, -1, assignments=((0, (1,)), (2, (1,)))), E.invalid_replica_assignment),
        (new_topic(version, "counted", 2, -1, assignments=((0, (1,)),)), E.invalid_request),
        (new_topic(version, "replicated", -1, 1, assignments=((0, (1,)),)), E.invalid_request),
        (new_topic(version, "unknown-config", configs={"no.such.config": "1"}), E.invalid_config),
        (new_topic(version, "bad-value", configs={"retention.ms": "soon"}), E.invalid_config),
        (new_topic(version, "too-small", configs={"retention.bytes": "-2"}), E.invalid_config),
        (new_topic(version, "null-config", configs={"cleanup.policy": None, "segment.ms": None}), E.invalid_config),
        (new_topic(version, "dup", 2), E.invalid_request),
    ]
    response = await client.call(create_request(version, *(topic for topic, _ in refused)))
    results = results_by_name(response.topics)
    # ControllerApis answers a duplicated name once, after the others.
    assert [r.name for r in response.topics][-1] == "dup"
    assert len(results["dup"]) == 1
    assert (results["dup"][0].error_code, results["dup"][0].error_message) == (E.invalid_request, DUPLICATE)
    assert len(response.topics) == len(refused) - 1
    for topic, error in refused:
        (result,) = results[topic.name]
        assert result.error_code is error, (topic.name, result)
        assert result.error_message, topic.name
        if version >= 5:
            assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, ())
        if version >= 7:
            assert result.topic_id is None  # the zero UUID, which kio reads as None
    assert results["topic"][0].error_message == "Topic 'topic' already exists."
    assert results["three-replicas"][0].error_message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
        "because only 1 broker(s) are registered."
    )
    assert results["null-config"][0].error_message == (
        "Null value not supported for topic configs: cleanup.policy,segment.ms"
    )
    assert results["unknown-config"][0].error_message == "Unknown topic config name: no.such.config"
    assert {t.name for t in server.topics.all()} == before


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_checks_in_kafkas_order(server: BrokerServer, connect: Connect, version: int) -> None:
    """Name, then existence, then configs, then replication factor, then partition count."""
    client = await connect()
    cases = [
        (new_topic(version, "bad name!", 0, 0, configs={"nope": "1"}), E.invalid_topic_exception),
        (new_topic(version, "topic", 0, 0, configs={"nope": "1"}), E.topic_already_exists),
        (new_topic(version, "config-first", 0, 0, configs={"nope": "1"}), E.invalid_config),
        (new_topic(version, "replicas-first", 0, 0), E.invalid_replication_factor),
        (new_topic(version, "assignment-replicas-first", 3, 3, assignments=((0, (1,)),)), E.invalid_request),
    ]
    response = await client.call(create_request(version, *(topic for topic, _ in cases)))
    assert [(r.name, r.error_code) for r in response.topics] == [(t.name, error) for t, error in cases]
    messages = {r.name: r.error_message for r in response.topics}
    assert messages["assignment-replicas-first"] == (
        "A manual partition assignment was specified, but replication factor was not set to -1."
    )


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_validate_only(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(
        create_request(
            version,
            new_topic(version, "validated", 3, 1, configs={"max.message.bytes": "2048"}),
            new_topic(version, "topic", 3, 1),
            validate_only=True,
        )
    )
    validated, existing = response.topics
    assert (validated.name, validated.error_code, validated.error_message) == ("validated", E.none, None)
    assert (existing.name, existing.error_code) == ("topic", E.topic_already_exists)
    if version >= 5:
        assert (validated.num_partitions, validated.replication_factor) == (3, 1)
        configs = {c.name: (c.value, c.config_source) for c in validated.configs}
        assert configs["max.message.bytes"] == ("2048", DYNAMIC_TOPIC_CONFIG)
    assert server.topics.get("validated") is None
    missing = await described(client, "validated")
    assert (missing.error_code, missing.partitions) == (E.unknown_topic_or_partition, ())
    # Nothing was reserved either: the real creation goes through.
    response = await client.call(create_request(version, new_topic(version, "validated", 3, 1)))
    assert response.topics[0].error_code is E.none


# -- DeleteTopics --------------------------------------------------------------------------------


async def create(client: WireClient, name: str, partitions: int = 1) -> uuid.UUID:
    response = await client.call(create_request(7, new_topic(7, name, partitions, 1)))
    (result,) = response.topics
    assert result.error_code is E.none, result
    topic_id: uuid.UUID = result.topic_id
    return topic_id


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
async def test_delete_topics_by_name(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    first, second = f"doomed-a-v{version}", f"doomed-b-v{version}"
    ids = {first: await create(client, first, 2), second: await create(client, second)}

    response = await client.call(delete_request(version, first, "never-created", second, "dup", "dup"))
    assert response.throttle_time == datetime.timedelta(0)
    results = results_by_name(response.responses)
    assert set(results) == {first, second, "never-created", "dup"}
    assert all(len(r) == 1 for r in results.values()), "one answer per name"
    answers = {name: r[0] for name, r in results.items()}
    assert {name: a.error_code for name, a in answers.items()} == {
        first: E.none,
        second: E.none,
        "never-created": E.unknown_topic_or_partition,
        "dup": E.invalid_request,
    }
    assert has_field(type(answers[first]), "error_message") == (version >= 5)
    if version >= 5:
        assert answers[first].error_message is None
        assert answers["never-created"].error_message == "This server does not host this topic-partition."
        assert answers["dup"].error_message == DUPLICATE
    assert has_field(type(answers[first]), "topic_id") == (version >= 6)
    if version >= 6:
        assert (answers[first].topic_id, answers[second].topic_id) == (ids[first], ids[second])
        assert answers["never-created"].topic_id is None  # the zero UUID

    assert server.topics.get(first) is None and server.topics.get(second) is None
    for name in (first, second):
        gone = await described(client, name)
        assert (gone.error_code, gone.partitions) == (E.unknown_topic_or_partition, ())
    again = await client.call(delete_request(version, first))
    assert [(r.name, r.error_code) for r in again.responses] == [(first, E.unknown_topic_or_partition)]
    assert server.topics.get("topic") is not None


async def test_delete_topics_v6_by_id(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    by_id = await create(client, "by-id", 2)
    named = await create(client, "named-and-id")
    twice = await create(client, "twice-by-id")
    both = await create(client, "both-ways")
    unknown = uuid.uuid4()

    response = await client.call(
        delete_request(
            6,
            by_id,
            unknown,
            ("named-and-id", named),  # a name and an id in one entry
            (None, None),  # neither
            twice,
            twice,
            both,
            "both-ways",  # a name that maps to an id already given
        )
    )
    # Kafka shuffles these answers: compare them as a set.
    answers = {(r.name, r.topic_id or ZERO_UUID, r.error_code, r.error_message) for r in response.responses}
    assert len(response.responses) == len(answers)
    assert answers == {
        ("by-id", by_id, E.none, None),
        (None, unknown, E.unknown_topic_id, "This server does not host this topic ID."),
        ("named-and-id", named, E.invalid_request, "You may not specify both topic name and topic id."),
        (None, ZERO_UUID, E.invalid_request, "Neither topic name nor id were specified."),
        (None, twice, E.invalid_request, "Duplicate topic id."),
        ("both-ways", both, E.invalid_request, "The provided topic name maps to an ID that was already supplied."),
    }
    assert server.topics.get("by-id") is None and server.topics.by_id(by_id) is None
    for kept in ("named-and-id", "twice-by-id", "both-ways"):
        assert server.topics.get(kept) is not None, kept
    gone = await client.call(metadata_request(by_id))
    assert [(t.topic_id, t.error_code) for t in gone.topics] == [(by_id, E.unknown_topic_id)]


# -- CreatePartitions ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
async def test_create_partitions(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await create(client, "grown", 2)
    await create(client, "assigned", 1)
    await create(client, "only-validated", 1)
    response = await client.call(grow_request(version, ("grown", 4, None), ("assigned", 3, ((1,), (1,)))))
    assert response.throttle_time == datetime.timedelta(0)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("grown", E.none, None),
        ("assigned", E.none, None),
    ]
    for name, count in (("grown", 4), ("assigned", 3)):
        topic = await described(client, name)
        assert [(p.partition_index, p.leader_id, p.replica_nodes) for p in topic.partitions] == [
            (i, 1, (1,)) for i in range(count)
        ]

    response = await client.call(grow_request(version, ("only-validated", 5, None), validate_only=True))
    assert [(r.name, r.error_code) for r in response.results] == [("only-validated", E.none)]
    assert len((await described(client, "only-validated")).partitions) == 1

    response = await client.call(
        grow_request(
            version,
            ("dup", 2, None),
            ("never-created", 2, None),
            ("grown", 4, None),
            ("assigned", 5, ((1,),)),
            ("only-validated", 2, ((2,),)),
            ("topic", 4, ((1, 1),)),
            ("dup", 3, None),
        )
    )
    results = results_by_name(response.results)
    assert all(len(r) == 1 for r in results.values()), "one answer per name"
    errors = {name: (r[0].error_code, r[0].error_message) for name, r in results.items()}
    assert response.results[0].name == "dup"  # ControllerApis answers duplicates first
    assert errors == {
        "dup": (E.invalid_request, DUPLICATE),
        "never-created": (E.unknown_topic_or_partition, None),  # a bare exception: no message
        "grown": (E.invalid_partitions, "Topic already has 4 partition(s)."),
        "assigned": (
            E.invalid_replica_assignment,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        "only-validated": (
            E.invalid_replica_assignment,
            "The manual partition assignment includes broker 2, but no such broker is registered.",
        ),
        "topic": (
            E.invalid_replica_assignment,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
    }
    response = await client.call(grow_request(version, ("grown", 3, None)))
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("grown", E.invalid_partitions, "The topic grown currently has 4 partition(s); 3 would not be an increase."),
    ]
    counts = {"grown": 4, "assigned": 3, "only-validated": 1, "topic": 3}
    assert {name: len((await described(client, name)).partitions) for name in counts} == counts
    assert server.topics.get("dup") is None and server.topics.get("never-created") is None


async def test_new_partitions_take_produce_and_fetch(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    topic_id = await create(client, "growing", 2)
    response = await client.call(grow_request(3, ("growing", 4, None)))
    assert response.results[0].error_code is E.none

    for partition in (1, 3):
        records = record_batch(f"hello-{partition}".encode(), b"world")
        produced = await client.call(produce_request("growing", partition, records))
        ((answer,),) = [t.partition_responses for t in produced.responses]
        assert (answer.index, answer.error_code, answer.base_offset) == (partition, E.none, 0)

    for version, key in ((12, "growing"), (16, topic_id)):
        response = await client.call(data_fetch_request(version, key, [2, 3]))
        assert response.error_code is E.none
        ((empty, full),) = [t.partitions for t in response.responses]
        assert (empty.partition_index, empty.error_code, empty.high_watermark, empty.records) == (2, E.none, 0, b"")
        assert (full.partition_index, full.error_code, full.high_watermark) == (3, E.none, 2)
        assert full.records is not None and b"hello-3" in full.records and b"world" in full.records
        # Beyond the new count the partition still does not exist.
        response = await client.call(data_fetch_request(version, key, [4]))
        assert response.responses[0].partitions[0].error_code is E.unknown_topic_or_partition


# -- topic ids -----------------------------------------------------------------------------------


async def test_topic_id_is_stable_for_a_topics_life_and_new_after_recreation(
    server: BrokerServer, connect: Connect
) -> None:
    client = await connect()
    created = await create(client, "lifetime", 1)
    assert created != ZERO_UUID

    async def ids_seen() -> set[uuid.UUID]:
        seen = set()
        for version in range(10, 14):
            topic = await described(client, "lifetime", version)
            assert topic.error_code is E.none
            seen.add(topic.topic_id)
            every = await client.call(
                request(
                    ApiKey.METADATA,
                    version,
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            )
            seen |= {t.topic_id for t in every.topics if t.name == "lifetime"}
        return seen

    assert await ids_seen() == {created}
    await client.call(produce_request("lifetime", 0, record_batch(b"x")))
    assert (await client.call(grow_request(3, ("lifetime", 3, None)))).results[0].error_code is E.none
    assert await ids_seen() == {created}
    by_id = await client.call(metadata_request(created))
    assert [(t.name, t.topic_id, len(t.partitions)) for t in by_id.topics] == [("lifetime", created, 3)]

    deleted = await client.call(delete_request(6, "lifetime"))
    assert [(r.topic_id, r.error_code) for r in deleted.responses] == [(created, E.none)]
    recreated = await create(client, "lifetime", 2)
    assert recreated not in (created, ZERO_UUID)
    assert await ids_seen() == {recreated}
    old = await client.call(metadata_request(created))
    assert [(t.topic_id, t.error_code) for t in old.topics] == [(created, E.unknown_topic_id)]
    # The new topic starts empty, with its own partition count.
    fresh = await client.call(data_fetch_request(16, recreated, [0, 1]))
    assert [(p.error_code, p.high_watermark) for p in fresh.responses[0].partitions] == [(E.none, 0), (E.none, 0)]
    stale = await client.call(data_fetch_request(16, created, [0]))
    assert stale.responses[0].partitions[0].error_code is E.unknown_topic_id


# -- what a delete takes with it -----------------------------------------------------------------


def list_groups_request() -> Any:
    return request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=())


async def test_deleting_a_topic_drops_its_committed_offsets(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    await create(client, "offsets-doomed", 2)
    only_doomed = {"offsets-doomed": [(0, 5, -1, "a"), (1, 7, -1, None)]}
    assert commit_errors(await client.call(commit_request(9, "only-doomed", only_doomed))) == {
        "offsets-doomed": [(0, E.none), (1, E.none)]
    }
    mixed: dict[str, list[tuple[int, int, int, str | None]]] = {
        "offsets-doomed": [(0, 3, -1, None)],
        "topic": [(1, 11, -1, "kept")],
    }
    assert commit_errors(await client.call(commit_request(9, "mixed", mixed))) == {
        "offsets-doomed": [(0, E.none)],
        "topic": [(1, E.none)],
    }
    member, generation = await stable_group(client, "active")
    active: dict[str, list[tuple[int, int, int, str | None]]] = {"offsets-doomed": [(1, 9, -1, None)]}
    response = await client.call(commit_request(9, "active", active, generation=generation, member_id=member))
    assert commit_errors(response) == {"offsets-doomed": [(1, E.none)]}
    listed = await client.call(list_groups_request())
    assert {(g.group_id, g.group_state) for g in listed.groups} == {
        ("only-doomed", "Empty"),
        ("mixed", "Empty"),
        ("active", "Stable"),
    }

    response = await client.call(delete_request(6, "offsets-doomed"))
    assert response.responses[0].error_code is E.none

    answer = await client.call(
        fetch_request(
            9,
            ("only-doomed", {"offsets-doomed": [0, 1]}),
            ("mixed", None),
            ("mixed", {"offsets-doomed": [0]}),
            ("active", None),
        )
    )
    assert [g.error_code for g in answer.groups] == [E.none] * 4
    assert [fetched(g.topics) for g in answer.groups] == [
        {"offsets-doomed": [(0, -1, -1, "", E.none), (1, -1, -1, "", E.none)]},
        {"topic": [(1, 11, -1, "kept", E.none)]},
        {"offsets-doomed": [(0, -1, -1, "", E.none)]},
        {},
    ]
    # The Empty group left with no offsets is deleted; the one with offsets elsewhere and the active one stay.
    listed = await client.call(list_groups_request())
    assert {(g.group_id, g.group_state) for g in listed.groups} == {("mixed", "Empty"), ("active", "Stable")}

    # A topic of the same name created again starts with no committed offsets either.
    await create(client, "offsets-doomed", 2)
    answer = await client.call(fetch_request(9, ("mixed", None)))
    assert fetched(answer.groups[0].topics) == {"topic": [(1, 11, -1, "kept", E.none)]}


@pytest.mark.parametrize("fetch_version", [12, 16])
async def test_deleting_a_topic_answers_a_parked_fetch(
    server: BrokerServer, connect: Connect, fetch_version: int
) -> None:
    fetcher, admin = await connect("fetcher"), await connect("admin")
    topic_id = await create(admin, "parked", 2)
    key: str | uuid.UUID = topic_id if fetch_version >= 13 else "parked"
    parked = fetcher.encode(data_fetch_request(fetch_version, key, [0, 1], max_wait_ms=5000, min_bytes=1), 77)
    await fetcher.send_raw(parked)
    await eventually(lambda: len(server.fetches) == 1, "the fetch to park")

    loop = asyncio.get_running_loop()
    started = loop.time()
    deleted = await admin.call(delete_request(6, "parked"))
    assert deleted.responses[0].error_code is E.none
    correlation_id, response = fetcher.decode(ApiKey.FETCH, fetch_version, await fetcher.read_frame(timeout=2.0))
    assert loop.time() - started < 2.0, "the parked fetch waited for its max_wait"
    assert correlation_id == 77
    assert len(server.fetches) == 0
    assert response.error_code is E.none
    (topic,) = response.responses
    assert [(p.partition_index, p.error_code, p.high_watermark, p.records) for p in topic.partitions] == [
        (0, E.unknown_topic_or_partition, -1, b""),
        (1, E.unknown_topic_or_partition, -1, b""),
    ]
    # The connection carries on.
    again = await fetcher.call(data_fetch_request(fetch_version, key, [0]))
    expected = E.unknown_topic_id if fetch_version >= 13 else E.unknown_topic_or_partition
    assert again.responses[0].partitions[0].error_code is expected


async def test_create_topics_refuses_a_name_colliding_up_to_dot_and_underscore(
    server: BrokerServer, connect: Connect
) -> None:
    """ReplicationControlManager: 'a.b' and 'a_b' share metric names, so the second one is refused."""
    client = await connect()
    first = (await client.call(create_request(7, new_topic(7, "metrics.topic")))).topics[0]
    assert first.error_code is ErrorCode.none
    second = (await client.call(create_request(7, new_topic(7, "metrics_topic")))).topics[0]
    assert second.error_code is ErrorCode.invalid_topic_exception
    assert second.error_message == "Topic 'metrics_topic' collides with existing topic: metrics.topic"
    assert server.topics.get("metrics_topic") is None
