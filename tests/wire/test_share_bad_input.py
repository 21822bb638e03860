"""Bad input to the share-group APIs over TCP, every served version (KIP-932 spec sections 4.1, 7, 8.1-8.4, 9, 10):
unknown topic ids, invalid acknowledgement types, overlapping and out-of-order batches, bad member epochs, bad share
session epochs, a group id of another type, truncated frames and versions not served. Each is answered with Kafka's
error codes, or (a frame that does not decode, a version outside the served range) the connection is closed with a
"closing connection" log line, as Kafka closes it; meanwhile another share consumer on the same broker, on its own
connection, keeps being served (``SteadyShare.assert_served``)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient
from tests.wire.share_client import (
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
from tests.wire.test_bad_input import assert_hung_up, closing_lines, encoded_body, encoded_request, header, sized
from tests.wire.test_consumer_group_api import join as consumer_join
from tests.wire.test_data_plane import produce_request

E = ErrorCode
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
STEADY_GROUP, CONSUMER_GROUP = "steady", "a-consumer-group"
UNKNOWN_TOPIC = uuid.UUID(int=0xDEAD)
BAD_CLIENT = "bad-client"


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


@dataclass
class SteadyShare:
    """A share member with a share session and acquired records, on its own connection: what bad input elsewhere
    must leave alone."""

    server: BrokerServer
    client: WireClient
    tid: uuid.UUID
    epoch: int = 1  # the share session epoch it sends next

    async def assert_served(self) -> None:
        beat = await self.client.call(heartbeat(STEADY_GROUP, "steady", 1))
        assert beat.error_code is E.none and beat.member_epoch == 1
        answer = await self.client.call(share_fetch(STEADY_GROUP, "steady", self.epoch, self.tid, []))
        assert answer.error_code is E.none, answer
        self.epoch += 1
        share = self.server.coordinator.share.partitions.get((STEADY_GROUP, self.tid, 1))
        assert share is not None and {r.member_id for _, r in share.held()} == {"steady"}


@pytest.fixture
async def steady(server: BrokerServer) -> AsyncIterator[SteadyShare]:
    client = await WireClient.connect(server.port, "steady-client")
    tid = topic_id(server, "topic")
    assert (await client.call(heartbeat(STEADY_GROUP, "steady", 0, ("topic",)))).error_code is E.none
    await set_group_config(client, STEADY_GROUP, share_auto_offset_reset="earliest")
    await produce(client, 2, topic="topic", partition=1)
    first = await client.call(share_fetch(STEADY_GROUP, "steady", 0, tid, [1]))
    assert [(p.partition_index, len(p.acquired_records)) for p in first.responses[0].partitions] == [(1, 1)]
    yield SteadyShare(server, client, tid)
    await client.close()


@pytest.fixture
async def consumer_group(connect: Connect) -> str:
    """A KIP-848 consumer group, for the group id of another type."""
    client = await connect("consumer")
    assert (await client.call(consumer_join(1, CONSUMER_GROUP, "c1"))).error_code is E.none
    return CONSUMER_GROUP


async def session_with_records(client: WireClient, server: BrokerServer, version: int, group: str = "g") -> Any:
    """Member m of ``group`` opened its session (v ``version``) on ``one`` and ``topic`` 0 and acquired 0-2 of both."""
    await set_group_config(client, group, share_auto_offset_reset="earliest")
    await produce(client, 3)
    await produce(client, 3, topic="topic")
    opened = await client.call(share_fetch(group, "m", 0, topic_id(server), [0], version=version))
    assert opened.error_code is E.none
    more = await client.call(share_fetch(group, "m", 1, topic_id(server, "topic"), [0], version=version))
    assert more.error_code is E.none
    return opened


def errors_by_partition(answer: Any, field: str = "error_code") -> dict[tuple[uuid.UUID, int], Any]:
    return {(t.topic_id, p.partition_index): getattr(p, field) for t in answer.responses for p in t.partitions}


# -- ShareGroupHeartbeat: member epochs, ids, topics, another group type ------------------------------------------


async def test_heartbeat_bad_member_epochs(server: BrokerServer, connect: Connect, steady: SteadyShare) -> None:
    client = await connect()
    assert (await client.call(heartbeat("g", "m1", 0, ("one",)))).member_epoch == 1
    cases = [
        (heartbeat("g", "m1", -2), E.invalid_request, "MemberEpoch is invalid."),
        (heartbeat("g", "m1", 7), E.fenced_member_epoch, None),
        (heartbeat("g", "ghost", 3), E.unknown_member_id, None),
        (heartbeat("g", "ghost", -1), E.unknown_member_id, None),
        (heartbeat("nobody", "m1", 5), E.group_id_not_found, None),
        (heartbeat("g", "", 0, ("one",)), E.invalid_request, "MemberId can't be empty."),
        (heartbeat("", "m1", 0, ("one",)), E.invalid_request, "GroupId can't be empty."),
        (heartbeat("g", "m2", 0, ()), E.invalid_request, "SubscribedTopicNames must be set in first request."),
        (heartbeat("g", "m2", 0, ("one",), rack=""), E.invalid_request, "RackId can't be empty."),
    ]
    for sent, error, message in cases:
        answer = await client.call(sent)
        assert answer.error_code is error, (sent, answer)
        if message is not None:
            assert answer.error_message == message
        # An error answer: no member id, epoch 0, interval 0, no assignment (section 2.1).
        assert (answer.member_id, answer.member_epoch, answer.heartbeat_interval.total_seconds(), answer.assignment) \
            == (None, 0, 0, None)  # fmt: skip
        await steady.assert_served()
    assert (await client.call(heartbeat("g", "m1", 1))).error_code is E.none  # fencing by epoch kept the member


async def test_heartbeat_unknown_topic_is_an_empty_assignment(connect: Connect, steady: SteadyShare) -> None:
    client = await connect()
    answer = await client.call(heartbeat("g", "m1", 0, ("no-such-topic",)))
    assert answer.error_code is E.none and answer.member_epoch == 1
    assert answer.assignment is not None and answer.assignment.topic_partitions == ()
    await steady.assert_served()


async def test_heartbeat_and_describe_with_a_consumer_group_id(
    server: BrokerServer, connect: Connect, consumer_group: str, steady: SteadyShare
) -> None:
    client = await connect()
    join = await client.call(heartbeat(consumer_group, "m1", 0, ("one",)))
    assert join.error_code is E.group_id_not_found
    assert join.error_message == f"Group {consumer_group} is not a share group."
    assert (await client.call(heartbeat(consumer_group, "c1", -1))).error_code is E.group_id_not_found
    (described,) = (await client.call(share_describe(consumer_group))).groups
    assert described.error_code is E.group_id_not_found and described.members == ()
    assert consumer_group in server.coordinator.consumer_groups
    await steady.assert_served()


# -- ShareFetch ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_share_fetch_unknown_topic_ids_and_partitions(
    server: BrokerServer, connect: Connect, steady: SteadyShare, version: int
) -> None:
    """Section 8.2: an unknown topic id -> UNKNOWN_TOPIC_ID, an unknown partition -> UNKNOWN_TOPIC_OR_PARTITION, per
    partition; the known partition of the same request is served."""
    client = await connect()
    tid = topic_id(server)
    await set_group_config(client, "g", share_auto_offset_reset="earliest")
    await produce(client, 2)
    answer = await client.call(share_fetch("g", "m", 0, UNKNOWN_TOPIC, [0], version=version))
    assert answer.error_code is E.none
    assert errors_by_partition(answer) == {(UNKNOWN_TOPIC, 0): E.unknown_topic_id}
    beyond = await client.call(share_fetch("g", "m2", 0, tid, [0, 7], version=version))
    assert errors_by_partition(beyond) == {(tid, 0): E.none, (tid, 7): E.unknown_topic_or_partition}
    assert [(r.first_offset, r.last_offset) for r in partition_of(beyond).acquired_records] == [(0, 1)]
    acks = await client.call(share_fetch("g", "m", 1, UNKNOWN_TOPIC, [], acks={0: [(0, 0, (ACCEPT,))]},
                                         version=version))  # fmt: skip
    assert errors_by_partition(acks, "acknowledge_error_code")[(UNKNOWN_TOPIC, 0)] == E.unknown_topic_id.value
    await steady.assert_served()


BAD_BATCHES: list[tuple[str, list[tuple[int, int, tuple[int, ...]]]]] = [
    ("type 5", [(0, 0, (5,))]),
    ("type -1", [(0, 0, (-1,))]),
    ("renew without IsRenewAck", [(0, 0, (RENEW,))]),
    ("one type per offset, one short", [(0, 2, (ACCEPT, ACCEPT))]),
    ("empty types", [(0, 1, ())]),
    ("first past last", [(2, 1, (ACCEPT,))]),
    ("overlapping", [(0, 2, (ACCEPT,)), (1, 1, (ACCEPT,))]),
    ("touching", [(0, 1, (ACCEPT,)), (1, 2, (ACCEPT,))]),
    ("descending", [(2, 2, (ACCEPT,)), (0, 1, (ACCEPT,))]),
]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("why", "batches"), BAD_BATCHES, ids=[why for why, _ in BAD_BATCHES])
async def test_share_fetch_bad_acknowledgement_batches(
    server: BrokerServer, connect: Connect, steady: SteadyShare, version: int, why: str,
    batches: list[tuple[int, int, tuple[int, ...]]],
) -> None:  # fmt: skip
    """Section 8.4: INVALID_REQUEST in that partition's AcknowledgeErrorCode, nothing of it applied; the other
    partition's acknowledgement (in another topic entry) applied; the answer is NONE at the top."""
    client = await connect()
    await session_with_records(client, server, version)
    one, other = topic_id(server), topic_id(server, "topic")
    sent = share_fetch("g", "m", 2, one, [], acks={0: batches}, version=version, max_records=0)
    good = share_fetch("g", "m", 2, other, [], acks={0: [(0, 2, (ACCEPT,))]}, version=version)
    answer = await client.call(dataclasses.replace(sent, topics=sent.topics + good.topics))
    assert answer.error_code is E.none
    assert errors_by_partition(answer, "acknowledge_error_code") == {
        (one, 0): E.invalid_request.value, (other, 0): E.none.value,
    }, why  # fmt: skip
    shares = server.coordinator.share.partitions
    assert [r.state.name for _, r in shares.get(("g", one, 0)).held()] == ["ACQUIRED"] * 3  # type: ignore[union-attr]
    assert shares.get(("g", other, 0)).start_offset == 3  # type: ignore[union-attr]
    await steady.assert_served()


