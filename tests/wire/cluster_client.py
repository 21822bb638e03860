"""Shorthands of the multi-node wire tests (issue 29): a three-node broker, group ids by coordinator, classic
membership requests."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.wire.client import WireClient, part, request

E = ErrorCode
SESSION = datetime.timedelta(seconds=10)


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(cluster=ClusterConfig(nodes=3)))
    await broker.start()
    yield broker
    await broker.stop()


def group_on(server: BrokerServer, node_id: int, prefix: str = "g") -> str:
    """The first ``prefix-N`` group id that node ``node_id`` coordinates."""
    layout = server.nodes.layout
    return next(f"{prefix}-{n}" for n in range(10_000) if layout.group_coordinator(f"{prefix}-{n}") == node_id)


def txn_on(server: BrokerServer, node_id: int, prefix: str = "t") -> str:
    layout = server.nodes.layout
    return next(f"{prefix}-{n}" for n in range(10_000) if layout.transaction_coordinator(f"{prefix}-{n}") == node_id)


def port_of(server: BrokerServer, node_id: int) -> int:
    return server.listeners[server.nodes.layout.order.index(node_id)].port


async def connect_to(server: BrokerServer, node_id: int, opened: list[WireClient]) -> WireClient:
    client = await WireClient.connect(port_of(server, node_id))
    opened.append(client)
    return client


def join_request(group_id: str, member_id: str = "", version: int = 3) -> Any:
    return request(
        ApiKey.JOIN_GROUP,
        version,
        group_id=group_id,
        session_timeout=SESSION,
        rebalance_timeout=SESSION,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(part(ApiKey.JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range", metadata=b"r"),),
        reason=None,
    )


def sync_request(group_id: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None) -> Any:
    return request(
        ApiKey.SYNC_GROUP,
        3,
        group_id=group_id,
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        assignments=tuple(
            part(ApiKey.SYNC_GROUP, 3, "SyncGroupRequestAssignment", member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ),
    )


def heartbeat_request(group_id: str, generation: int, member_id: str) -> Any:
    return request(ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=i32(generation), member_id=member_id)


async def stable_pair(first: WireClient, second: WireClient, group_id: str) -> tuple[str, str, int]:
    """Two members formed over JoinGroup v3 and SyncGroup: (leader, follower, generation)."""
    leader_join = await first.call(join_request(group_id))
    assert leader_join.error_code is E.none, leader_join
    # The second join starts a new rebalance that parks until the first member rejoins.
    await second.send_raw(second.encode(join_request(group_id)))
    rejoin = await first.call(join_request(group_id, leader_join.member_id))
    _, follower_join = second.decode(ApiKey.JOIN_GROUP, 3, await second.read_frame())
    assert rejoin.error_code is E.none and follower_join.error_code is E.none
    generation = int(rejoin.generation_id)
    leader, follower = rejoin.member_id, follower_join.member_id
    assert rejoin.leader == leader
    await second.send_raw(second.encode(sync_request(group_id, generation, follower)))
    synced = await first.call(sync_request(group_id, generation, leader, {leader: b"L", follower: b"F"}))
    _, follower_sync = second.decode(ApiKey.SYNC_GROUP, 3, await second.read_frame())
    assert synced.assignment == b"L" and follower_sync.assignment == b"F"
    return leader, follower, generation
