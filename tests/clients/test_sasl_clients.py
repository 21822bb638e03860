"""Real clients on a SASL_PLAINTEXT listener of a real ``serve`` process (docs/spec/security.md checklist items 21,
31 and 66): confluent-kafka, aiokafka and kafka-python with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER
produce, consume in a group and commit; a wrong password surfaces as an authentication error with the broker's
message; with ``--connections-max-reauth-ms 3000`` each keeps consuming across three lifetimes, and the broker's
events say which client re-authenticates on its connection and which gets its expired session closed.

Observed (recorded in the assertions): confluent-kafka (librdkafka 2.x) and kafka-python re-authenticate on the same
connection; aiokafka does not re-authenticate: its connections are closed at their first request after expiry and
it reconnects and logs in again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port, start_broker_process

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
TOPIC = "sasl-topic"


def _start(tmp_path: Path, *extra: str) -> BrokerProcess:
    port = free_port()
    return start_broker_process(
        tmp_path,
        "--listeners", f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "--sasl-users", "alice:secret",
        "--sasl-enabled-mechanisms", ",".join(MECHANISMS),
        "--topic", f"{TOPIC}:2",
        *extra,
        listen_port=port,
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = _start(tmp_path_factory.mktemp("sasl"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = _start(tmp_path_factory.mktemp("sasl-reauth"), "--connections-max-reauth-ms", "3000")
    yield process
    process.stop()


def events(broker: BrokerProcess, name: str, client_id: str) -> list[dict[str, Any]]:
    found = []
    for line in broker.log().splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            record = json.loads(line)
            if record.get("event") == name and record.get("client_id", "").startswith(client_id):
                found.append(record)
    return found


def unsecured_jwt(principal: str = "alice", life_s: int = 3600) -> tuple[str, float]:
    # Issued a second ago: the validator refuses an iat after its own now (skew 0), and two clocks of one machine
    # (the broker's is anchored once, then monotonic) may differ by a millisecond.
    now = time.time() - 1

    def segment(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{segment({'alg': 'none'})}.{segment({'sub': principal, 'iat': now, 'exp': now + life_s})}.", now + life_s


# -- confluent-kafka ----------------------------------------------------------------------------------------------


def confluent_config(broker: BrokerProcess, mechanism: str, password: str = "secret") -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        config.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"})
    else:
        config.update({"sasl.username": "alice", "sasl.password": password})
    return config


def confluent_round_trip(config: dict[str, Any], client_id: str, seconds: float = 0, count: int = 3) -> list[bytes]:
    """Produce ``count`` records, consume them in a group, commit; with ``seconds``, keep producing and consuming
    that long (one record every half second) before the commit."""
    from confluent_kafka import Consumer, Producer

    marker = uuid.uuid4().hex[:8].encode()
    producer = Producer({**config, "client.id": f"{client_id}-p"})
    consumer = Consumer(
        {**config, "client.id": f"{client_id}-c", "group.id": f"g-{client_id}", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    sent = 0
    deadline = time.monotonic() + 30 + seconds
    ends = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sent < count or (time.monotonic() < ends and len(got) >= sent):
            producer.produce(TOPIC, marker + b"-%d" % sent)
            producer.flush(10)
            sent += 1
        message = consumer.poll(0.5)
        if message is not None and not message.error() and message.value().startswith(marker):
            got.append(message.value())
        if len(got) >= sent >= count and time.monotonic() >= ends:
            break
    assert consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    assert sum(max(tp.offset, 0) for tp in committed) >= len(got)
    consumer.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_66_confluent_kafka_produces_consumes_in_a_group_and_commits(broker: BrokerProcess, mechanism: str) -> None:
    client_id = f"confluent-{mechanism}"
    assert len(confluent_round_trip(confluent_config(broker, mechanism), client_id)) == 3
    (login, *_) = events(broker, "authentication_succeeded", client_id)
    assert (login["principal"], login["mechanism"]) == ("User:alice", mechanism)


def test_66_confluent_kafka_wrong_password_is_an_authentication_error_event(broker: BrokerProcess) -> None:
    """Observed: an ``_AUTHENTICATION`` error with the broker's message within about 0.1 s (the delay)."""
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer({**confluent_config(broker, "SCRAM-SHA-256", "wrong"), "error_cb": errors.append})
    started = time.monotonic()
    while not errors and time.monotonic() - started < 10:
        producer.poll(0.1)
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-256" in errors[0].str()


# -- aiokafka -----------------------------------------------------------------------------------------------------


class AioTokens:
    """aiokafka's token provider (``aiokafka.abc.AbstractTokenProvider``): an unsecured JWT."""

    async def token(self) -> str:
        return unsecured_jwt()[0]

    def extensions(self) -> dict[str, str]:
        return {}


def aiokafka_config(broker: BrokerProcess, mechanism: str, password: str = "secret") -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        from aiokafka.abc import AbstractTokenProvider

        provider = type("Tokens", (AioTokens, AbstractTokenProvider), {})()
        config["sasl_oauth_token_provider"] = provider
    else:
        config.update({"sasl_plain_username": "alice", "sasl_plain_password": password})
    return config


