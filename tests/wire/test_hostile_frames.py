"""Issue 14's hostile frames, each sent as it was found, over a real socket to a running broker.

Every case checks the four things that make a hostile client harmless: the connection is closed (or answered with
Kafka's error code), a log line names the peer, the client id and the reason, the broker keeps serving (a fresh
connection's ApiVersions and the steady group's Heartbeat are answered), and no group state changed (a Stable group
formed beforehand keeps its state, generation, members, assignments and offsets).

- Defect 1: a length that lies (an array claiming 2^32-2 elements) killed the process inside kio's native reader.
- Defect 4: a null array where the version forbids null reached the handlers (TypeError, traceback).
- Defect 5: answers that could not be encoded dropped the connection with asyncio's "Fatal error on transport",
  naming no peer; Metadata v10/v11 asking for a topic by id (or with a null name) is Kafka's INVALID_REQUEST.
- Defect 3: a client that pipelines Fetches and never reads made the broker hold every answer; an answer that cannot
  be built (MemoryError) must end that connection, logged, not escape as a traceback.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import re
import struct
import uuid
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest
import structlog
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

import broker.server.pipeline
from broker.coordinator.classic.state import GroupState
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import make_batch
from tests.wire.client import WireClient, part, request
from tests.wire.test_bad_input import (
    Steady,
    assert_hung_up,
    assert_still_serving,
    closing_lines,
    form_steady_group,
    sized,
)
from tests.wire.test_data_plane import fetch_partition, fetch_request, produced, topic_key
from tests.wire.test_flow_control import slow_connection
from tests.wire.test_heartbeat_fast_path import eventually
from tests.wire.test_versions import join as join_group
from tests.wire.test_versions import join_request, stable_group, sync_request

E = ErrorCode
HOSTILE = "hostile"
SESSION = datetime.timedelta(seconds=10)


@pytest.fixture
async def steady(server: BrokerServer) -> AsyncIterator[Steady]:
    group = await form_steady_group(server)
    yield group
    await group.client.close()


def encoded(body: Any, client_id: str = HOSTILE, correlation_id: int = 7) -> bytes:
    """Header and body as kio writes them, without the size prefix."""
    header_cls = type(body).__header_schema__
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=i16(body.__api_key__),
        request_api_version=i16(body.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


async def hung_up_on(
    server: BrokerServer, steady: Steady, frame: bytes, *, client_id: str, reason: str, joins: bool = False
) -> MutableMapping[str, Any]:
    """Sends ``frame`` on a fresh connection; checks the hang-up, its log line, the broker, the steady group.
    ``joins``: the request is a JoinGroup that creates its own group (as in Kafka) before its answer fails."""
    before = steady.snapshot()
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, client_id)
        await client.send_raw(frame)
        await assert_hung_up(server, client, logs, client_id=client_id, reason=reason)
        await client.close()
    (line,) = closing_lines(logs)
    assert not [entry for entry in logs if entry.get("log_level") in ("error", "critical")], logs
    await assert_still_serving(server)
    if joins:
        before = (sorted(server.coordinator.groups), *before[1:])
    await steady.assert_untouched(before)
    return line


# -- defect 1: a claimed count kio would allocate for -------------------------------------------------------------


async def test_describe_groups_v5_claiming_four_billion_groups_is_refused(server: BrokerServer, steady: Steady) -> None:
    """The 22-byte reproducer: client id "x", a compact array of 0xFFFFFFFF - 1 group names, then nothing.
    Before the bounded pre-pass, kio asked for 34 GB and the process aborted (SIGABRT): this test's process."""
    reproducer = bytes.fromhex("00000012000f00050000000100017800ffffffff0f00")
    line = await hung_up_on(
        server, steady, reproducer, client_id="x", reason="Tried to allocate a collection of size 4294967294"
    )
    assert line["reason"] == (
        "DESCRIBE_GROUPS v5 body does not decode: Tried to allocate a collection of size 4294967294 for field "
        "groups, but there are only 1 bytes remaining."
    )


def with_count(body: Any, count: bytes) -> bytes:
    """The request (its last field an empty array) with that array's count replaced by ``count``, then the tag
    buffer when the version is flexible, as a complete frame."""
    payload = encoded(body)
    flexible = type(body).__flexible__
    empty = b"\x01\x00" if flexible else b"\x00\x00\x00\x00"
    assert payload.endswith(empty), payload.hex()
    return sized(payload[: -len(empty)] + count + (b"\x00" if flexible else b""))