@pytest.mark.parametrize("version", [1, 2])
async def test_share_fetch_bad_session_epochs(
    server: BrokerServer, connect: Connect, steady: SteadyShare, version: int
) -> None:
    """Section 7: top-level SHARE_SESSION_NOT_FOUND (122) / INVALID_SHARE_SESSION_EPOCH (123) / INVALID_REQUEST for
    acknowledgements on epoch 0, each with no partitions and the lock duration."""
    client = await connect()
    tid = topic_id(server)
    cases = [
        (share_fetch("g", "m", 1, tid, [0], version=version), E.share_session_not_found),
        (share_fetch("g", "m", -1, tid, [], version=version), E.share_session_not_found),
        (share_fetch("g", "m", 0, tid, [0], acks={0: [(0, 0, (ACCEPT,))]}, version=version), E.invalid_request),
        (share_fetch("g", "m", 0, tid, [0], version=version), E.none),
        (share_fetch("g", "m", 2, tid, [], version=version), E.invalid_share_session_epoch),
        (share_fetch("g", "m", -2, tid, [], version=version), E.invalid_share_session_epoch),
        (share_fetch("g", "m", 2**31 - 1, tid, [], version=version), E.invalid_share_session_epoch),
        (share_fetch("g", "m", 1, tid, [], version=version), E.none),
    ]
    for sent, error in cases:
        answer = await client.call(sent)
        assert answer.error_code is error, (sent.share_session_epoch, answer)
        if error is not E.none:
            # ShareFetchRequest.getErrorResponse: no partitions, AcquisitionLockTimeoutMs 0 (Kafka's
            # testShareFetchInitialEpochWithAcknowledgements asserts the 0).
            assert answer.responses == () and answer.acquisition_lock_timeout.total_seconds() == 0
        else:
            assert answer.acquisition_lock_timeout.total_seconds() == 1
        await steady.assert_served()


