"""Real clients over SSL listeners of a real ``serve`` process (docs/spec/security.md 8, 8.4, 8.5; checklist 32,
36, 37): aiokafka, kafka-python and confluent-kafka each produce, consume in a group and commit with only the
generated ca.pem given (hostname verification on, as each client defaults), with and without a client
certificate; a required client certificate; the CA reused by a restart; three nodes behind one certificate; and a
plaintext client on the TLS port."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port, free_ports, start_broker_process
from tests.security.tls_helpers import client_certificate

DEADLINE_S = 30.0
COUNT = 10


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls-state") / "tls"


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory: pytest.TempPathFactory, tls_dir: Path) -> Iterator[BrokerProcess]:
    """One SSL listener asking for client certificates (requested): anonymous and mTLS clients both connect."""
    port = free_port()
    broker = start_broker_process(
        tmp_path_factory.mktemp("ssl-broker"), "--listeners", f"SSL://127.0.0.1:{port}", "--ssl-dir", str(tls_dir),
        "--ssl-client-auth", "requested", "--log-level", "debug", listen_port=port,
    )
    yield broker
    broker.stop()


def log_lines(broker: BrokerProcess) -> list[dict[str, Any]]:
    lines = []
    for line in broker.log().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


def wait_for_line(broker: BrokerProcess, event: str, **fields: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in log_lines(broker):
            if line.get("event", "").startswith(event) and all(line.get(k) == v for k, v in fields.items()):
                return line
        time.sleep(0.05)
    raise AssertionError(f"no {event!r} line with {fields} in the broker log:\n{broker.log()[-3000:]}")


def mtls_cert(tls_dir: Path, tmp: Path, user: str) -> tuple[Path, Path]:
    return client_certificate(tls_dir, tmp / user, O="test", CN=user)


# -- aiokafka ----------------------------------------------------------------------------------------------------


async def aiokafka_round(
    bootstrap: str, ca: Path, topic: str, cert: tuple[Path, Path] | None = None
) -> tuple[list[bytes], int]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    def context() -> Any:
        if cert is None:
            return create_ssl_context(cafile=str(ca))
        return create_ssl_context(cafile=str(ca), certfile=str(cert[0]), keyfile=str(cert[1]))

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context())
    await producer.start()
    try:
        for i in range(COUNT):
            await producer.send_and_wait(topic, f"aio-{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context(),
        group_id=f"aio-{uuid.uuid4()}", auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    await consumer.start()
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < COUNT:
            assert time.monotonic() < deadline, f"aiokafka read {len(seen)} of {COUNT} over SSL"
            batches = await consumer.getmany(timeout_ms=500)
            seen += [record.value for records in batches.values() for record in records if record.value]
        await consumer.commit()
        committed = await consumer.committed(TopicPartition(topic, 0))
        return seen, committed or 0
    finally:
        await consumer.stop()


async def test_aiokafka_produces_consumes_in_a_group_and_commits_over_ssl(
    ssl_broker: BrokerProcess, tls_dir: Path
) -> None:
    seen, committed = await aiokafka_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-aiokafka")
    assert sorted(seen) == sorted(f"aio-{i}".encode() for i in range(COUNT))
    assert committed == COUNT


async def test_aiokafka_with_a_client_certificate_gets_the_dn_principal(
    ssl_broker: BrokerProcess, tls_dir: Path, tmp_path: Path
) -> None:
    cert = mtls_cert(tls_dir, tmp_path, "aio-user")
    seen, _ = await aiokafka_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-aiokafka-mtls", cert)
    assert len(seen) == COUNT
    wait_for_line(ssl_broker, "ssl connection principal", principal="User:CN=aio-user,O=test")


# -- kafka-python ------------------------------------------------------------------------------------------------


def kafka_python_round(bootstrap: str, ca: Path, topic: str, cert: tuple[Path, Path] | None = None) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    tls: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(ca)}  # ssl_check_hostname defaults to True
    if cert is not None:
        tls |= {"ssl_certfile": str(cert[0]), "ssl_keyfile": str(cert[1])}
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    try:
        for i in range(COUNT):
            producer.send(topic, f"kp-{i}".encode()).get(timeout=DEADLINE_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"kp-{uuid.uuid4()}", auto_offset_reset="earliest",
        enable_auto_commit=False, **tls,
    )  # fmt: skip
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < COUNT:
            assert time.monotonic() < deadline, f"kafka-python read {len(seen)} of {COUNT} over SSL"
            for records in consumer.poll(timeout_ms=500).values():
                seen += [record.value for record in records]
        consumer.commit()
        assert sum(consumer.committed(tp) or 0 for tp in consumer.assignment()) == len(seen)
        return seen
    finally:
        consumer.close()


def test_kafka_python_produces_consumes_in_a_group_and_commits_over_ssl(
    ssl_broker: BrokerProcess, tls_dir: Path
) -> None:
    seen = kafka_python_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-kafka-python")
    assert sorted(seen) == sorted(f"kp-{i}".encode() for i in range(COUNT))


def test_kafka_python_with_a_client_certificate_gets_the_dn_principal(
    ssl_broker: BrokerProcess, tls_dir: Path, tmp_path: Path
) -> None:
    cert = mtls_cert(tls_dir, tmp_path, "kp-user")
    assert len(kafka_python_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-kafka-python-mtls", cert)) == COUNT
    wait_for_line(ssl_broker, "ssl connection principal", principal="User:CN=kp-user,O=test")


# -- confluent-kafka ---------------------------------------------------------------------------------------------


def confluent_round(
    bootstrap: str, ca: Path, topic: str, cert: tuple[Path, Path] | None = None, partitions: int = 1
) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    # librdkafka verifies the host name (ssl.endpoint.identification.algorithm=https) by default since 2.0.
    tls: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    if cert is not None:
        tls |= {"ssl.certificate.location": str(cert[0]), "ssl.key.location": str(cert[1])}
    producer = Producer({"bootstrap.servers": bootstrap, **tls})
    for i in range(COUNT):
        producer.produce(topic, f"ck-{i}".encode(), partition=i % partitions)
    assert producer.flush(DEADLINE_S) == 0, "confluent-kafka could not deliver over SSL"
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"ck-{uuid.uuid4()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, **tls,
    })  # fmt: skip
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < COUNT:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(seen)} of {COUNT} over SSL"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed)
        assert sum(tp.offset for tp in committed) == COUNT
        return seen
    finally:
        consumer.close()


def test_confluent_kafka_produces_consumes_in_a_group_and_commits_over_ssl(
    ssl_broker: BrokerProcess, tls_dir: Path
) -> None:
    seen = confluent_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-confluent")
    assert sorted(seen) == sorted(f"ck-{i}".encode() for i in range(COUNT))


def test_confluent_kafka_with_a_client_certificate_gets_the_dn_principal(
    ssl_broker: BrokerProcess, tls_dir: Path, tmp_path: Path
) -> None:
    cert = mtls_cert(tls_dir, tmp_path, "ck-user")
    assert len(confluent_round(ssl_broker.bootstrap, tls_dir / "ca.pem", "tls-confluent-mtls", cert)) == COUNT
    wait_for_line(ssl_broker, "ssl connection principal", principal="User:CN=ck-user,O=test")


# -- failures, restarts, several nodes ---------------------------------------------------------------------------


def test_a_plaintext_client_on_the_ssl_port_is_closed_and_named_in_the_log(ssl_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):  # kafka-python 3: a timeout waiting for a broker (no Kafka error is answered)
        KafkaProducer(
            bootstrap_servers=ssl_broker.bootstrap, request_timeout_ms=2000,
            max_block_ms=3000,
        ).send("tls-plaintext", b"x").get(timeout=5)
    line = wait_for_line(ssl_broker, "tls handshake failed")
    assert line["peer"].startswith("127.0.0.1:")
    assert "does not speak TLS" in line["reason"]


def test_a_wrong_ca_is_refused_by_confluent_kafka(ssl_broker: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from broker.security.certs import ensure_server_certificate

    other = ensure_server_certificate(tmp_path / "other", ["localhost"]).ca_file
    errors: list[str] = []
    producer = Producer({
        "bootstrap.servers": ssl_broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(other),
        "error_cb": lambda error: errors.append(str(error)), "message.timeout.ms": 3000,
    })  # fmt: skip
    failed: list[Any] = []
    producer.produce("tls-wrong-ca", b"never", on_delivery=lambda error, _: failed.append(error))
    producer.flush(10)
    assert len(failed) == 1 and failed[0] is not None  # never delivered: the message timed out
    assert any("certificate verify failed" in error for error in errors), errors


def test_client_auth_required_refuses_a_client_without_a_certificate_and_a_restart_reuses_the_ca(
    tmp_path: Path,
) -> None:
    from confluent_kafka import Producer

    tls_dir = tmp_path / "tls"
    port = free_port()
    flags = ("--listeners", f"SSL://127.0.0.1:{port}", "--ssl-dir", str(tls_dir), "--ssl-client-auth", "required",
             "--ssl-principal-mapping-rules", "RULE:^CN=([^,]+),.*$/$1/,DEFAULT")
    broker = start_broker_process(tmp_path, *flags, "--log-level", "debug", listen_port=port)
    try:
        ca = tls_dir / "ca.pem"
        assert wait_for_line(broker, "CA certificate for clients: ")["ca_file"] == str(ca)
        first_ca = ca.read_bytes()
        cert = mtls_cert(tls_dir, tmp_path, "carol")
        assert len(confluent_round(broker.bootstrap, ca, "tls-required", cert)) == COUNT
        wait_for_line(broker, "ssl connection principal", principal="User:carol")
        errors: list[str] = []
        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca),
            "error_cb": lambda error: errors.append(str(error)), "message.timeout.ms": 3000,
        })  # fmt: skip
        failed: list[Any] = []
        producer.produce("tls-required", b"no certificate", on_delivery=lambda error, _: failed.append(error))
        producer.flush(10)
        assert len(failed) == 1 and failed[0] is not None  # never delivered
        assert errors, "no error for a client without a certificate"
        wait_for_line(broker, "tls handshake failed", listener="SSL")
    finally:
        broker.stop()
    broker = start_broker_process(tmp_path, *flags, listen_port=port)
    try:
        assert ca.read_bytes() == first_ca  # clients keep the ca.pem they were given
        wait_for_line(broker, "tls listeners", generated="no, reused")
        seen, _ = asyncio.run(aiokafka_round(broker.bootstrap, ca, "tls-required-again", cert))
        assert len(seen) == COUNT
    finally:
        broker.stop()


def test_three_nodes_serve_tls_with_one_certificate_to_every_client(tmp_path: Path) -> None:
    """serve --nodes 3: node i listens on port + i and advertises 127.0.0.1 (an IP SAN: librdkafka and Python's ssl
    check it, spec 8.4 item 2); partitions led by every node are produced to and read over TLS."""
    tls_dir = tmp_path / "tls"
    port = free_ports(3)
    broker = start_broker_process(
        tmp_path, "--listeners", f"SSL://127.0.0.1:{port}", "--ssl-dir", str(tls_dir), "--nodes", "3",
        "--topic", "tls-nodes:3", listen_port=port,
    )
    try:
        ca = tls_dir / "ca.pem"
        seen = confluent_round(broker.bootstrap, ca, "tls-nodes", partitions=3)
        assert sorted(seen) == sorted(f"ck-{i}".encode() for i in range(COUNT))
        assert len(kafka_python_round(f"127.0.0.1:{port + 2}", ca, "tls-nodes")) >= COUNT
        listening = [line for line in log_lines(broker) if line.get("event") == "broker listening"]
        assert sorted(line["port"] for line in listening) == [port, port + 1, port + 2]
        assert {line["security_protocol"] for line in listening} == {"SSL"}
    finally:
        broker.stop()
