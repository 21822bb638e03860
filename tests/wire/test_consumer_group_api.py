"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), every version, through a running broker over TCP.

docs/spec/consumer-groups.md sections 2 (wire formats), 2.4 (ApiVersions), 3.6 (topic ids), 4.1 (the request
layer), 9.2 and 9.3 (describing consumer groups), and checklist items 1-5 and 98-100. Tests marked "coordinator"
in their docstring need the coordinator's consumer-group logic (a join that succeeds); the rest exercise only the
API layer (a broker with the consumer protocol off, fault rules, the codec, the bounded pre-pass).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.consumer_groups import heartbeat_response
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import ConsumerHeartbeatResult
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from protocol.codec import encode_response, has_field
from tests.conftest import broker_settings
from tests.wire.client import Connect, WireClient, part, request
from tests.wire.test_bad_input import Steady, form_steady_group, sized
from tests.wire.test_hostile_frames import encoded, hung_up_on, with_count
from tests.wire.test_versions import describe_request, stable_group, versions

E = ErrorCode
HEARTBEAT, DESCRIBE = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
INT32_MIN = -(2**31)
ALL_GROUP_OPERATIONS = 3400
REBALANCE_MS = 300_000
DEFAULT_INTERVAL = datetime.timedelta(milliseconds=5000)  # group.consumer.heartbeat.interval.ms


def heartbeat(
    version: int,
    group_id: str,
    member_id: str,
    epoch: int,
    *,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_ms: int = -1,
    topics: tuple[str, ...] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    owned: dict[uuid.UUID, tuple[int, ...]] | None = None,
) -> Any:
    return request(
        HEARTBEAT,
        version,
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms),
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,  # v1+ only: ``request`` leaves it out of v0
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else tuple(
            part(HEARTBEAT, version, "TopicPartitions", topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in owned.items()
        ),
    )


def join(version: int, group_id: str, member_id: str, topics: tuple[str, ...] = ("topic",), **fields: Any) -> Any:
    """A full joining heartbeat (checklist: "join"): epoch 0, a rebalance timeout, names, nothing owned."""
    return heartbeat(version, group_id, member_id, 0, rebalance_ms=REBALANCE_MS, topics=topics, owned={}, **fields)


def consumer_describe(version: int, *group_ids: str, operations: bool = False) -> Any:
    return request(DESCRIBE, version, group_ids=group_ids, include_authorized_operations=operations)


def assigned(response: Any) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions}


def topic_id(server: BrokerServer, name: str = "topic") -> uuid.UUID:
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


def assert_error_only(response: Any, error: ErrorCode) -> None:
    """A heartbeat answer carrying nothing but its error (section 4.1, 4.15: no message before the coordinator)."""
    assert (response.error_code, response.error_message, response.member_id) == (error, None, None)
    assert (response.member_epoch, response.heartbeat_interval, response.assignment) == (0, datetime.timedelta(0), None)


@pytest.fixture
async def disabled() -> AsyncIterator[BrokerServer]:
    """A broker with ``group.coordinator.rebalance.protocols=classic``: the consumer protocol is off."""
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000, rebalance_protocols=("classic",))
    broker = BrokerServer(broker_settings(group=config))
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
async def steady(server: BrokerServer) -> AsyncIterator[Steady]:
    group = await form_steady_group(server)
    yield group
    await group.client.close()


# -- item 1: ApiVersions ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
async def test_api_versions_lists_both_apis_0_to_1_and_describe_groups_to_6(connect: Connect, version: int) -> None:
    client = await connect()
    response = await client.call(
        request(ApiKey.API_VERSIONS, version, client_software_name="wire-test", client_software_version="1.0")
    )
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (listed[68], listed[69], listed[ApiKey.DESCRIBE_GROUPS]) == ((0, 1), (0, 1), (0, 6))


# -- item 2: the consumer protocol off ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(HEARTBEAT))
async def test_heartbeat_answers_unsupported_version_when_the_protocol_is_off(
    disabled: BrokerServer, version: int
) -> None:
    client = await WireClient.connect(disabled.port)
    try:
        assert_error_only(await client.call(join(version, "g", str(uuid.uuid4()))), E.unsupported_version)
        assert_error_only(await client.call(heartbeat(version, "g", "m", 3)), E.unsupported_version)
        # Still listed in ApiVersions (section 2.4), and the connection stays open.
        versions_answer = await client.call(
            request(ApiKey.API_VERSIONS, 3, client_software_name="wire-test", client_software_version="1.0")
        )
        assert {k.api_key for k in versions_answer.api_keys} >= {68, 69}
    finally:
        await client.close()
    assert not disabled.coordinator.groups


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_describe_answers_unsupported_version_for_every_group_when_the_protocol_is_off(
    disabled: BrokerServer, version: int
) -> None:
    client = await WireClient.connect(disabled.port)
    try:
        response = await client.call(consumer_describe(version, "b", "a", "", "b", operations=True))
    finally:
        await client.close()
    assert response.throttle_time == datetime.timedelta(0)
    assert [g.group_id for g in response.groups] == ["b", "a", "", "b"]  # request order, repeats kept
    for group in response.groups:
        assert (group.error_code, group.error_message, group.group_state) == (E.unsupported_version, None, "")
        assert (group.group_epoch, group.assignment_epoch, group.assignor_name, group.members) == (0, 0, "", ())
        assert group.authorized_operations == INT32_MIN