def join(version: int, *protocols: str) -> Any:
    return request(
        ApiKey.JOIN_GROUP,
        version,
        group_id="hostile-group",
        session_timeout=SESSION,
        rebalance_timeout=SESSION,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=tuple(
            part(ApiKey.JOIN_GROUP, version, "JoinGroupRequestProtocol", name=name, metadata=b"") for name in protocols
        ),
    )


def commit(version: int) -> Any:
    return request(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id="hostile-group",
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=(),
    )


def sync(version: int) -> Any:
    return request(
        ApiKey.SYNC_GROUP,
        version,
        group_id="hostile-group",
        generation_id=i32(1),
        member_id="m",
        group_instance_id=None,
        assignments=(),
    )


def leave(version: int) -> Any:
    return request(ApiKey.LEAVE_GROUP, version, group_id="hostile-group", members=())


def delete_groups(version: int) -> Any:
    return request(ApiKey.DELETE_GROUPS, version, groups_names=())


def find_coordinators(version: int) -> Any:
    return request(ApiKey.FIND_COORDINATOR, version, key_type=0, coordinator_keys=())


def describe(version: int) -> Any:
    return request(ApiKey.DESCRIBE_GROUPS, version, groups=())


# (request with an empty array last, its API's name, the array's field name)
LAST_ARRAYS: list[tuple[Any, str, str]] = [
    (join(5), "JOIN_GROUP v5", "protocols"),
    (join(7), "JOIN_GROUP v7", "protocols"),
    (commit(2), "OFFSET_COMMIT v2", "topics"),
    (commit(9), "OFFSET_COMMIT v9", "topics"),
    (sync(3), "SYNC_GROUP v3", "assignments"),
    (sync(4), "SYNC_GROUP v4", "assignments"),
    (leave(3), "LEAVE_GROUP v3", "members"),
    (leave(5), "LEAVE_GROUP v5", "members"),
    (delete_groups(1), "DELETE_GROUPS v1", "groups_names"),
    (delete_groups(2), "DELETE_GROUPS v2", "groups_names"),
    (find_coordinators(4), "FIND_COORDINATOR v4", "coordinator_keys"),
    (describe(0), "DESCRIBE_GROUPS v0", "groups"),
]
LAST_ARRAY_IDS = [name for _, name, _ in LAST_ARRAYS]


@pytest.mark.parametrize(("body", "name", "field"), LAST_ARRAYS, ids=LAST_ARRAY_IDS)
async def test_an_array_claiming_more_elements_than_bytes_is_refused(
    server: BrokerServer, steady: Steady, body: Any, name: str, field: str
) -> None:
    lie = bytes.fromhex("ffffffff0f") if type(body).__flexible__ else struct.pack(">i", 2**31 - 1)
    line = await hung_up_on(server, steady, with_count(body, lie), client_id=HOSTILE, reason=f"{name} body")
    claim = rf"Tried to allocate a collection of size \d+ for field {field}, but there are only"
    assert re.search(claim, line["reason"]), line
    assert "hostile-group" not in server.coordinator.groups


# -- defect 4: null where the version forbids it --------------------------------------------------------------------


async def test_describe_groups_v0_with_a_null_groups_array_is_refused(server: BrokerServer, steady: Steady) -> None:
    """The reproducer: client id "x", groups = null (int32 -1). It used to reach the handler: TypeError."""
    reproducer = bytes.fromhex("0000000f000f000000000001000178ffffffff")
    line = await hung_up_on(server, steady, reproducer, client_id="x", reason="non-nullable field groups")
    assert line["reason"] == "DESCRIBE_GROUPS v0 body does not decode: non-nullable field groups was serialized as null"


@pytest.mark.parametrize(("body", "name", "field"), LAST_ARRAYS, ids=LAST_ARRAY_IDS)
async def test_a_null_array_the_version_forbids_is_refused_at_decode(
    server: BrokerServer, steady: Steady, body: Any, name: str, field: str
) -> None:
    null = b"\x00" if type(body).__flexible__ else struct.pack(">i", -1)
    line = await hung_up_on(server, steady, with_count(body, null), client_id=HOSTILE, reason=name)
    assert line["reason"] == f"{name} body does not decode: non-nullable field {field} was serialized as null"
    assert "hostile-group" not in server.coordinator.groups


async def test_a_null_array_the_version_allows_is_served(server: BrokerServer, steady: Steady) -> None:
    """Metadata v1+ topics may be null (all topics): answered, connection kept."""
    before = steady.snapshot()
    client = await WireClient.connect(server.port, HOSTILE)
    try:
        answer = await client.call(request(ApiKey.METADATA, 1, topics=None))
        assert [t.name for t in answer.topics] == ["topic"]
    finally:
        await client.close()
    await steady.assert_untouched(before)