@pytest.mark.parametrize("version", [1, 2])
async def test_share_fetch_bad_member_ids_and_renew_rules(
    server: BrokerServer, connect: Connect, steady: SteadyShare, version: int
) -> None:
    """Section 8.1: MemberId empty or null -> INVALID_REQUEST; v2 IsRenewAck with MaxRecords > 0 -> INVALID_REQUEST."""
    client = await connect()
    tid = topic_id(server)
    for member in ("", None):
        answer = await client.call(share_fetch("g", member, 0, tid, [0], version=version))  # type: ignore[arg-type]
        assert answer.error_code is E.invalid_request and answer.responses == ()
    assert (await client.call(share_fetch("g", "m", 0, tid, [0], version=version))).error_code is E.none
    if version == 2:
        renew = share_fetch("g", "m", 1, tid, [], acks={0: [(0, 0, (RENEW,))]}, version=2, renew=True)
        assert (await client.call(renew)).error_code is E.invalid_request
    await steady.assert_served()


async def test_share_fetch_with_a_consumer_group_id_is_not_checked(
    server: BrokerServer, connect: Connect, consumer_group: str, steady: SteadyShare
) -> None:
    """Section 8.2: ShareFetch checks no group (Kafka's SharePartitionManager has no group lookup): a consumer
    group's id fetches; the consumer group is untouched."""
    client = await connect()
    answer = await client.call(share_fetch(consumer_group, "m", 0, topic_id(server), [0]))
    assert answer.error_code is E.none
    assert consumer_group in server.coordinator.consumer_groups
    assert consumer_group not in server.coordinator.share.registry.share_groups
    ack = await client.call(share_acknowledge(consumer_group, "other", 1, topic_id(server), {0: [(0, 0, (1,))]}))
    assert ack.error_code is E.share_session_not_found
    await steady.assert_served()


