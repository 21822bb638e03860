"""The wire tests' connections: opened on the test's in-process broker, closed at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from broker.server.broker import BrokerServer
from tests.wire.client import Connect, WireClient


@pytest.fixture
async def connect(server: BrokerServer) -> AsyncIterator[Connect]:
    opened: list[WireClient] = []

    async def open_client(client_id: str = "wire-test") -> WireClient:
        client = await WireClient.connect(server.port, client_id)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        await client.close()
