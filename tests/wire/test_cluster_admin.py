"""DescribeCluster, DeleteRecords and the ACL APIs over a real socket, every supported version.

What each answer must hold is Kafka 4.0's: ``AuthHelper.computeDescribeClusterResponse`` for DescribeCluster,
``ReplicaManager.deleteRecords`` / ``UnifiedLog.maybeIncrementLogStartOffset`` for DeleteRecords (the effects are
checked through Fetch and ListOffsets), and ``AclApis`` without an authorizer for the ACL APIs.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from broker.server.broker import BrokerServer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient, part, request
from tests.wire.test_data_plane import (
    EARLIEST,
    FETCH_V,
    LIST_OFFSETS_V,
    TOPIC,
    fetch_partition,
    fetch_partitions,
    list_offsets_request,
    produced,
)

E = ErrorCode
INT32_MIN = -(2**31)
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
ALL_CLUSTER_OPERATIONS = 8096
TIMEOUT = datetime.timedelta(seconds=5)


def versions(api: ApiKey) -> list[int]:
    low, high = SUPPORTED_VERSIONS[api]
    return list(range(low, high + 1))


# -- DescribeCluster -------------------------------------------------------------------------------


def describe_cluster_request(version: int, *, operations: bool = False, endpoint_type: int = 1) -> Any:
    return request(
        ApiKey.DESCRIBE_CLUSTER,
        version,
        include_cluster_authorized_operations=operations,
        endpoint_type=i8(endpoint_type),
        include_fenced_brokers=False,
    )


@pytest.mark.parametrize("operations", [False, True])
@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
async def test_describe_cluster(server: BrokerServer, connect: Connect, version: int, operations: bool) -> None:
    client = await connect()
    response = await client.call(describe_cluster_request(version, operations=operations))
    assert (response.error_code, response.error_message) == (E.none, None)
    assert response.cluster_id == "test-cluster"
    assert response.controller_id == 1
    (broker,) = response.brokers
    assert (broker.broker_id, broker.host, broker.port, broker.rack) == (1, "127.0.0.1", server.port, None)
    assert response.cluster_authorized_operations == (ALL_CLUSTER_OPERATIONS if operations else INT32_MIN)
    if version >= 1:
        assert response.endpoint_type == 1
    if version >= 2:
        assert broker.is_fenced is False


async def test_describe_cluster_matches_metadata(connect: Connect) -> None:
    client = await connect()
    cluster = await client.call(describe_cluster_request(1))
    metadata = await client.call(
        request(
            ApiKey.METADATA, 12, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    assert cluster.cluster_id == metadata.cluster_id
    assert cluster.controller_id == metadata.controller_id
    (described,), (listed,) = cluster.brokers, metadata.brokers
    assert (described.broker_id, described.host, described.port) == (listed.node_id, listed.host, listed.port)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.DESCRIBE_CLUSTER) if v >= 1])
@pytest.mark.parametrize(
    ("endpoint_type", "error", "message"),
    [
        (
            2,
            E.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        ),
        (3, E.unsupported_endpoint_type, "Unsupported endpoint type 3"),
        (0, E.unsupported_endpoint_type, "Unsupported endpoint type 0"),
        (-1, E.unsupported_endpoint_type, "Unsupported endpoint type -1"),
    ],
)
async def test_describe_cluster_refuses_other_endpoint_types(
    connect: Connect, version: int, endpoint_type: int, error: ErrorCode, message: str
) -> None:
    client = await connect()
    response = await client.call(describe_cluster_request(version, operations=True, endpoint_type=endpoint_type))
    assert (response.error_code, response.error_message) == (error, message)
    # The code and the message alone: the rest keeps the schema's defaults.
    assert (response.cluster_id, response.controller_id, response.brokers) == ("", -1, ())
    assert (response.endpoint_type, response.cluster_authorized_operations) == (1, INT32_MIN)
    # The connection stays usable.
    assert (await client.call(describe_cluster_request(version))).error_code is E.none


# -- DeleteRecords ---------------------------------------------------------------------------------


def delete_records_request(version: int, topics: dict[str, list[tuple[int, int]]]) -> Any:
    return request(
        ApiKey.DELETE_RECORDS,
        version,
        timeout=TIMEOUT,
        topics=tuple(
            part(
                ApiKey.DELETE_RECORDS,
                version,
                "DeleteRecordsTopic",
                name=name,
                partitions=tuple(
                    part(
                        ApiKey.DELETE_RECORDS,
                        version,
                        "DeleteRecordsPartition",
                        partition_index=i32(index),
                        offset=i64(offset),
                    )
                    for index, offset in partitions
                ),
            )
            for name, partitions in topics.items()
        ),
    )


async def delete_records(
    client: WireClient, version: int, topics: dict[str, list[tuple[int, int]]]
) -> dict[str, list[tuple[int, ErrorCode, int]]]:
    response = await client.call(delete_records_request(version, topics))
    return {t.name: [(p.partition_index, p.error_code, p.low_watermark) for p in t.partitions] for t in response.topics}


async def earliest(client: WireClient, partition: int) -> int:
    response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(partition, EARLIEST)]))
    (answer,) = response.topics[0].partitions
    assert answer.error_code is E.none
    return int(answer.offset)


async def fill(client: WireClient, partition: int, batches: int = 3) -> None:
    """``batches`` batches of two records each: offsets 0 to 2 * batches - 1."""
    for _ in range(batches):
        await produced(client, partition, make_batch(2))


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_RECORDS))
async def test_delete_records_moves_the_log_start(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await fill(client, 0)
    used = server.topics.budget.used
    assert await delete_records(client, version, {TOPIC: [(0, 3)]}) == {TOPIC: [(0, E.none, 3)]}
    assert await earliest(client, 0) == 3
    assert server.topics.budget.used < used  # the batch wholly below offset 3 is gone

    below, at = await fetch_partitions(
        client, server, FETCH_V, [fetch_partition(FETCH_V, 0, 2), fetch_partition(FETCH_V, 1, 0)]
    )
    assert below.error_code is E.offset_out_of_range
    (answer,) = await fetch_partitions(client, server, FETCH_V, [fetch_partition(FETCH_V, 0, 3)])
    assert (answer.error_code, answer.log_start_offset, answer.high_watermark) == (E.none, 3, 6)
    assert answer.records  # the batch holding offset 3 (2-3), whole, as Kafka reads a segment
    assert at.error_code is E.none

    # Never backward: an offset below the start answers the start as it is.
    assert await delete_records(client, version, {TOPIC: [(0, 1)]}) == {TOPIC: [(0, E.none, 3)]}
    # -1 is the high watermark: everything goes, and the log goes on from there.
    assert await delete_records(client, version, {TOPIC: [(0, -1)]}) == {TOPIC: [(0, E.none, 6)]}
    assert await earliest(client, 0) == 6
    assert server.topics.budget.used == 0
    assert await produced(client, 0, make_batch(1)) == 6
    assert await earliest(client, 0) == 6


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_RECORDS))
async def test_delete_records_errors(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    await fill(client, 1, batches=2)
    server.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    answered = await delete_records(
        client,
        version,
        {
            TOPIC: [(1, 5), (2, -2), (7, 0), (-1, 0)],
            "no-such-topic": [(0, 0)],
            "compacted": [(0, 0)],
        },
    )
    assert answered == {
        TOPIC: [
            (1, E.offset_out_of_range, -1),  # past the high watermark (4)
            (2, E.offset_out_of_range, -1),  # negative, not -1
            (7, E.unknown_topic_or_partition, -1),
            (-1, E.unknown_topic_or_partition, -1),
        ],
        "no-such-topic": [(0, E.unknown_topic_or_partition, -1)],
        "compacted": [(0, E.policy_violation, -1)],
    }
    assert await earliest(client, 1) == 0  # nothing moved
    # Up to the high watermark itself is allowed.
    assert await delete_records(client, version, {TOPIC: [(1, 4)]}) == {TOPIC: [(1, E.none, 4)]}


async def test_delete_records_answers_a_repeated_partition_once(connect: Connect) -> None:
    client = await connect()
    await fill(client, 0)
    answered = await delete_records(client, 2, {TOPIC: [(0, 1), (2, 0), (0, 4)]})
    assert answered == {TOPIC: [(0, E.none, 4), (2, E.none, 0)]}


async def test_delete_records_then_retention_keeps_the_start(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    await fill(client, 0)
    await delete_records(client, 2, {TOPIC: [(0, 3)]})
    topic = server.topics.get(TOPIC)
    assert topic is not None
    log = topic.logs[0]
    assert log.enforce_retention(0, -1, -1) == 0
    assert log.log_start_offset == 3


async def test_delete_records_truncated_body_closes_the_connection(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    frame = client.encode(delete_records_request(2, {TOPIC: [(0, 1)]}))
    cut = frame[4:-6]
    await client.send_raw(len(cut).to_bytes(4, "big") + cut)
    assert await client.closed_by_peer()
    fresh = await connect()
    assert await delete_records(fresh, 2, {TOPIC: [(0, 0)]}) == {TOPIC: [(0, E.none, 0)]}


# -- ACLs without an authorizer -----------------------------------------------------------------------


def acl_filter(api: ApiKey, version: int, cls: str) -> Any:
    return part(
        api,
        version,
        cls,
        resource_type_filter=i8(1),  # ANY
        resource_name_filter=None,
        pattern_type_filter=i8(1),  # ANY
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_ACLS))
async def test_describe_acls_is_security_disabled(connect: Connect, version: int) -> None:
    client = await connect()
    body = acl_filter(ApiKey.DESCRIBE_ACLS, version, "DescribeAclsRequest")
    response = await client.call(body)
    assert (response.error_code, response.error_message) == (
        E.security_disabled,
        "No Authorizer is configured on the broker",
    )
    assert response.resources == ()


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_ACLS))
async def test_create_acls_is_security_disabled_per_creation(connect: Connect, version: int) -> None:
    client = await connect()
    creation = part(
        ApiKey.CREATE_ACLS,
        version,
        "AclCreation",
        resource_type=i8(2),  # TOPIC
        resource_name="topic",
        resource_pattern_type=i8(3),  # LITERAL
        principal="User:alice",
        host="*",
        operation=i8(3),  # READ
        permission_type=i8(3),  # ALLOW
    )
    response = await client.call(request(ApiKey.CREATE_ACLS, version, creations=(creation, creation)))
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (E.security_disabled, "No Authorizer is configured.")
    ] * 2
    empty = await client.call(request(ApiKey.CREATE_ACLS, version, creations=()))
    assert empty.results == ()


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_ACLS))
async def test_delete_acls_is_security_disabled_per_filter(connect: Connect, version: int) -> None:
    client = await connect()
    one = acl_filter(ApiKey.DELETE_ACLS, version, "DeleteAclsFilter")
    response = await client.call(request(ApiKey.DELETE_ACLS, version, filters=(one, one, one)))
    assert [(r.error_code, r.error_message, r.matching_acls) for r in response.filter_results] == [
        (E.security_disabled, "No Authorizer is configured.", ())
    ] * 3
