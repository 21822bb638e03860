"""Bytes the broker cannot answer: it hangs up on that connection, says why, and nothing else changes.

For every kind of bad input: the client sees EOF, a "closing connection" log line names the
peer, the client id and the reason, another connection is still served, and no group state
changed (a Stable group formed beforehand on another connection is untouched; a bad
JoinGroup creates no group). Requests already received before the bad bytes are answered
first, as Kafka does (it reads a connection one request at a time).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from broker.coordinator.classic.state import GroupState
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey, advertised_versions
from protocol.codec import build, nested
from tests.conftest import broker_settings
from tests.wire.client import WireClient, request

E = ErrorCode
SESSION = datetime.timedelta(seconds=10)
BAD_CLIENT = "bad-client"
STEADY_GROUP = "steady"


def join_request(version: int, group_id: str, member_id: str = "", protocols: tuple[str, ...] = ("range",)) -> Any:
    """A JoinGroup naming ``protocols``, each with its own name as opaque metadata."""
    protocol_cls = nested(load_request_schema(ApiKey.JOIN_GROUP, version), "JoinGroupRequestProtocol")
    return request(
        ApiKey.JOIN_GROUP,
        version,
        group_id=group_id,
        session_timeout=SESSION,
        rebalance_timeout=SESSION,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=tuple(build(protocol_cls, name=name, metadata=name.encode()) for name in protocols),
        reason=None,
    )


def api_versions_request(version: int = 3) -> Any:
    return request(ApiKey.API_VERSIONS, version, client_software_name="wire-test", client_software_version="1.0")


def heartbeat_request(group_id: str, generation: int, member_id: str) -> Any:
    return request(ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=i32(generation), member_id=member_id)


def header(api_key: int, version: int, correlation_id: int = 7, client_id: str | None = BAD_CLIENT) -> bytes:
    """A request header v1 (the v2 header only adds a tagged-field byte)."""
    if client_id is None:
        return struct.pack(">hhih", api_key, version, correlation_id, -1)
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id.encode()


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def encoded_body(body: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


def encoded_request(body: Any, correlation_id: int = 7, client_id: str = BAD_CLIENT) -> bytes:
    header_cls = type(body).__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=i16(body.__api_key__),
            request_api_version=i16(body.__version__),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    return buffer.getvalue() + encoded_body(body)


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Polls until ``check()`` holds (the broker runs in this event loop, so it gets turns meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def group_state(server: BrokerServer) -> GroupState:
    return server.coordinator.groups[STEADY_GROUP].state


# -- fixtures -------------------------------------------------------------------------------------


@dataclass
class Steady:
    """A Stable one-member group, on its own connection, that bad input elsewhere must not touch."""

    server: BrokerServer
    client: WireClient
    member_id: str
    generation: int

    def snapshot(self) -> tuple[Any, ...]:
        coordinator = self.server.coordinator
        group = coordinator.groups[STEADY_GROUP]
        return (
            sorted(coordinator.groups),
            group.state,
            group.generation_id,
            group.leader_id,
            sorted(group.members),
            group.protocol_name,
            dict(group.offsets),
            {m.member_id: (m.assignment, m.is_awaiting_join) for m in group.members.values()},
        )

    async def assert_untouched(self, before: tuple[Any, ...]) -> None:
        assert self.snapshot() == before
        assert self.server.coordinator.groups[STEADY_GROUP].state is GroupState.STABLE
        beat = await self.client.call(heartbeat_request(STEADY_GROUP, self.generation, self.member_id))
        assert beat.error_code is E.none


async def form_steady_group(server: BrokerServer) -> Steady:
    client = await WireClient.connect(server.port, "steady-client")
    joined = await client.call(join_request(3, STEADY_GROUP))
    assert joined.error_code is E.none
    member, generation = joined.member_id, joined.generation_id
    assignment_cls = nested(load_request_schema(ApiKey.SYNC_GROUP, 3), "SyncGroupRequestAssignment")
    synced = await client.call(
        request(
            ApiKey.SYNC_GROUP,
            3,
            group_id=STEADY_GROUP,
            generation_id=i32(generation),
            member_id=member,
            group_instance_id=None,
            assignments=(build(assignment_cls, member_id=member, assignment=b"assigned"),),
        )
    )
    assert (synced.error_code, synced.assignment) == (E.none, b"assigned")
    committed = await client.call(
        request(
            ApiKey.OFFSET_COMMIT,
            3,
            group_id=STEADY_GROUP,
            generation_id_or_member_epoch=i32(generation),
            member_id=member,
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=(
                build(
                    nested(load_request_schema(ApiKey.OFFSET_COMMIT, 3), "OffsetCommitRequestTopic"),
                    name="topic",
                    partitions=(
                        build(
                            nested(load_request_schema(ApiKey.OFFSET_COMMIT, 3), "OffsetCommitRequestPartition"),
                            partition_index=i32(0),
                            committed_offset=123,
                            committed_metadata="m",
                        ),
                    ),
                ),
            ),
        )
    )
    assert committed.topics[0].partitions[0].error_code is E.none
    return Steady(server, client, member, generation)


@pytest.fixture
async def steady(server: BrokerServer) -> AsyncIterator[Steady]:
    group = await form_steady_group(server)
    yield group
    await group.client.close()


# -- the checks shared by every case ----------------------------------------------------------------


def closing_lines(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == "closing connection"]


async def assert_hung_up(
    server: BrokerServer,
    client: WireClient,
    logs: list[MutableMapping[str, Any]],
    *,
    client_id: str,
    reason: str,
) -> None:
    assert await client.closed_by_peer(), "the broker should close the connection"
    host, port = client.writer.get_extra_info("sockname")[:2]
    lines = [entry for entry in closing_lines(logs) if entry.get("peer") == f"{host}:{port}"]
    assert len(lines) == 1, logs
    (line,) = lines
    assert line["client_id"] == client_id
    assert reason in line["reason"], line
    assert line["log_level"] == "warning"
    # The connection is gone from the server's books.
    await eventually(lambda: all(c.peer != f"{host}:{port}" for c in server.connections))


async def assert_still_serving(server: BrokerServer) -> None:
    fresh = await WireClient.connect(server.port, "fresh")
    try:
        response = await fresh.call(api_versions_request())
        assert response.error_code is E.none
        assert {k.api_key for k in response.api_keys} == {key for key, _ in advertised_versions(share_groups=True)}
    finally:
        await fresh.close()


# -- cases ------------------------------------------------------------------------------------------------

# (name, bytes sent after one good ApiVersions request on the same connection, reason fragment)
FRAME_CASES: list[tuple[str, bytes, str]] = [
    ("negative size prefix", struct.pack(">i", -1), "negative frame size -1"),
    ("most negative size prefix", struct.pack(">i", -(2**31)) + b"\x00" * 16, "negative frame size"),
    ("http request", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "larger than socket.request.max.bytes"),
    ("tls hello", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 40, "larger than socket.request.max.bytes"),
    ("empty frame", sized(b""), "frame of 0 bytes is too short for a request header"),
    ("three byte frame", sized(b"\x00\x12\x00"), "frame of 3 bytes is too short for a request header"),
    ("seven byte frame", sized(b"\x00\x12\x00\x00\x00\x00\x00"), "frame of 7 bytes is too short"),
    ("header without client id", sized(struct.pack(">hhi", ApiKey.API_VERSIONS, 0, 1)), "does not decode"),
    ("client id past the end", sized(struct.pack(">hhih", ApiKey.HEARTBEAT, 0, 1, 50) + b"abc"), "does not decode"),
]


@pytest.mark.parametrize(("name", "data", "reason"), FRAME_CASES, ids=[c[0] for c in FRAME_CASES])
async def test_bad_frame_closes_the_connection(
    server: BrokerServer, steady: Steady, name: str, data: bytes, reason: str
) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        assert (await client.call(api_versions_request())).error_code is E.none  # the broker learns the client id
        await client.send_raw(data)
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason=reason)
        await client.close()
    await assert_still_serving(server)
    await steady.assert_untouched(before)


async def test_truncated_frame_then_close(server: BrokerServer, steady: Steady) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        assert (await client.call(api_versions_request())).error_code is E.none
        whole = sized(encoded_request(heartbeat_request(STEADY_GROUP, steady.generation, steady.member_id)))
        await client.send_raw(whole[: len(whole) - 5])
        await asyncio.sleep(0.05)
        assert closing_lines(logs) == []  # an incomplete frame is simply waited for ...
        client.writer.write_eof()  # ... until the peer closes
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason="incomplete")
        await client.close()
    await assert_still_serving(server)
    await steady.assert_untouched(before)


async def test_clean_close_is_not_an_error(server: BrokerServer) -> None:
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        assert (await client.call(api_versions_request())).error_code is E.none
        client.writer.write_eof()
        assert await client.closed_by_peer()
        await client.close()
    assert closing_lines(logs) == []
    await assert_still_serving(server)


# (name, one whole frame payload sent first on a new connection, client id in the log, reason fragment)
REQUEST_CASES: list[tuple[str, bytes, str, str]] = [
    ("unknown api key 999", header(999, 0) + b"\x00" * 8, BAD_CLIENT, "unsupported api key 999"),
    ("api key not served (LeaderAndIsr)", header(4, 4) + b"\x00" * 8, BAD_CLIENT, "unsupported api key 4"),
    ("negative api key", header(-5, 0), BAD_CLIENT, "unsupported api key -5"),
    ("garbage", b"\xff" * 24, "", "unsupported api key -1"),
    ("OffsetCommit v1", header(ApiKey.OFFSET_COMMIT, 1) + b"\x00\x01g", BAD_CLIENT, "OFFSET_COMMIT v1 is outside"),
    ("OffsetCommit v0", header(ApiKey.OFFSET_COMMIT, 0), BAD_CLIENT, "OFFSET_COMMIT v0 is outside"),
    ("OffsetFetch v0", header(ApiKey.OFFSET_FETCH, 0), BAD_CLIENT, "OFFSET_FETCH v0 is outside the supported range"),
    ("Heartbeat v99", header(ApiKey.HEARTBEAT, 99) + b"\x00", BAD_CLIENT, "HEARTBEAT v99 is outside"),
    ("Metadata v14", header(ApiKey.METADATA, 14) + b"\x00", BAD_CLIENT, "METADATA v14 is outside"),
    ("JoinGroup v-1", header(ApiKey.JOIN_GROUP, -1), BAD_CLIENT, "JOIN_GROUP v-1 is outside"),
    ("ApiVersions v-1", header(ApiKey.API_VERSIONS, -1), BAD_CLIENT, "API_VERSIONS v-1 is outside"),
    ("null client id", header(999, 0, client_id=None), "", "unsupported api key 999"),
]


@pytest.mark.parametrize(("name", "payload", "client_id", "reason"), REQUEST_CASES, ids=[c[0] for c in REQUEST_CASES])
async def test_bad_request_header_closes_the_connection(
    server: BrokerServer, steady: Steady, name: str, payload: bytes, client_id: str, reason: str
) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        await client.send_raw(sized(payload))
        await assert_hung_up(server, client, logs, client_id=client_id, reason=reason)
        await client.close()
    await assert_still_serving(server)
    await steady.assert_untouched(before)


def _bad_join_bodies() -> list[tuple[str, bytes]]:
    group = "never-created"
    v5 = encoded_request(join_request(5, group))
    v9 = encoded_request(join_request(9, group))
    v5_header = header(ApiKey.JOIN_GROUP, 5)
    return [
        # group id length says 1000 bytes, the frame holds 13
        ("string length past the end", v5_header + struct.pack(">h", 1000) + group.encode()),
        ("truncated v5 body", v5[:-6]),
        ("truncated v9 body", v9[:-3]),
        ("v5 body cut inside the protocols array", v5[: len(v5_header) + 2 + len(group) + 8 + 2 + 2 + 2]),
        # the protocols array claims 2**31-1 entries
        (
            "array length past the end",
            v5_header
            + struct.pack(">h", len(group))
            + group.encode()
            + struct.pack(">ii", 10_000, 10_000)
            + struct.pack(">h", 0)
            + struct.pack(">h", -1)
            + struct.pack(">h", 8)
            + b"consumer"
            + struct.pack(">i", 2**31 - 1),
        ),
        # a compact string length varint that never ends
        ("endless varint", header(ApiKey.JOIN_GROUP, 9) + b"\x00" + b"\xff" * 12),
        (
            "invalid utf-8 group id",
            v5_header + struct.pack(">h", 4) + b"\xff\xfe\xfd\xfc" + v5[len(v5_header) + 2 + len(group) :],
        ),
    ]


@pytest.mark.parametrize(("name", "payload"), _bad_join_bodies(), ids=[c[0] for c in _bad_join_bodies()])
async def test_body_that_does_not_decode_closes_the_connection(
    server: BrokerServer, steady: Steady, name: str, payload: bytes
) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        await client.send_raw(sized(payload))
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason="JOIN_GROUP")
        (line,) = closing_lines(logs)
        assert "does not decode" in line["reason"]
        await client.close()
    await assert_still_serving(server)
    await steady.assert_untouched(before)
    assert "never-created" not in server.coordinator.groups


async def test_requests_before_the_bad_bytes_are_answered_in_order(server: BrokerServer, steady: Steady) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        good = [
            (api_versions_request(), 1),
            (heartbeat_request(STEADY_GROUP, steady.generation, steady.member_id), 2),
            (api_versions_request(0), 3),
        ]
        # One write: three good requests, then a negative size prefix, then a request never read.
        await client.send_raw(
            b"".join(sized(encoded_request(body, correlation_id)) for body, correlation_id in good)
            + struct.pack(">i", -7)
            + sized(encoded_request(api_versions_request(), 4))
        )
        for body, correlation_id in good:
            answered, response = client.decode(body.__api_key__, body.__version__, await client.read_frame())
            assert (answered, response.error_code) == (correlation_id, E.none)
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason="negative frame size -7")
        await client.close()
    await assert_still_serving(server)
    await steady.assert_untouched(before)


async def test_bad_frame_behind_a_parked_join_waits_for_its_answer(server: BrokerServer, steady: Steady) -> None:
    """Kafka does not read a connection while a request is in flight: the parked JoinGroup is answered first."""
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        join = join_request(3, STEADY_GROUP)
        await client.send_raw(sized(encoded_request(join, 11)) + struct.pack(">i", -2))
        await eventually(lambda: group_state(server) is GroupState.PREPARING_REBALANCE)
        await asyncio.sleep(0.1)
        assert closing_lines(logs) == []
        # The leader rejoins, the join phase completes and the parked answer goes out; then the hang-up.
        rejoined = await steady.client.call(join_request(3, STEADY_GROUP, steady.member_id))
        assert (rejoined.error_code, rejoined.generation_id) == (E.none, steady.generation + 1)
        answered, joined = client.decode(ApiKey.JOIN_GROUP, 3, await client.read_frame())
        assert (answered, joined.error_code, joined.generation_id) == (11, E.none, steady.generation + 1)
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason="negative frame size -2")
        await client.close()
    await assert_still_serving(server)


async def test_truncated_frame_behind_a_parked_join_then_close(server: BrokerServer, steady: Steady) -> None:
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        whole = sized(encoded_request(api_versions_request(), 12))
        await client.send_raw(sized(encoded_request(join_request(3, STEADY_GROUP), 11)) + whole[:-4])
        client.writer.write_eof()
        await eventually(lambda: group_state(server) is GroupState.PREPARING_REBALANCE)
        await asyncio.sleep(0.1)
        assert closing_lines(logs) == []
        rejoined = await steady.client.call(join_request(3, STEADY_GROUP, steady.member_id))
        assert rejoined.error_code is E.none
        answered, joined = client.decode(ApiKey.JOIN_GROUP, 3, await client.read_frame())
        assert (answered, joined.error_code) == (11, E.none)
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason="incomplete")
        await client.close()


# -- socket.request.max.bytes ------------------------------------------------------------------------------

MAX_BYTES = 1024


@pytest.fixture
async def small_server() -> AsyncIterator[BrokerServer]:
    settings = broker_settings(socket_request_max_bytes=MAX_BYTES)
    broker = BrokerServer(settings)
    await broker.start()
    yield broker
    await broker.stop()


def padded_api_versions(size: int, correlation_id: int) -> bytes:
    """An ApiVersions v3 request of exactly ``size`` bytes (the client software name pads it)."""
    for length in range(size, 0, -1):  # the compact string's length varint grows with it
        body = request(ApiKey.API_VERSIONS, 3, client_software_name="a" * length, client_software_version="1.0")
        payload = encoded_request(body, correlation_id)
        if len(payload) == size:
            return sized(payload)
    raise AssertionError(f"no ApiVersions request of {size} bytes")


@pytest.mark.parametrize("oversize", [MAX_BYTES + 1, 2**31 - 1])
async def test_size_prefix_above_socket_request_max_bytes(small_server: BrokerServer, oversize: int) -> None:
    steady = await form_steady_group(small_server)
    try:
        before = steady.snapshot()
        with structlog.testing.capture_logs() as logs:
            client = await WireClient.connect(small_server.port, BAD_CLIENT)
            # Exactly at the limit is fine.
            await client.send_raw(padded_api_versions(MAX_BYTES, 5))
            answered, response = client.decode(ApiKey.API_VERSIONS, 3, await client.read_frame())
            assert (answered, response.error_code) == (5, E.none)
            # One byte more is refused as soon as the size prefix arrives, before any payload.
            await client.send_raw(struct.pack(">i", oversize))
            await assert_hung_up(
                small_server,
                client,
                logs,
                client_id=BAD_CLIENT,
                reason=f"frame size {oversize} is larger than socket.request.max.bytes ({MAX_BYTES})",
            )
            await client.close()
        await assert_still_serving(small_server)
        await steady.assert_untouched(before)
    finally:
        await steady.client.close()


async def test_bad_join_group_creates_no_group_and_other_connections_keep_going(server: BrokerServer) -> None:
    """A connection with a parked JoinGroup of its own is unaffected by another connection's bad bytes."""
    waiting = await WireClient.connect(server.port, "waiting")
    steady = await form_steady_group(server)
    try:
        await waiting.send_raw(waiting.encode(join_request(3, STEADY_GROUP), 77))
        await eventually(lambda: group_state(server) is GroupState.PREPARING_REBALANCE)
        with structlog.testing.capture_logs() as logs:
            bad = await WireClient.connect(server.port, BAD_CLIENT)
            await bad.send_raw(sized(_bad_join_bodies()[1][1]))
            await assert_hung_up(server, bad, logs, client_id=BAD_CLIENT, reason="does not decode")
            await bad.close()
        assert "never-created" not in server.coordinator.groups
        rejoined = await steady.client.call(join_request(3, STEADY_GROUP, steady.member_id))
        assert rejoined.error_code is E.none
        answered, joined = waiting.decode(ApiKey.JOIN_GROUP, 3, await waiting.read_frame())
        assert (answered, joined.error_code, joined.generation_id) == (77, E.none, steady.generation + 1)
    finally:
        await waiting.close()
        await steady.client.close()
