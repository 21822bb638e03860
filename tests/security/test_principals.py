"""Decisions on principals other than PLAINTEXT's User:ANONYMOUS, before TLS and SASL set real ones: the handlers
and the authorization gate called as a connection calls them, with a ``Client`` carrying the principal (a test-only
way in: nothing on the wire can choose its principal)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.base import Call
from broker.api.dispatch import HANDLERS
from broker.coordinator.client import Client
from broker.security.acls import Operation, ResourceType, binding
from broker.server.acl_gate import AuthorizationGate
from broker.server.broker import BrokerServer
from broker.server.gates import Answer, GateRequest
from broker.server.settings import AclConfig
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.wire.test_acls import describe_groups, join, metadata

ALICE, BOB = "User:alice", "User:bob"


@pytest.fixture
async def acl_server() -> AsyncIterator[BrokerServer]:
    server = BrokerServer(broker_settings(acls=AclConfig(authorizer="standard", super_users=(ALICE,))))
    await server.start()
    yield server
    await server.stop()


def as_principal(server: BrokerServer, principal: str, api: int, version: int, body: Any) -> Any:
    """The request as a connection of ``principal`` has it answered: the gate first, then the handler."""
    assert server.authorizer is not None
    client = Client("test", "/127.0.0.1", 1, principal)
    verdict = AuthorizationGate(server.authorizer).check(GateRequest(api, version, "test", body, client))
    if isinstance(verdict, Answer):
        return verdict.error
    return HANDLERS[api](server.listeners[0].api, Call(version, client), body)


async def test_a_super_user_and_a_bound_principal_against_one_left_out(acl_server: BrokerServer) -> None:
    assert acl_server.authorizer is not None
    acl_server.authorizer.add([binding(ResourceType.TOPIC, "topic", BOB, Operation.DESCRIBE)])
    request = metadata("topic")
    by_principal = {
        who: [t.error_code for t in as_principal(acl_server, who, ApiKey.METADATA, 12, request).topics]
        for who in (ALICE, BOB, "User:carol")
    }
    assert by_principal == {
        ALICE: [ErrorCode.none], BOB: [ErrorCode.none], "User:carol": [ErrorCode.topic_authorization_failed],
    }  # fmt: skip


async def test_user_wildcard_binds_every_principal_but_a_deny_for_one_wins(acl_server: BrokerServer) -> None:
    assert acl_server.authorizer is not None
    acl_server.authorizer.add(
        [
            binding(ResourceType.GROUP, "shared", "User:*", Operation.READ),
            binding(ResourceType.GROUP, "shared", BOB, Operation.READ, permission=_deny()),
        ]
    )
    assert as_principal(acl_server, BOB, ApiKey.JOIN_GROUP, 5, join("shared")) is ErrorCode.group_authorization_failed
    carol = as_principal(acl_server, "User:carol", ApiKey.JOIN_GROUP, 5, join("shared"))
    assert carol is not ErrorCode.group_authorization_failed  # past the gate: the coordinator's answer
    described = as_principal(acl_server, BOB, ApiKey.DESCRIBE_GROUPS, 5, describe_groups("shared"))
    assert described.groups[0].error_code is ErrorCode.none  # a DENY READ leaves the implied DESCRIBE alone
    assert described.groups[0].authorized_operations == 1 << Operation.DESCRIBE


def _deny() -> Any:
    from broker.security.acls import Permission

    return Permission.DENY


async def test_acls_survive_a_restart_with_a_data_directory(tmp_path: Path) -> None:
    settings = broker_settings(acls=AclConfig(acls_enabled=True), data_dir=str(tmp_path))
    first = BrokerServer(settings)
    await first.start()
    assert first.authorizer is not None
    first.authorizer.add([binding(ResourceType.GROUP, "kept", BOB, Operation.READ)])
    await first.stop()
    again = BrokerServer(settings)
    await again.start()
    try:
        assert again.authorizer is not None
        assert again.authorizer.bindings == [binding(ResourceType.GROUP, "kept", BOB, Operation.READ)]
    finally:
        await again.stop()


async def test_with_acls_off_there_is_no_authorizer_and_no_gate(tmp_path: Path) -> None:
    server = BrokerServer(broker_settings())
    assert server.authorizer is None
    assert not any(isinstance(gate, AuthorizationGate) for gate in server.gates)
    assert server.listeners == [] or server.listeners[0].api.authorizer is None
