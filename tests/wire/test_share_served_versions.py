"""Every served version of the share-group APIs over TCP, with a valid request and the answer's shape checked
(checklist items 1-4 of the KIP-932 spec, section 2): ShareGroupHeartbeat v1, ShareGroupDescribe v1, ShareFetch v1-2,
ShareAcknowledge v1-2, DescribeShareGroupOffsets v0-1, AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0.

``WireClient.decode`` reads each answer with kio at the request's version and fails on trailing bytes, so a field
the version does not have (or lacks) would break the decode: the shape is checked by the decode, the values here.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.groups import ALL_GROUP_OPERATIONS
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient, request
from tests.wire.share_client import (
    LOCK_MS,
    acquired,
    alter_offsets,
    delete_offsets,
    describe_offsets,
    heartbeat,
    offsets_by_partition,
    partition_of,
    set_group_config,
    share_acknowledge,
    share_broker,
    share_describe,
    share_fetch,
)
from tests.wire.test_data_plane import produce_request

E = ErrorCode
ACCEPT, RELEASE, RENEW = 1, 2, 4
NO_OPERATIONS = -(2**31)
INTERVAL = datetime.timedelta(milliseconds=1000)
LOCK = datetime.timedelta(milliseconds=LOCK_MS)
SHARE_APIS = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    broker = share_broker()
    await broker.start()
    yield broker
    await broker.stop()


def topic_id(server: BrokerServer, name: str = "one") -> uuid.UUID:
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def produce(client: WireClient, count: int, topic: str = "one", partition: int = 0) -> None:
    answer = await client.call(produce_request(11, [(partition, make_batch(count))], topic=topic))
    assert answer.responses[0].partition_responses[0].error_code is E.none


async def member_with_records(client: WireClient, group: str = "g", member: str = "m1", count: int = 3) -> None:
    """``member`` joined ``group`` (earliest), ``count`` records produced to ``one``."""
    joined = await client.call(heartbeat(group, member, 0, ("one",)))
    assert joined.error_code is E.none
    assert (await set_group_config(client, group, share_auto_offset_reset="earliest")).responses[0].error_code is E.none
    await produce(client, count)


# -- item 1: ApiVersions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3])
async def test_api_versions_lists_the_share_apis(connect: Connect, version: int) -> None:
    """Item 1: 76 (1-1), 77 (1-1), 78 (1-2), 79 (1-2), 90 (0-1), 91 (0-0), 92 (0-0); no share-coordinator RPCs."""
    client = await connect()
    fields: dict[str, Any] = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    answer = await client.call(request(ApiKey.API_VERSIONS, version, **fields))
    listed = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert {key: listed.get(key) for key in SHARE_APIS} == SHARE_APIS
    assert not {83, 84, 85, 86, 87} & set(listed)


# -- ShareGroupHeartbeat v1 (item 3) ----------------------------------------------------------------------------


async def test_share_group_heartbeat_v1(server: BrokerServer, connect: Connect) -> None:
    """A join answers the whole assignment; a quiet heartbeat a null one (marker -1); a leave epoch -1, interval 0."""
    client = await connect()
    joined = await client.call(heartbeat("g", "m1", 0, ("topic", "one"), rack="r1"))
    assert (joined.error_code, joined.error_message, joined.member_id, joined.member_epoch) == (E.none, None, "m1", 1)
    assert joined.heartbeat_interval == INTERVAL and joined.throttle_time == datetime.timedelta(0)
    assert {(t.topic_id, tuple(t.partitions)) for t in joined.assignment.topic_partitions} == {
        (topic_id(server, "topic"), (0, 1, 2)), (topic_id(server, "one"), (0,)),
    }  # fmt: skip
    quiet = await client.call(heartbeat("g", "m1", 1))
    assert quiet.error_code is E.none and quiet.assignment is None
    left = await client.call(heartbeat("g", "m1", -1))
    assert (left.error_code, left.member_epoch, left.heartbeat_interval, left.assignment) == (
        E.none, -1, datetime.timedelta(0), None,
    )  # fmt: skip


async def test_share_group_heartbeat_assignment_markers_on_the_wire(connect: Connect) -> None:
    """Item 3: the encoded answer ends with the Assignment: -1 (null), or 1 + an empty compact array (0x01) + the
    struct's empty tagged fields, then the response's own tagged fields."""
    client = await connect()
    join = heartbeat("g", "m1", 0, ("nothing-here",))
    await client.send_raw(client.encode(join, 41))
    frame = await client.read_frame()
    assert frame[-4:] == b"\x01\x01\x00\x00"  # present, zero topics, struct tags, response tags
    _, body = client.decode(76, 1, frame)
    assert body.assignment is not None and body.assignment.topic_partitions == ()
    await client.send_raw(client.encode(heartbeat("g", "m1", 1), 42))
    frame = await client.read_frame()
    assert frame[-2:] == b"\xff\x00"  # null marker, then the response's tagged fields
    assert struct.unpack(">i", frame[:4])[0] == 42


# -- ShareGroupDescribe v1 -------------------------------------------------------------------------------------------


async def test_share_group_describe_v1(server: BrokerServer, connect: Connect) -> None:
    client = await connect("describer")
    await client.call(heartbeat("g", "m1", 0, ("one", "topic"), rack="r1"))
    answer = await client.call(share_describe("g", "nobody", "", operations=True))
    assert [g.group_id for g in answer.groups] == ["g", "nobody", ""]
    found, unknown, empty = answer.groups
    assert (found.error_code, found.error_message, found.group_state) == (E.none, None, "Stable")
    assert (found.group_epoch, found.assignment_epoch, found.assignor_name) == (1, 1, "simple")
    assert found.authorized_operations == ALL_GROUP_OPERATIONS
    (member,) = found.members
    assert (member.member_id, member.rack_id, member.member_epoch) == ("m1", "r1", 1)
    assert (member.client_id, member.client_host) == ("describer", "/127.0.0.1")
    assert tuple(member.subscribed_topic_names) == ("one", "topic")
    assert {(t.topic_id, t.topic_name, tuple(t.partitions)) for t in member.assignment.topic_partitions} == {
        (topic_id(server, "one"), "one", (0,)), (topic_id(server, "topic"), "topic", (0, 1, 2)),
    }  # fmt: skip
    assert (unknown.error_code, unknown.members, unknown.authorized_operations) == (
        E.group_id_not_found, (), NO_OPERATIONS,
    )  # fmt: skip
    assert empty.error_code is E.invalid_group_id
    plain = await client.call(share_describe("g"))
    assert plain.groups[0].authorized_operations == NO_OPERATIONS


# -- ShareFetch v1-2 and ShareAcknowledge v1-2 (item 4) -----------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_share_fetch(server: BrokerServer, connect: Connect, version: int) -> None:
    """SF(0) acquires with Records and AcquiredRecords; SF(1) carries an acknowledgement (AcknowledgeErrorCode 0)
    and acquires nothing new; every answer carries AcquisitionLockTimeoutMs (item 4), CurrentLeader -1/-1."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client)
    first = await client.call(share_fetch("g", "m1", 0, tid, [0], version=version))
    assert (first.error_code, first.error_message, first.acquisition_lock_timeout) == (E.none, None, LOCK)
    assert [t.topic_id for t in first.responses] == [tid] and first.node_endpoints == ()
    entry = partition_of(first)
    assert (entry.error_code, entry.acknowledge_error_code) == (E.none, 0)
    assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == (-1, -1)
    assert entry.records and acquired(first) == [(0, 2, 1)]
    second = await client.call(share_fetch("g", "m1", 1, tid, [], acks={0: [(0, 2, (ACCEPT,))]}, version=version))
    assert second.acquisition_lock_timeout == LOCK and acquired(second) == []
    assert partition_of(second).acknowledge_error_code == 0
    empty = await client.call(share_fetch("g", "m1", 2, tid, [], version=version))
    assert (empty.error_code, empty.responses, empty.acquisition_lock_timeout) == (E.none, (), LOCK)


