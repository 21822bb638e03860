"""Real admin clients against a broker process: DescribeCluster, DeleteRecords and the ACL APIs.

confluent-kafka's AdminClient (delete_records, describe_acls, create_acls, delete_acls; librdkafka answers its
describe_cluster from a Metadata call), kafka-python's KafkaAdminClient (describe_cluster sends DescribeCluster v2
with IncludeFencedBrokers, delete_records, describe_acls, create_acls) and aiokafka's AIOKafkaAdminClient
(delete_records; its describe_cluster is a Metadata call, and it has no ACL calls). Without an authorizer the ACL
calls surface SECURITY_DISABLED as each client's own error, except librdkafka's describe_acls, which drops the
top-level error. A DeleteRecords is checked by a consumer: its watermarks and where it starts reading.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import BrokerProcess, start_broker_process

PARTITIONS = 2
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker_process(tmp_path_factory.mktemp("cluster-admin-broker"), "--num-partitions", str(PARTITIONS))
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _broker_alive(broker: BrokerProcess) -> Iterator[None]:
    yield
    assert broker.process.poll() is None, "the broker died:\n" + broker.log()[-4000:]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_ten(broker: BrokerProcess, topic: str) -> None:
    """Ten records to partition 0 of ``topic`` (auto-created), offsets 0-9."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
        producer.flush(DEADLINE_S)
    assert len(producer) == 0


def earliest(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    """(low, high) watermarks of partition 0, as a consumer reads them (ListOffsets earliest and latest)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE_S)
        return int(low), int(high)
    finally:
        consumer.close()


def first_consumed_offset(broker: BrokerProcess, topic: str) -> int:
    """Where a new consumer of partition 0 with auto.offset.reset=earliest starts."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        message = consumer.poll(DEADLINE_S)
        assert message is not None and message.error() is None, message and message.error()
        return int(message.offset())
    finally:
        consumer.close()


# -- confluent-kafka -------------------------------------------------------------------------------


def test_confluent_describe_cluster_and_delete_records(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(DEADLINE_S)
    (node,) = cluster.nodes
    assert (node.id, node.host, node.port) == (1, "127.0.0.1", broker.port)
    assert cluster.controller.id == 1
    assert cluster.cluster_id
    # librdkafka answers describe_cluster from a Metadata call, not DescribeCluster: Metadata v11+ carries no
    # cluster operations (KIP-700), so none come back.
    assert cluster.authorized_operations is None

    topic = unique("deleted")
    produce_ten(broker, topic)
    futures = admin.delete_records([TopicPartition(topic, 0, 4)])
    (deleted,) = (future.result(DEADLINE_S) for future in futures.values())
    assert deleted.low_watermark == 4
    assert earliest(broker, topic) == (4, 10)
    assert first_consumed_offset(broker, topic) == 4

    # Past the high watermark: OFFSET_OUT_OF_RANGE surfaces from the partition's future.
    from confluent_kafka import KafkaError, KafkaException

    (future,) = admin.delete_records([TopicPartition(topic, 0, 11)]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(DEADLINE_S)
    assert raised.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_confluent_acls_are_security_disabled(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    # librdkafka (2.16) reads DescribeAcls' top-level error code and drops it: against Kafka without an authorizer
    # too, describe_acls answers an empty list. The bytes are checked in tests/wire/test_cluster_admin.py.
    assert admin.describe_acls(every).result(DEADLINE_S) == []

    binding = AclBinding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    (future,) = admin.create_acls([binding]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(DEADLINE_S)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED

    (future,) = admin.delete_acls([every]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(DEADLINE_S)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


# -- kafka-python ----------------------------------------------------------------------------------


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import SecurityDisabledError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        cluster: dict[str, Any] = admin.describe_cluster()
        assert cluster["controller_id"] == 1
        assert cluster["cluster_id"]
        (node,) = cluster["brokers"]
        assert (node["broker_id"], node["host"], node["port"]) == (1, "127.0.0.1", broker.port)
        assert node["is_fenced"] is False
        # DescribeCluster v2 (is_fenced above), with every operation of the cluster resource: no authorizer.
        assert set(cluster["authorized_operations"]) == {
            "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
        }  # fmt: skip

        topic = unique("kp-deleted")
        produce_ten(broker, topic)
        answered = admin.delete_records({TopicPartition(topic, 0): 7})
        (result,) = answered.values()
        assert result["low_watermark"] == 7
        assert earliest(broker, topic) == (7, 10)

        every = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(every)
        acl = ACL(
            principal="User:alice",
            host="*",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, "t", ACLResourcePatternType.LITERAL),
        )
        created = admin.create_acls([acl])
        assert created["succeeded"] == []
        assert created["failed"] == [SecurityDisabledError]  # kafka-python lists the error types
    finally:
        admin.close()


# -- aiokafka --------------------------------------------------------------------------------------


async def test_aiokafka_admin(broker: BrokerProcess) -> None:
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    topic = unique("aio-deleted")
    produce_ten(broker, topic)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()  # a Metadata call in aiokafka, not DescribeCluster
        assert cluster["controller_id"] == 1
        answered = await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(before_offset=5)})
        assert answered == {TopicPartition(topic, 0): 5}
    finally:
        await admin.close()
    assert earliest(broker, topic) == (5, 10)
