"""The Heartbeat fast path's memo of decoded frames (``RequestPipeline._remember``), and its cost, on a real connection.

A member's Heartbeats differ only in the correlation id until its generation changes, so a connection keeps what
each frame (from the client id on) decoded to. The memo holds decoding only: every Heartbeat is still answered by
the coordinator. The cost guard counts Python calls per Heartbeat (deterministic, unlike a timing), so a change
that puts the hot path back on kio, or back to decoding every frame, fails here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

from kio.schema.errors import ErrorCode

import broker
import protocol
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import Connect, WireClient
from tests.wire.test_versions import heartbeat_request, leave_request, stable_group

E = ErrorCode
OURS = (str(Path(broker.__file__).parent), str(Path(protocol.__file__).parent))


async def pipelined(client: WireClient, frames: list[tuple[int, Any]], first: int = 100) -> list[Any]:
    """Send every (version, request) in one write; the answers' bodies, in order, correlation ids checked."""
    data = b"".join(client.encode(body, first + n) for n, (_, body) in enumerate(frames))
    await client.send_raw(data)
    answers = []
    for n, (version, _) in enumerate(frames):
        correlation, answer = client.decode(ApiKey.HEARTBEAT, version, await client.read_frame())
        assert correlation == first + n
        answers.append(answer)
    return answers


async def test_remembered_heartbeats_are_still_answered_by_the_coordinator(
    server: BrokerServer, connect: Connect
) -> None:
    client = await connect()
    member, generation = await stable_group(client, "memo")
    beat = heartbeat_request(4, "memo", generation, member)
    assert [a.error_code for a in await pipelined(client, [(4, beat)] * 5)] == [E.none] * 5
    # The same bytes once the member has left: the memo decodes them, the coordinator no longer knows the member.
    left = await client.call(leave_request(4, "memo", member))
    assert left.error_code is E.none
    assert [a.error_code for a in await pipelined(client, [(4, beat)] * 3)] == [E.unknown_member_id] * 3


async def test_the_same_body_under_another_version_is_answered_in_that_version(
    server: BrokerServer, connect: Connect
) -> None:
    """Heartbeat v0, v1 and v2 have the same body bytes: only the version (byte 3) tells them apart, and the
    answers differ (v0 has no throttle time), so the memo must not answer one version's frame as another's."""
    client = await connect()
    member, generation = await stable_group(client, "versions")
    frames = [(v, heartbeat_request(v, "versions", generation, member)) for v in (0, 1, 2, 0, 2, 1, 1, 0)]
    assert [a.error_code for a in await pipelined(client, frames)] == [E.none] * len(frames)


async def test_a_new_generation_is_a_new_frame(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    member, generation = await stable_group(client, "generations")
    frames = [(4, heartbeat_request(4, "generations", g, member)) for g in (generation, generation + 1, generation)]
    answers = await pipelined(client, frames * 2)
    assert [a.error_code for a in answers] == [E.none, E.illegal_generation, E.none] * 2


async def test_many_members_on_one_connection_outgrow_the_memo(server: BrokerServer, connect: Connect) -> None:
    """A load generator cycling through more members than the memo holds: the memo is dropped (every frame is
    decoded again, as before it) and every answer stays right."""
    client = await connect()
    members = [await stable_group(client, f"many-{n}") for n in range(80)]
    frames = [(4, heartbeat_request(4, f"many-{n}", g, m)) for n, (m, g) in enumerate(members)]
    stale = [(4, heartbeat_request(4, f"many-{n}", g + 1, m)) for n, (m, g) in enumerate(members)]
    for _ in range(3):
        assert {a.error_code for a in await pipelined(client, frames)} == {E.none}
        assert {a.error_code for a in await pipelined(client, stale)} == {E.illegal_generation}
    assert [c.pipeline._beats for c in server.connections] == [None]  # 80 members, 64 remembered: it did not pay


async def test_python_calls_per_heartbeat_stay_under_a_ceiling(server: BrokerServer, connect: Connect) -> None:
    """Calls into the broker's own Python code (broker/, protocol/) while 400 pipelined Heartbeats of one member are
    answered. Today: the coordinator's heartbeat and the session extension under it, and the answer's encoding,
    about six per Heartbeat; decoding once for the member. The generic kio path costs several tens."""
    client = await connect()
    member, generation = await stable_group(client, "ceiling")
    beats = [(4, heartbeat_request(4, "ceiling", generation, member))] * 400
    await pipelined(client, beats[:1])  # the member's frame is now known to the connection
    calls: dict[str, int] = {}

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(OURS):
            name = frame.f_code.co_name
            calls[name] = calls.get(name, 0) + 1

    sys.setprofile(count)
    try:
        answers = await pipelined(client, beats)
    finally:
        sys.setprofile(None)
    assert {a.error_code for a in answers} == {E.none}
    assert calls.get("decode_heartbeat", 0) == 0, calls  # every frame was remembered
    assert sum(calls.values()) <= 8 * len(beats), calls
