"""Connection limits with Kafka's names, through real sockets: ``max.connections.per.ip`` (and its overrides) and
``max.connections``, as Kafka's ConnectionQuotas and Acceptor apply them (broker/server/quotas.py says how).

- Over an address's limit, the new connection is closed at once, logged with the peer and the limit; the
  address's other connections, and other addresses, go on; once one of them closes, the address may connect again.
- At ``max.connections`` the broker stops accepting: the next connection is made (the kernel accepts it) but not
  read until another one closes; everything else is answered meanwhile, promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, MutableMapping
from typing import Any

import pytest
import structlog
import uvloop
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.wire.client import WireClient, request
from tests.wire.test_bad_input import Steady, form_steady_group
from tests.wire.test_heartbeat_fast_path import eventually

E = ErrorCode
PROMPT_S = 1.0  # an answer on another connection while the acceptor waits (generous: the machine is shared)


def api_versions() -> Any:
    return request(ApiKey.API_VERSIONS, 3, client_software_name="limits", client_software_version="1")


async def answered(client: WireClient) -> bool:
    started = asyncio.get_running_loop().time()
    response = await client.call(api_versions())
    assert asyncio.get_running_loop().time() - started < PROMPT_S
    return bool(response.error_code is E.none)


def peer_of(client: WireClient) -> str:
    host, port = client.writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


def lines(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == event]


class Broker:
    """A broker with the limits under test, the Stable group that must not notice, and the clients opened."""

    def __init__(self, server: BrokerServer, steady: Steady) -> None:
        self.server = server
        self.steady = steady
        self.before = steady.snapshot()
        self.clients: list[WireClient] = []

    async def connect(self, client_id: str = "limited", local: str | None = None) -> WireClient:
        if local is None:
            client = await WireClient.connect(self.server.port, client_id)
        else:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port, local_addr=(local, 0))
            except OSError as error:  # Linux routes all of 127/8 to loopback; other systems may not
                pytest.skip(f"cannot connect from {local}: {error}")
            client = WireClient(reader, writer, client_id)
        self.clients.append(client)
        return client

    async def assert_group_untouched(self) -> None:
        await self.steady.assert_untouched(self.before)


@contextlib.asynccontextmanager
async def limited(**limits: Any) -> AsyncIterator[Broker]:
    server = BrokerServer(broker_settings(**limits))
    await server.start()
    steady = await form_steady_group(server)  # one connection from 127.0.0.1, counted like any other
    broker = Broker(server, steady)
    try:
        yield broker
    finally:
        for client in [*broker.clients, steady.client]:
            await client.close()
        await server.stop()


# -- max.connections.per.ip ---------------------------------------------------------------------------------------


async def per_ip_limit() -> None:
    async with limited(max_connections_per_ip=3) as broker:
        first, second = await broker.connect(), await broker.connect()  # with the steady group's: 3 from 127.0.0.1
        with structlog.testing.capture_logs() as logs:
            extra = await broker.connect("one-too-many")
            assert await extra.closed_by_peer(), "the fourth connection from 127.0.0.1 should be closed at once"
        (line,) = lines(logs, "connection refused")
        assert (line["peer"], line["limit"], line["listener"]) == (peer_of(extra), 3, "PLAINTEXT")
        assert line["reason"] == (
            "address 127.0.0.1 already has the configured maximum of 3 connections (max.connections.per.ip)"
        )
        assert len(broker.server.connections) == 3
        # The earlier ones keep working; another address is not limited by this one's count.
        assert await answered(first) and await answered(second)
        assert await answered(await broker.connect("elsewhere", local="127.0.0.2"))
        await broker.assert_group_untouched()
        # Once one closes, the address may connect again.
        await first.close()
        await eventually(lambda: broker.server.quotas.count("127.0.0.1") == 2)
        assert await answered(await broker.connect("after-a-close"))
        await broker.assert_group_untouched()


async def test_a_connection_over_the_per_ip_limit_is_closed_at_once() -> None:
    await per_ip_limit()


@pytest.mark.parametrize(("default", "override"), [(1, 3), (100, 2)], ids=["raised", "lowered"])
async def test_an_override_sets_one_address_limit(default: int, override: int) -> None:
    async with limited(
        max_connections_per_ip=default, max_connections_per_ip_overrides=(("127.0.0.1", override),)
    ) as broker:
        opened = [await broker.connect() for _ in range(override - 1)]  # plus the steady group's
        with structlog.testing.capture_logs() as logs:
            extra = await broker.connect("one-too-many")
            assert await extra.closed_by_peer()
        (line,) = lines(logs, "connection refused")
        assert (line["peer"], line["limit"]) == (peer_of(extra), override)
        assert line["reason"].endswith(f"maximum of {override} connections (max.connections.per.ip.overrides)")
        for client in opened:
            assert await answered(client)
        # The default still applies to every other address.
        others = [await broker.connect("elsewhere", local="127.0.0.2") for _ in range(min(default, 3))]
        for client in others:
            assert await answered(client)
        await broker.assert_group_untouched()


# -- max.connections ------------------------------------------------------------------------------------------------


async def broker_wide_limit() -> None:
    async with limited(max_connections=3) as broker:
        first, second = await broker.connect(), await broker.connect("elsewhere", local="127.0.0.2")
        with structlog.testing.capture_logs() as logs:
            waiting = await broker.connect("waiting")  # the kernel accepts it; the broker does not read it yet
            await waiting.send_raw(waiting.encode(api_versions(), 1))
            behind = await broker.connect("behind")  # in the listen backlog, behind the waiting one
            await behind.send_raw(behind.encode(api_versions(), 1))
            await eventually(lambda: bool(lines(logs, "not accepting connections until one closes")))
            with pytest.raises(TimeoutError):
                await waiting.read_frame(timeout=0.3)
            (line,) = lines(logs, "not accepting connections until one closes")
            assert (line["waiting_peer"], line["limit"]) == (peer_of(waiting), 3)
            assert line["reason"] == "the broker holds 3 connections (max.connections is 3)"
            # Everything else is answered meanwhile, promptly: the acceptor waits, the loop does not.
            assert await answered(first) and await answered(second)
            await broker.assert_group_untouched()
            assert len(broker.server.connections) == 3
            # One closes: the waiting connection is taken and answered; the one behind it waits its turn.
            await first.close()
            answered_id, response = waiting.decode(ApiKey.API_VERSIONS, 3, await waiting.read_frame())
            assert (answered_id, response.error_code) == (1, E.none)
            assert lines(logs, "accepting connections again")
            with pytest.raises(TimeoutError):
                await behind.read_frame(timeout=0.3)
            await second.close()
            answered_id, response = behind.decode(ApiKey.API_VERSIONS, 3, await behind.read_frame())
            assert (answered_id, response.error_code) == (1, E.none)
        assert not lines(logs, "connection refused")  # nobody was refused: they waited, as with Kafka
        await broker.assert_group_untouched()


async def test_at_max_connections_the_next_connection_waits_until_one_closes() -> None:
    await broker_wide_limit()


async def test_stopping_while_a_connection_waits_for_a_slot_closes_it() -> None:
    server = BrokerServer(broker_settings(max_connections=1))
    await server.start()
    first = await WireClient.connect(server.port, "first")
    waiting = await WireClient.connect(server.port, "waiting")
    try:
        assert await answered(first)
        await waiting.send_raw(waiting.encode(api_versions(), 1))
        await asyncio.sleep(0.05)
        await asyncio.wait_for(server.stop(), timeout=5)
        assert await waiting.closed_by_peer()
        assert await first.closed_by_peer()
        assert server.quotas.total == 0
    finally:
        await first.close()
        await waiting.close()


# -- the same on uvloop, the loop ``group-broker serve`` runs on -------------------------------------------------


@pytest.mark.parametrize("scenario", [per_ip_limit, broker_wide_limit], ids=["per ip", "broker wide"])
def test_the_same_on_uvloop(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())
