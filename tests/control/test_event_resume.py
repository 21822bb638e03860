"""The event endpoints across a broker restart (issue 27): the broker's own events beside a group's
(``broker_events=true``), and a resume point from the run before the restart replaying the new run from its start.

A broker with a data directory in this test's loop, SIGKILLed as the pytest plugin's ``restart()`` does it
(``BrokerServer.abandon``: connections dropped, no clean-shutdown marker) and started again on the same Kafka and
control ports and directory. Every answer is checked against ``docs/control-api.yaml`` by the control tests'
client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openapi_core import OpenAPI

from broker.server.broker import BrokerServer
from tests.conftest import broker_settings
from tests.control.test_control_api import ControlClient, stable_group, url
from tests.wire.client import WireClient

GROUP = "resumed"


class Restartable:
    """A broker on a data directory that can be killed and started again on the same ports."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server = BrokerServer(broker_settings(admin_port=0, data_dir=str(data_dir)))
        self.clients: list[WireClient] = []

    async def connect(self, client_id: str = "admin-test") -> WireClient:
        client = await WireClient.connect(self.server.port, client_id)
        self.clients.append(client)
        return client

    async def kill_and_start(self) -> None:
        assert self.server.control is not None
        port, admin_port = self.server.port, self.server.control.port
        await self.close_clients()
        await self.server.abandon()
        self.server = BrokerServer(broker_settings(port=port, admin_port=admin_port, data_dir=str(self.data_dir)))
        await self.server.start()

    async def close_clients(self) -> None:
        for client in self.clients:
            await client.close()
        self.clients.clear()


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[Restartable]:
    broker = Restartable(tmp_path / "data")
    await broker.server.start()
    yield broker
    await broker.close_clients()
    await broker.server.stop()


@pytest.fixture
async def client(durable: Restartable, openapi: OpenAPI, spec: dict[str, Any]) -> AsyncIterator[ControlClient]:
    assert durable.server.control is not None
    async with aiohttp.ClientSession() as session:
        yield ControlClient(session, durable.server.control.port, openapi, spec)


async def test_a_groups_events_with_the_brokers_own(client: ControlClient, durable: Restartable) -> None:
    await stable_group(client, durable.connect, GROUP)
    own = await client.events(GROUP)
    assert own and all(r["group_id"] == GROUP for r in own)
    both = await client.events(GROUP, broker_events="true")
    started = both[0]
    assert (started["event"], started["group_id"], started["seq"]) == ("broker_started", "", 1)
    assert started["data_dir"] == str(durable.data_dir) and started["clean_shutdown"] is True
    assert both[1:] == own
    assert await client.events(GROUP, broker_events="false") == own
    assert await client.events(GROUP, broker_events="1", limit=2) == both[-2:]  # limit counts them too
    assert await client.events(GROUP, broker_events="true", since_seq=1) == own
    bad = await client.get(url("v1", "groups", GROUP, "events"), query={"broker_events": "yes"}, well_formed=False)
    assert bad.status == 400 and "broker_events must be true or false" in bad.error


async def test_a_resume_from_before_a_restart_replays_the_new_run_from_its_start(
    client: ControlClient, durable: Restartable
) -> None:
    members = await stable_group(client, durable.connect, GROUP, size=2)
    before = await client.events(GROUP, broker_events="true")
    old_run, last = before[-1]["run_id"], before[-1]["seq"]
    assert last > 2  # the new run's first events have smaller numbers: a plain since_seq would skip them

    await durable.kill_and_start()
    new_run = durable.server.events.run_id
    assert new_run != old_run
    replayed = await client.events(GROUP, broker_events="true", since_seq=last, run_id=old_run)
    assert [(r["event"], r["seq"], r["run_id"]) for r in replayed[:2]] == [
        ("broker_stopped", 1, new_run),
        ("broker_started", 2, new_run),
    ]
    assert replayed[0]["clean"] is False and replayed[0]["detected_at_start"] is True
    assert replayed[1]["clean_shutdown"] is False and replayed[1]["loaded"]["groups"] >= 1
    assert replayed == await client.events(GROUP, broker_events="true")  # all of the new run
    # The same numbers under the new run's id are what they say; above the newest seq is another run's, whatever id.
    assert await client.events(GROUP, broker_events="true", since_seq=2, run_id=new_run) == replayed[2:]
    assert await client.events(GROUP, broker_events="true", since_seq=10**9) == replayed

    async with client.stream({"group": GROUP, "since_seq": last, "run_id": old_run, "broker_events": "true"}) as sse:
        streamed = [await sse.next() for _ in replayed]
        assert streamed == replayed
        # Live after the replay: a member the restart kept (its generation too), kicked now.
        kicked = members[0].member_id
        assert (await client.post(url("v1", "groups", GROUP, "members", kicked, "kick"))).status == 200
        live = await sse.until(lambda r: r["event"] == "member_expired" and r["member_id"] == kicked)
        assert live[-1]["run_id"] == new_run and live[-1]["seq"] > replayed[-1]["seq"]


@pytest.mark.parametrize("how", ["Last-Event-ID above the newest seq", "since_seq of another run_id"])
async def test_the_stream_resumes_a_resume_point_of_another_run_from_the_start(
    client: ControlClient, durable: Restartable, how: str
) -> None:
    await stable_group(client, durable.connect, GROUP)
    old = (await client.events(GROUP))[-1]
    await durable.kill_and_start()
    query: dict[str, str | int] = {"group": GROUP, "broker_events": "true"}
    headers: dict[str, str] = {}
    if how.startswith("Last-Event-ID"):
        headers["Last-Event-ID"] = str(10**9)
    else:
        query |= {"since_seq": 1, "run_id": old["run_id"]}  # 1 is within the new run's numbers: the id decides
    async with client.stream(query, headers) as sse:
        first = await sse.next()
    assert (first["event"], first["seq"], first["run_id"]) == ("broker_stopped", 1, durable.server.events.run_id)


async def test_the_all_groups_stream_is_unchanged_by_broker_events(client: ControlClient, durable: Restartable) -> None:
    """Every group's stream has the broker's events anyway (group ``""``); a group's has them only when asked."""
    async with client.stream({"since_seq": 0}) as sse:
        first = await sse.next()
    assert (first["event"], first["group_id"]) == ("broker_started", "")
    await stable_group(client, durable.connect, GROUP)
    async with client.stream({"group": GROUP, "since_seq": 0}) as sse:
        first = await sse.next()
    assert first["group_id"] == GROUP