# -- ShareAcknowledge ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
async def test_share_acknowledge_bad_input(
    server: BrokerServer, connect: Connect, steady: SteadyShare, version: int
) -> None:
    """Section 9: epoch 0 -> INVALID_SHARE_SESSION_EPOCH, no session -> SHARE_SESSION_NOT_FOUND, a wrong epoch ->
    INVALID_SHARE_SESSION_EPOCH (top-level); an unknown topic id -> UNKNOWN_TOPIC_ID, bad batches -> INVALID_REQUEST
    (per partition, the others applied); an empty member id -> INVALID_REQUEST."""
    client = await connect()
    one, other = topic_id(server), topic_id(server, "topic")
    assert (await client.call(share_acknowledge("g", "m", 1, one, {}, version=version))).error_code \
        is E.share_session_not_found  # fmt: skip
    await session_with_records(client, server, version)
    top_level = [
        (share_acknowledge("g", "m", 0, one, {0: [(0, 0, (ACCEPT,))]}, version=version), E.invalid_share_session_epoch),
        (share_acknowledge("g", "m", 5, one, {0: [(0, 0, (ACCEPT,))]}, version=version), E.invalid_share_session_epoch),
        (share_acknowledge("g", "", 2, one, {0: [(0, 0, (ACCEPT,))]}, version=version), E.invalid_request),
        (share_acknowledge("g", "ghost", 2, one, {0: [(0, 0, (ACCEPT,))]}, version=version), E.share_session_not_found),
    ]
    for sent, error in top_level:
        answer = await client.call(sent)
        assert (answer.error_code, answer.responses) == (error, ()), answer
    epoch = 2
    for _, batches in BAD_BATCHES:
        sent = share_acknowledge("g", "m", epoch, one, {0: batches}, version=version)
        good = share_acknowledge("g", "m", epoch, UNKNOWN_TOPIC, {0: [(0, 0, (ACCEPT,))]}, version=version)
        answer = await client.call(dataclasses.replace(sent, topics=sent.topics + good.topics))
        epoch += 1
        assert answer.error_code is E.none
        assert errors_by_partition(answer) == {(one, 0): E.invalid_request, (UNKNOWN_TOPIC, 0): E.unknown_topic_id}
    applied = await client.call(share_acknowledge("g", "m", epoch, other, {0: [(0, 2, (ACCEPT,))]}, version=version))
    assert errors_by_partition(applied) == {(other, 0): E.none}
    share = server.coordinator.share.partitions.get(("g", one, 0))
    assert share is not None and [r.state.name for _, r in share.held()] == ["ACQUIRED"] * 3
    await steady.assert_served()


