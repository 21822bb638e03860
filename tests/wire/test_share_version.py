"""share.version 0 over TCP: a broker without share groups, as a Kafka 4.0 broker (or 4.1 with the feature off) is.

Kafka's ApiVersionManager leaves the seven share APIs out of ApiVersions when the finalized share.version is 0, and
KafkaApis answers a share request sent anyway with UNSUPPORTED_VERSION in that API's own shape
(docs/spec/share-groups.md 2.7; checklist items 1 and 71). librdkafka's ShareConsumer then never finds a
coordinator and waits silently (tests/clients/test_share_consumer.py shows it ends by a timeout).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import fields
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer
from broker.setting import DECLARED
from protocol.apis import CLUSTER_APIS, SHARE_APIS, SUPPORTED_VERSIONS, ApiKey
from tests.conftest import broker_settings
from tests.wire.client import Connect, WireClient, request
from tests.wire.share_client import heartbeat, share_acknowledge, share_fetch
from tests.wire.test_api_versions_fast_path import answer, arm_generic
from tests.wire.test_api_versions_fast_path import request as api_versions_request

E = ErrorCode


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(group=GroupConfig(share_version=0), topics=(("one", 1),)))
    await broker.start()
    yield broker
    await broker.stop()


def listed(body: Any) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


# One node: no cluster API either (protocol/apis.py CLUSTER_APIS).
ONE_NODE = {key: versions for key, versions in SUPPORTED_VERSIONS.items() if key not in CLUSTER_APIS}
WITHOUT_SHARE = {key: versions for key, versions in ONE_NODE.items() if key not in SHARE_APIS}


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1))
async def test_api_versions_lists_no_share_api_on_either_path(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    client = await connect()
    data = client.encode(api_versions_request(version), 5)
    fast = await answer(client, data)
    arm_generic(server)
    assert await answer(client, data) == fast
    _, body = client.decode(ApiKey.API_VERSIONS, version, fast)
    assert body.error_code is E.none
    assert listed(body) == WITHOUT_SHARE
    assert len(SHARE_APIS) == 7 and set(SUPPORTED_VERSIONS) >= SHARE_APIS


async def test_a_too_new_api_versions_lists_no_share_api_either(connect: Connect) -> None:
    client = await connect()
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 5, 1) + b"x" + b"\x00\x02a\x02b\x00"
    _, body = client.decode(ApiKey.API_VERSIONS, 0, await answer(client, struct.pack(">i", len(payload)) + payload))
    assert body.error_code is E.unsupported_version and listed(body) == WITHOUT_SHARE


async def test_each_share_api_sent_anyway_is_answered_unsupported_version(
    server: BrokerServer, connect: Connect
) -> None:
    client = await connect()
    tid = uuid.uuid4()
    beat = await client.call(heartbeat("g", "m1", 0, ("one",)))
    assert beat.error_code is E.unsupported_version and beat.member_epoch == 0
    describe = await client.call(request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=("g", "h"),
                                         include_authorized_operations=False))  # fmt: skip
    assert [(g.group_id, g.error_code) for g in describe.groups] == [("g", E.unsupported_version),
                                                                     ("h", E.unsupported_version)]  # fmt: skip
    fetch = await client.call(share_fetch("g", "m1", 0, tid, [0]))
    assert fetch.error_code is E.unsupported_version and fetch.responses == ()
    ack = await client.call(share_acknowledge("g", "m1", 1, tid, {0: [(0, 0, (1,))]}))
    assert ack.error_code is E.unsupported_version
    # Nothing was created on the way: no share group, no share session.
    assert server.coordinator.share.describe("g").error is E.group_id_not_found
    # The connection, and the broker, go on serving everything else.
    versions = await client.call(api_versions_request(3))
    assert versions.error_code is E.none and listed(versions) == WITHOUT_SHARE


async def test_the_default_lists_the_share_apis() -> None:
    """The control: with share.version 1 (Kafka 4.2's default) the same broker lists all seven."""
    broker = BrokerServer(broker_settings(topics=(("one", 1),)))
    await broker.start()
    try:
        client = await WireClient.connect(broker.port)
        try:
            body = await client.call(api_versions_request(3))
            assert listed(body) == ONE_NODE
            beat = await client.call(heartbeat("g", "m1", 0, ("one",)))
            assert beat.error_code is E.none and beat.member_epoch == 1
        finally:
            await client.close()
    finally:
        await broker.stop()


def test_share_version_takes_zero_or_one() -> None:
    declared = next(f.metadata[DECLARED] for f in fields(GroupConfig) if f.name == "share_version")
    assert declared.flag == "--share-version" and declared.kafka == "share.version"
    assert declared.from_text("0") == 0
    with pytest.raises(ValueError, match="from 0 to 1"):
        declared.from_text("2")
