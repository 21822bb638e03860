"""Real admin clients read and change configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

confluent-kafka's AdminClient (librdkafka: DescribeConfigs v1, AlterConfigs v2, IncrementalAlterConfigs v1),
kafka-python's KafkaAdminClient and aiokafka's AIOKafkaAdminClient, on a topic and on the broker. An altered
retention.ms is then enforced by the broker's retention pass (run every 100 ms here).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import BrokerProcess, start_broker_process

DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker_process(
        tmp_path_factory.mktemp("configs-broker"),
        "--auto-create-topics-enable",
        "false",
        "--log-retention-check-interval-ms",
        "100",
    )
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _create(broker: BrokerProcess, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_kafka_configs_and_retention(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    name = unique("confluent-configs")
    _create(broker, name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = ConfigResource(ResourceType.TOPIC, name)

    def described(resource: Any) -> dict[str, Any]:
        result: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout=10)
        return result

    configs = described(topic)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == 5  # DEFAULT_CONFIG
    assert configs["cleanup.policy"].value == "delete"

    # An old record, kept under the default retention, dropped once retention.ms is one second.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, b"old", timestamp=int(time.time() * 1000) - 3_600_000)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (0, 1)
        alter = ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)],
        )
        admin.incremental_alter_configs([alter])[alter].result(timeout=10)
        assert described(topic)["retention.ms"].value == "1000"
        wait_until(
            lambda: consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (1, 1), "retention to apply"
        )
    finally:
        consumer.close()

    legacy = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "1000"})
    admin.alter_configs([legacy])[legacy].result(timeout=10)
    configs = described(topic)
    assert (configs["retention.bytes"].value, configs["retention.ms"].value) == ("1000", "604800000")

    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"no.such.config": "1"})
    with pytest.raises(KafkaException, match="Unknown topic config name"):
        admin.alter_configs([bad])[bad].result(timeout=10)

    broker_resource = ConfigResource(ResourceType.BROKER, "1")
    broker_configs = described(broker_resource)
    assert broker_configs["auto.create.topics.enable"].value == "false"
    assert broker_configs["auto.create.topics.enable"].is_read_only
    change = ConfigResource(ResourceType.BROKER, "1", set_config={"num.partitions": "4"})
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        admin.alter_configs([change])[change].result(timeout=10)


def test_kafka_python_configs(broker: BrokerProcess) -> None:
    """IncrementalAlterConfigs by default, AlterConfigs when forced (the client re-sends the other overrides)."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    name = unique("kafka-python-configs")
    _create(broker, name)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kafka-python-configs")
    resource = ConfigResourceType.TOPIC
    try:
        altered = admin.alter_configs([ConfigResource(resource, name, configs={"retention.ms": "5000"})])
        assert altered == {"topic": {name: "OK"}}
        legacy = admin.alter_configs(
            [ConfigResource(resource, name, configs={"retention.bytes": "5"})], incremental=False
        )
        assert legacy == {"topic": {name: "OK"}}
        described = admin.describe_configs([ConfigResource(resource, name)])["topic"][name]
        assert {key: entry["value"] for key, entry in described.items()} == {
            "retention.ms": "5000",
            "retention.bytes": "5",
        }
        assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        everything = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
        assert everything["broker"]["1"]["num.partitions"]["value"] == "1"
    finally:
        admin.close()


def test_aiokafka_configs(broker: BrokerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    name = unique("aiokafka-configs")
    _create(broker, name)

    async def run() -> tuple[Any, Any, Any]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            altered = await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "7000"})]
            )
            topic = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            node = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
            return altered, topic, node
        finally:
            await admin.close()

    altered, topic, node = asyncio.run(run())
    (response,) = altered
    assert [r[0] for r in response.resources] == [0]
    ((_error, _message, _type, _name, configs),) = topic[0].resources
    assert ("retention.ms", "7000") in [(c[0], c[1]) for c in configs]
    assert "num.partitions" in [c[0] for c in node[0].resources[0][4]]
