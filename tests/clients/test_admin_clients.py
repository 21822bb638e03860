"""Real admin clients against a broker process: create, grow and delete topics; growing a topic rebalances.

kafka-python's KafkaAdminClient (CreateTopics v7, CreatePartitions v3, DeleteTopics v6), confluent-kafka's
AdminClient (librdkafka 2.16: CreateTopics v4, CreatePartitions v2, DeleteTopics v4) and aiokafka's
AIOKafkaAdminClient (CreateTopics v3, CreatePartitions v1, DeleteTopics v3) each go through the whole cycle,
with the refusals surfacing as each client's own exception or error code. (Before this file, CreateTopics
v2-4 - librdkafka's and aiokafka's - closed the connection: the handler looked up the v5+ config schema.)

Where a client checks something itself it is read back through the same client: partition counts from its own
metadata call. Auto-creation is off on this broker, so a metadata call for a deleted topic cannot bring it back
(aiokafka's describe_topics, on a broker with auto.create.topics.enable, recreates the topic it names).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import BrokerProcess, start_broker_process

DEADLINE_S = 20.0
NUM_PARTITIONS = 3  # the broker's num.partitions, for topics created with -1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker process with no auto-creation (and conftest's group flags: no initial delay, 1 s min session)."""
    process = start_broker_process(
        tmp_path_factory.mktemp("admin-broker"),
        "--auto-create-topics-enable",
        "false",
        "--num-partitions",
        str(NUM_PARTITIONS),
    )
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _broker_alive(broker: BrokerProcess) -> Iterator[None]:
    yield
    assert broker.process.poll() is None, "the broker died:\n" + broker.log()[-4000:]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def log_events(broker: BrokerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in broker.log().splitlines() if line.startswith("{")]


def generations(broker: BrokerProcess, group: str) -> list[int]:
    """The generation of every "join_completed" the broker logged for ``group``."""
    return [
        int(e["generation_id"])
        for e in log_events(broker)
        if e.get("event") == "join_completed" and e.get("group_id") == group
    ]


def deleted_topics(broker: BrokerProcess) -> list[str]:
    return [e["topic"] for e in log_events(broker) if e.get("event") == "topic deleted"]


# -- kafka-python ------------------------------------------------------------------------------


def test_kafka_python_admin_client(broker: BrokerProcess) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    from kafka.errors import (
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )

    name = unique("kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kafka-python-admin")

    def partitions(topic: str) -> list[int]:
        (described,) = admin.describe_topics([topic])
        assert described["error_code"] == 0, described
        return sorted(p["partition_index"] for p in described["partitions"])

    try:
        validated = admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in validated["topics"]] == [(name, 0, 2)]
        assert name not in admin.list_topics()

        created = admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "60000"})])
        (result,) = created["topics"]
        summary = {key: result[key] for key in ("name", "error_code", "num_partitions", "replication_factor")}
        assert summary == {"name": name, "error_code": 0, "num_partitions": 2, "replication_factor": 1}
        assert result["configs"]["retention.ms"] == {
            "value": "60000",
            "read_only": False,
            "config_source": "DYNAMIC_TOPIC_CONFIG",
            "is_sensitive": False,
        }
        assert result["configs"]["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert result["topic_id"]
        assert partitions(name) == [0, 1]

        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, 2, 1)])
        with pytest.raises(InvalidReplicationFactorError, match="only 1 broker"):
            admin.create_topics([NewTopic(unique("kafka-python-rf"), 1, 3)])

        defaulted = admin.create_topics([NewTopic(unique("kafka-python-default"), -1, -1)])
        assert [(t["error_code"], t["num_partitions"]) for t in defaulted["topics"]] == [(0, NUM_PARTITIONS)]

        grown = admin.create_partitions({name: NewPartitions(4)})
        assert [(r.name, r.error_code) for r in grown.results] == [(name, 0)]
        assert partitions(name) == [0, 1, 2, 3]
        with pytest.raises(InvalidPartitionsError, match="would not be an increase"):
            admin.create_partitions({name: NewPartitions(3)})

        deleted = admin.delete_topics([name])
        assert [(t["name"], t["error_code"], t["topic_id"]) for t in deleted["topics"]] == [
            (name, 0, result["topic_id"])
        ]
        assert name not in admin.list_topics()
        assert name in deleted_topics(broker)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([name])
    finally:
        admin.close()


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------


def confluent_outcomes(futures: dict[Any, Any]) -> dict[str, Any]:
    """Each future's result: None for success, else the KafkaError code."""
    from confluent_kafka import KafkaException

    outcomes: dict[str, Any] = {}
    for key, future in futures.items():
        try:
            outcomes[getattr(key, "topic", key)] = future.result(timeout=DEADLINE_S)
        except KafkaException as error:
            outcomes[getattr(key, "topic", key)] = error.args[0].code()
    return outcomes