async def aiokafka_round_trip(config: dict[str, Any], client_id: str, seconds: float = 0) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    marker = uuid.uuid4().hex[:8].encode()
    producer = AIOKafkaProducer(**config, client_id=f"{client_id}-p")
    consumer = AIOKafkaConsumer(
        TOPIC, **config, client_id=f"{client_id}-c", group_id=f"g-{client_id}", auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await producer.start()
    await consumer.start()
    got: list[bytes] = []
    try:
        ends = time.monotonic() + seconds
        sent = 0
        while sent < 3 or time.monotonic() < ends:
            await producer.send_and_wait(TOPIC, marker + b"-%d" % sent)
            sent += 1
            deadline = time.monotonic() + 30
            while len(got) < sent and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                got += [m.value for ms in batch.values() for m in ms if m.value.startswith(marker)]
            if seconds:
                await asyncio.sleep(0.5)
        await consumer.commit()
        committed = [await consumer.committed(tp) for tp in consumer.assignment()]
        assert sum(offset or 0 for offset in committed) >= len(got)
    finally:
        await consumer.stop()
        await producer.stop()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_66_aiokafka_produces_consumes_in_a_group_and_commits(broker: BrokerProcess, mechanism: str) -> None:
    client_id = f"aiokafka-{mechanism}"
    assert len(await aiokafka_round_trip(aiokafka_config(broker, mechanism), client_id)) == 3
    assert events(broker, "authentication_succeeded", client_id)[0]["mechanism"] == mechanism


async def test_66_aiokafka_wrong_password_logs_the_broker_message_and_start_fails(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """Observed: the log line ``[Error 58] SaslAuthenticationFailed: <message>``; ``start()`` raises a bare
    ``KafkaConnectionError`` ("Unable to bootstrap")."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    producer = AIOKafkaProducer(**aiokafka_config(broker, "SCRAM-SHA-512", "wrong"))
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    assert time.monotonic() - started < 10
    assert "[Error 58] SaslAuthenticationFailed: Authentication failed during authentication due to invalid " \
           "credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


# -- kafka-python -------------------------------------------------------------------------------------------------


def kafka_python_config(broker: BrokerProcess, mechanism: str, password: str = "secret") -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Tokens(AbstractTokenProvider):  # type: ignore[misc]
            def token(self) -> str:
                return unsecured_jwt()[0]

        config["sasl_oauth_token_provider"] = Tokens()
    else:
        config.update({"sasl_plain_username": "alice", "sasl_plain_password": password})
    return config


def kafka_python_round_trip(config: dict[str, Any], client_id: str, seconds: float = 0) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    marker = uuid.uuid4().hex[:8].encode()
    producer = KafkaProducer(**config, client_id=f"{client_id}-p")
    consumer = KafkaConsumer(
        TOPIC, **config, client_id=f"{client_id}-c", group_id=f"g-{client_id}", auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    ends = time.monotonic() + seconds
    sent = 0
    while sent < 3 or time.monotonic() < ends:
        producer.send(TOPIC, marker + b"-%d" % sent).get(timeout=30)
        sent += 1
        deadline = time.monotonic() + 30
        while len(got) < sent and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500)
            got += [m.value for ms in batch.values() for m in ms if m.value.startswith(marker)]
        if seconds:
            time.sleep(0.5)
    consumer.commit()
    assert sum(consumer.committed(tp) or 0 for tp in consumer.assignment()) >= len(got)
    consumer.close()
    producer.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_66_kafka_python_produces_consumes_in_a_group_and_commits(broker: BrokerProcess, mechanism: str) -> None:
    client_id = f"kafka-python-{mechanism}"
    assert len(kafka_python_round_trip(kafka_python_config(broker, mechanism), client_id)) == 3
    assert events(broker, "authentication_succeeded", client_id)[0]["mechanism"] == mechanism


def test_66_kafka_python_wrong_password_is_sasl_authentication_failed_with_the_message(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """Observed: ``[Error 58] SaslAuthenticationFailedError: Authentication failed: Invalid username or password``
    logged per attempt (the linger lets it read the answer before the close), retried with backoff; the
    constructor gives up at ``bootstrap_timeout_ms`` (30 s by default) with ``KafkaTimeoutError``."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError) as raised:
        KafkaProducer(**kafka_python_config(broker, "PLAIN", "wrong"), bootstrap_timeout_ms=3000)
    assert raised.type.__name__ == "KafkaTimeoutError"  # "Unable to bootstrap from 127.0.0.1:PORT"
    assert time.monotonic() - started < 10
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "Authentication failed: Invalid username or password" in caplog.text


# -- re-authentication (KIP-368), connections.max.reauth.ms 3000 --------------------------------------------------


def test_31_confluent_kafka_reauthenticates_on_its_connection_across_three_lifetimes(
    reauth_broker: BrokerProcess,
) -> None:
    got = confluent_round_trip(confluent_config(reauth_broker, "SCRAM-SHA-512"), "confluent-reauth", seconds=10)
    assert len(got) >= 10
    assert len(events(reauth_broker, "reauthenticated", "confluent-reauth-c")) >= 2


def test_31_kafka_python_reauthenticates_on_its_connection_across_three_lifetimes(
    reauth_broker: BrokerProcess,
) -> None:
    got = kafka_python_round_trip(kafka_python_config(reauth_broker, "PLAIN"), "kafka-python-reauth", seconds=10)
    assert len(got) >= 10
    assert len(events(reauth_broker, "reauthenticated", "kafka-python-reauth-c")) >= 2


async def test_31_aiokafka_is_closed_at_expiry_and_logs_in_again_across_three_lifetimes(
    reauth_broker: BrokerProcess,
) -> None:
    got = await aiokafka_round_trip(aiokafka_config(reauth_broker, "SCRAM-SHA-256"), "aiokafka-reauth", seconds=10)
    assert len(got) >= 10
    assert events(reauth_broker, "reauthenticated", "aiokafka-reauth") == []
    assert len(events(reauth_broker, "session_expired", "aiokafka-reauth-c")) >= 2
    assert len(events(reauth_broker, "authentication_succeeded", "aiokafka-reauth-c")) >= 3