async def test_share_fetch_v2_record_limit_and_renew(server: BrokerServer, connect: Connect) -> None:
    """v2 ShareAcquireMode 1 takes exactly MaxRecords; IsRenewAck with RENEW answers NONE and fetches nothing."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client, count=5)
    limited = await client.call(share_fetch("g", "m1", 0, tid, [0], version=2, max_records=2, acquire_mode=1))
    assert acquired(limited) == [(0, 1, 1)]
    renew = share_fetch("g", "m1", 1, tid, [], acks={0: [(0, 1, (RENEW,))]}, version=2, renew=True,
                        max_records=0, max_bytes=0, min_bytes=0)  # fmt: skip
    renewed = await client.call(renew)
    assert renewed.error_code is E.none and partition_of(renewed).acknowledge_error_code == 0
    assert acquired(renewed) == []


@pytest.mark.parametrize("version", [1, 2])
async def test_share_acknowledge(server: BrokerServer, connect: Connect, version: int) -> None:
    """ShareAcknowledge answers each partition's ErrorCode; v2 adds AcquisitionLockTimeoutMs (the decode checks v1
    has none)."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client)
    await client.call(share_fetch("g", "m1", 0, tid, [0], version=version))
    answer = await client.call(share_acknowledge("g", "m1", 1, tid, {0: [(0, 1, (ACCEPT,))]}, version=version))
    assert (answer.error_code, answer.error_message) == (E.none, None)
    (topic,) = answer.responses
    assert topic.topic_id == tid
    ((partition),) = topic.partitions
    assert (partition.partition_index, partition.error_code, partition.error_message) == (0, E.none, None)
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (-1, -1)
    if version >= 2:
        assert answer.acquisition_lock_timeout == LOCK
    else:
        assert not hasattr(answer, "acquisition_lock_timeout")
    final = await client.call(share_acknowledge("g", "m1", -1, tid, {0: [(2, 2, (RELEASE,))]}, version=version))
    assert final.error_code is E.none and final.responses[0].partitions[0].error_code is E.none
    share = server.coordinator.share.partitions.get(("g", tid, 0))
    assert share is not None and share.start_offset == 2 and share.records[2].delivery_count == 1


