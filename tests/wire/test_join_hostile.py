"""Issue 14, defect 7 over real sockets: a JoinGroup listing one protocol name twice, and a coordinator step that
raises, never leave a group parked.

The reproducer is JoinGroup v3 listing ``range`` twice, sent as raw bytes. Before the fix its join phase raised in
protocol selection on the loop timer: the JoinGroup was never answered and the group sat in PreparingRebalance.
Now the first entry of each name is kept (as Kafka's readers of the keyed protocol list do), so the broker answers
it as the leader of generation 1 with ``range``; the LeaveGroup path to the same selection is answered too. If a
coordinator step raises anyway (forced here), the parked JoinGroup is answered UNKNOWN_SERVER_ERROR, the failure is
logged with the group and the operation, and the group takes new members. In every case the connection stays
open, another client's Stable group is untouched and the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.state import GroupState
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from protocol.codec import build, nested
from tests.wire.client import WireClient, request
from tests.wire.test_bad_input import join_request

E = ErrorCode
SESSION = datetime.timedelta(seconds=10)
HOSTILE = "hostile-client"
STEADY_GROUP = "steady"


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def join_v3_listing_range_twice(group_id: str, correlation_id: int = 7, client_id: str = HOSTILE) -> bytes:
    """The reproducer as raw bytes: JoinGroup v3 (header v1) whose protocols are ``range``, ``range``."""
    header = struct.pack(">hhi", ApiKey.JOIN_GROUP, 3, correlation_id) + string(client_id)
    body = (
        string(group_id)
        + struct.pack(">ii", 10_000, 10_000)  # session and rebalance timeouts
        + string("")  # member id
        + string("consumer")
        + struct.pack(">i", 2)
        + string("range")
        + struct.pack(">i", 5)
        + b"first"
        + string("range")
        + struct.pack(">i", 6)
        + b"second"
    )
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def sync_request(group_id: str, generation: int, member_id: str, assignments: dict[str, bytes]) -> Any:
    assignment_cls = nested(load_request_schema(ApiKey.SYNC_GROUP, 3), "SyncGroupRequestAssignment")
    return request(
        ApiKey.SYNC_GROUP,
        3,
        group_id=group_id,
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        assignments=tuple(build(assignment_cls, member_id=m, assignment=a) for m, a in assignments.items()),
    )


def heartbeat_request(group_id: str, generation: int, member_id: str) -> Any:
    return request(ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=i32(generation), member_id=member_id)


def leave_request(group_id: str, member_id: str) -> Any:
    member_cls = nested(load_request_schema(ApiKey.LEAVE_GROUP, 3), "MemberIdentity")
    return request(
        ApiKey.LEAVE_GROUP,
        3,
        group_id=group_id,
        members=(build(member_cls, member_id=member_id, group_instance_id=None),),
    )


async def call_raw(client: WireClient, frame: bytes, version: int, correlation_id: int = 7) -> Any:
    await client.send_raw(frame)
    answered, body = client.decode(ApiKey.JOIN_GROUP, version, await client.read_frame())
    assert answered == correlation_id
    return body


# -- a Stable group on another connection, which nothing here may touch ---------------------------------------------


@dataclass
class Steady:
    server: BrokerServer
    client: WireClient
    member_id: str
    generation: int

    def snapshot(self) -> tuple[Any, ...]:
        group = self.server.coordinator.groups[STEADY_GROUP]
        members = {m.member_id: (m.assignment, m.is_awaiting_join) for m in group.members.values()}
        return group.state, group.generation_id, group.leader_id, group.protocol_name, members, dict(group.offsets)

    async def assert_untouched(self, before: tuple[Any, ...]) -> None:
        assert self.snapshot() == before
        assert before[0] is GroupState.STABLE
        beat = await self.client.call(heartbeat_request(STEADY_GROUP, self.generation, self.member_id))
        assert beat.error_code is E.none


@pytest.fixture
async def steady(server: BrokerServer) -> AsyncIterator[Steady]:
    client = await WireClient.connect(server.port, "steady-client")
    joined = await client.call(join_request(3, STEADY_GROUP))
    assert joined.error_code is E.none
    synced = await client.call(
        sync_request(STEADY_GROUP, joined.generation_id, joined.member_id, {joined.member_id: b"a"})
    )
    assert synced.error_code is E.none
    yield Steady(server, client, joined.member_id, joined.generation_id)
    await client.close()


async def assert_still_serving(server: BrokerServer) -> None:
    fresh = await WireClient.connect(server.port, "fresh")
    try:
        response = await fresh.call(
            request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        )
        assert response.error_code is E.none
    finally:
        await fresh.close()


def lines(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["event"].startswith(event)]


# -- the cases -------------------------------------------------------------------------------------------------------


async def test_join_v3_listing_range_twice_is_answered_as_a_member_of_generation_one(
    server: BrokerServer, steady: Steady
) -> None:
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, HOSTILE)
        joined = await call_raw(client, join_v3_listing_range_twice("hostile"), 3)
        assert joined.error_code is E.none
        assert (joined.generation_id, joined.protocol_name, joined.leader) == (1, "range", joined.member_id)
        assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"first")]
        synced = await client.call(sync_request("hostile", 1, joined.member_id, {joined.member_id: b"x"}))
        assert (synced.error_code, synced.assignment) == (E.none, b"x")
        assert server.coordinator.groups["hostile"].state is GroupState.STABLE
        assert not client.reader.at_eof()  # answered, not hung up on
        await client.close()
    (note,) = lines(logs, "join lists a protocol name more than once")
    assert (note["group_id"], note["client_id"], note["protocols"]) == ("hostile", HOSTILE, ["range", "range"])
    assert note["client_host"].startswith("/127.0.0.1")
    assert lines(logs, "group operation failed") == [] and lines(logs, "timer action failed") == []
    assert server.purgatory.failures == 0
    await assert_still_serving(server)
    await steady.assert_untouched(before)


async def test_a_leave_that_ends_the_join_phase_answers_the_member_listing_range_twice(
    server: BrokerServer, steady: Steady
) -> None:
    """LeaveGroup reaches protocol selection: one member rejoins listing ``range`` twice, the other leaves."""
    before = steady.snapshot()
    group = "leaving"
    first, second = await WireClient.connect(server.port, "first"), await WireClient.connect(server.port, "second")
    try:
        joins = await asyncio.gather(first.call(join_request(3, group)), second.call(join_request(3, group)))
        leader = joins[0].leader
        syncs = [
            client.call(sync_request(group, 1, joined.member_id, {j.member_id: b"p" for j in joins}))
            for client, joined in zip((first, second), joins, strict=True)
        ]
        assert {s.error_code for s in await asyncio.gather(*syncs)} == {E.none}
        stay, go = (second, first) if joins[0].member_id == leader else (first, second)
        stay_id = next(j.member_id for j in joins if j.member_id != leader)
        rejoin = asyncio.ensure_future(call_raw(stay, rejoin_listing_range_twice(group, stay_id), 3, correlation_id=9))
        await asyncio.sleep(0.05)
        assert not rejoin.done()  # parked until the leader rejoins or leaves
        left = await go.call(leave_request(group, leader))
        assert left.error_code is E.none and left.members[0].error_code is E.none
        result = await asyncio.wait_for(rejoin, 5)
        assert (result.error_code, result.generation_id, result.protocol_name, result.leader) == (
            E.none,
            2,
            "range",
            stay_id,
        )
    finally:
        await first.close()
        await second.close()
    assert server.coordinator.failed_operations == 0
    await assert_still_serving(server)
    await steady.assert_untouched(before)


def rejoin_listing_range_twice(group_id: str, member_id: str) -> bytes:
    """JoinGroup v3 from a known member, listing ``range`` twice (raw bytes, correlation id 9)."""
    frame = join_v3_listing_range_twice(group_id, correlation_id=9, client_id="rejoiner")
    fresh, known = string(""), string(member_id)
    marker = string(group_id) + struct.pack(">ii", 10_000, 10_000)
    at = frame.index(marker) + len(marker)
    assert frame[at : at + len(fresh)] == fresh
    payload = frame[4:at] + known + frame[at + len(fresh) :]
    return struct.pack(">i", len(payload)) + payload


async def test_a_coordinator_step_that_raises_answers_the_parked_join(
    server: BrokerServer, steady: Steady, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever else raises in the join phase on the loop timer: answered UNKNOWN_SERVER_ERROR, never parked."""
    before = steady.snapshot()
    original = ClassicGroup.select_protocol

    def broken(group: ClassicGroup, members: Any = None) -> str:
        if group.group_id == "broken":
            raise RuntimeError("forced failure")
        return original(group, members)

    monkeypatch.setattr(ClassicGroup, "select_protocol", broken)
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, HOSTILE)
        joined = await client.call(join_request(3, "broken"))
        assert joined.error_code is E.unknown_server_error
        assert server.coordinator.groups["broken"].state is GroupState.EMPTY
        monkeypatch.setattr(ClassicGroup, "select_protocol", original)
        again = await client.call(join_request(3, "broken"))  # the same connection goes on
        assert (again.error_code, again.generation_id > 1, again.protocol_name) == (E.none, True, "range")
        await client.close()
    (line,) = lines(logs, "group operation failed")
    assert (line["group_id"], line["operation"], line["log_level"]) == (
        "broken",
        "the initial rebalance delay",
        "error",
    )
    await assert_still_serving(server)
    await steady.assert_untouched(before)
