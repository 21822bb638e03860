"""ShareFetch (78) and ShareAcknowledge (79) through a running broker over TCP: share sessions, acquisition,
acknowledgements, locks and delivery counts (docs/spec/share-groups.md sections 6-9, checklist items 4, 23-50).

Locks run on the broker's real clock here (a 1 s lock): these are the wire-level checks; the timer rules are also
tested on the manual clock in tests/coordinator/share/.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient
from tests.wire.share_client import (
    LOCK_MS,
    acquired,
    heartbeat,
    offsets_of,
    partition_of,
    set_group_config,
    share_acknowledge,
    share_broker,
    share_fetch,
)
from tests.wire.test_data_plane import produce_request

E = ErrorCode
ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = share_broker()
    await broker.start()
    yield broker
    await broker.stop()


def topic_id(server: BrokerServer, name: str = "one") -> Any:
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def produce(client: WireClient, count: int, topic: str = "one", partition: int = 0) -> None:
    answer = await client.call(produce_request(11, [(partition, make_batch(count))], topic=topic))
    assert answer.responses[0].partition_responses[0].error_code is E.none


async def test_fetch_acquires_and_accept_finishes(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    tid = topic_id(server)
    join = await client.call(heartbeat("g", "m1", 0, ("one",)))
    assert join.error_code is E.none and join.member_epoch == 1
    assert [(t.topic_id, list(t.partitions)) for t in join.assignment.topic_partitions] == [(tid, [0])]
    answer = await set_group_config(client, "g", share_auto_offset_reset="earliest")
    assert answer.responses[0].error_code is E.none, answer
    await produce(client, 5)
    first = await client.call(share_fetch("g", "m1", 0, tid, [0]))
    assert first.error_code is E.none
    assert first.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
    assert acquired(first) == [(0, 4, 1)]
    assert partition_of(first).records
    second = await client.call(share_fetch("g", "m1", 1, tid, [], acks={0: [(0, 4, (ACCEPT,))]}))
    assert second.error_code is E.none
    entry = partition_of(second)
    assert entry.acknowledge_error_code == 0 and acquired(second) == []
    share = server.coordinator.share.partitions.get(("g", tid, 0))
    assert share is not None and share.start_offset == 5 and share.in_flight() == 0


async def test_latest_by_default_skips_what_was_there(server: BrokerServer, connect: Connect) -> None:
    """Checklist 29: share.auto.offset.reset latest: records before the first fetch are never delivered."""
    client = await connect()
    tid = topic_id(server)
    await produce(client, 3)
    first = await client.call(share_fetch("g", "m1", 0, tid, [0]))
    assert acquired(first) == []
    await produce(client, 2)
    second = await client.call(share_fetch("g", "m1", 1, tid, []))
    assert acquired(second) == [(3, 4, 1)]


async def test_two_members_never_hold_the_same_offset(server: BrokerServer, connect: Connect) -> None:
    """Checklist 31 and 46: records spread over both; acknowledging another's record is INVALID_RECORD_STATE."""
    a, b = await connect(), await connect()
    tid = topic_id(server)
    await set_group_config(a, "g", share_auto_offset_reset="earliest")
    await produce(a, 3)
    await produce(a, 3)
    got_a = await a.call(share_fetch("g", "a", 0, tid, [0], max_records=1))
    got_b = await b.call(share_fetch("g", "b", 0, tid, [0], max_records=1))
    assert offsets_of(got_a) == [0, 1, 2]  # batch-optimized: the whole produced batch
    assert offsets_of(got_b) == [3, 4, 5]
    wrong = await a.call(share_fetch("g", "a", 1, tid, [], acks={0: [(3, 3, (ACCEPT,))]}, max_records=0))
    assert partition_of(wrong).acknowledge_error_code == E.invalid_record_state.value


async def test_release_is_redelivered_in_the_same_answer(server: BrokerServer, connect: Connect) -> None:
    """Checklist 44 and 36: a RELEASE applied before fetching; delivery counts 1..5 then archived."""
    client = await connect()
    tid = topic_id(server)
    await set_group_config(client, "g", share_auto_offset_reset="earliest")
    await produce(client, 1)
    answer = await client.call(share_fetch("g", "m", 0, tid, [0]))
    counts = [acquired(answer)[0][2]]
    epoch = 1
    for _ in range(5):
        answer = await client.call(share_fetch("g", "m", epoch, tid, [], acks={0: [(0, 0, (RELEASE,))]}))
        epoch += 1
        assert partition_of(answer).acknowledge_error_code == 0
        counts += [c for _, _, c in acquired(answer)]
    assert counts == [1, 2, 3, 4, 5]
    share = server.coordinator.share.partitions.get(("g", tid, 0))
    assert share is not None and share.start_offset == 1  # archived at the limit