# -- the offsets admin APIs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_share_group_offsets_bad_input(
    connect: Connect, consumer_group: str, steady: SteadyShare, version: int
) -> None:
    """Section 10.2: "" -> INVALID_GROUP_ID, a consumer group -> GROUP_ID_NOT_FOUND (group level); an unknown group
    with topics, an unknown topic and an unknown partition -> StartOffset -1 without an error."""
    client = await connect()
    (empty,) = (await client.call(describe_offsets("", {"one": [0]}, version=version))).groups
    assert (empty.error_code, empty.topics) == (E.invalid_group_id, ())
    (other,) = (await client.call(describe_offsets(consumer_group, {"one": [0]}, version=version))).groups
    assert other.error_code is E.group_id_not_found and other.error_message is not None
    unknown = await client.call(describe_offsets("nobody", {"one": [0, 9], "missing": [0]}, version=version))
    assert unknown.groups[0].error_code is E.none
    lag = -1 if version >= 1 else None
    assert offsets_by_partition(unknown, "one") == {0: (-1, lag, E.none), 9: (-1, lag, E.none)}
    assert offsets_by_partition(unknown, "missing") == {0: (-1, lag, E.none)}
    await steady.assert_served()


async def test_alter_share_group_offsets_bad_input(
    server: BrokerServer, connect: Connect, consumer_group: str, steady: SteadyShare
) -> None:
    """Section 10.3: "" -> INVALID_GROUP_ID, a consumer group -> GROUP_ID_NOT_FOUND, members -> NON_EMPTY_GROUP
    (top level, nothing moved); an unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION per partition."""
    client = await connect()
    assert (await client.call(alter_offsets("", {"one": {0: 0}}))).error_code is E.invalid_group_id
    assert (await client.call(alter_offsets(consumer_group, {"one": {0: 0}}))).error_code is E.group_id_not_found
    busy = await client.call(alter_offsets(STEADY_GROUP, {"topic": {1: 2}}))
    assert (busy.error_code, busy.responses) == (E.non_empty_group, ())
    assert server.coordinator.share.partitions.get((STEADY_GROUP, steady.tid, 1)).start_offset == 0  # type: ignore[union-attr]
    answer = await client.call(alter_offsets("fresh", {"one": {0: 0, 4: 0}, "missing": {0: 0}}))
    assert answer.error_code is E.none
    results = {(t.topic_name, p.partition_index): p.error_code for t in answer.responses for p in t.partitions}
    assert results == {("one", 0): E.none, ("one", 4): E.unknown_topic_or_partition,
                       ("missing", 0): E.unknown_topic_or_partition}  # fmt: skip
    await steady.assert_served()


async def test_delete_share_group_offsets_bad_input(
    server: BrokerServer, connect: Connect, consumer_group: str, steady: SteadyShare
) -> None:
    """Section 10.3: "" -> INVALID_GROUP_ID, an unknown group or a consumer group -> GROUP_ID_NOT_FOUND, members ->
    NON_EMPTY_GROUP; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION for that topic."""
    client = await connect()
    assert (await client.call(delete_offsets("", "one"))).error_code is E.invalid_group_id
    assert (await client.call(delete_offsets("nobody", "one"))).error_code is E.group_id_not_found
    assert (await client.call(delete_offsets(consumer_group, "one"))).error_code is E.group_id_not_found
    busy = await client.call(delete_offsets(STEADY_GROUP, "topic"))
    assert (busy.error_code, busy.responses) == (E.non_empty_group, ())
    assert server.coordinator.share.partitions.get((STEADY_GROUP, steady.tid, 1)) is not None
    await client.call(alter_offsets("fresh", {"one": {0: 0}}))
    answer = await client.call(delete_offsets("fresh", "one", "missing"))
    assert answer.error_code is E.none
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [
        ("one", E.none), ("missing", E.unknown_topic_or_partition),
    ]  # fmt: skip
    await steady.assert_served()


# -- frames: truncated bodies and versions not served ------------------------------------------------------------


