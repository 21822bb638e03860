"""Flow control through a real socket: a client that pipelines Fetches and does not read the answers.

Kafka mutes a connection until its answer is sent. The broker lets answers pile up in the transport only to the
high-water mark (``socket_send_buffer_high_bytes``): past it, it answers nothing more on that connection and reads
nothing more from it until the client has read the buffer down to the low-water mark. Other connections go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from broker.server.connection import Connection
from broker.storage.records import restamp
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient, request
from tests.wire.test_data_plane import FETCH_V, fetch_partition, fetch_request, produced, records_of, topic_key
from tests.wire.test_heartbeat_fast_path import eventually
from tests.wire.test_versions import heartbeat_request, stable_group

E = ErrorCode

FETCHES = 200
VALUE = b"v" * 1_000_000  # one record: each Fetch answer is a little over 1 MB
PROMPT_S = 1.0  # an answer on another connection while one is jammed (generous: the machine is shared)


def slow_connection(server: BrokerServer, client: WireClient) -> Connection:
    host, port = client.writer.get_extra_info("sockname")[:2]
    (connection,) = (c for c in server.connections if c.peer == f"{host}:{port}")
    return connection


async def answered_promptly(client: WireClient, sent: Any) -> Any:
    started = asyncio.get_running_loop().time()
    answer = await client.call(sent, timeout=5.0)
    elapsed = asyncio.get_running_loop().time() - started
    assert elapsed < PROMPT_S, f"{type(sent).__name__} took {elapsed:.3f} s while another connection was jammed"
    return answer


async def pipelined_fetches_not_read(server: BrokerServer, connect: Connect) -> None:
    producer, slow, other = await connect("producer"), await connect("slow-reader"), await connect("other")
    batch = make_batch(value=VALUE)
    await produced(producer, 0, batch)
    member, generation = await stable_group(other, "flow-control")
    fetch = fetch_request(FETCH_V, [(topic_key(server, FETCH_V), [fetch_partition(FETCH_V, 0, 0, max_bytes=2 << 20)])])
    await slow.send_raw(b"".join(slow.encode(fetch, correlation) for correlation in range(1, FETCHES + 1)))

    connection = slow_connection(server, slow)
    await eventually(lambda: not connection.reading, timeout=10.0)
    high = server.settings.socket_send_buffer_high_bytes
    answer_size = len(batch) + 1024  # the records plus the Fetch envelope, generously
    for _ in range(20):  # the buffer stays capped while the client does not read
        assert not connection.reading
        assert connection.unsent_bytes <= high + answer_size, connection.unsent_bytes
        await asyncio.sleep(0.01)

    # Another connection is answered meanwhile, and promptly.
    api_versions = request(ApiKey.API_VERSIONS, 3, client_software_name="wire", client_software_version="1")
    assert (await answered_promptly(other, api_versions)).error_code is E.none
    heartbeat = heartbeat_request(4, "flow-control", generation, member)
    assert (await answered_promptly(other, heartbeat)).error_code is E.none

    # The client reads at last: every answer, in order, complete.
    for correlation in range(1, FETCHES + 1):
        answered, response = slow.decode(ApiKey.FETCH, FETCH_V, await slow.read_frame(timeout=10.0))
        assert answered == correlation
        assert response.error_code is E.none
        ((partition,),) = (topic.partitions for topic in response.responses)
        assert (partition.error_code, records_of(partition)) == (E.none, restamp(batch, 0, 0))
    assert connection.reading
    assert connection.unsent_bytes == 0


async def test_a_client_that_does_not_read_its_answers_is_not_read(server: BrokerServer, connect: Connect) -> None:
    await pipelined_fetches_not_read(server, connect)


async def _on_a_broker(scenario: Callable[[BrokerServer, Connect], Coroutine[Any, Any, None]]) -> None:
    broker = BrokerServer(broker_settings())
    await broker.start()
    opened: list[WireClient] = []

    async def open_client(client_id: str = "wire-test") -> WireClient:
        opened.append(await WireClient.connect(broker.port, client_id))
        return opened[-1]

    try:
        await scenario(broker, open_client)
    finally:
        for client in opened:
            await client.close()
        await broker.stop()


def test_the_same_on_uvloop_the_loop_serve_runs_on() -> None:
    """``group-broker serve`` runs on uvloop, whose transports implement the write-buffer limits themselves."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_on_a_broker(pipelined_fetches_not_read))


async def test_a_client_queueing_many_requests_behind_a_waiting_one_is_read_again_once_they_are_answered(
    server: BrokerServer, connect: Connect
) -> None:
    """The read side of the same flow control: more than 256 requests queued behind one that waits (here held by a
    delay rule, as a parked JoinGroup would be) and the broker reads no more from that client until it catches up."""
    client = await connect("crowd")
    server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 300, "count": 1, "client_id": "crowd"})
    api_versions = request(ApiKey.API_VERSIONS, 3, client_software_name="wire", client_software_version="1")
    count = 400
    await client.send_raw(b"".join(client.encode(api_versions, correlation) for correlation in range(1, count + 1)))
    connection = slow_connection(server, client)
    await eventually(lambda: not connection.reading)
    for correlation in range(1, count + 1):
        answered, response = client.decode(ApiKey.API_VERSIONS, 3, await client.read_frame())
        assert (answered, response.error_code) == (correlation, E.none)
    await eventually(lambda: connection.reading)
