"""The steady ShareGroupHeartbeat takes the hand-written path (``decode_share_steady`` in
protocol/consumer_heartbeat.py, ``GroupCoordinator.share_heartbeat_steady``) and answers the same bytes as the
generic kio path over real connections; anything else, an armed fault rule, share groups off, or a node that does
not coordinate the group, still goes the generic way."""

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
from tests.conftest import broker_settings
from tests.wire.client import Connect, WireClient, request
from tests.wire.share_client import SHARE_GROUP_CONFIG, heartbeat, share_broker

E = ErrorCode
HB = ApiKey.SHARE_GROUP_HEARTBEAT
GROUP = "sg-fast"
MEMBER = "Q7YTt/jmRy6R8wuUst3dqg"  # librdkafka's: a standard base64 Uuid, 22 characters


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = share_broker()
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
def full_calls(server: BrokerServer) -> list[int]:
    """The epoch of every heartbeat the full handler sees (the fast path never calls it)."""
    calls: list[int] = []
    share = server.coordinator.share
    full = share.heartbeat

    def wrapped(beat: Any) -> Any:
        calls.append(beat.member_epoch)
        return full(beat)

    share.heartbeat = wrapped  # type: ignore[method-assign]
    return calls


@pytest.fixture
def generic_decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The api key of every frame kio decoded (the generic path's decoder, counted)."""
    calls: list[int] = []

    def counted(frame: bytes) -> Any:
        decoded = decode_request(frame)
        calls.append(decoded.api_key)
        return decoded

    monkeypatch.setattr(pipeline_module, "decode_request", counted)
    yield calls


def arm_generic(server: BrokerServer) -> None:
    # Any armed fault rule sends every request the generic way; this one matches nothing.
    server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 1, "client_id": "nobody"})


async def joined(client: WireClient, group: str = GROUP, member: str = MEMBER) -> int:
    answer = await client.call(heartbeat(group, member, 0, ("one",)))
    assert answer.error_code is E.none, answer
    return int(answer.member_epoch)


async def raw_beat(client: WireClient, group: str, member: str, epoch: int, correlation: int = 4242) -> bytes:
    await client.send_raw(client.encode(heartbeat(group, member, epoch), correlation))
    return await client.read_frame()


async def test_a_steady_beat_takes_the_fast_path_with_the_generic_bytes(
    server: BrokerServer, connect: Connect, full_calls: list[int], generic_decodes: list[int]
) -> None:
    client = await connect()
    epoch = await joined(client)
    full_calls.clear()
    generic_decodes.clear()
    fast = await raw_beat(client, GROUP, MEMBER, epoch)
    assert full_calls == [] and generic_decodes == []  # neither kio nor the full handler saw it
    arm_generic(server)
    generic = await raw_beat(client, GROUP, MEMBER, epoch)
    assert full_calls == [epoch] and generic_decodes == [HB]
    assert fast == generic
    correlation, answer = client.decode(HB, 1, fast)
    assert correlation == 4242
    assert (answer.error_code, answer.error_message, answer.member_id, answer.member_epoch, answer.assignment) == (
        E.none, None, MEMBER, epoch, None,
    )  # fmt: skip
    assert answer.heartbeat_interval.total_seconds() * 1000 == SHARE_GROUP_CONFIG.share_heartbeat_interval_ms