# -- item 3: both heartbeat versions parse; their answers are the same bytes ---------------------------------------


async def test_v0_without_a_regex_and_v1_with_a_null_regex_parse(disabled: BrokerServer) -> None:
    """The request layer answers both (here UNSUPPORTED_VERSION), so kio and the bounded pre-pass read them."""
    assert not has_field(type(join(0, "g", "")), "subscribed_topic_regex")
    client = await WireClient.connect(disabled.port)
    try:
        for body in (join(0, "g", ""), join(1, "g", "member", regex=None), join(1, "g", "member", regex="t.*")):
            assert (await client.call(body)).error_code is E.unsupported_version
    finally:
        await client.close()


def test_the_heartbeat_response_is_the_same_bytes_in_both_versions() -> None:
    result = ConsumerHeartbeatResult(
        E.none, member_id="m", member_epoch=3, heartbeat_interval_ms=500, assignment=((uuid.uuid4(), (2, 0)),)
    )
    v0, v1 = (encode_response(HEARTBEAT, v, 9, heartbeat_response(v, result)) for v in (0, 1))
    assert v0 == v1


async def test_join_at_v0_and_v1_answer_alike(server: BrokerServer, connect: Connect) -> None:
    """Coordinator. Item 3 and item 7: v0 with MemberId "" gets a broker-made id; v1 brings its own."""
    client = await connect()
    answers = []
    for version, group, member in ((0, "cg-v0", ""), (1, "cg-v1", str(uuid.uuid4()))):
        response = await client.call(join(version, group, member))
        assert (response.error_code, response.error_message) == (E.none, None)
        assert response.member_id and (response.member_id == member or not member)
        assert (response.member_epoch, response.heartbeat_interval) == (1, DEFAULT_INTERVAL)
        assert assigned(response) == {topic_id(server): [0, 1, 2]}
        answers.append(response)
    assert type(answers[0]).__dataclass_fields__.keys() == type(answers[1]).__dataclass_fields__.keys()


# -- item 4: Assignment null and empty, byte by byte -----------------------------------------------------------------


def test_assignment_markers_in_the_encoded_response() -> None:
    """Section 2.1: null is the int8 marker -1; empty is marker 1, an empty compact array, the struct's tags."""

    def tail(assignment: Any) -> bytes:
        result = ConsumerHeartbeatResult(
            E.none, member_id="m", member_epoch=1, heartbeat_interval_ms=5000, assignment=assignment
        )
        return encode_response(HEARTBEAT, 1, 1, heartbeat_response(1, result))

    body_end = b"\x00\x00\x00\x01" + b"\x00\x00\x13\x88"  # member epoch 1, interval 5000
    assert tail(None).endswith(body_end + b"\xff" + b"\x00")
    assert tail(()).endswith(body_end + b"\x01" + b"\x01\x00" + b"\x00")
    one = uuid.UUID(int=1)
    assert tail(((one, (1, 0)),)).endswith(
        body_end + b"\x01" + b"\x02" + one.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00\x00" + b"\x00"
    )


async def test_assignment_markers_on_the_wire(server: BrokerServer, connect: Connect) -> None:
    """Coordinator. Item 4 with items 14 and 35: a join subscribed to nothing gets an empty assignment (marker 1),
    a steady heartbeat gets null (marker -1)."""
    client = await connect()
    member = str(uuid.uuid4())

    async def raw(body: Any) -> tuple[bytes, Any]:
        await client.send_raw(client.encode(body, 77))
        frame = await client.read_frame()
        correlation_id, response = client.decode(HEARTBEAT, 1, frame)
        assert correlation_id == 77
        return frame, response

    frame, joined = await raw(join(1, "cg-markers", member, topics=()))
    assert (joined.error_code, joined.member_epoch, assigned(joined)) == (E.none, 1, {})
    assert frame.endswith(b"\x01\x01\x00\x00")
    frame, steady = await raw(heartbeat(1, "cg-markers", member, joined.member_epoch))
    assert (steady.error_code, steady.member_epoch, steady.assignment) == (E.none, 1, None)
    assert steady.heartbeat_interval == DEFAULT_INTERVAL
    assert frame.endswith(b"\xff\x00")