async def test_lock_expiry_makes_records_available_with_count_plus_one(server: BrokerServer, connect: Connect) -> None:
    """Checklist 34."""
    a, b = await connect(), await connect()
    tid = topic_id(server)
    await set_group_config(a, "g", share_auto_offset_reset="earliest")
    await produce(a, 2)
    assert acquired(await a.call(share_fetch("g", "a", 0, tid, [0]))) == [(0, 1, 1)]
    assert acquired(await b.call(share_fetch("g", "b", 0, tid, [0]))) == []
    waited = await b.call(share_fetch("g", "b", 1, tid, [], max_wait_ms=LOCK_MS * 3), timeout=LOCK_MS * 4 / 1000)
    assert acquired(waited) == [(0, 1, 2)]


async def test_closed_connection_releases_at_once(server: BrokerServer, connect: Connect) -> None:
    """Checklist 28."""
    a, b = await connect(), await connect()
    tid = topic_id(server)
    await set_group_config(a, "g", share_auto_offset_reset="earliest")
    await produce(a, 2)
    assert offsets_of(await a.call(share_fetch("g", "a", 0, tid, [0]))) == [0, 1]
    await a.close()
    await asyncio.sleep(0.1)
    assert acquired(await b.call(share_fetch("g", "b", 0, tid, [0]))) == [(0, 1, 2)]


async def test_session_epochs(server: BrokerServer, connect: Connect) -> None:
    """Checklist 23-26."""
    client = await connect()
    tid = topic_id(server)
    with_acks = await client.call(share_fetch("g", "m", 0, tid, [0], acks={0: [(0, 0, (ACCEPT,))]}))
    assert with_acks.error_code is E.invalid_request
    assert (await client.call(share_fetch("g", "m", 1, tid, [0]))).error_code is E.share_session_not_found
    assert (await client.call(share_fetch("g", "m", 0, tid, [0]))).error_code is E.none
    assert (await client.call(share_fetch("g", "m", 3, tid, []))).error_code is E.invalid_share_session_epoch
    assert (await client.call(share_fetch("g", "m", 1, tid, []))).error_code is E.none
    assert (await client.call(share_fetch("g", "m", 2, tid, []))).error_code is E.none
    assert (await client.call(share_acknowledge("g", "m", 0, tid, {}))).error_code is E.invalid_share_session_epoch
    assert (await client.call(share_acknowledge("g", "m", 3, tid, {}))).error_code is E.none
    assert (await client.call(share_fetch("g", "m", -1, tid, []))).error_code is E.none
    assert (await client.call(share_fetch("g", "m", -1, tid, []))).error_code is E.share_session_not_found
    assert (await client.call(share_acknowledge("g", "m", -1, tid, {}))).error_code is E.share_session_not_found


async def test_bad_batches_are_invalid_request_per_partition(server: BrokerServer, connect: Connect) -> None:
    """Checklist 48."""
    client = await connect()
    tid = topic_id(server)
    await set_group_config(client, "g", share_auto_offset_reset="earliest")
    await produce(client, 4)
    await client.call(share_fetch("g", "m", 0, tid, [0]))
    bad = [
        [(2, 1, (ACCEPT,))],
        [(0, 1, (ACCEPT,)), (1, 2, (ACCEPT,))],
        [(0, 1, ())],
        [(0, 2, (ACCEPT, ACCEPT))],
        [(0, 0, (RENEW,))],
        [(0, 0, (9,))],
    ]
    epoch = 1
    for batches in bad:
        answer = await client.call(share_fetch("g", "m", epoch, tid, [], acks={0: batches}, max_records=0))
        epoch += 1
        assert partition_of(answer).acknowledge_error_code == E.invalid_request.value, batches


async def test_renew_restarts_the_lock(server: BrokerServer, connect: Connect) -> None:
    """Checklist 38 (v2)."""
    a, b = await connect(), await connect()
    tid = topic_id(server)
    await set_group_config(a, "g", share_auto_offset_reset="earliest")
    await produce(a, 1)
    assert acquired(await a.call(share_fetch("g", "a", 0, tid, [0], version=2))) == [(0, 0, 1)]
    renew_fetching = share_fetch("g", "a", 1, tid, [], acks={0: [(0, 0, (RENEW,))]}, version=2, renew=True)
    assert (await a.call(renew_fetching)).error_code is E.invalid_request  # MaxRecords > 0 with IsRenewAck
    await asyncio.sleep(LOCK_MS * 0.7 / 1000)
    renew = share_fetch("g", "a", 1, tid, [], acks={0: [(0, 0, (RENEW,))]}, version=2, renew=True, max_records=0,
                        max_bytes=0, min_bytes=0)  # fmt: skip
    answer = await a.call(renew)
    assert answer.error_code is E.none and partition_of(answer).acknowledge_error_code == 0, answer
    await asyncio.sleep(LOCK_MS * 0.6 / 1000)  # past the first lock, inside the renewed one
    assert acquired(await b.call(share_fetch("g", "b", 0, tid, [0]))) == []
