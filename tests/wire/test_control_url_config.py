"""``group.broker.control.url`` in DescribeConfigs on the BROKER resource (issue 18, broker/api/configs.py): the
control API's URL as each listener's clients reach it, over a real socket at every version, kio-encoded, and as
confluent-kafka's AdminClient reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config.settings import Endpoint
from broker.server.broker import BrokerServer
from broker.testing.embedded import run_broker
from tests.conftest import broker_settings
from tests.wire.client import WireClient
from tests.wire.test_configs import BROKER, DEFAULT_CONFIG, DESCRIBE, STATIC_BROKER_CONFIG, by_name, describe
from tests.wire.test_versions import versions

KEY = "group.broker.control.url"


async def _started(**overrides: Any) -> BrokerServer:
    server = BrokerServer(broker_settings(**overrides))
    await server.start()
    return server


async def _described(port: int, version: int, keys: tuple[str, ...] | None = None) -> Any:
    client = await WireClient.connect(port)
    try:
        (result,) = (await client.call(describe(version, (BROKER, "1", keys)))).results
    finally:
        await client.close()
    assert result.error_code == ErrorCode.none
    return result


@pytest.fixture
async def control_on() -> AsyncIterator[BrokerServer]:
    server = await _started(admin_port=0)
    yield server
    await server.stop()


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_the_broker_advertises_its_control_url(control_on: BrokerServer, version: int) -> None:
    assert control_on.control is not None
    url = f"http://127.0.0.1:{control_on.control.port}"
    config = by_name(await _described(control_on.port, version))[KEY]
    assert (config.value, config.read_only, config.is_sensitive) == (url, True, False)
    # --admin-port 0 is not the default: a static setting, as Kafka's sources go.
    assert config.config_source == STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in config.synonyms] == [(KEY, url, STATIC_BROKER_CONFIG)]
    if version >= 3:
        assert (config.config_type, "control API" in config.documentation) == (2, True)  # STRING
    # Asked for by name alone, as the CLI asks (broker/cli/discover.py).
    assert [c.name for c in (await _described(control_on.port, version, (KEY,))).configs] == [KEY]


async def test_the_url_is_null_when_the_control_api_is_off(server: BrokerServer) -> None:
    config = by_name(await _described(server.port, 1))[KEY]  # the wire tests' broker: --admin-port -1
    assert (config.value, config.config_source) == (None, STATIC_BROKER_CONFIG)


async def test_the_default_admin_port_is_a_default_config_even_where_it_gave_way() -> None:
    server = await _started(admin_port=9644)  # taken by another broker, or not: either way the default
    try:
        assert server.control is not None
        config = by_name(await _described(server.port, 2))[KEY]
        assert (config.value, config.config_source) == (f"http://127.0.0.1:{server.control.port}", DEFAULT_CONFIG)
    finally:
        await server.stop()


async def test_a_wildcard_control_host_is_advertised_with_each_listeners_host() -> None:
    server = await _started(
        admin_host="0.0.0.0",
        admin_port=0,
        listeners=(Endpoint("INSIDE", "127.0.0.1", 0), Endpoint("OUTSIDE", "127.0.0.1", 0)),
        advertised_listeners=(Endpoint("INSIDE", "broker", 0), Endpoint("OUTSIDE", "localhost", 0)),
    )
    try:
        assert server.control is not None
        port = server.control.port
        inside, outside = [by_name(await _described(listener.port, 4))[KEY] for listener in server.listeners]
        assert (inside.value, outside.value) == (f"http://broker:{port}", f"http://localhost:{port}")
    finally:
        await server.stop()


def test_confluent_kafka_admin_client_reads_the_control_url() -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    with run_broker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "1")
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        entry = configs[KEY]
        assert (entry.value, entry.is_read_only) == (broker.admin_url, True)