def test_confluent_admin_client(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    name, rf3, defaulted = unique("confluent"), unique("confluent-rf"), unique("confluent-default")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "confluent-admin"})

    def partitions(topic: str) -> list[int]:
        found = admin.list_topics(timeout=DEADLINE_S).topics.get(topic)
        assert found is not None and found.error is None, found
        return sorted(found.partitions)

    def listed() -> set[str]:
        return set(admin.list_topics(timeout=DEADLINE_S).topics)

    assert confluent_outcomes(admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)) == {name: None}
    assert name not in listed()

    assert confluent_outcomes(admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "60000"})])) == {
        name: None
    }
    assert partitions(name) == [0, 1]
    assert confluent_outcomes(admin.create_topics([NewTopic(name, 2, 1), NewTopic(rf3, 1, 3)])) == {
        name: KafkaError.TOPIC_ALREADY_EXISTS,
        rf3: KafkaError.INVALID_REPLICATION_FACTOR,
    }
    assert rf3 not in listed()
    assert confluent_outcomes(admin.create_topics([NewTopic(defaulted)])) == {defaulted: None}
    assert partitions(defaulted) == list(range(NUM_PARTITIONS))

    assert confluent_outcomes(admin.create_partitions([NewPartitions(name, 4)])) == {name: None}
    assert partitions(name) == [0, 1, 2, 3]
    assert confluent_outcomes(admin.create_partitions([NewPartitions(name, 4)])) == {
        name: KafkaError.INVALID_PARTITIONS
    }
    assert confluent_outcomes(admin.create_partitions([NewPartitions(rf3, 2)])) == {
        rf3: KafkaError.UNKNOWN_TOPIC_OR_PART
    }

    assert confluent_outcomes(admin.delete_topics([name, defaulted])) == {name: None, defaulted: None}
    assert not {name, defaulted} & listed()
    assert confluent_outcomes(admin.delete_topics([name])) == {name: KafkaError.UNKNOWN_TOPIC_OR_PART}


# -- aiokafka -----------------------------------------------------------------------------------


async def test_aiokafka_admin_client(broker: BrokerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

    name, rf3 = unique("aiokafka"), unique("aiokafka-rf")
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="aiokafka-admin")
    await admin.start()

    async def partitions(topic: str) -> list[int]:
        (described,) = await admin.describe_topics([topic])
        assert described["error_code"] == 0, described
        return sorted(p["partition"] for p in described["partitions"])

    try:
        # create_topics and delete_topics hand back the response; only create_partitions raises.
        validated = await admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)
        assert validated.topic_errors == [(name, 0, None)]
        assert name not in await admin.list_topics()

        created = await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "60000"})])
        assert created.topic_errors == [(name, 0, None)]
        assert await partitions(name) == [0, 1]
        refused = await admin.create_topics([NewTopic(name, 2, 1), NewTopic(rf3, 1, 3)])
        assert {(topic, code) for topic, code, _ in refused.topic_errors} == {(name, 36), (rf3, 38)}
        assert rf3 not in await admin.list_topics()

        await admin.create_partitions({name: NewPartitions(4)})
        assert await partitions(name) == [0, 1, 2, 3]
        with pytest.raises(InvalidPartitionsError, match="already has 4"):
            await admin.create_partitions({name: NewPartitions(4)})
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.create_partitions({rf3: NewPartitions(2)})

        deleted = await admin.delete_topics([name])
        assert deleted.topic_error_codes == [(name, 0)]
        assert name not in await admin.list_topics()
        again = await admin.delete_topics([name])
        assert again.topic_error_codes == [(name, 3)]
    finally:
        await admin.close()


# -- growing a topic rebalances its consumers ---------------------------------------------------


def test_confluent_consumer_rebalances_when_its_topic_grows(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    name, group = unique("confluent-grow"), unique("confluent-grow-group")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert confluent_outcomes(admin.create_topics([NewTopic(name, 2, 1)])) == {name: None}
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )

    def owned() -> set[int]:
        consumer.poll(0.05)
        return {tp.partition for tp in consumer.assignment() if tp.topic == name}

    try:
        consumer.subscribe([name])
        wait_until(lambda: owned() == {0, 1}, "the consumer to own both partitions")
        wait_until(lambda: bool(generations(broker, group)), "the broker to log the join")
        first = max(generations(broker, group))

        assert confluent_outcomes(admin.create_partitions([NewPartitions(name, 4)])) == {name: None}
        wait_until(lambda: owned() == {0, 1, 2, 3}, "the consumer to own all four partitions")
        wait_until(lambda: max(generations(broker, group)) > first, "a new generation in the broker's log")
    finally:
        consumer.close()


async def test_aiokafka_consumer_rebalances_when_its_topic_grows(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

    name, group = unique("aiokafka-grow"), unique("aiokafka-grow-group")
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    consumer = AIOKafkaConsumer(
        name,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        enable_auto_commit=False,
        metadata_max_age_ms=500,
    )

    async def until(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    def owned() -> set[int]:
        return {tp.partition for tp in consumer.assignment() if tp.topic == name}

    try:
        created = await admin.create_topics([NewTopic(name, 2, 1)])
        assert created.topic_errors == [(name, 0, None)]
        await consumer.start()
        await until(lambda: owned() == {0, 1}, "the consumer to own both partitions")
        await until(lambda: bool(generations(broker, group)), "the broker to log the join")
        first = max(generations(broker, group))

        await admin.create_partitions({name: NewPartitions(4)})
        await until(lambda: owned() == {0, 1, 2, 3}, "the consumer to own all four partitions")
        await until(lambda: max(generations(broker, group)) > first, "a new generation in the broker's log")
    finally:
        await consumer.stop()
        await admin.close()
