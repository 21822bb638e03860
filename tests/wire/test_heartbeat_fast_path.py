"""Heartbeats on the hand-decoded fast path, mixed with everything else on a real connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import Connect, request
from tests.wire.test_versions import heartbeat_request, join_request, stable_group, sync_request

E = ErrorCode


async def test_pipelined_heartbeats_of_every_version_keep_their_order_among_other_requests(
    server: BrokerServer, connect: Connect
) -> None:
    client = await connect()
    member, generation = await stable_group(client, "fast")
    sent: list[tuple[int, int, int]] = []  # (correlation id, api key, version)
    data = b""
    for round_ in range(40):
        version = round_ % 5
        correlation = 1000 + 2 * round_
        data += client.encode(heartbeat_request(version, "fast", generation, member), correlation)
        sent.append((correlation, ApiKey.HEARTBEAT, version))
        data += client.encode(
            request(ApiKey.DESCRIBE_GROUPS, 5, groups=("fast",), include_authorized_operations=False), correlation + 1
        )
        sent.append((correlation + 1, ApiKey.DESCRIBE_GROUPS, 5))
    await client.send_raw(data)  # one write: the broker reads many frames at once and answers them in one write
    for correlation, api_key, version in sent:
        answered, body = client.decode(api_key, version, await client.read_frame())
        assert answered == correlation
        if api_key == ApiKey.HEARTBEAT:
            assert body.error_code is E.none
        else:
            assert body.groups[0].group_state == "Stable"


async def test_fast_and_generic_paths_give_the_same_errors(server: BrokerServer, connect: Connect) -> None:
    """A group id of 127+ bytes has a multi-byte compact length, so v4 takes kio's path; the answers match."""
    client = await connect()
    long_group = "g" * 130
    for group_id in ("short", long_group):
        member, generation = await stable_group(client, group_id)
        for version in range(5):
            ok = await client.call(heartbeat_request(version, group_id, generation, member))
            stale = await client.call(heartbeat_request(version, group_id, generation + 1, member))
            unknown = await client.call(heartbeat_request(version, group_id, generation, "nobody"))
            assert (ok.error_code, stale.error_code, unknown.error_code) == (
                E.none,
                E.illegal_generation,
                E.unknown_member_id,
            ), (group_id, version)


async def test_answers_before_a_parked_join_are_not_held_back(server: BrokerServer, connect: Connect) -> None:
    """Answers are written once per pass over a connection's queue; a JoinGroup that parks flushes them first."""
    leader, follower = await connect("leader"), await connect("follower")
    member, generation = await stable_group(leader, "parked", instance_id="a")
    # The follower's static join starts a rebalance and parks; the leader's rejoin completes it.
    await follower.send_raw(follower.encode(join_request(9, "parked", instance_id="b"), 1))
    await eventually(lambda: group_state(server, "parked") == "PreparingRebalance")
    rejoined = await leader.call(join_request(9, "parked", member_id=member, instance_id="a"))
    _, joined = follower.decode(ApiKey.JOIN_GROUP, 9, await follower.read_frame())
    generation = rejoined.generation_id
    assignments = ((member, b""), (joined.member_id, b""))
    await leader.call(sync_request(5, "parked", generation, member, assignments, instance_id="a"))
    await follower.call(sync_request(5, "parked", generation, joined.member_id, instance_id="b"))

    # Now the leader heartbeats and rejoins in one write: the rejoin parks until the follower rejoins too.
    data = leader.encode(heartbeat_request(4, "parked", generation, member), 50)
    data += leader.encode(join_request(9, "parked", member_id=member, instance_id="a"), 51)
    await leader.send_raw(data)
    answered, body = leader.decode(ApiKey.HEARTBEAT, 4, await leader.read_frame(timeout=2.0))
    assert (answered, body.error_code) == (50, E.none)
    assert group_state(server, "parked") == "PreparingRebalance"  # the join behind it is still parked


def group_state(server: BrokerServer, group_id: str) -> str:
    return server.coordinator.describe(group_id).state


async def eventually(check: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_a_client_id_that_is_not_utf8_is_refused_on_the_fast_path_as_on_the_generic_one(
    server: BrokerServer, connect: Connect
) -> None:
    """The fast path answered this Heartbeat v4 (client id 0xab) while kio's reader refuses the same frame and the
    connection closes: a client must not see two brokers depending on how a frame is decoded. Found by the fuzzer."""
    good = await connect()
    member, generation = await stable_group(good, "utf8")
    hostile = await connect()
    await hostile.send_raw(bytes.fromhex("00000019000c0004000002ab0004000000fa0003000000000000010000"))
    assert await hostile.closed_by_peer()
    assert (await good.call(heartbeat_request(4, "utf8", generation, member))).error_code is E.none