# -- the offsets admin APIs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_share_group_offsets(server: BrokerServer, connect: Connect, version: int) -> None:
    """StartOffset follows the acknowledgements; v1 adds Lag (end - SPSO - finished above it); unknown topics and
    partitions without state answer -1; Topics null lists every initialised partition."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client, count=4)
    await client.call(share_fetch("g", "m1", 0, tid, [0]))
    await client.call(share_acknowledge("g", "m1", 1, tid, {0: [(0, 0, (ACCEPT,)), (2, 2, (ACCEPT,))]}))
    answer = await client.call(describe_offsets("g", {"one": [0], "topic": [1], "missing": [0]}, version=version))
    (group,) = answer.groups
    assert (group.group_id, group.error_code, group.error_message) == ("g", E.none, None)
    lag = 2 if version >= 1 else None  # end 4 - SPSO 1 - one finished above it (2)
    assert offsets_by_partition(answer, "one") == {0: (1, lag, E.none)}
    assert offsets_by_partition(answer, "topic")[1][0] == -1
    assert offsets_by_partition(answer, "missing")[0][0] == -1
    every = await client.call(describe_offsets("g", None, version=version))
    assert [(t.topic_name, t.topic_id, [p.partition_index for p in t.partitions]) for t in every.groups[0].topics] == [
        ("one", tid, [0])
    ]


async def test_alter_share_group_offsets(server: BrokerServer, connect: Connect) -> None:
    """On an empty group: NONE, the SPSO moved, delivery counts reset; the next fetch starts there."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client, count=5)
    await client.call(share_fetch("g", "m1", 0, tid, [0]))
    await client.call(share_fetch("g", "m1", -1, tid, []))
    await client.call(heartbeat("g", "m1", -1))
    answer = await client.call(alter_offsets("g", {"one": {0: 3}}))
    assert (answer.error_code, answer.error_message) == (E.none, None)
    (topic,) = answer.responses
    assert (topic.topic_name, topic.topic_id) == ("one", tid)
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, E.none)]
    assert acquired(await client.call(share_fetch("g", "m2", 0, tid, [0]))) == [(3, 4, 1)]


async def test_delete_share_group_offsets(server: BrokerServer, connect: Connect) -> None:
    """On an empty group: NONE per topic and the state gone (the next fetch starts again from the reset)."""
    client = await connect()
    tid = topic_id(server)
    await member_with_records(client, count=2)
    await client.call(share_fetch("g", "m1", 0, tid, [0]))
    await client.call(share_fetch("g", "m1", -1, tid, [], acks={0: [(0, 1, (ACCEPT,))]}))
    await client.call(heartbeat("g", "m1", -1))
    answer = await client.call(delete_offsets("g", "one"))
    assert (answer.error_code, answer.error_message) == (E.none, None)
    assert [(t.topic_name, t.topic_id, t.error_code) for t in answer.responses] == [("one", tid, E.none)]
    assert server.coordinator.share.partitions.get(("g", tid, 0)) is None
    assert acquired(await client.call(share_fetch("g", "m2", 0, tid, [0]))) == [(0, 1, 1)]  # earliest again