# -- defect 5: Metadata v10/v11 by topic id, answered as Kafka answers it -----------------------------------------


def metadata_v(version: int, name: str | None, topic_id: uuid.UUID | None) -> Any:
    return request(
        ApiKey.METADATA,
        version,
        topics=(part(ApiKey.METADATA, version, "MetadataRequestTopic", name=name, topic_id=topic_id),),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize(
    ("name", "by_id", "reason"),
    [
        (None, True, "Topic name can not be null for version {v}"),
        (None, False, "Topic name can not be null for version {v}"),
        ("topic", True, "Topic IDs are not supported in requests for version {v}"),
    ],
    ids=["null name and an id", "null name", "a name and an id"],
)
async def test_metadata_v10_v11_by_topic_id_is_invalid_request(
    server: BrokerServer, steady: Steady, version: int, name: str | None, by_id: bool, reason: str
) -> None:
    """KafkaApis.handleTopicMetadataRequest throws InvalidRequestException; getErrorResponse answers every topic
    with INVALID_REQUEST (a null name as ""), no brokers. The broker used to fail to encode its answer (a null name
    where v10/v11 answers have none) and drop the connection with a transport traceback."""
    before = steady.snapshot()
    registered = server.topics.get("topic")
    assert registered is not None
    topic_id = registered.topic_id if by_id else None
    with structlog.testing.capture_logs() as logs:
        client = await WireClient.connect(server.port, HOSTILE)
        try:
            answer = await client.call(metadata_v(version, name, topic_id))
            ((topic,),) = (answer.topics,)
            assert (topic.error_code, topic.name, topic.topic_id, topic.partitions) == (
                E.invalid_request,
                name or "",
                topic_id,
                (),
            )
            assert (answer.brokers, answer.cluster_id, answer.controller_id) == ((), None, -1)
            # The connection stays open, as Kafka's does: the next request is answered.
            assert [t.name for t in (await client.call(metadata_v(version, "topic", None))).topics] == ["topic"]
            host, port = client.writer.get_extra_info("sockname")[:2]
        finally:
            await client.close()
    (line,) = [entry for entry in logs if entry.get("event") == "invalid request"]
    assert (line["peer"], line["client_id"], line["api"], line["version"]) == (
        f"{host}:{port}",
        HOSTILE,
        "METADATA",
        version,
    )
    assert line["reason"] == reason.format(v=version)
    assert closing_lines(logs) == []
    await assert_still_serving(server)
    await steady.assert_untouched(before)


# -- every answer decodes with kio, to its last byte: Metadata v2 and SyncGroup v4, reported with trailing bytes ----


async def test_metadata_v2_and_sync_group_v4_answers_have_no_trailing_bytes(server: BrokerServer) -> None:
    """Issue 14 saw Metadata v2 and SyncGroup v4 answers with trailing bytes; none is produced now (a fuzz campaign
    over every API and version, decoding each answer as the request's header said, found none either). Every answer
    here goes through WireClient.decode, which refuses a trailing byte, across the states those answers take."""
    client = await WireClient.connect(server.port, HOSTILE)
    other = await WireClient.connect(server.port, "other")
    try:
        for topics in (None, [], ["topic"], ["auto-created", "not a valid name!", "topic"], ["x" * 249]):
            await client.call(
                request(
                    ApiKey.METADATA,
                    2,
                    topics=None
                    if topics is None
                    else tuple(part(ApiKey.METADATA, 2, "MetadataRequestTopic", name=name) for name in topics),
                )
            )
        member, generation = await stable_group(client, "trailing")
        for assignments in (((member, b"a" * 1000),), (), ((member, b""),)):
            await client.call(sync_request(4, "trailing", generation, member, assignments))  # the leader, Stable
        await client.call(sync_request(4, "trailing", generation + 1, member))  # ILLEGAL_GENERATION
        await client.call(sync_request(4, "trailing", generation, "unknown-member"))  # UNKNOWN_MEMBER_ID
        await client.call(sync_request(4, "no-such-group", 1, "m"))
        # A second member joins (its JoinGroup parks, the group rebalances), then the leader rejoins.
        first = await other.call(join_request(9, "trailing"))
        assert first.error_code is E.member_id_required
        await other.send_raw(other.encode(join_request(9, "trailing", member_id=first.member_id), 99))
        await eventually(lambda: server.coordinator.groups["trailing"].state is GroupState.PREPARING_REBALANCE)
        leader = await join_group(client, 9, "trailing", member_id=member)
        answered, follower = other.decode(ApiKey.JOIN_GROUP, 9, await other.read_frame())
        assert answered == 99
        assert follower.error_code is leader.error_code is E.none
        await client.call(
            sync_request(4, "trailing", leader.generation_id, member, ((member, b"l"), (follower.member_id, b"f")))
        )
        assert (
            await other.call(sync_request(4, "trailing", leader.generation_id, follower.member_id))
        ).assignment == b"f"
    finally:
        await client.close()
        await other.close()


# -- an answer that cannot be encoded ends its connection, said with peer and client ------------------------------


async def test_a_join_answer_too_long_to_encode_closes_the_connection(server: BrokerServer, steady: Steady) -> None:
    """JoinGroup v5 from a client id of 32,767 bytes: the member id Kafka builds (client id, "-", a UUID) is longer
    than a string may be (Kafka's writer: "'memberId' field is too long to be serialized")."""
    client_id = "c" * 32767
    frame = sized(encoded(join(5, "range"), client_id=client_id))
    reason = "the answer to JOIN_GROUP v5"
    line = await hung_up_on(server, steady, frame, client_id=client_id, reason=reason, joins=True)
    assert "cannot be encoded" in line["reason"] and "OutOfBoundValue" in line["reason"]


async def test_an_answer_that_runs_out_of_memory_closes_the_connection(
    server: BrokerServer, steady: Steady, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow reader's end before flow control: MemoryError in encode_response (a 23 MB Fetch answer too many).
    It is forced here for one Fetch; the connection closes with the reason, other clients never notice."""
    real = broker.server.pipeline.encode_response

    def out_of_memory(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
        if api_key == ApiKey.FETCH:
            raise MemoryError
        return real(api_key, api_version, correlation_id, body)

    monkeypatch.setattr(broker.server.pipeline, "encode_response", out_of_memory)
    fetch = fetch_request(12, [("topic", [fetch_partition(12, 0, 0)])])
    line = await hung_up_on(
        server, steady, sized(encoded(fetch)), client_id=HOSTILE, reason="the answer to FETCH v12 cannot be encoded"
    )
    assert line["reason"].endswith("MemoryError()")


# -- defect 3: a reader that never reads holds the broker's memory to the high-water mark --------------------------

PIPELINED = 106  # the reproducer's count
VALUE = 1_000_000  # one record under max.message.bytes: each Fetch answer ~1 MB, far past the high-water mark below
ANSWER = VALUE + 4096  # the record plus the Fetch envelope, generously
HIGH, LOW = 128 << 10, 32 << 10


def rss() -> int:
    with open("/proc/self/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+) kB", status.read()).group(1)) * 1024  # type: ignore[union-attr]


async def test_pipelined_fetches_never_read_stay_bounded_by_the_high_water_mark() -> None:
    """106 pipelined Fetches whose 1 MB answers each pass the high-water mark on their own: the broker holds one
    answer past the mark, not 106 (over 100 MB), and answers them all once the client reads."""
    server = BrokerServer(broker_settings(socket_send_buffer_high_bytes=HIGH, socket_send_buffer_low_bytes=LOW))
    await server.start()
    steady = await form_steady_group(server)
    producer = await WireClient.connect(server.port, "producer")
    slow = await WireClient.connect(server.port, HOSTILE)
    try:
        before = steady.snapshot()
        await produced(producer, 0, make_batch(value=b"v" * VALUE))
        fetch = fetch_request(12, [(topic_key(server, 12), [fetch_partition(12, 0, 0, max_bytes=2 * ANSWER)])])
        start = rss()
        await slow.send_raw(b"".join(slow.encode(fetch, correlation) for correlation in range(1, PIPELINED + 1)))
        connection = slow_connection(server, slow)
        await eventually(lambda: not connection.reading, timeout=10.0)
        peak = 0
        for _ in range(30):
            assert connection.unsent_bytes <= HIGH + ANSWER, connection.unsent_bytes
            peak = max(peak, rss() - start)
            await asyncio.sleep(0.01)
        assert peak < 32 << 20, f"RSS grew {peak >> 20} MB while the client did not read"
        await steady.assert_untouched(before)
        await assert_still_serving(server)
        for correlation in range(1, PIPELINED + 1):  # every answer arrives, whole, in order
            answered, response = slow.decode(ApiKey.FETCH, 12, await slow.read_frame(timeout=10.0))
            assert (answered, response.error_code) == (correlation, E.none)
    finally:
        for client in (producer, slow, steady.client):
            await client.close()
        await server.stop()
