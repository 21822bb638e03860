"""SASL_SSL over raw frames (docs/spec/security.md section 1): TLS first, with the broker's generated certificate,
then Kafka's SASL state machine unchanged inside it. The connection's principal is the SASL one: a client
certificate (``ssl_client_auth`` requested) is verified but never becomes the principal, before the login or after
it, as Kafka's SaslServerAuthenticator builds the principal from the SASL authorization id."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.config.settings import parse_endpoints
from broker.server.broker import BrokerServer
from broker.server.settings import SaslConfig, TlsConfig, parse_users
from tests.conftest import broker_settings
from tests.security.tls_helpers import api_versions, client_certificate, client_context, principals, tls_client
from tests.wire.sasl_client import USERS, login_plain, metadata

E = ErrorCode


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    settings = dataclasses.replace(
        broker_settings(
            listeners=parse_endpoints("SASL_SSL://127.0.0.1:0"),
            tls=TlsConfig(ssl_dir=str(tmp_path / "tls"), ssl_client_auth="requested"),
        ),
        sasl=SaslConfig(users=parse_users(USERS), failed_authentication_delay_ms=0),
    )  # fmt: skip
    started = BrokerServer(settings)
    await started.start()
    yield started
    await started.stop()


async def test_1_sasl_ssl_login_inside_tls_and_the_principal_is_the_sasl_users_not_the_certificates(
    server: BrokerServer, tmp_path: Path
) -> None:
    tls_dir = tmp_path / "tls"
    cert = client_certificate(tls_dir, tmp_path / "carol", O="test", CN="carol")
    client = await tls_client(server.listeners[0].port, client_context(tls_dir / "ca.pem", cert=cert))
    try:
        assert await api_versions(client) == E.none
        assert principals(server) == ["User:ANONYMOUS"]  # not User:CN=carol,O=test: SASL decides
        assert (await login_plain(client, "bob", "bob-secret")).error_code == E.none
        assert principals(server) == ["User:bob"]
        assert (await client.call(metadata())).brokers
    finally:
        await client.close()


async def test_sasl_ssl_enforces_the_login_a_request_before_it_closes_the_connection(
    server: BrokerServer, tmp_path: Path
) -> None:
    """TLS alone does not authenticate on SASL_SSL: a Metadata before the SaslHandshake is closed unanswered, as on
    SASL_PLAINTEXT (Kafka's SaslServerAuthenticator in its HANDSHAKE_OR_VERSIONS_REQUEST state)."""
    client = await tls_client(server.listeners[0].port, client_context(tmp_path / "tls" / "ca.pem"))
    try:
        assert await api_versions(client) == E.none
        await client.send_raw(client.encode(metadata()))
        assert await client.closed_by_peer(3)
    finally:
        await client.close()


async def test_sasl_ssl_wrong_password_fails_inside_tls(server: BrokerServer, tmp_path: Path) -> None:
    client = await tls_client(server.listeners[0].port, client_context(tmp_path / "tls" / "ca.pem"))
    try:
        answer = await login_plain(client, "bob", "wrong")
        assert answer.error_code == E.sasl_authentication_failed
        assert await client.closed_by_peer(3)
    finally:
        await client.close()
