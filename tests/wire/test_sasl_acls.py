"""SASL and ACLs together, raw frames over TCP (docs/spec/security.md sections 1, 10 and 12): the principal a SASL
login establishes is the one the authorizer decides for, and the SCRAM credential APIs need DESCRIBE (50) and ALTER
(51) on the cluster, CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise, nothing changed."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode

from broker.config.settings import parse_endpoints
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from broker.server.broker import BrokerServer
from broker.server.settings import AclConfig, SaslConfig, parse_users
from tests.conftest import broker_settings
from tests.wire.client import WireClient
from tests.wire.sasl_client import USERS, login_plain
from tests.wire.test_acls import grant, join
from tests.wire.test_sasl_sessions import alter, describe, scram_ok, upsertion

E = ErrorCode


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    settings = dataclasses.replace(
        broker_settings(
            listeners=parse_endpoints("SASL_PLAINTEXT://127.0.0.1:0"),
            acls=AclConfig(authorizer="standard", super_users=("User:alice",)),
            topics=(("topic", 1),), auto_create_topics=False,
        ),
        sasl=SaslConfig(users=parse_users(USERS), failed_authentication_delay_ms=0),
    )  # fmt: skip
    started = BrokerServer(settings)
    await started.start()
    yield started
    await started.stop()


async def logged_in(server: BrokerServer, user: str, password: str) -> WireClient:
    client = await WireClient.connect(server.listeners[0].port, f"{user}-client")
    assert (await login_plain(client, user, password)).error_code == E.none
    return client


class _Opened:
    """SaslBroker's ``connect`` for scram_ok: a fresh connection to the SASL listener."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server

    async def connect(self) -> WireClient:
        return await WireClient.connect(self.server.listeners[0].port)


async def test_scram_credential_apis_need_describe_and_alter_on_the_cluster(server: BrokerServer) -> None:
    bob = await logged_in(server, "bob", "bob-secret")
    try:
        answer = await bob.call(describe(None))
        assert (answer.error_code, answer.results) == (E.cluster_authorization_failed, ())
        answer = await bob.call(alter(upsertions=(upsertion("dave", "dave-pw"),)))
        assert [(r.user, r.error_code) for r in answer.results] == [("dave", E.cluster_authorization_failed)]
        assert not await scram_ok(_Opened(server), "dave", "dave-pw")  # nothing was stored

        grant(server, ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE, principal="User:bob")
        answer = await bob.call(describe("alice"))
        assert (answer.error_code, [r.user for r in answer.results]) == (E.none, ["alice"])
        answer = await bob.call(alter(upsertions=(upsertion("dave", "dave-pw"),)))  # DESCRIBE is not ALTER
        assert answer.results[0].error_code == E.cluster_authorization_failed

        grant(server, ResourceType.CLUSTER, CLUSTER_NAME, Operation.ALTER, principal="User:bob")
        answer = await bob.call(alter(upsertions=(upsertion("dave", "dave-pw"),)))
        assert answer.results[0].error_code == E.none
        assert await scram_ok(_Opened(server), "dave", "dave-pw")
    finally:
        await bob.close()


async def test_the_sasl_principal_is_the_one_acls_decide_for(server: BrokerServer) -> None:
    """alice is a super user, bob is not: the same JoinGroup, one login each (spec section 1: the SASL user)."""
    bob = await logged_in(server, "bob", "bob-secret")
    alice = await logged_in(server, "alice", "secret")
    try:
        assert (await bob.call(join("g"))).error_code == E.group_authorization_failed
        assert (await alice.call(join("g"))).error_code != E.group_authorization_failed
        denied = [r for r in server.events.history("g") or () if r["event"] == "authorization_denied"]
        assert denied and all(record["principal"] == "User:bob" for record in denied)
    finally:
        await bob.close()
        await alice.close()
