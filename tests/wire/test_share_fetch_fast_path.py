"""The steady ShareFetch v1 takes the hand-decoded path (``protocol/share_fetch_requests.py``, ``RequestPipeline.
_share_fetch``, ``share_fetch_steady``) over real connections, with the generic path's bytes (the seeded comparison
of many shapes is tests/server/test_share_fetch_fast_path.py); an armed fault rule, share groups off, a multi-node
broker and the shapes it does not read (v2, several partitions, forgotten topics) go the generic way, and a session
error on the fast path is the generic path's answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

import broker.server.pipeline as pipeline_module
from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from protocol.apis import ApiKey
from protocol.codec import decode_request
from protocol.share_fetch_requests import decode_steady_share_fetch
from tests.conftest import broker_settings
from tests.wire.client import Connect, WireClient
from tests.wire.share_client import SHARE_GROUP_CONFIG, acquired, heartbeat, set_group_config, share_broker, share_fetch
from tests.wire.test_share_fetch import produce, topic_id

E = ErrorCode
FETCH = ApiKey.SHARE_FETCH
ACCEPT = 1
MEMBER = "Q7YTt/jmRy6R8wuUst3dqg"


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = share_broker()
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[int]]]:
    """The correlation id of every ShareFetch each path read: "fast" by hand, "generic" through kio."""
    seen: dict[str, list[int]] = {"fast": [], "generic": []}

    def fast(frame: bytes) -> Any:
        decoded = decode_steady_share_fetch(frame)
        if decoded is not None:
            seen["fast"].append(decoded[0])
        return decoded

    def generic(frame: bytes) -> Any:
        decoded = decode_request(frame)
        if decoded.api_key == FETCH:
            seen["generic"].append(decoded.correlation_id)
        return decoded

    monkeypatch.setattr(pipeline_module, "decode_steady_share_fetch", fast)
    monkeypatch.setattr(pipeline_module, "decode_request", generic)
    yield seen


def arm_generic(server: BrokerServer) -> None:
    server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 1, "client_id": "nobody"})


async def raw(client: WireClient, body: Any, correlation: int) -> bytes:
    await client.send_raw(client.encode(body, correlation))
    return await client.read_frame()


async def joined(server: BrokerServer, client: WireClient, records: int = 20) -> Any:
    answer = await client.call(heartbeat("g", MEMBER, 0, ("one",)))
    assert answer.error_code is E.none
    assert (await set_group_config(client, "g", share_auto_offset_reset="earliest")).responses[0].error_code is E.none
    await produce(client, records)
    return topic_id(server)


async def test_the_steady_poll_takes_the_fast_path_and_an_error_answers_the_generic_bytes(
    server: BrokerServer, connect: Connect, paths: dict[str, list[int]]
) -> None:
    client = await connect()
    tid = await joined(server, client, records=5)
    counted = server.request_stats.by_api[(FETCH, 1)].count if (FETCH, 1) in server.request_stats.by_api else 0
    first = client.decode(FETCH, 1, await raw(client, share_fetch("g", MEMBER, 0, tid, [0], max_records=5), 11))[1]
    assert first.error_code is E.none and acquired(first) == [(0, 4, 1)]
    await produce(client, 15)
    acks = {0: [(0, 4, (ACCEPT,))]}
    steady = client.decode(FETCH, 1, await raw(client, share_fetch("g", MEMBER, 1, tid, [], acks=acks), 12))[1]
    assert acquired(steady) == [(5, 19, 1)]
    assert steady.responses[0].partitions[0].acknowledge_error_code == 0
    empty = client.decode(FETCH, 1, await raw(client, share_fetch("g", MEMBER, 2, tid, []), 13))[1]
    assert empty.error_code is E.none and acquired(empty) == []  # the session's partition, nothing left
    assert paths == {"fast": [11, 12, 13], "generic": []}
    assert server.request_stats.by_api[(FETCH, 1)].count == counted + 3  # /metrics counts them as any other
    # A session epoch mismatch and an unknown member change nothing: both paths answer them the same.
    for correlation, body, error in [
        (20, share_fetch("g", MEMBER, 9, tid, [], acks={0: [(5, 19, (ACCEPT,))]}), E.invalid_share_session_epoch),
        (21, share_fetch("g", "nobody-at-all", 3, tid, []), E.share_session_not_found),
    ]:
        fast = await raw(client, body, correlation)
        assert client.decode(FETCH, 1, fast)[1].error_code is error
        arm_generic(server)
        assert await raw(client, body, correlation) == fast
        server.faults.clear()
    assert paths == {"fast": [11, 12, 13, 20, 21], "generic": [20, 21]}


async def test_a_parked_poll_on_the_fast_path_is_answered_when_records_arrive(
    server: BrokerServer, connect: Connect, paths: dict[str, list[int]]
) -> None:
    client, producer = await connect(), await connect("producer")
    tid = await joined(server, client, records=3)
    first = client.decode(FETCH, 1, await raw(client, share_fetch("g", MEMBER, 0, tid, [0]), 11))[1]
    assert acquired(first) == [(0, 2, 1)]
    poll = share_fetch("g", MEMBER, 1, tid, [], acks={0: [(0, 2, (ACCEPT,))]}, max_wait_ms=5000)
    await client.send_raw(client.encode(poll, 12))
    await produce(producer, 4)
    answer = client.decode(FETCH, 1, await client.read_frame())
    assert answer[0] == 12 and acquired(answer[1]) == [(3, 6, 1)]
    assert paths["fast"] == [11, 12] and paths["generic"] == []


async def test_shapes_it_does_not_read_and_an_armed_rule_go_the_generic_way(
    server: BrokerServer, connect: Connect, paths: dict[str, list[int]]
) -> None:
    client = await connect()
    tid = await joined(server, client)
    await raw(client, share_fetch("g", MEMBER, 0, tid, [0], max_records=1), 1)
    not_steady = [
        share_fetch("g", MEMBER, 1, tid, [], version=2, max_records=1),  # v2
        share_fetch("g", MEMBER, 2, tid, [0, 1], max_records=1),  # two partitions (1 is unknown)
        share_fetch("g", MEMBER, 3, tid, [0], forgotten=[1], max_records=1),  # a forgotten topic
    ]
    for correlation, body in enumerate(not_steady, start=2):
        version = 2 if correlation == 2 else 1
        answer = client.decode(FETCH, version, await raw(client, body, correlation))[1]
        assert answer.error_code is E.none
    assert paths == {"fast": [1], "generic": [2, 3, 4]}
    arm_generic(server)
    answer = client.decode(FETCH, 1, await raw(client, share_fetch("g", MEMBER, 4, tid, [], max_records=1), 5))[1]
    assert answer.error_code is E.none
    assert paths == {"fast": [1], "generic": [2, 3, 4, 5]}


async def test_with_share_groups_off_a_steady_poll_is_answered_unsupported_version(
    paths: dict[str, list[int]],
) -> None:
    server = BrokerServer(broker_settings(group=GroupConfig(share_version=0), topics=(("one", 1),)))
    await server.start()
    try:
        client = await WireClient.connect(server.port, "off")
        tid = topic_id(server)
        answer = await raw(client, share_fetch("g", MEMBER, 0, tid, [0]), 7)
        assert client.decode(FETCH, 1, answer)[1].error_code is E.unsupported_version
        assert paths == {"fast": [], "generic": [7]}
        await client.close()
    finally:
        await server.stop()


async def test_a_multi_node_broker_answers_every_node_the_generic_way(paths: dict[str, list[int]]) -> None:
    settings = broker_settings(group=SHARE_GROUP_CONFIG, topics=(("one", 1),), cluster=ClusterConfig(nodes=2))
    server = BrokerServer(settings)
    await server.start()
    try:
        leader = server.nodes.layout.leadership("one", 0).leader
        ports = {settings.node_id + index: listener.port for index, listener in enumerate(server.listeners)}
        (follower,) = [node for node in ports if node != leader]
        at_leader = await WireClient.connect(ports[leader], "c")
        at_follower = await WireClient.connect(ports[follower], "c")
        tid = topic_id(server)
        coordinator = await WireClient.connect(ports[server.nodes.layout.group_coordinator("g")], "c")
        assert (await coordinator.call(heartbeat("g", MEMBER, 0, ("one",)))).error_code is E.none
        await coordinator.close()
        led = at_leader.decode(FETCH, 1, await raw(at_leader, share_fetch("g", MEMBER, 0, tid, [0]), 8))[1]
        refused = at_follower.decode(FETCH, 1, await raw(at_follower, share_fetch("g", "m2", 0, tid, [0]), 9))[1]
        assert led.error_code is E.none and led.responses[0].partitions[0].error_code == 0
        assert refused.responses[0].partitions[0].error_code == E.not_leader_or_follower.value
        assert paths == {"fast": [], "generic": [8, 9]}
        await at_leader.close()
        await at_follower.close()
    finally:
        await server.stop()
