"""Real clients on a SASL_SSL listener of a real ``serve`` process (docs/spec/security.md section 1 and checklist
items 31 and 66 over TLS): confluent-kafka, aiokafka and kafka-python with PLAIN and SCRAM-SHA-512 each verify the
generated certificate against ca.pem (hostname checks on), log in over TLS, produce, consume in a group and commit.
A client that also presents a certificate (``--ssl-client-auth requested``) is still the SASL user: on SASL_SSL the
principal comes from SASL, never from the certificate (Kafka's SaslServerAuthenticator builds it from the SASL
authorization id). A wrong password over TLS is the same authentication failure as on SASL_PLAINTEXT."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_sasl_clients import (
    TOPIC,
    aiokafka_config,
    aiokafka_round_trip,
    confluent_config,
    confluent_round_trip,
    events,
    kafka_python_config,
    kafka_python_round_trip,
)
from tests.conftest import BrokerProcess, free_port, start_broker_process
from tests.security.tls_helpers import client_certificate

MECHANISMS = ("PLAIN", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sasl-ssl-state") / "tls"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, tls_dir: Path) -> Iterator[BrokerProcess]:
    port = free_port()
    process = start_broker_process(
        tmp_path_factory.mktemp("sasl-ssl"),
        "--listeners", f"SASL_SSL://127.0.0.1:{port}",
        "--ssl-dir", str(tls_dir), "--ssl-client-auth", "requested",
        "--sasl-users", "alice:secret",
        "--sasl-enabled-mechanisms", ",".join(MECHANISMS),
        "--topic", f"{TOPIC}:2",
        listen_port=port,
    )  # fmt: skip
    yield process
    process.stop()


def logins(broker: BrokerProcess, client_id: str) -> list[dict[str, Any]]:
    found = events(broker, "authentication_succeeded", client_id)
    assert found, f"no login of {client_id} in the broker log:\n{broker.log()[-3000:]}"
    return found


def assert_sasl_ssl_login(broker: BrokerProcess, client_id: str, mechanism: str) -> None:
    for login in logins(broker, client_id):
        assert (login["principal"], login["mechanism"], login["listener"]) == ("User:alice", mechanism, "SASL_SSL")


# -- confluent-kafka ----------------------------------------------------------------------------------------------


def confluent_sasl_ssl(
    broker: BrokerProcess, tls_dir: Path, mechanism: str, password: str = "secret"
) -> dict[str, Any]:
    return {
        **confluent_config(broker, mechanism, password),
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
    }  # fmt: skip


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_66_confluent_kafka_over_sasl_ssl_produces_consumes_in_a_group_and_commits(
    broker: BrokerProcess, tls_dir: Path, mechanism: str
) -> None:
    client_id = f"confluent-ssl-{mechanism}"
    assert len(confluent_round_trip(confluent_sasl_ssl(broker, tls_dir, mechanism), client_id)) == 3
    assert_sasl_ssl_login(broker, client_id, mechanism)


def test_1_confluent_kafka_with_a_client_certificate_is_the_sasl_user_on_sasl_ssl(
    broker: BrokerProcess, tls_dir: Path, tmp_path: Path
) -> None:
    """Spec section 1: a SASL_SSL connection's principal is the SASL one; the certificate (CN=mallory) is verified
    (requested) but names nobody."""
    cert, key = client_certificate(tls_dir, tmp_path / "mallory", O="test", CN="mallory")
    config = {
        **confluent_sasl_ssl(broker, tls_dir, "SCRAM-SHA-512"),
        "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
    }  # fmt: skip
    client_id = "confluent-ssl-cert"
    assert len(confluent_round_trip(config, client_id)) == 3
    assert_sasl_ssl_login(broker, client_id, "SCRAM-SHA-512")
    assert "mallory" not in {login["principal"] for login in logins(broker, client_id)}


def test_66_confluent_kafka_wrong_password_over_sasl_ssl_is_an_authentication_error(
    broker: BrokerProcess, tls_dir: Path
) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer(
        {**confluent_sasl_ssl(broker, tls_dir, "PLAIN", "wrong"), "error_cb": errors.append, "client.id": "bad-ssl"}
    )
    for _ in range(40):
        producer.poll(0.25)
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors):
            break
    producer.flush(0)
    assert any(
        error.code() == KafkaError._AUTHENTICATION and "Invalid username or password" in error.str() for error in errors
    ), errors
    assert events(broker, "authentication_failed", "bad-ssl")[0]["listener"] == "SASL_SSL"


# -- aiokafka -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_66_aiokafka_over_sasl_ssl_produces_consumes_in_a_group_and_commits(
    broker: BrokerProcess, tls_dir: Path, mechanism: str
) -> None:
    from aiokafka.helpers import create_ssl_context

    config = {
        **aiokafka_config(broker, mechanism),
        "security_protocol": "SASL_SSL", "ssl_context": create_ssl_context(cafile=str(tls_dir / "ca.pem")),
    }  # fmt: skip
    client_id = f"aiokafka-ssl-{mechanism}"
    assert len(await aiokafka_round_trip(config, client_id)) == 3
    assert_sasl_ssl_login(broker, client_id, mechanism)


# -- kafka-python -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_66_kafka_python_over_sasl_ssl_produces_consumes_in_a_group_and_commits(
    broker: BrokerProcess, tls_dir: Path, mechanism: str
) -> None:
    config = {
        **kafka_python_config(broker, mechanism),
        "security_protocol": "SASL_SSL", "ssl_cafile": str(tls_dir / "ca.pem"),
    }  # fmt: skip
    client_id = f"kafka-python-ssl-{mechanism}"
    assert len(kafka_python_round_trip(config, client_id)) == 3
    assert_sasl_ssl_login(broker, client_id, mechanism)
