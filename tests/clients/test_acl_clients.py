"""ACLs with real clients against a broker process started with ``--acls-enabled --acl-file`` (checklist 57-61 and
the consumer half of "Authorization"): the admin clients' ACL calls, and a consumer of each client denied READ on
its group, then on its topic, each failing with its own error, then consuming once CreateAcls granted them.

Every connection is PLAINTEXT, so every client is User:ANONYMOUS; the ACL file gives it what an operator would:
ALTER and DESCRIBE on the cluster (the ACL APIs), DESCRIBE on the groups ``grp-*`` (FindCoordinator) and
DESCRIBE and WRITE on the topic (Metadata, the producer), but no READ anywhere.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, start_broker_process

TOPIC = "acl-orders"
ACL_FILE = f"""\
# what the operator grants the clients of this test (all User:ANONYMOUS on PLAINTEXT)
ALLOW User:ANONYMOUS * ALTER,DESCRIBE CLUSTER:kafka-cluster
ALLOW User:ANONYMOUS * DESCRIBE GROUP:grp- PREFIXED
ALLOW User:ANONYMOUS * DESCRIBE,WRITE TOPIC:{TOPIC}
"""
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("acl-broker")
    acl_file = tmp / "acls.txt"
    acl_file.write_text(ACL_FILE)
    process = start_broker_process(tmp, "--acls-enabled", "--acl-file", str(acl_file), "--topic", f"{TOPIC}:1")
    produce(process.bootstrap, 3)
    yield process
    process.stop()


def produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(TOPIC, f"record-{n}".encode())
    assert producer.flush(10) == 0


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def grant_read(bootstrap: str, kind: str, name: str) -> None:
    """READ for User:ANONYMOUS through confluent-kafka's create_acls."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    binding = AclBinding(
        getattr(ResourceType, kind), name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", AclOperation.READ,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    client = admin(bootstrap)  # held: a collected AdminClient fails its futures with _DESTROY
    for future in client.create_acls([binding]).values():
        future.result(10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- ACL administration -------------------------------------------------------------------------------------


def test_confluent_admin_client_creates_describes_and_deletes_acls(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.error import KafkaException

    client = admin(broker.bootstrap)
    name = unique("conf")
    acls = [
        AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, name, ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL,
                   AclPermissionType.DENY),
    ]  # fmt: skip
    for future in client.create_acls(acls).values():
        assert future.result(10) is None
    invalid = AclBinding(ResourceType.BROKER, "other", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        client.create_acls([invalid])[invalid].result(10)
    assert "kafka-cluster" in str(refused.value)

    everything_of_alice = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY, AclPermissionType.ANY
    )
    described = client.describe_acls(everything_of_alice).result(10)
    assert sorted((b.restype, b.name, b.resource_pattern_type, b.operation) for b in described) == sorted(
        (b.restype, b.name, b.resource_pattern_type, b.operation) for b in acls
    )
    matching = AclBindingFilter(
        ResourceType.TOPIC, name, ResourcePatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert [b.name for b in client.describe_acls(matching).result(10)] == [name]

    deleted = client.delete_acls([everything_of_alice])[everything_of_alice].result(10)
    assert len(deleted) == 2
    assert client.describe_acls(everything_of_alice).result(10) == []


def test_kafka_python_admin_client_creates_describes_and_deletes_acls(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        name = unique("kp")
        acl = ACL(
            "User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, name, ACLResourcePatternType.PREFIXED),
        )  # fmt: skip
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        acl_filter = ACLFilter(
            "User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        found, error = client.describe_acls(acl_filter)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.operation) for a in found] == [(name, ACLOperation.WRITE)]
        ((_, removed, removed_error),) = client.delete_acls([acl_filter])
        assert removed_error.errno == 0
        assert [a.resource_pattern.resource_name for a in removed] == [name]
        assert client.describe_acls(acl_filter)[0] == []
    finally:
        client.close()


# -- consumers denied READ on their group, then on their topic ------------------------------------------------


def test_confluent_consumer_denied_group_then_topic_then_consumes(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, KafkaError

    group = unique("grp-conf")
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        consumer.subscribe([TOPIC])

        def first_error() -> Any:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is not None:
                    return message.error()
            raise AssertionError("no error from poll")

        error = first_error()
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        grant_read(broker.bootstrap, "GROUP", group)
        error = first_error()
        while error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:  # one already in flight when the ACL came
            error = first_error()
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
        grant_read(broker.bootstrap, "TOPIC", TOPIC)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [b"record-0", b"record-1", b"record-2"]
    finally:
        consumer.close()
        _revoke_topic_read(broker)


def _revoke_topic_read(broker: BrokerProcess) -> None:
    """The topic's READ goes again, so that each consumer test meets the denial."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as Kind

    acl_filter = AclBindingFilter(
        Kind.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:ANONYMOUS", None, AclOperation.READ, AclPermissionType.ANY
    )
    client = admin(broker.bootstrap)
    client.delete_acls([acl_filter])[acl_filter].result(10)


def test_kafka_python_consumer_denied_group_then_topic_then_consumes(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    group = unique("grp-kp")
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        session_timeout_ms=6000,
    )  # fmt: skip
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            _poll_until_raises(consumer)
        grant_read(broker.bootstrap, "GROUP", group)
        with pytest.raises(TopicAuthorizationFailedError):
            _poll_until_raises(consumer)
        grant_read(broker.bootstrap, "TOPIC", TOPIC)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        assert values == [b"record-0", b"record-1", b"record-2"]
    finally:
        consumer.close()
        _revoke_topic_read(broker)


def _poll_until_raises(consumer: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    raise AssertionError("poll never raised")


def test_aiokafka_consumer_denied_group_then_topic_then_consumes(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    group = unique("grp-aio")

    async def run() -> list[bytes]:
        denied = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id=group,
                                  auto_offset_reset="earliest", session_timeout_ms=6000)  # fmt: skip
        try:
            # aiokafka 0.14 raises it from start(), which joins the group when subscribed.
            with pytest.raises(GroupAuthorizationFailedError):
                await denied.start()
        finally:
            await denied.stop()
        grant_read(broker.bootstrap, "GROUP", group)
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", session_timeout_ms=6000)  # fmt: skip
        await consumer.start()
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                deadline = time.monotonic() + DEADLINE_S
                while time.monotonic() < deadline:
                    await consumer.getmany(timeout_ms=200)
            grant_read(broker.bootstrap, "TOPIC", TOPIC)
            values: list[bytes] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(values) < 3 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
            return values
        finally:
            await consumer.stop()

    try:
        assert asyncio.run(run()) == [b"record-0", b"record-1", b"record-2"]
    finally:
        _revoke_topic_read(broker)


def test_an_invalid_acl_file_line_stops_the_start_with_its_number(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    acl_file = tmp_path / "acls.txt"
    acl_file.write_text("# fine\nALLOW User:bob * READ GROUP:g\nALLOW bob * READ GROUP:g\n")
    done = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--port", "0", "--admin-port", "-1", "--acls-enabled",
         "--acl-file", str(acl_file)],
        capture_output=True, text=True, timeout=30, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"{acl_file} line 3: Could not parse principal from `bob`" in done.stderr