# -- item 5: Metadata by topic id ------------------------------------------------------------------------------------


async def test_metadata_by_topic_id(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    known, unknown = topic_id(server), uuid.uuid4()

    def by_id(version: int) -> Any:
        entries = tuple(
            part(ApiKey.METADATA, version, "MetadataRequestTopic", name=None, topic_id=i) for i in (known, unknown)
        )
        return request(
            ApiKey.METADATA,
            version,
            topics=entries,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )

    for version in (12, 13):
        found, missing = (await client.call(by_id(version))).topics
        assert (found.error_code, found.name, found.topic_id, len(found.partitions)) == (E.none, "topic", known, 3)
        assert (missing.error_code, missing.name, missing.topic_id, missing.partitions) == (
            E.unknown_topic_id,
            None,
            unknown,
            (),
        )
    answer = await client.call(by_id(11))
    assert [(t.error_code, t.name) for t in answer.topics] == [(E.invalid_request, "")] * 2


# -- items 98, 99: ConsumerGroupDescribe -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_consumer_group_describe(server: BrokerServer, connect: Connect, version: int) -> None:
    """Coordinator. A one-member consumer group, an unknown id, a classic group and ""."""
    client = await connect("describer")
    member = str(uuid.uuid4())
    joined = await client.call(join(1, "cg-described", member, rack_id="rack-a"))
    assert joined.error_code is E.none, joined
    await stable_group(client, "classic-described")

    response = await client.call(
        consumer_describe(version, "cg-described", "no-such-group", "classic-described", "", operations=True)
    )
    described, unknown, classic, empty = response.groups
    assert (described.error_code, described.error_message, described.group_id) == (E.none, None, "cg-described")
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 1, 1)
    assert (described.assignor_name, described.authorized_operations) == ("uniform", ALL_GROUP_OPERATIONS)
    (m,) = described.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch) == (member, None, "rack-a", 1)
    assert (m.client_id, m.client_host) == ("describer", "/127.0.0.1")
    assert (m.subscribed_topic_names, m.subscribed_topic_regex) == (("topic",), "")
    for assignment in (m.assignment, m.target_assignment):
        ((topic,),) = (assignment.topic_partitions,)
        assert (topic.topic_id, topic.topic_name, sorted(topic.partitions)) == (topic_id(server), "topic", [0, 1, 2])
    assert has_field(type(m), "member_type") == (version >= 1)
    if version >= 1:
        assert m.member_type == 1

    assert (unknown.error_code, unknown.error_message) == (E.group_id_not_found, "Group no-such-group not found.")
    assert (classic.error_code, classic.error_message) == (
        E.group_id_not_found,
        "Group classic-described is not a consumer group.",
    )
    for entry in (unknown, classic):
        assert (entry.group_state, entry.group_epoch, entry.assignor_name, entry.members) == ("", 0, "", ())
        assert entry.authorized_operations == INT32_MIN
    assert (empty.group_id, empty.error_code) == ("", E.invalid_group_id)


# -- item 100: DescribeGroups of a consumer group ---------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
async def test_describe_groups_of_a_consumer_group(connect: Connect, version: int) -> None:
    """Coordinator (and ``GroupCoordinator.group_type``). v0-5: NONE, Dead, nothing else; v6: GROUP_ID_NOT_FOUND."""
    client = await connect()
    assert (await client.call(join(1, "cg-classic-view", str(uuid.uuid4())))).error_code is E.none
    (group,) = (await client.call(describe_request(version, "cg-classic-view"))).groups
    error = E.group_id_not_found if version >= 6 else E.none
    assert (group.error_code, group.group_id, group.group_state) == (error, "cg-classic-view", "Dead")
    assert (group.protocol_type, group.protocol_data, group.members) == ("", "", ())
    if version >= 6:
        assert group.error_message == "Group cg-classic-view is not a classic group."


# -- fault rules --------------------------------------------------------------------------------------------------


