"""The client side of SASL for wire tests: a SASL_PLAINTEXT broker in the test's loop on a manual clock, raw
SaslHandshake / SaslAuthenticate calls, a SCRAM client (RFC 5802, written from the RFC) and unsecured JWTs."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from broker.config.settings import parse_endpoints
from broker.server.broker import BrokerServer
from broker.server.settings import SaslConfig, parse_mechanisms, parse_users
from broker.timing.clock import ManualClock
from tests.conftest import broker_settings
from tests.wire.client import WireClient, request

USERS = "alice:secret,bob:bob-secret,carol:carol-secret:SCRAM-SHA-512"
ALL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclasses.dataclass
class SaslBroker:
    server: BrokerServer
    clock: ManualClock
    opened: list[WireClient]

    @property
    def sasl_port(self) -> int:
        return self.server.listeners[0].port

    @property
    def plain_port(self) -> int:
        return self.server.listeners[1].port

    async def connect(self, port: int | None = None) -> WireClient:
        client = await WireClient.connect(port or self.sasl_port)
        self.opened.append(client)
        return client

    def events(self, name: str) -> list[dict[str, Any]]:
        return [record for record in self.server.events.history("") or () if record["event"] == name]


StartBroker = Callable[..., Awaitable[SaslBroker]]


@pytest.fixture
async def sasl_broker() -> AsyncIterator[StartBroker]:
    started: list[SaslBroker] = []

    async def start(**sasl: Any) -> SaslBroker:
        values: dict[str, Any] = {"users": parse_users(USERS), "enabled_mechanisms": parse_mechanisms(ALL_MECHANISMS)}
        values.update(sasl)
        settings = dataclasses.replace(
            broker_settings(listeners=parse_endpoints("SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")),
            sasl=SaslConfig(**values),
        )
        clock = ManualClock()
        server = BrokerServer(settings, clock)
        clock.attach(server.purgatory)
        await server.start()
        broker = SaslBroker(server, clock, [])
        started.append(broker)
        return broker

    yield start
    for broker in started:
        for client in broker.opened:
            await client.close()
        await broker.server.stop()


async def handshake(client: WireClient, mechanism: str, version: int = 1) -> Any:
    return await client.call(request(17, version, mechanism=mechanism))


async def authenticate(client: WireClient, token: bytes, version: int = 2) -> Any:
    return await client.call(request(36, version, auth_bytes=token))


async def login_plain(client: WireClient, user: str = "alice", password: str = "secret", version: int = 2) -> Any:
    assert (await handshake(client, "PLAIN")).error_code == 0
    return await authenticate(client, f"\0{user}\0{password}".encode(), version)


def metadata(version: int = 12) -> Any:
    return request(3, version, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


class ScramClient:
    """RFC 5802's client: client-first, then client-final from the server-first, then checks server-final."""

    def __init__(self, mechanism: str, user: str, password: str, authzid: str = "") -> None:
        self.hash = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = secrets.token_urlsafe(18)
        self.gs2 = f"n,{'a=' + authzid if authzid else ''},"
        self.first_bare = f"n={user},r={self.nonce}"
        self.server_first = ""
        self.salted = b""
        self.auth_message = b""

    def first(self) -> bytes:
        return (self.gs2 + self.first_bare).encode()

    def final(self, server_first: bytes, channel: str | None = None, nonce_suffix: str = "") -> bytes:
        self.server_first = server_first.decode()
        fields = dict(item.split("=", 1) for item in self.server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        self.salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt, iterations)
        client_key = hmac.new(self.salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        binding = channel if channel is not None else base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={binding},r={fields['r']}{nonce_suffix}"
        self.auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def server_signature_ok(self, server_final: bytes) -> bool:
        server_key = hmac.new(self.salted, b"Server Key", self.hash).digest()
        expected = hmac.new(server_key, self.auth_message, self.hash).digest()
        return server_final == b"v=" + base64.b64encode(expected)


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def jwt(claims: dict[str, Any], header: dict[str, Any] | None = None, signature: str = "") -> str:
    return f"{_segment(header or {'alg': 'none'})}.{_segment(claims)}.{signature}"


def oauth_token(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()
