"""Every supported version of every API, through a real socket to a running broker.

Requests are built once per API from one set of field values (``protocol.codec.build``
drops the fields a version does not carry), encoded by kio, answered by the broker and
decoded by kio with no trailing bytes allowed. Each test asserts what that version's
answer must contain (docs/spec/group-coordinator.md sections 3, 13-15 and 22;
docs/spec/client-traps.md G2, G10, G14).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i8, i16, i32, i64

from broker.coordinator.classic.state import GroupState
from broker.server.broker import BrokerServer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, advertised_versions
from protocol.codec import has_field
from tests.wire.client import Connect, WireClient, part, request

# What a one-node broker lists: every supported API but the cluster ones (protocol/apis.py CLUSTER_APIS).
ONE_NODE = dict(advertised_versions(share_groups=True))

E = ErrorCode

SESSION = datetime.timedelta(seconds=10)
NO_RETENTION = datetime.timedelta(milliseconds=-1)
INT32_MIN = -(2**31)
ALL_GROUP_OPERATIONS = 3400  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
UUID_TEXT_LENGTH = 36


def versions(api: ApiKey) -> list[int]:
    low, high = SUPPORTED_VERSIONS[api]
    return list(range(low, high + 1))






def subscription(*topics: str) -> bytes:
    """ConsumerProtocol subscription v0: int16 version, []string topics, nullable bytes user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


METADATA = subscription("topic")
ASSIGNMENT = b"\x00\x00assignment"




# -- group helpers ------------------------------------------------------------------------


def join_request(
    version: int,
    group_id: str,
    *,
    member_id: str = "",
    instance_id: str | None = None,
    protocol_type: str = "consumer",
    protocols: tuple[tuple[str, bytes], ...] = (("range", METADATA),),
    session: datetime.timedelta = SESSION,
    rebalance: datetime.timedelta = SESSION,
) -> Any:
    return request(
        ApiKey.JOIN_GROUP,
        version,
        group_id=group_id,
        session_timeout=session,
        rebalance_timeout=rebalance,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=tuple(
            part(ApiKey.JOIN_GROUP, version, "JoinGroupRequestProtocol", name=name, metadata=metadata)
            for name, metadata in protocols
        ),
        reason=None,
    )


async def join(client: WireClient, version: int, group_id: str, **options: Any) -> Any:
    """JoinGroup, doing KIP-394's second step when the broker answers MEMBER_ID_REQUIRED."""
    response = await client.call(join_request(version, group_id, **options))
    if response.error_code is E.member_id_required:
        response = await client.call(join_request(version, group_id, **{**options, "member_id": response.member_id}))
    return response


