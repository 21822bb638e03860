"""SASL principals in ACL decisions, with real clients against a ``serve`` process (docs/spec/security.md sections 1
and 10): a confluent-kafka and a kafka-python consumer logged in as bob over SASL_PLAINTEXT are denied READ on
their group (bob has READ on the topic only), consume and commit once an admin (a super user, logged in over SASL
too) grants it with CreateAcls. Over SASL_SSL a client certificate whose subject is a super user changes nothing:
the principal is the SASL user's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port, start_broker_process
from tests.security.tls_helpers import client_certificate

TOPIC = "sasl-acl-orders"
DEADLINE_S = 20.0


class Brokers:
    def __init__(self, process: BrokerProcess, ssl_port: int, tls_dir: Path) -> None:
        self.process, self.ssl_port, self.tls_dir = process, ssl_port, tls_dir


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    tmp = tmp_path_factory.mktemp("sasl-acl")
    (tmp / "acls.txt").write_text(f"ALLOW User:bob * READ TOPIC:{TOPIC}\n")  # READ implies DESCRIBE
    plain, tls = free_port(), free_port()
    process = start_broker_process(
        tmp,
        "--listeners", f"SASL_PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{tls}",
        "--ssl-dir", str(tmp / "tls"), "--ssl-client-auth", "requested",
        "--sasl-users", "bob:bob-secret,admin:admin-secret",
        "--acls-enabled", "--acl-file", str(tmp / "acls.txt"),
        # The certificate subject of the SASL_SSL test is a super user: were it the principal, bob would pass.
        "--super-users", "User:admin;User:CN=admin,O=test",
        "--topic", f"{TOPIC}:1",
        listen_port=plain,
    )  # fmt: skip
    from confluent_kafka import Producer

    producer = Producer(sasl(process.bootstrap, "admin", "admin-secret"))
    for n in range(3):
        producer.produce(TOPIC, f"record-{n}".encode())
    assert producer.flush(10) == 0
    yield Brokers(process, tls, tmp / "tls")
    process.stop()


def sasl(bootstrap: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": password,
    }  # fmt: skip


def grant_group_read(brokers: Brokers, group: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(
        ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    client = AdminClient(sasl(brokers.process.bootstrap, "admin", "admin-secret"))
    for future in client.create_acls([binding]).values():
        future.result(10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def first_error(consumer: Any) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is not None:
            return message.error()
    raise AssertionError("no error from poll")


def consume_three_and_commit(consumer: Any) -> None:
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    assert values == [b"record-0", b"record-1", b"record-2"]
    consumer.commit(asynchronous=False)
    (committed,) = consumer.committed(consumer.assignment(), timeout=10)
    assert committed.offset == 3


def test_confluent_bob_over_sasl_plaintext_denied_group_read_then_granted(brokers: Brokers) -> None:
    from confluent_kafka import Consumer, KafkaError

    group = unique("grp-bob")
    consumer = Consumer(
        {**sasl(brokers.process.bootstrap, "bob", "bob-secret"), "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        error = first_error(consumer)
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        grant_group_read(brokers, group)
        consume_three_and_commit(consumer)
    finally:
        consumer.close()
    assert '"principal": "User:bob"' in brokers.process.log()  # the denial's authorization_denied event


def test_kafka_python_bob_over_sasl_plaintext_denied_group_read_then_granted(brokers: Brokers) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import GroupAuthorizationFailedError

    group = unique("grp-kp-bob")
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=brokers.process.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
    )  # fmt: skip
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
        grant_group_read(brokers, group)
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < 3 and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=200)
            values += [record.value for records in batch.values() for record in records]
        assert values == [b"record-0", b"record-1", b"record-2"]
        consumer.commit()
        assert consumer.committed(TopicPartition(TOPIC, 0)) == 3
    finally:
        consumer.close()


def test_1_over_sasl_ssl_a_super_users_certificate_does_not_make_bob_one(brokers: Brokers, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, KafkaError

    cert, key = client_certificate(brokers.tls_dir, tmp_path / "admin-cert", O="test", CN="admin")
    group = unique("grp-ssl-bob")
    consumer = Consumer(
        {**sasl(f"127.0.0.1:{brokers.ssl_port}", "bob", "bob-secret"), "security.protocol": "SASL_SSL",
         "ssl.ca.location": str(brokers.tls_dir / "ca.pem"), "ssl.certificate.location": str(cert),
         "ssl.key.location": str(key), "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        error = first_error(consumer)
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        grant_group_read(brokers, group)
        consume_three_and_commit(consumer)
    finally:
        consumer.close()