async def test_an_error_rule_matches_a_heartbeat_by_group_member_instance_and_client(disabled: BrokerServer) -> None:
    """The rule answers before the request layer; a heartbeat it does not match goes on (here to UNSUPPORTED_VERSION,
    the answer of a broker with the protocol off)."""
    disabled.faults.add(
        {
            "api": "ConsumerGroupHeartbeat",
            "action": "error",
            "error": "COORDINATOR_NOT_AVAILABLE",
            "group_id": "g",
            "member_id": "m",
            "group_instance_id": "i",
            "client_id": "faulted",
        }
    )
    faulted, other = await WireClient.connect(disabled.port, "faulted"), await WireClient.connect(disabled.port)
    try:
        for version in versions(HEARTBEAT):
            assert_error_only(await faulted.call(join(version, "g", "m", instance_id="i")), E.coordinator_not_available)
            assert_error_only(await faulted.call(join(version, "g", "m", instance_id="j")), E.unsupported_version)
            assert_error_only(await faulted.call(join(version, "h", "m", instance_id="i")), E.unsupported_version)
            assert_error_only(await other.call(join(version, "g", "m", instance_id="i")), E.unsupported_version)
    finally:
        await faulted.close()
        await other.close()


async def test_an_error_rule_answers_describe_for_every_group(disabled: BrokerServer) -> None:
    disabled.faults.add({"api": 69, "action": "error", "error": "NOT_COORDINATOR", "group_id": "first"})
    client = await WireClient.connect(disabled.port)
    try:
        for version in versions(DESCRIBE):
            response = await client.call(consumer_describe(version, "first", "second"))
            assert [(g.group_id, g.error_code, g.error_message) for g in response.groups] == [
                ("first", E.not_coordinator, None),
                ("second", E.not_coordinator, None),
            ]
            later = await client.call(consumer_describe(version, "second", "first"))
            assert {g.error_code for g in later.groups} == {E.unsupported_version}
    finally:
        await client.close()


# -- undecodable bodies: the connection closes, logged; the broker serves everyone else ------------------------------


def with_claim(body: Any, field: str, count: int) -> bytes:
    """``body`` (with ``field`` an empty compact array) as a frame whose ``field`` claims ``count`` elements."""
    empty, one = encoded(body), encoded(_replace(body, field, ("",)))
    at = next(i for i, (a, b) in enumerate(zip(empty, one, strict=False)) if a != b)
    assert empty[at] == 1  # an empty compact array: length + 1
    length, claim = count + 1, bytearray()
    while length > 0x7F:
        claim.append(length & 0x7F | 0x80)
        length >>= 7
    claim.append(length)
    return sized(empty[:at] + bytes(claim) + empty[at + 1 :])


def _replace(body: Any, field: str, value: Any) -> Any:
    return dataclasses.replace(body, **{field: value})


@pytest.mark.parametrize("version", versions(HEARTBEAT))
async def test_subscribed_names_claiming_2_to_the_31_entries_close_the_connection(
    server: BrokerServer, steady: Steady, version: int
) -> None:
    """protocol/bounds.py covers the new APIs: the claim is refused before kio would allocate for it."""
    frame = with_claim(join(version, "hostile-group", "m", topics=()), "subscribed_topic_names", 0x7FFFFFFF)
    line = await hung_up_on(server, steady, frame, client_id="hostile", reason="Tried to allocate")
    assert line["reason"].startswith(
        f"CONSUMER_GROUP_HEARTBEAT v{version} body does not decode: Tried to allocate a collection of size "
        "2147483647 for field subscribed_topic_names"
    )


@pytest.mark.parametrize("version", versions(DESCRIBE))
async def test_describe_group_ids_claiming_4_billion_entries_close_the_connection(
    server: BrokerServer, steady: Steady, version: int
) -> None:
    frame = with_claim(consumer_describe(version), "group_ids", 0xFFFFFFFE)
    line = await hung_up_on(server, steady, frame, client_id="hostile", reason="Tried to allocate")
    assert line["reason"].startswith(
        f"CONSUMER_GROUP_DESCRIBE v{version} body does not decode: Tried to allocate a collection of size "
        "4294967294 for field group_ids"
    )


async def test_null_and_truncated_heartbeats_close_the_connection(server: BrokerServer, steady: Steady) -> None:
    body = join(1, "", "m")
    payload = encoded(body)
    at = next(
        i for i, (a, b) in enumerate(zip(payload, encoded(_replace(body, "group_id", "x")), strict=False)) if a != b
    )
    null_group = sized(payload[:at] + b"\x00" + payload[at + 1 :])
    line = await hung_up_on(server, steady, null_group, client_id="hostile", reason="non-nullable field group_id")
    assert line["reason"].startswith("CONSUMER_GROUP_HEARTBEAT v1 body does not decode")
    await hung_up_on(server, steady, sized(payload[:-3]), client_id="hostile", reason="does not decode")
    # The last array, the owned partitions, claiming more than there is (the helper of the hostile-frame tests).
    lie = with_count(body, b"\x80\x80\x80\x80\x08")
    line = await hung_up_on(server, steady, lie, client_id="hostile", reason="Tried to allocate")
    assert "size 2147483647 for field topic_partitions" in line["reason"]