def sync_request(
    version: int,
    group_id: str,
    generation: int,
    member_id: str,
    assignments: tuple[tuple[str, bytes], ...] = (),
    *,
    instance_id: str | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
) -> Any:
    return request(
        ApiKey.SYNC_GROUP,
        version,
        group_id=group_id,
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=tuple(
            part(ApiKey.SYNC_GROUP, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
            for m, a in assignments
        ),
    )


async def stable_group(client: WireClient, group_id: str, *, instance_id: str | None = None) -> tuple[str, int]:
    """A one-member Stable group (JoinGroup v9, SyncGroup v5); returns (member id, generation)."""
    joined = await join(client, 9, group_id, instance_id=instance_id)
    assert joined.error_code is E.none, joined
    member, generation = joined.member_id, joined.generation_id
    synced = await client.call(
        sync_request(5, group_id, generation, member, ((member, ASSIGNMENT),), instance_id=instance_id)
    )
    assert synced.error_code is E.none, synced
    assert synced.assignment == ASSIGNMENT
    return member, generation


def heartbeat_request(version: int, group_id: str, generation: int, member_id: str) -> Any:
    return request(
        ApiKey.HEARTBEAT, version, group_id=group_id, generation_id=i32(generation), member_id=member_id,
        group_instance_id=None,
    )


def leave_request(version: int, group_id: str, *member_ids: str) -> Any:
    if version < 3:
        (member_id,) = member_ids
        return request(ApiKey.LEAVE_GROUP, version, group_id=group_id, member_id=member_id)
    members = tuple(
        part(ApiKey.LEAVE_GROUP, version, "MemberIdentity", member_id=m, group_instance_id=None, reason="bye")
        for m in member_ids
    )
    return request(ApiKey.LEAVE_GROUP, version, group_id=group_id, members=members)


def commit_request(
    version: int,
    group_id: str,
    offsets: dict[str, list[tuple[int, int, int, str | None]]],
    *,
    generation: int = -1,
    member_id: str = "",
) -> Any:
    """OffsetCommit; ``offsets`` maps a topic to (partition, offset, leader epoch, metadata)."""
    return request(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id=group_id,
        generation_id_or_member_epoch=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        retention_time=NO_RETENTION,
        topics=tuple(
            part(
                ApiKey.OFFSET_COMMIT,
                version,
                "OffsetCommitRequestTopic",
                name=topic,
                partitions=tuple(
                    part(
                        ApiKey.OFFSET_COMMIT,
                        version,
                        "OffsetCommitRequestPartition",
                        partition_index=i32(p),
                        committed_offset=i64(offset),
                        committed_leader_epoch=i32(epoch),
                        committed_metadata=metadata,
                    )
                    for p, offset, epoch, metadata in partitions
                ),
            )
            for topic, partitions in offsets.items()
        ),
    )


def commit_errors(response: Any) -> dict[str, list[tuple[int, ErrorCode]]]:
    return {t.name: [(p.partition_index, p.error_code) for p in t.partitions] for t in response.topics}


def fetch_topics(version: int, wanted: dict[str, list[int]] | None) -> Any:
    if wanted is None:
        return None
    name = "OffsetFetchRequestTopics" if version >= 8 else "OffsetFetchRequestTopic"
    return tuple(
        part(ApiKey.OFFSET_FETCH, version, name, name=topic, partition_indexes=tuple(i32(p) for p in partitions))
        for topic, partitions in wanted.items()
    )


def fetch_request(version: int, *groups: tuple[str, dict[str, list[int]] | None]) -> Any:
    if version >= 8:
        return request(
            ApiKey.OFFSET_FETCH,
            version,
            groups=tuple(
                part(
                    ApiKey.OFFSET_FETCH,
                    version,
                    "OffsetFetchRequestGroup",
                    group_id=group_id,
                    member_id=None,
                    member_epoch=i32(-1),
                    topics=fetch_topics(version, wanted),
                )
                for group_id, wanted in groups
            ),
            require_stable=True,
        )
    ((group_id, wanted),) = groups
    return request(
        ApiKey.OFFSET_FETCH, version, group_id=group_id, topics=fetch_topics(version, wanted), require_stable=True
    )


def fetched(topics: Any) -> dict[str, list[tuple[int, int, int | None, str | None, ErrorCode]]]:
    """topic -> [(partition, offset, leader epoch or None when the version has none, metadata, error)]."""
    return {
        t.name: [
            (
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", None),
                p.metadata,
                p.error_code,
            )
            for p in t.partitions
        ]
        for t in topics
    }


def describe_request(version: int, *groups: str, operations: bool = False) -> Any:
    return request(ApiKey.DESCRIBE_GROUPS, version, groups=groups, include_authorized_operations=operations)


# -- ApiVersions ------------------------------------------------------------------------------


def api_versions_request(version: int, name: str = "wire-test", software_version: str = "1.0.0") -> Any:
    return request(ApiKey.API_VERSIONS, version, client_software_name=name, client_software_version=software_version)


@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
async def test_api_versions_lists_exactly_the_supported_table(connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(api_versions_request(version))
    assert response.error_code is E.none
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert listed == ONE_NODE
    assert len(response.api_keys) == len(ONE_NODE)
    assert has_field(type(response), "throttle_time") == (version >= 1)


@pytest.mark.parametrize("name", ["", "-starts-with-dash", "has space", "ends-with-dot."])
async def test_api_versions_v3_rejects_an_invalid_client_software_name(connect: Connect, name: str) -> None:
    # KIP-511: v3+ client software name and version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    client = await connect()
    response = await client.call(api_versions_request(3, name=name))
    assert response.error_code is E.invalid_request
    response = await client.call(api_versions_request(4, software_version=name))
    assert response.error_code is E.invalid_request
    # The connection stays usable.
    response = await client.call(api_versions_request(3, name="librdkafka", software_version="2.16.0"))
    assert response.error_code is E.none


def api_versions_frame(version: int, correlation_id: int, client_id: str = "too-new") -> bytes:
    """An ApiVersions request at a version kio has no schema for: header v2, a v3-style body."""
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, version, correlation_id, len(client_id)) + client_id.encode()
    payload += b"\x00"  # header tagged fields
    payload += b"\x05wire" + b"\x041.0" + b"\x00"  # compact strings, body tagged fields
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("version", [5, 127, 32767])
async def test_api_versions_above_4_gets_unsupported_version_with_a_v0_body(connect: Connect, version: int) -> None:
    client = await connect()
    await client.send_raw(api_versions_frame(version, 4242))
    frame = await client.read_frame()
    # v0 response header (no tagged-field byte) and a v0 body; decode() refuses trailing bytes.
    correlation_id, body = client.decode(ApiKey.API_VERSIONS, 0, frame)
    assert correlation_id == 4242
    v0_schema: Any = load_response_schema(ApiKey.API_VERSIONS, 0)
    assert type(body) is v0_schema
    assert body.error_code is E.unsupported_version
    listed = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert listed[ApiKey.API_VERSIONS] == (0, 4)
    assert all(SUPPORTED_VERSIONS[key] == pair for key, pair in listed.items())
    # The client retries at the broker's maximum on the same connection.
    response = await client.call(api_versions_request(4))
    assert response.error_code is E.none


# -- Metadata ----------------------------------------------------------------------------------


def metadata_request(version: int, topics: list[str] | None, *, auto_create: bool = True) -> Any:
    return request(
        ApiKey.METADATA,
        version,
        topics=None
        if topics is None
        else tuple(part(ApiKey.METADATA, version, "MetadataRequestTopic", name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def assert_this_broker_only(server: BrokerServer, response: Any, version: int) -> None:
    (broker,) = response.brokers
    assert (broker.node_id, broker.host, broker.port) == (1, "127.0.0.1", server.port)
    if version >= 1:
        assert broker.rack is None
        assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id == "test-cluster"
    if 8 <= version <= 10:
        assert response.cluster_authorized_operations == INT32_MIN
    if version >= 13:
        assert response.error_code is E.none


def assert_topic(server: BrokerServer, topic: Any, name: str, partitions: int, version: int) -> None:
    assert topic.error_code is E.none
    assert topic.name == name
    assert sorted(p.partition_index for p in topic.partitions) == list(range(partitions))
    for p in topic.partitions:
        assert p.error_code is E.none
        assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (1, (1,), (1,))
        if version >= 5:
            assert p.offline_replicas == ()
    if version >= 1:
        assert topic.is_internal is False
    if version >= 8:
        assert topic.topic_authorized_operations == INT32_MIN
    if version >= 10:
        registered = server.topics.get(name)
        assert registered is not None
        assert topic.topic_id == registered.topic_id
        assert topic.topic_id != uuid.UUID(int=0)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
async def test_metadata(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()

    response = await client.call(metadata_request(version, ["topic"]))
    assert_this_broker_only(server, response, version)
    (topic,) = response.topics
    assert_topic(server, topic, "topic", 3, version)

    # Auto-creation (v0-3 always; v4+ when asked) with num.partitions (1).
    created = f"auto-v{version}"
    response = await client.call(metadata_request(version, [created]))
    (topic,) = response.topics
    assert_topic(server, topic, created, 1, version)
    assert server.topics.get(created) is not None

    if version >= 4:
        response = await client.call(metadata_request(version, ["not-created"], auto_create=False))
        (topic,) = response.topics
        assert (topic.name, topic.error_code, topic.partitions) == ("not-created", E.unknown_topic_or_partition, ())
        assert server.topics.get("not-created") is None

    everything = {"topic", created}
    if version == 0:
        # v0: an empty list means every topic.
        response = await client.call(metadata_request(version, []))
        assert {t.name for t in response.topics} == everything
    else:
        # v1+: null means every topic, an empty list means none (brokers only).
        response = await client.call(metadata_request(version, None))
        assert {t.name for t in response.topics} == everything
        for topic in response.topics:
            assert_topic(server, topic, topic.name, 3 if topic.name == "topic" else 1, version)
        response = await client.call(metadata_request(version, []))
        assert response.topics == ()
        assert_this_broker_only(server, response, version)


@pytest.mark.parametrize("version", [12, 13])
async def test_metadata_looks_topics_up_by_id(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    registered = server.topics.get("topic")
    assert registered is not None
    unknown = uuid.uuid4()
    response = await client.call(
        request(
            ApiKey.METADATA,
            version,
            topics=tuple(
                part(ApiKey.METADATA, version, "MetadataRequestTopic", name=None, topic_id=topic_id)
                for topic_id in (registered.topic_id, unknown)
            ),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    found, missing = response.topics
    assert_topic(server, found, "topic", 3, version)
    assert (missing.error_code, missing.topic_id, missing.name) == (E.unknown_topic_id, unknown, None)


# -- FindCoordinator ---------------------------------------------------------------------------

INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message "
    "was sent to an incompatible broker. See the broker logs for more details."
)


def find_request(version: int, key_type: int, *keys: str) -> Any:
    return request(
        ApiKey.FIND_COORDINATOR,
        version,
        key=keys[0] if keys else "",
        key_type=i8(key_type),
        coordinator_keys=keys,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_find_coordinator_single_key(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(find_request(version, 0, "group"))
    assert (response.error_code, response.node_id, response.host, response.port) == (
        E.none, 1, "127.0.0.1", server.port,
    )
    assert has_field(type(response), "error_message") == (version >= 1)
    if version == 0:
        return
    assert response.error_message == "NONE"
    assert response.throttle_time == datetime.timedelta(0)

    response = await client.call(find_request(version, 1, "transactional-id"))  # this broker's TC
    assert (response.error_code, response.error_message) == (E.none, "NONE")
    assert (response.node_id, response.host, response.port) == (1, "127.0.0.1", server.port)

    for key_type in (2, 3, 100, -1):  # share before v6, then unknown key types
        response = await client.call(find_request(version, key_type, "group"))
        assert (response.error_code, response.error_message) == (E.invalid_request, INVALID_REQUEST_MESSAGE)
        assert (response.node_id, response.host, response.port) == (-1, "", -1)


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_find_coordinator_batched_keys(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(find_request(version, 0, "b", "a", "", "b"))
    assert [c.key for c in response.coordinators] == ["b", "a", "", "b"]
    for c in response.coordinators:
        assert (c.error_code, c.error_message, c.node_id, c.host, c.port) == (
            E.none, None, 1, "127.0.0.1", server.port,
        )

    response = await client.call(find_request(version, 1, "txn-1", "txn-2"))
    assert [c.key for c in response.coordinators] == ["txn-1", "txn-2"]
    for c in response.coordinators:  # this broker's transaction coordinator
        assert (c.error_code, c.error_message, c.node_id, c.host, c.port) == (
            E.none, None, 1, "127.0.0.1", server.port,
        )

    response = await client.call(find_request(version, 2, "share-1", "share-2"))
    assert [c.key for c in response.coordinators] == ["share-1", "share-2"]
    for c in response.coordinators:
        if version >= 6:
            assert (c.error_code, c.error_message, c.node_id, c.host, c.port) == (
                E.coordinator_not_available, None, -1, "", -1,
            )
        else:
            assert (c.error_code, c.error_message, c.node_id, c.host, c.port) == (
                E.invalid_request, INVALID_REQUEST_MESSAGE, -1, "", -1,
            )

    response = await client.call(find_request(version, 7, "x", "y"))
    assert [(c.key, c.error_code, c.error_message) for c in response.coordinators] == [
        ("x", E.invalid_request, INVALID_REQUEST_MESSAGE), ("y", E.invalid_request, INVALID_REQUEST_MESSAGE),
    ]

    response = await client.call(find_request(version, 0))
    assert response.coordinators == ()


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
async def test_group_round_trip(server: BrokerServer, connect: Connect, version: int) -> None:
    sync_version, heartbeat_version, leave_version = min(version, 5), min(version, 4), min(version, 5)
    client = await connect("round-trip")
    group = f"round-trip-v{version}"

    first = await client.call(join_request(version, group))
    if version >= 4:
        # KIP-394: the first join of a dynamic member only hands out an id.
        assert first.error_code is E.member_id_required
        assert first.member_id.startswith("round-trip-")
        assert (first.generation_id, first.leader, first.members) == (-1, "", ())
        assert first.protocol_name == ("" if version < 7 else None)
        if version >= 7:
            assert first.protocol_type is None
        assert server.coordinator.groups[group].state is GroupState.EMPTY
        joined = await client.call(join_request(version, group, member_id=first.member_id))
        assert joined.member_id == first.member_id
    else:
        joined = first
    assert joined.error_code is E.none
    member = joined.member_id
    assert member.startswith("round-trip-") and len(member) == len("round-trip-") + UUID_TEXT_LENGTH
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member, "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, METADATA)]
    if version >= 5:
        assert joined.members[0].group_instance_id is None
    assert has_field(type(joined), "throttle_time") == (version >= 2)
    assert has_field(type(joined), "protocol_type") == (version >= 7)
    if version >= 7:
        assert joined.protocol_type == "consumer"
    assert has_field(type(joined), "skip_assignment") == (version >= 9)
    if version >= 9:
        assert joined.skip_assignment is False
    assert server.coordinator.groups[group].state is GroupState.COMPLETING_REBALANCE

    synced = await client.call(sync_request(sync_version, group, 1, member, ((member, ASSIGNMENT),)))
    assert (synced.error_code, synced.assignment) == (E.none, ASSIGNMENT)
    assert server.coordinator.groups[group].state is GroupState.STABLE

    beat = await client.call(heartbeat_request(heartbeat_version, group, 1, member))
    assert beat.error_code is E.none

    left = await client.call(leave_request(leave_version, group, member))
    assert left.error_code is E.none
    if leave_version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, E.none)]
    state = server.coordinator.groups[group]
    assert (state.state, state.generation_id, state.members) == (GroupState.EMPTY, 2, {})


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
async def test_join_group_error_shape(connect: Connect, version: int) -> None:
    client = await connect()
    # No protocols: INCONSISTENT_GROUP_PROTOCOL, answered in the generic error shape (spec 6.4).
    response = await client.call(join_request(version, f"no-protocols-v{version}", protocols=()))
    assert response.error_code is E.inconsistent_group_protocol
    assert (response.generation_id, response.leader, response.member_id, response.members) == (-1, "", "", ())
    assert response.protocol_name == ("" if version < 7 else None)
    if version >= 7:
        assert response.protocol_type is None
    if version >= 9:
        assert response.skip_assignment is False
    # An unknown member id for an unknown group: UNKNOWN_MEMBER_ID with the id echoed.
    response = await client.call(join_request(version, f"unknown-v{version}", member_id="ghost"))
    assert (response.error_code, response.member_id, response.generation_id) == (E.unknown_member_id, "ghost", -1)
    assert response.protocol_name == ("" if version < 7 else None)


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
async def test_join_group_static_member_replacement(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect("static")
    group = f"static-v{version}"
    joined = await client.call(join_request(version, group, instance_id="instance-1"))
    assert joined.error_code is E.none  # static members never get MEMBER_ID_REQUIRED
    old = joined.member_id
    assert old.startswith("instance-1-")
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in joined.members] == [(old, "instance-1", METADATA)]
    synced = await client.call(
        sync_request(min(version, 5), group, 1, old, ((old, ASSIGNMENT),), instance_id="instance-1")
    )
    assert synced.error_code is E.none

    # The same instance comes back with no member id: replaced in place, no rebalance.
    replaced = await client.call(join_request(version, group, instance_id="instance-1"))
    assert replaced.error_code is E.none
    new = replaced.member_id
    assert new != old and new.startswith("instance-1-")
    assert (replaced.generation_id, replaced.protocol_name) == (1, "range")
    if version >= 9:
        # KIP-814: the replaced leader is told it leads but must not assign.
        assert (replaced.leader, replaced.skip_assignment) == (new, True)
        assert [(m.member_id, m.group_instance_id) for m in replaced.members] == [(new, "instance-1")]
    else:
        assert (replaced.leader, replaced.members) == (old, ())
    assert server.coordinator.groups[group].state is GroupState.STABLE
    synced = await client.call(sync_request(min(version, 5), group, 1, new, instance_id="instance-1"))
    assert (synced.error_code, synced.assignment) == (E.none, ASSIGNMENT)

    # The old id is fenced.
    beat = await client.call(
        request(
            ApiKey.HEARTBEAT, 4, group_id=group, generation_id=i32(1), member_id=old, group_instance_id="instance-1"
        )
    )
    assert beat.error_code is E.fenced_instance_id


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
async def test_sync_group(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    group = f"sync-v{version}"
    joined = await join(client, 9, group)
    member = joined.member_id

    if version >= 5:
        # KafkaApis refuses a v5 SyncGroup without protocol type or name before the coordinator sees it.
        for missing in ({"protocol_type": None}, {"protocol_name": None}):
            refused = await client.call(sync_request(version, group, 1, member, ((member, ASSIGNMENT),), **missing))
            assert refused.error_code is E.inconsistent_group_protocol
            assert (refused.protocol_type, refused.protocol_name, refused.assignment) == (None, None, b"")
            assert server.coordinator.groups[group].state is GroupState.COMPLETING_REBALANCE

    wrong = await client.call(sync_request(version, group, 2, member, ((member, ASSIGNMENT),)))
    assert (wrong.error_code, wrong.assignment) == (E.illegal_generation, b"")
    synced = await client.call(sync_request(version, group, 1, member, ((member, ASSIGNMENT),)))
    assert (synced.error_code, synced.assignment) == (E.none, ASSIGNMENT)
    assert has_field(type(synced), "throttle_time") == (version >= 1)
    assert has_field(type(synced), "protocol_name") == (version >= 5)
    if version >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    assert server.coordinator.groups[group].state is GroupState.STABLE
    # A Stable group answers a later sync at once with the stored assignment.
    again = await client.call(sync_request(version, group, 1, member))
    assert (again.error_code, again.assignment) == (E.none, ASSIGNMENT)
    unknown = await client.call(sync_request(version, "no-such-group", 1, member))
    assert unknown.error_code is E.unknown_member_id


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
async def test_heartbeat(connect: Connect, version: int) -> None:
    client = await connect()
    group = f"heartbeat-v{version}"
    member, generation = await stable_group(client, group)
    beat = await client.call(heartbeat_request(version, group, generation, member))
    assert beat.error_code is E.none
    assert has_field(type(beat), "throttle_time") == (version >= 1)
    assert (await client.call(heartbeat_request(version, group, generation + 1, member))).error_code is (
        E.illegal_generation
    )
    assert (await client.call(heartbeat_request(version, group, generation, "ghost"))).error_code is (
        E.unknown_member_id
    )
    assert (await client.call(heartbeat_request(version, "no-such-group", 1, member))).error_code is (
        E.unknown_member_id
    )


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
async def test_leave_group(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    group = f"leave-v{version}"
    member, _ = await stable_group(client, group)

    if version < 3:
        unknown = await client.call(leave_request(version, "no-such-group", member))
        assert unknown.error_code is E.unknown_member_id
        ghost = await client.call(leave_request(version, group, "ghost"))
        assert ghost.error_code is E.unknown_member_id
        left = await client.call(leave_request(version, group, member))
        assert left.error_code is E.none
    else:
        unknown = await client.call(leave_request(version, "no-such-group", member))
        assert unknown.error_code is E.none
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in unknown.members] == [
            (member, None, E.unknown_member_id)
        ]
        left = await client.call(leave_request(version, group, "ghost", member))
        assert left.error_code is E.none
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
            ("ghost", None, E.unknown_member_id), (member, None, E.none),
        ]
    assert has_field(type(left), "throttle_time") == (version >= 1)
    state = server.coordinator.groups[group]
    assert (state.state, state.generation_id, state.members) == (GroupState.EMPTY, 2, {})


# -- OffsetCommit / OffsetFetch ------------------------------------------------------------------

OFFSETS: dict[str, list[tuple[int, int, int, str | None]]] = {"topic": [(0, 42, 7, "meta-0"), (1, 1000, 8, None)]}


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
async def test_offset_commit(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    group = f"commit-v{version}"
    # Generation -1 into an unknown group creates a "simple" group and is accepted.
    response = await client.call(commit_request(version, group, OFFSETS))
    assert commit_errors(response) == {"topic": [(0, E.none), (1, E.none)]}
    assert has_field(type(response), "throttle_time") == (version >= 3)
    simple = server.coordinator.groups[group]
    assert (simple.state, simple.protocol_type, simple.generation_id) == (GroupState.EMPTY, None, 0)

    answer = await client.call(fetch_request(9, (group, {"topic": [0, 1]})))
    (fetched_group,) = answer.groups
    epochs = (7, 8) if version >= 6 else (-1, -1)  # CommittedLeaderEpoch exists from v6
    assert fetched(fetched_group.topics) == {
        "topic": [(0, 42, epochs[0], "meta-0", E.none), (1, 1000, epochs[1], "", E.none)]
    }

    # A generation >= 0 for an unknown group: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
    response = await client.call(commit_request(version, f"unknown-{group}", OFFSETS, generation=1, member_id="m"))
    expected = E.group_id_not_found if version >= 9 else E.illegal_generation
    assert commit_errors(response) == {"topic": [(0, expected), (1, expected)]}
    assert f"unknown-{group}" not in server.coordinator.groups

    # Partitions missing from the metadata are answered UNKNOWN_TOPIC_OR_PARTITION by KafkaApis and
    # dropped; the rest goes to the coordinator (spec 6.1).
    response = await client.call(
        commit_request(version, group, {"nope": [(0, 1, -1, None)], "topic": [(3, 1, -1, None), (2, 77, -1, "p2")]})
    )
    assert commit_errors(response) == {
        "nope": [(0, E.unknown_topic_or_partition)],
        "topic": [(3, E.unknown_topic_or_partition), (2, E.none)],
    }
    answer = await client.call(fetch_request(9, (group, {"topic": [2]})))
    assert fetched(answer.groups[0].topics) == {"topic": [(2, 77, -1, "p2", E.none)]}
    assert server.topics.get("nope") is None  # commits never create topics
    # With nothing left, the group is not even looked at: no ILLEGAL_GENERATION / GROUP_ID_NOT_FOUND.
    response = await client.call(
        commit_request(version, f"unknown-{group}", {"nope": [(0, 1, -1, None)]}, generation=5, member_id="m")
    )
    assert commit_errors(response) == {"nope": [(0, E.unknown_topic_or_partition)]}
    assert f"unknown-{group}" not in server.coordinator.groups

    # A member of a Stable group commits with its generation.
    member, generation = await stable_group(client, f"member-{group}")
    response = await client.call(
        commit_request(version, f"member-{group}", {"topic": [(2, 5, 1, "m")]}, generation=generation, member_id=member)
    )
    assert commit_errors(response) == {"topic": [(2, E.none)]}
    response = await client.call(
        commit_request(
            version, f"member-{group}", {"topic": [(2, 6, 1, "m")]}, generation=generation + 1, member_id=member
        )
    )
    assert commit_errors(response) == {"topic": [(2, E.illegal_generation)]}


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
async def test_offset_fetch(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    group, other = f"fetch-v{version}", f"fetch-other-v{version}"
    assert commit_errors(await client.call(commit_request(9, group, OFFSETS))) == {
        "topic": [(0, E.none), (1, E.none)]
    }
    assert commit_errors(await client.call(commit_request(9, other, {"topic": [(2, 9, 3, "x")]}))) == {
        "topic": [(2, E.none)]
    }

    def expect(*rows: tuple[int, int, int, str]) -> list[tuple[int, int, int | None, str, ErrorCode]]:
        # CommittedLeaderEpoch exists from v5.
        return [(p, offset, epoch if version >= 5 else None, metadata, E.none) for p, offset, epoch, metadata in rows]

    committed = expect((0, 42, 7, "meta-0"), (1, 1000, 8, ""))
    explicit = {"topic": committed + expect((2, -1, -1, ""))}
    nothing = {"topic": expect((0, -1, -1, ""), (2, -1, -1, ""))}

    if version >= 8:
        groups: list[tuple[str, dict[str, list[int]] | None]] = [
            (group, {"topic": [0, 1, 2]}),
            ("no-such-group", {"topic": [0, 2]}),
            (other, None),
            (group, None),
            ("no-such-group", None),
        ]
        answer = await client.call(fetch_request(version, *groups))
        assert [(g.group_id, g.error_code) for g in answer.groups] == [(g, E.none) for g, _ in groups]
        assert [fetched(g.topics) for g in answer.groups] == [
            explicit,
            nothing,
            {"topic": expect((2, 9, 3, "x"))},
            {"topic": committed},
            {},
        ]
    else:
        answer = await client.call(fetch_request(version, (group, {"topic": [0, 1, 2]})))
        assert fetched(answer.topics) == explicit
        assert has_field(type(answer), "error_code") == (version >= 2)
        assert has_field(type(answer), "throttle_time") == (version >= 3)
        if version >= 2:
            assert answer.error_code is E.none
        # An unknown group is not an error: -1 / "" for each partition, and no group is created.
        answer = await client.call(fetch_request(version, ("no-such-group", {"topic": [0, 2]})))
        assert fetched(answer.topics) == nothing
        if version >= 2:
            # Null topics: every committed offset of the group.
            answer = await client.call(fetch_request(version, (group, None)))
            assert answer.error_code is E.none
            assert fetched(answer.topics) == {"topic": committed}
            answer = await client.call(fetch_request(version, ("no-such-group", None)))
            assert (answer.error_code, answer.topics) == (E.none, ())
    assert "no-such-group" not in server.coordinator.groups


# -- DescribeGroups / ListGroups / DeleteGroups / OffsetDelete -------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
async def test_describe_groups(connect: Connect, version: int) -> None:
    client = await connect("describer")
    member, _ = await stable_group(client, "described", instance_id="instance-d")
    await client.call(commit_request(9, "simple", {"topic": [(0, 1, -1, None)]}))

    response = await client.call(describe_request(version, "described", "no-such-group", "simple"))
    assert has_field(type(response), "throttle_time") == (version >= 1)
    stable, unknown, simple = response.groups
    assert (stable.error_code, stable.group_id, stable.group_state) == (E.none, "described", "Stable")
    assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
    (described,) = stable.members
    assert (described.member_id, described.client_id, described.client_host) == (member, "describer", "/127.0.0.1")
    assert (described.member_metadata, described.member_assignment) == (METADATA, ASSIGNMENT)
    assert has_field(type(described), "group_instance_id") == (version >= 4)
    if version >= 4:
        assert described.group_instance_id == "instance-d"

    # Item 130: NONE and Dead up to v5; v6 (KIP-1043) says GROUP_ID_NOT_FOUND, with a message.
    unknown_error = E.group_id_not_found if version >= 6 else E.none
    assert (unknown.error_code, unknown.group_id, unknown.group_state) == (unknown_error, "no-such-group", "Dead")
    assert (unknown.protocol_type, unknown.protocol_data, unknown.members) == ("", "", ())
    assert has_field(type(unknown), "error_message") == (version >= 6)
    if version >= 6:
        assert unknown.error_message == "Group no-such-group not found."
        assert (stable.error_message, simple.error_message) == (None, None)

    assert (simple.error_code, simple.group_state, simple.protocol_type, simple.protocol_data, simple.members) == (
        E.none, "Empty", "", "", (),
    )

    assert has_field(type(stable), "authorized_operations") == (version >= 3)
    if version >= 3:
        assert stable.authorized_operations == INT32_MIN
        asked = await client.call(describe_request(version, "described", operations=True))
        assert asked.groups[0].authorized_operations == ALL_GROUP_OPERATIONS


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
async def test_list_groups(connect: Connect, version: int) -> None:
    client = await connect()
    await stable_group(client, "listed-stable")
    await client.call(commit_request(9, "listed-simple", {"topic": [(0, 1, -1, None)]}))

    def list_request(states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> Any:
        return request(ApiKey.LIST_GROUPS, version, states_filter=states, types_filter=types)

    def listing(response: Any) -> dict[str, tuple[Any, ...]]:
        assert response.error_code is E.none
        return {
            g.group_id: (g.protocol_type, getattr(g, "group_state", None), getattr(g, "group_type", None))
            for g in response.groups
        }

    state = "Stable" if version >= 4 else None
    empty = "Empty" if version >= 4 else None
    kind = "classic" if version >= 5 else None
    assert listing(await client.call(list_request())) == {
        "listed-stable": ("consumer", state, kind),
        "listed-simple": ("", empty, kind),
    }
    assert has_field(type(list_request()), "states_filter") == (version >= 4)
    assert has_field(type(list_request()), "types_filter") == (version >= 5)
    if version >= 4:
        assert set(listing(await client.call(list_request(states=(" stable ",))))) == {"listed-stable"}
        assert set(listing(await client.call(list_request(states=("EMPTY", "Stable"))))) == {
            "listed-stable", "listed-simple",
        }
        assert listing(await client.call(list_request(states=("PreparingRebalance",)))) == {}
        assert listing(await client.call(list_request(states=("nonsense",)))) == {}
    if version >= 5:
        assert len(listing(await client.call(list_request(types=("Classic",))))) == 2
        assert listing(await client.call(list_request(types=("consumer",)))) == {}
        assert listing(await client.call(list_request(types=("share",)))) == {}
        assert set(listing(await client.call(list_request(states=("empty",), types=("classic",))))) == {
            "listed-simple"
        }


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
async def test_delete_groups(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await stable_group(client, "busy")
    await client.call(commit_request(9, "deletable", {"topic": [(0, 1, -1, None)]}))

    response = await client.call(
        request(ApiKey.DELETE_GROUPS, version, groups_names=("busy", "no-such-group", "deletable", "deletable"))
    )
    assert response.throttle_time == datetime.timedelta(0)
    assert sorted((r.group_id, r.error_code) for r in response.results) == [
        ("busy", E.non_empty_group), ("deletable", E.none), ("no-such-group", E.group_id_not_found),
    ]
    assert "deletable" not in server.coordinator.groups or server.coordinator.groups["deletable"].state is (
        GroupState.DEAD
    )
    assert server.coordinator.groups["busy"].state is GroupState.STABLE
    answer = await client.call(fetch_request(9, ("deletable", {"topic": [0]})))
    assert fetched(answer.groups[0].topics) == {"topic": [(0, -1, -1, "", E.none)]}
    described = await client.call(describe_request(5, "deletable"))
    assert described.groups[0].group_state == "Dead"
    again = await client.call(request(ApiKey.DELETE_GROUPS, version, groups_names=("deletable",)))
    assert [(r.group_id, r.error_code) for r in again.results] == [("deletable", E.group_id_not_found)]


def offset_delete_request(group_id: str, offsets: dict[str, list[int]]) -> Any:
    version = 0
    return request(
        ApiKey.OFFSET_DELETE,
        version,
        group_id=group_id,
        topics=tuple(
            part(
                ApiKey.OFFSET_DELETE,
                version,
                "OffsetDeleteRequestTopic",
                name=topic,
                partitions=tuple(
                    part(ApiKey.OFFSET_DELETE, version, "OffsetDeleteRequestPartition", partition_index=i32(p))
                    for p in partitions
                ),
            )
            for topic, partitions in offsets.items()
        ),
    )


async def test_offset_delete(connect: Connect) -> None:
    client = await connect()
    await client.call(commit_request(9, "simple", {"topic": [(0, 10, -1, "a"), (1, 11, -1, "b")]}))

    response = await client.call(offset_delete_request("simple", {"topic": [0]}))
    assert (response.error_code, response.throttle_time) == (E.none, datetime.timedelta(0))
    assert commit_errors(response) == {"topic": [(0, E.none)]}
    answer = await client.call(fetch_request(9, ("simple", {"topic": [0, 1]})))
    assert fetched(answer.groups[0].topics) == {"topic": [(0, -1, -1, "", E.none), (1, 11, -1, "b", E.none)]}

    response = await client.call(offset_delete_request("no-such-group", {"topic": [0]}))
    assert (response.error_code, response.topics) == (E.group_id_not_found, ())

    # Unknown topics and partitions: UNKNOWN_TOPIC_OR_PARTITION each; group errors still win.
    response = await client.call(offset_delete_request("simple", {"nope": [0], "topic": [1, 3]}))
    assert response.error_code is E.none
    assert commit_errors(response) == {
        "nope": [(0, E.unknown_topic_or_partition)],
        "topic": [(1, E.none), (3, E.unknown_topic_or_partition)],
    }
    answer = await client.call(fetch_request(9, ("simple", None)))
    assert fetched(answer.groups[0].topics) == {}
    response = await client.call(offset_delete_request("no-such-group", {"nope": [0]}))
    assert (response.error_code, response.topics) == (E.group_id_not_found, ())

    # An active "consumer" group subscribed to the topic.
    member, generation = await stable_group(client, "subscribed")
    await client.call(
        commit_request(9, "subscribed", {"topic": [(0, 1, -1, None)]}, generation=generation, member_id=member)
    )
    response = await client.call(offset_delete_request("subscribed", {"topic": [0, 1]}))
    assert response.error_code is E.none
    assert commit_errors(response) == {"topic": [(0, E.group_subscribed_to_topic), (1, E.group_subscribed_to_topic)]}

    # An active group of another protocol type.
    joined = await join(client, 9, "connect-group", protocol_type="connect", protocols=(("default", b"x"),))
    await client.call(
        sync_request(5, "connect-group", 1, joined.member_id, protocol_type="connect", protocol_name="default")
    )
    response = await client.call(offset_delete_request("connect-group", {"topic": [0]}))
    assert (response.error_code, response.topics) == (E.non_empty_group, ())


# -- tagged fields ---------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tagged_section(*fields: tuple[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag, data in fields:
        out += uvarint(tag) + uvarint(len(data)) + data
    return out


def encode_with_unknown_tags(client: WireClient, body: Any, correlation_id: int) -> bytes:
    """A flexible request whose header and top-level body both carry unknown tagged fields."""
    header_cls = type(body).__header_schema__
    header = io.BytesIO()
    entity_writer(header_cls)(
        header,
        header_cls(
            request_api_key=i16(body.__api_key__),
            request_api_version=i16(body.__version__),
            correlation_id=i32(correlation_id),
            client_id=client.client_id,
        ),
    )
    encoded_body = io.BytesIO()
    entity_writer(type(body))(encoded_body, body)
    head, tail = header.getvalue(), encoded_body.getvalue()
    assert head[-1:] == b"\x00" and tail[-1:] == b"\x00"  # empty tagged-field sections
    payload = (
        head[:-1]
        + tagged_section((5, b"header-tag"), (1000, b"\x01\x02"))
        + tail[:-1]
        + tagged_section((77, b"body-tag" * 40))
    )
    return struct.pack(">i", len(payload)) + payload


async def test_unknown_tagged_fields_are_ignored(connect: Connect) -> None:
    client = await connect("tagged")
    member, generation = await stable_group(client, "tagged")

    await client.send_raw(encode_with_unknown_tags(client, heartbeat_request(4, "tagged", generation, member), 900))
    correlation_id, beat = client.decode(ApiKey.HEARTBEAT, 4, await client.read_frame())
    assert (correlation_id, beat.error_code) == (900, E.none)

    await client.send_raw(encode_with_unknown_tags(client, api_versions_request(3), 901))
    correlation_id, versions_response = client.decode(ApiKey.API_VERSIONS, 3, await client.read_frame())
    assert (correlation_id, versions_response.error_code) == (901, E.none)
    assert len(versions_response.api_keys) == len(ONE_NODE)

    # Unknown tags inside nested structs too: a JoinGroup v9 whose protocol entry carries one.
    join = join_request(9, "tagged-join", instance_id="instance-t", protocols=())
    without_protocols = encode_with_unknown_tags(client, join, 902)[4:]
    assert without_protocols.endswith(b"\x01\x00" + tagged_section((77, b"body-tag" * 40)))  # [] protocols, null reason
    protocol = part(ApiKey.JOIN_GROUP, 9, "JoinGroupRequestProtocol", name="range", metadata=METADATA)
    entry = io.BytesIO()
    entity_writer(type(protocol))(entry, protocol)
    payload = (
        without_protocols[: -len(tagged_section((77, b"body-tag" * 40))) - 2]
        + uvarint(2)
        + entry.getvalue()[:-1]
        + tagged_section((3, b"nested"), (40000, b""))
        + b"\x00"
        + tagged_section((77, b"body-tag" * 40))
    )
    await client.send_raw(struct.pack(">i", len(payload)) + payload)
    correlation_id, joined = client.decode(ApiKey.JOIN_GROUP, 9, await client.read_frame())
    assert (correlation_id, joined.error_code, joined.protocol_name) == (902, E.none, "range")
    assert [(m.group_instance_id, m.metadata) for m in joined.members] == [("instance-t", METADATA)]

    # The connection carries on normally afterwards.
    beat = await client.call(heartbeat_request(4, "tagged", generation, member))
    assert beat.error_code is E.none


# -- per-connection ordering -----------------------------------------------------------------------


async def test_responses_keep_request_order_behind_a_parked_join(server: BrokerServer, connect: Connect) -> None:
    first = await connect("first")
    second = await connect("second")
    bystander = await connect("bystander")
    group = "ordering"
    leader, generation = await stable_group(first, group)

    # Pipeline on one connection: a JoinGroup that parks (the group must wait for the leader to
    # rejoin), then ApiVersions and a Heartbeat that must queue behind it.
    pipelined = [
        (join_request(3, group, rebalance=datetime.timedelta(seconds=30)), 101),
        (api_versions_request(3), 102),
        (heartbeat_request(4, group, generation, leader), 103),
        (request(ApiKey.LIST_GROUPS, 4, states_filter=(), types_filter=()), 104),
    ]
    await second.send_raw(b"".join(second.encode(body, correlation_id) for body, correlation_id in pipelined))

    async def nothing_arrives(client: WireClient, seconds: float) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.reader.readexactly(4), seconds)

    deadline = asyncio.get_running_loop().time() + 5
    while server.coordinator.groups[group].state is not GroupState.PREPARING_REBALANCE:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)
    await nothing_arrives(second, 0.3)

    # Other connections are answered meanwhile.
    beat = await first.call(heartbeat_request(4, group, generation, leader))
    assert beat.error_code is E.rebalance_in_progress
    assert (await bystander.call(api_versions_request(3))).error_code is E.none
    listed = await bystander.call(request(ApiKey.LIST_GROUPS, 4, states_filter=(), types_filter=()))
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(group, "PreparingRebalance")]
    await nothing_arrives(second, 0.1)

    # The leader rejoins: the join phase completes and the parked answer goes out, then the rest in order.
    rejoined = await first.call(join_request(9, group, member_id=leader))
    assert (rejoined.error_code, rejoined.generation_id) == (E.none, generation + 1)

    answers = []
    for body, expected_id in pipelined:
        correlation_id, answer = second.decode(body.__api_key__, body.__version__, await second.read_frame())
        assert correlation_id == expected_id
        answers.append(answer)
    joined, versions_answer, beat, listed = answers
    assert (joined.error_code, joined.generation_id, joined.leader) == (E.none, generation + 1, leader)
    assert joined.members == ()
    assert versions_answer.error_code is E.none
    # Processed only after the join completed: the old generation is now stale.
    assert beat.error_code is E.illegal_generation
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(group, "CompletingRebalance")]