async def test_the_fast_path_moves_the_session_and_counts_its_answers(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    epoch = await joined(client)
    member = server.coordinator.share.groups.groups[GROUP].members[MEMBER]
    member.last_heartbeat_ms = 0
    counted = server.request_stats.by_api[(HB, 1)].count  # the join
    for correlation in range(3):
        await raw_beat(client, GROUP, MEMBER, epoch, correlation)
    assert member.last_heartbeat_ms > 0
    assert server.request_stats.by_api[(HB, 1)].count == counted + 3  # /metrics counts them as any other


async def test_beats_that_are_not_steady_are_handled_in_full_with_the_generic_bytes(
    server: BrokerServer, connect: Connect, full_calls: list[int]
) -> None:
    client = await connect()
    epoch = await joined(client)
    other = await connect("another-client")
    shaped_like_steady = [
        (client, "someone-else", epoch, E.unknown_member_id),
        (client, MEMBER, epoch + 5, E.fenced_member_epoch),
        (client, MEMBER, -2, E.invalid_request),
        (other, MEMBER, epoch, E.none),  # another client id: the full path stores it
    ]
    for sender, member, beat_epoch, error in shaped_like_steady:
        full_calls.clear()
        answer = await raw_beat(sender, GROUP, member, beat_epoch)
        assert full_calls == [beat_epoch]
        _, body = sender.decode(HB, 1, answer)
        assert body.error_code is error, (member, beat_epoch)
    # A full request (topics again, as after a coordinator change) and a rack: the full path, the assignment given.
    full_calls.clear()
    again = await other.call(heartbeat(GROUP, MEMBER, epoch, ("one",)))
    racked = await other.call(heartbeat(GROUP, MEMBER, epoch, rack="rack-1"))
    assert full_calls == [epoch, epoch]
    assert again.error_code is E.none and again.assignment is not None
    assert racked.error_code is E.none and racked.assignment is None
    full_calls.clear()
    await raw_beat(other, GROUP, MEMBER, epoch)  # now from the client the group knows: fast again
    assert full_calls == []


async def test_a_moved_group_answers_its_new_epoch_the_full_way_then_fast(
    server: BrokerServer, connect: Connect, full_calls: list[int]
) -> None:
    first, second = await connect("first"), await connect("second")
    epoch = await joined(first, member="m1")
    await joined(second, member="m2")  # the group epoch moves
    full_calls.clear()
    moved = await raw_beat(first, GROUP, "m1", epoch)
    assert full_calls == [epoch]
    _, body = first.decode(HB, 1, moved)
    assert body.error_code is E.none and body.member_epoch == epoch + 1 and body.assignment is None
    full_calls.clear()
    fast = await raw_beat(first, GROUP, "m1", epoch + 1)
    assert full_calls == []
    arm_generic(server)
    assert await raw_beat(first, GROUP, "m1", epoch + 1) == fast
    assert full_calls == [epoch + 1]


async def test_pipelined_steady_beats_keep_their_order_among_other_requests(
    server: BrokerServer, connect: Connect, full_calls: list[int]
) -> None:
    client = await connect()
    epochs = {member: await joined(client, member=member) for member in ("m1", "m2", "m3")}
    settle = {member: await client.call(heartbeat(GROUP, member, epoch)) for member, epoch in epochs.items()}
    epochs = {member: int(answer.member_epoch) for member, answer in settle.items()}
    full_calls.clear()
    data = b""
    sent: list[tuple[int, int, str]] = []
    for round_ in range(30):
        member = f"m{round_ % 3 + 1}"
        data += client.encode(heartbeat(GROUP, member, epochs[member]), 1000 + 2 * round_)
        sent.append((1000 + 2 * round_, HB, member))
        describe = request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=(GROUP,), include_authorized_operations=False)
        data += client.encode(describe, 1001 + 2 * round_)
        sent.append((1001 + 2 * round_, ApiKey.SHARE_GROUP_DESCRIBE, member))
    await client.send_raw(data)  # one write: the broker reads many frames at once and answers them in one write
    for correlation, api_key, member in sent:
        answered, body = client.decode(api_key, 1, await client.read_frame())
        assert answered == correlation
        if api_key == HB:
            assert (body.error_code, body.member_id, body.member_epoch) == (E.none, member, epochs[member])
        else:
            assert len(body.groups[0].members) == 3
    assert full_calls == []


async def test_with_share_groups_off_a_steady_shaped_beat_is_answered_unsupported_version() -> None:
    server = BrokerServer(broker_settings(group=GroupConfig(share_version=0), topics=(("one", 1),)))
    await server.start()
    try:
        client = await WireClient.connect(server.port, "off")
        fast = await raw_beat(client, GROUP, MEMBER, 3)
        arm_generic(server)
        assert await raw_beat(client, GROUP, MEMBER, 3) == fast
        _, body = client.decode(HB, 1, fast)
        assert body.error_code is E.unsupported_version
        await client.close()
    finally:
        await server.stop()


async def test_a_node_that_does_not_coordinate_the_group_answers_not_coordinator_the_generic_way() -> None:
    settings = broker_settings(group=SHARE_GROUP_CONFIG, topics=(("one", 1),), cluster=ClusterConfig(nodes=2))
    server = BrokerServer(settings)
    await server.start()
    try:
        coordinator = server.nodes.layout.group_coordinator(GROUP)
        ports = {settings.node_id + index: listener.port for index, listener in enumerate(server.listeners)}
        (elsewhere,) = [node for node in ports if node != coordinator]
        at_coordinator = await WireClient.connect(ports[coordinator], "c")
        at_other = await WireClient.connect(ports[elsewhere], "c")
        epoch = await joined(at_coordinator)
        calls: list[int] = []
        share = server.coordinator.share
        full = share.heartbeat
        share.heartbeat = lambda beat: calls.append(beat.member_epoch) or full(beat)  # type: ignore[method-assign]
        fast = await raw_beat(at_coordinator, GROUP, MEMBER, epoch)
        routed = await raw_beat(at_other, GROUP, MEMBER, epoch)
        assert calls == []  # neither reached the full handler: the other node answers before the coordinator
        assert at_coordinator.decode(HB, 1, fast)[1].error_code is E.none
        assert at_other.decode(HB, 1, routed)[1].error_code is E.not_coordinator
        arm_generic(server)
        assert await raw_beat(at_coordinator, GROUP, MEMBER, epoch) == fast
        assert await raw_beat(at_other, GROUP, MEMBER, epoch) == routed
        assert calls == [epoch]
        await at_coordinator.close()
        await at_other.close()
    finally:
        await server.stop()
