"""The share session cache's limit over TCP (checklist item 27 of the KIP-932 spec, section 7) and two client traps
of section 12.7 on the wire: member ids as librdkafka makes them (trap 2) and one partition listed twice in a
ShareFetch (trap 3)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient
from tests.wire.share_client import acquired, heartbeat, partition_of, set_group_config, share_broker, share_fetch
from tests.wire.test_data_plane import produce_request

E = ErrorCode
ACCEPT = 1
WAIT_MS = 300


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = share_broker(share_max_share_sessions=1)
    await broker.start()
    yield broker
    await broker.stop()


def topic_id(server: BrokerServer, name: str = "one") -> uuid.UUID:
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def produce(client: WireClient, count: int) -> None:
    answer = await client.call(produce_request(11, [(0, make_batch(count))], topic="one"))
    assert answer.responses[0].partition_responses[0].error_code is E.none


async def test_session_limit_waits_then_frees_on_disconnect(server: BrokerServer, connect: Connect) -> None:
    """Item 27: with group.share.max.share.sessions 1, a second member's SF(0) is answered
    SHARE_SESSION_LIMIT_REACHED after its MaxWaitMs (not at once); once the first client disconnects, it opens."""
    a, b = await connect("a"), await connect("b")
    tid = topic_id(server)
    assert (await a.call(share_fetch("g", "a", 0, tid, [0]))).error_code is E.none
    loop = asyncio.get_running_loop()
    started = loop.time()
    refused = await b.call(share_fetch("g", "b", 0, tid, [0], max_wait_ms=WAIT_MS))
    waited = loop.time() - started
    assert (refused.error_code, refused.responses) == (E.share_session_limit_reached, ())
    assert waited >= WAIT_MS / 1000 * 0.9, waited
    quick = await b.call(share_fetch("g", "b", 0, tid, [0], max_wait_ms=0))
    assert quick.error_code is E.share_session_limit_reached
    await a.close()
    for _ in range(500):  # the broker sees the EOF on its next turns (up to 5 s on a loaded machine)
        if not server.coordinator.share.sessions.sessions:
            break
        await asyncio.sleep(0.01)
    assert (await b.call(share_fetch("g", "b", 0, tid, [0]))).error_code is E.none


async def test_refused_fetch_of_a_closing_connection(server: BrokerServer, connect: Connect) -> None:
    """Item 27: a client that hangs up while its refused fetch waits does not disturb the broker."""
    a, b = await connect("a"), await connect("b")
    tid = topic_id(server)
    await a.call(share_fetch("g", "a", 0, tid, [0]))
    await b.send_raw(b.encode(share_fetch("g", "b", 0, tid, [0], max_wait_ms=WAIT_MS)))
    await b.close()
    await asyncio.sleep(WAIT_MS * 1.5 / 1000)
    assert (await a.call(share_fetch("g", "a", 1, tid, []))).error_code is E.none


async def test_member_ids_as_librdkafka_makes_them(server: BrokerServer, connect: Connect) -> None:
    """Trap 2: a client-generated member id of 22-36 characters with + and / works on heartbeat and fetch."""
    client = await connect()
    member = "Zm9v+YmFy/YmF6cXV4+Lw"  # 22 characters of base64, as librdkafka sends
    joined = await client.call(heartbeat("g", member, 0, ("one",)))
    assert (joined.error_code, joined.member_id) == (E.none, member)
    long_id = str(uuid.uuid4())  # 36 characters, as the Java client sends
    assert (await client.call(heartbeat("g", long_id, 0, ("one",)))).error_code is E.none
    await set_group_config(client, "g", share_auto_offset_reset="earliest")
    await produce(client, 1)
    assert acquired(await client.call(share_fetch("g", member, 0, topic_id(server), [0]))) == [(0, 0, 1)]


async def test_a_partition_listed_twice_is_merged(server: BrokerServer, connect: Connect) -> None:
    """Trap 3: librdkafka lists a partition once to fetch it and once with its acknowledgements: merged, the
    acknowledgement applied and answered once, and the partition fetched."""
    client = await connect()
    tid = topic_id(server)
    await set_group_config(client, "g", share_auto_offset_reset="earliest")
    await produce(client, 2)
    await client.call(share_fetch("g", "m", 0, tid, [0]))
    await produce(client, 1)
    fetching = share_fetch("g", "m", 1, tid, [0])
    acking = share_fetch("g", "m", 1, tid, [], acks={0: [(0, 1, (ACCEPT,))]})
    answer = await client.call(dataclasses.replace(fetching, topics=fetching.topics + acking.topics))
    assert answer.error_code is E.none
    entry = partition_of(answer)  # exactly one entry for partition 0
    assert entry.acknowledge_error_code == 0 and acquired(answer) == [(2, 2, 1)]
    share = server.coordinator.share.partitions.get(("g", tid, 0))
    assert share is not None and share.start_offset == 2
