"""An ``error`` fault rule on every API but ApiVersions, at its oldest and newest version, over a real socket.

Each API declares its error answer beside its handler (``ROUTES`` of its family module, issue 25); this test is what
keeps every one of them usable: the answer must be encoded by the broker, decoded by kio with no trailing bytes,
carry the rule's error wherever the response has an error code (top level, per topic, per partition: Kafka's
``getErrorResponse`` puts the error on all of them), and leave the connection serving. A Produce with acks=0 has no
answer in Kafka: its error closes the connection (``RequestHandlerHelper.sendErrorOrCloseConnection``).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from benchmarks.fuzz.requests import build_request
from broker.api.routes import FAULTABLE_APIS
from broker.server.broker import BrokerServer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, kafka_name
from tests.wire.client import Connect, request

INJECTED = ErrorCode.not_coordinator
# Seeds tried until the request names something the answer can carry an error for (a request of no groups, no
# topics, has an answer of none of them: then only a top-level error can be checked, if the response has one).
SEEDS = range(12)


def cases() -> list[Any]:
    found = []
    for api in sorted(FAULTABLE_APIS):
        low, high = SUPPORTED_VERSIONS[api]
        for version in sorted({low, high}):
            found.append(pytest.param(api, version, id=f"{kafka_name(api)}-v{version}"))
    return found


def error_codes(value: Any) -> list[ErrorCode]:
    """Every error code in a kio response (``error_code``, ``partition_error_code``...), nested entities and tuples
    included."""
    if isinstance(value, tuple):
        return [code for item in value for code in error_codes(item)]
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return []
    codes = []
    for field in dataclasses.fields(value):
        inner = getattr(value, field.name)
        if field.name.endswith("error_code") and isinstance(inner, ErrorCode):
            codes.append(inner)
        else:
            codes.extend(error_codes(inner))
    return codes


def answerable(api: int, body: Any) -> bool:
    """Not a Produce with acks=0 (which has no answer)."""
    return not (api == ApiKey.PRODUCE and body.acks == 0)


def test_every_api_but_api_versions_takes_an_error_rule() -> None:
    assert set(SUPPORTED_VERSIONS) - FAULTABLE_APIS == {ApiKey.API_VERSIONS}


@pytest.mark.parametrize(("api", "version"), cases())
async def test_error_rule_answers_in_the_api_s_own_shape(
    server: BrokerServer, connect: Connect, api: int, version: int
) -> None:
    server.faults.add({"action": "error", "api": api, "error": INJECTED.name.upper()})
    client = await connect()
    seen: list[ErrorCode] = []
    for seed in SEEDS:
        body = build_request(random.Random(seed), api, version)
        if not answerable(api, body):
            continue
        answer = await client.call(body)
        # MetadataRequest.getErrorResponse puts the error on every requested topic; v13's top-level ErrorCode
        # (KIP-1102, REBOOTSTRAP_REQUIRED) is left NONE.
        codes = error_codes(answer.topics if api == ApiKey.METADATA else answer)
        assert set(codes) <= {INJECTED}, f"{kafka_name(api)} v{version}: {codes}"
        seen.extend(codes)
        if seen:
            break
    assert seen, f"{kafka_name(api)} v{version}: no answer of {len(SEEDS)} requests carried an error code"
    # The connection still serves, the rule still fires, and ApiVersions is never faulted.
    versions = await client.call(request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    assert versions.error_code is ErrorCode.none
    await client.close()


@pytest.mark.parametrize("version", sorted(set(SUPPORTED_VERSIONS[ApiKey.PRODUCE])))
async def test_error_rule_on_a_produce_with_acks_0_closes_the_connection(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    server.faults.add({"action": "error", "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"})
    client = await connect()
    body = dataclasses.replace(build_request(random.Random(0), ApiKey.PRODUCE, version), acks=i16(0))
    await client.send_raw(client.encode(body))
    assert await client.closed_by_peer()
