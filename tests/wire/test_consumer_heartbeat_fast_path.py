"""The steady ConsumerGroupHeartbeat takes the hand-written path (protocol/consumer_heartbeat.py) and answers the
same bytes as the generic kio path; anything else still goes the generic way."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.server.broker import BrokerServer
from tests.wire.client import Connect
from tests.wire.test_consumer_group_api import assigned, heartbeat, join

GROUP = "cg-fast"


def counting(server: BrokerServer) -> list[int]:
    """Count the heartbeats the full handler sees (the fast path never calls it)."""
    calls: list[int] = []
    full = server.coordinator.consumer_heartbeat

    def wrapped(request: Any) -> Any:
        calls.append(request.member_epoch)
        return full(request)

    server.coordinator.consumer_heartbeat = wrapped  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("version", [0, 1])
async def test_steady_beats_take_the_fast_path_with_the_generic_bytes(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    client = await connect()
    member = "Q7YTt/jmRy6R8wuUst3dqg" if version else ""
    joined = await client.call(join(version, f"{GROUP}-{version}", member))
    member = joined.member_id
    owned = {t: tuple(ps) for t, ps in (assigned(joined) or {}).items()}
    acked = await client.call(heartbeat(version, f"{GROUP}-{version}", member, joined.member_epoch, owned=owned))
    epoch = acked.member_epoch
    calls = counting(server)

    async def beat() -> bytes:
        await client.send_raw(client.encode(heartbeat(version, f"{GROUP}-{version}", member, epoch), 4242))
        return await client.read_frame()

    fast = await beat()
    assert calls == []  # answered by the fast path
    # Any armed fault rule sends every request the generic way; this one matches nothing.
    server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 1, "client_id": "nobody"})
    generic = await beat()
    assert calls == [epoch]
    assert fast == generic
    _, answer = client.decode(68, version, fast)
    assert (answer.error_code, answer.member_id, answer.member_epoch, answer.assignment) == (0, member, epoch, None)


async def test_a_beat_that_is_not_steady_is_handled_in_full(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    member = str(uuid.uuid4())
    joined = await client.call(join(1, GROUP, member))
    calls = counting(server)
    # Shaped like steady beats, but one names a stranger and one an epoch from the future: the full handler's errors.
    unknown = await client.call(heartbeat(1, GROUP, "someone-else", joined.member_epoch))
    assert unknown.error_code == 25  # UNKNOWN_MEMBER_ID
    wrong_epoch = await client.call(heartbeat(1, GROUP, member, joined.member_epoch + 5))
    assert wrong_epoch.error_code == 110  # FENCED_MEMBER_EPOCH
    assert calls == [joined.member_epoch, joined.member_epoch + 5]