def _valid_requests() -> list[tuple[str, Any]]:
    tid = uuid.UUID(int=1)
    return [
        ("ShareGroupHeartbeat v1", heartbeat("g", "m", 0, ("one", "topic"), rack="rack")),
        ("ShareGroupDescribe v1", share_describe("g", "h", operations=True)),
        ("ShareFetch v1", share_fetch("g", "m", 1, tid, [0, 1], acks={0: [(0, 4, (ACCEPT,))]})),
        ("ShareFetch v2", share_fetch("g", "m", 1, tid, [0], acks={0: [(0, 4, (ACCEPT,))]}, version=2)),
        ("ShareAcknowledge v1", share_acknowledge("g", "m", 1, tid, {0: [(0, 4, (ACCEPT, 2, 3, 0, 1))]})),
        ("ShareAcknowledge v2", share_acknowledge("g", "m", 1, tid, {0: [(0, 4, (ACCEPT,))]}, version=2)),
        ("DescribeShareGroupOffsets v0", describe_offsets("g", {"one": [0, 1]}, version=0)),
        ("DescribeShareGroupOffsets v1", describe_offsets("g", {"one": [0, 1]})),
        ("AlterShareGroupOffsets v0", alter_offsets("g", {"one": {0: 5}})),
        ("DeleteShareGroupOffsets v0", delete_offsets("g", "one", "topic")),
    ]


TRUNCATED = [
    (f"{name}, {cut} bytes short", body, cut)
    for name, body in _valid_requests()
    for cut in sorted({1, len(encoded_body(body)) // 2})  # inside the body: the header (and client id) stay whole
]


@pytest.mark.parametrize(("name", "body", "cut"), TRUNCATED, ids=[t[0] for t in TRUNCATED])
async def test_truncated_body_closes_the_connection(
    server: BrokerServer, steady: SteadyShare, name: str, body: Any, cut: int
) -> None:
    """A whole frame whose body ends early does not decode: Kafka closes the connection (RequestContext.parseRequest
    fails), with a log line; nothing of the request is applied; other connections are served."""
    groups_before = sorted(server.coordinator.share.registry.share_groups)
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        payload = encoded_request(body)
        await client.send_raw(sized(payload[:-cut]))
        api_name = ApiKey(body.__api_key__).name
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason=api_name)
        (line,) = closing_lines(logs)
        assert "does not decode" in line["reason"], line
        await client.close()
    assert sorted(server.coordinator.share.registry.share_groups) == groups_before
    await steady.assert_served()


UNSERVED = [
    ("ShareGroupHeartbeat v0", ApiKey.SHARE_GROUP_HEARTBEAT, 0),
    ("ShareGroupHeartbeat v2", ApiKey.SHARE_GROUP_HEARTBEAT, 2),
    ("ShareGroupDescribe v0", ApiKey.SHARE_GROUP_DESCRIBE, 0),
    ("ShareGroupDescribe v2", ApiKey.SHARE_GROUP_DESCRIBE, 2),
    ("ShareFetch v0", ApiKey.SHARE_FETCH, 0),
    ("ShareFetch v3", ApiKey.SHARE_FETCH, 3),
    ("ShareAcknowledge v0", ApiKey.SHARE_ACKNOWLEDGE, 0),
    ("ShareAcknowledge v3", ApiKey.SHARE_ACKNOWLEDGE, 3),
    ("DescribeShareGroupOffsets v2", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 2),
    ("AlterShareGroupOffsets v1", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 1),
    ("DeleteShareGroupOffsets v1", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 1),
    ("InitializeShareGroupState v0 (not advertised)", 83, 0),
    ("ReadShareGroupStateSummary v0 (not advertised)", 87, 0),
]


@pytest.mark.parametrize(("name", "api_key", "version"), UNSERVED, ids=[u[0] for u in UNSERVED])
async def test_a_version_not_served_closes_the_connection(
    server: BrokerServer, steady: SteadyShare, name: str, api_key: int, version: int
) -> None:
    """A version outside the advertised range (or a share-coordinator RPC, not advertised): the connection is
    closed with a log line, as for every other API (tests/wire/test_bad_input.py)."""
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, BAD_CLIENT)
        await client.send_raw(sized(header(api_key, version) + b"\x00" * 16))
        reason = f"v{version} is outside" if api_key < 83 or api_key > 87 else f"unsupported api key {api_key}"
        await assert_hung_up(server, client, logs, client_id=BAD_CLIENT, reason=reason)
        await client.close()
    await steady.assert_served()
