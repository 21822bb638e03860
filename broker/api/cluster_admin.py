"""DescribeCluster (60) and DeleteRecords (21); the ACL APIs are broker/api/acls.py.

Versions, as Kafka 4.0 serves them:
- DescribeCluster 0-2: v1 adds EndpointType (KIP-919; a broker listener answers only type 1, brokers), v2 adds
  IncludeFencedBrokers and Broker.IsFenced (KIP-1073; this broker is never fenced). Answered as
  ``KafkaApis.handleDescribeCluster`` and ``AuthHelper.computeDescribeClusterResponse`` do.
- DeleteRecords 0-2 (v2 is flexible): ``KafkaApis.handleDeleteRecordsRequest``, ``ReplicaManager.deleteRecords``,
  ``Partition.deleteRecordsOnLeader`` and ``UnifiedLog.maybeIncrementLogStartOffset``. With one replica the
  low watermark is this log's start offset at once, so the timeout never comes into play.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from broker.api.authorization import denied_topics
from broker.api.base import NO_AUTHORIZED_OPERATIONS, NO_THROTTLE, ApiContext, Call, Route, error_message
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

# EndpointType (KIP-919): 1 brokers, 2 controllers; anything else is UNKNOWN.
_BROKER_ENDPOINT, _CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {_BROKER_ENDPOINT: "BROKER", _CONTROLLER_ENDPOINT: "CONTROLLER"}
# AclOperation codes of what Kafka's AclEntry.supportedOperations lists for the CLUSTER resource (CREATE, ALTER,
# DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE): without an authorizer
# AuthHelper.authorizedOperations answers all of them.
ALL_CLUSTER_OPERATIONS = i32(sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12)))
# DeleteRecordsRequest.HIGH_WATERMARK and DeleteRecordsResponse.INVALID_LOW_WATERMARK.
_HIGH_WATERMARK = -1
_INVALID_LOW_WATERMARK = i64(-1)


def describe_cluster(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.DESCRIBE_CLUSTER, version)
    requested = int(getattr(body, "endpoint_type", _BROKER_ENDPOINT))  # v0 has none: brokers
    refusal: tuple[ErrorCode, str] | None = None
    if requested not in _ENDPOINT_NAMES:
        # The unknown type is checked before the mismatch; v0 cannot carry these codes, so INVALID_REQUEST.
        refusal = (ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {requested}")
    elif requested != _BROKER_ENDPOINT:
        refusal = (
            ErrorCode.mismatched_endpoint_type,
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            f"{_ENDPOINT_NAMES[requested]}",
        )
    if refusal is not None:
        error, message = refusal
        return _describe_cluster_error(version, body, ErrorCode.invalid_request if version == 0 else error, message)
    identity = ctx.identity
    node = i32(identity.node_id)
    broker = build(
        nested(cls, "DescribeClusterBroker"),
        broker_id=node,
        host=identity.host,
        port=i32(identity.port),
        rack=None,
        is_fenced=False,
    )
    operations = NO_AUTHORIZED_OPERATIONS
    if body.include_cluster_authorized_operations:
        authorizer = ctx.authorizer  # issue 30: the operations the client may do on the cluster
        operations = (
            ALL_CLUSTER_OPERATIONS
            if authorizer is None
            else i32(authorizer.authorized_operations(call.client, ResourceType.CLUSTER, CLUSTER_NAME))
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=i8(_BROKER_ENDPOINT),
        cluster_id=identity.cluster_id,
        controller_id=node,  # Metadata's answer too: this broker stands in for the controller
        brokers=(broker,),
        cluster_authorized_operations=operations,
    )


def delete_records(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.DELETE_RECORDS, call.api_version)
    topic_cls = nested(cls, "DeleteRecordsTopicResult")
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    # KafkaApis collects the request into a map by partition: a partition named twice is answered once, for its
    # last offset.
    wanted: dict[str, dict[int, int]] = {}
    for topic in body.topics:
        for p in topic.partitions:
            wanted.setdefault(topic.name, {})[int(p.partition_index)] = int(p.offset)
    topics = []
    denied = denied_topics(ctx, call, "DeleteRecords", Operation.DELETE, wanted)  # issue 30: DELETE on the topic
    for name, partitions in wanted.items():
        answers = []
        for index, offset in partitions.items():
            if name in denied:
                error, low_watermark = ErrorCode.topic_authorization_failed, _INVALID_LOW_WATERMARK
            else:
                error, low_watermark = _delete_partition(ctx, name, index, offset)
            answers.append(
                build(partition_cls, partition_index=i32(index), low_watermark=low_watermark, error_code=error)
            )
        topics.append(build(topic_cls, name=name, partitions=tuple(answers)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _delete_partition(ctx: ApiContext, name: str, index: int, offset: int) -> tuple[ErrorCode, i64]:
    """One partition's (error, low watermark), in Kafka's order of checks."""
    topic = ctx.topics.get(name)
    log = topic.log(index) if topic is not None else None
    if topic is None or log is None:
        return ErrorCode.unknown_topic_or_partition, _INVALID_LOW_WATERMARK
    # Several nodes: only the leader deletes (ReplicaManager.deleteRecordsOnLocalLog's getPartitionOrException,
    # Partition.deleteRecordsOnLeader's leaderLogIfLocal).
    if ctx.route is not None and ctx.route.partition_error(name, index) is not None:
        return ErrorCode.not_leader_or_follower, _INVALID_LOW_WATERMARK
    # Partition.deleteRecordsOnLeader: a log whose cleanup.policy lacks "delete" (compact only) keeps its records.
    policy = topic.configs.get("cleanup.policy", "delete")
    if "delete" not in (part.strip() for part in policy.split(",")):
        return ErrorCode.policy_violation, _INVALID_LOW_WATERMARK
    target = log.high_watermark if offset == _HIGH_WATERMARK else offset
    # Below 0 (other than -1) and past the high watermark are both OffsetOutOfRangeException.
    if target < 0 or target > log.high_watermark:
        return ErrorCode.offset_out_of_range, _INVALID_LOW_WATERMARK
    return ErrorCode.none, i64(log.delete_records_before(target))


def _describe_cluster_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    """DescribeClusterRequest.getErrorResponse: the code and the message alone, every other field at its schema
    default."""
    return build(
        response_schema(ApiKey.DESCRIBE_CLUSTER, version),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=error_message(error) if message is None else message,
        endpoint_type=i8(_BROKER_ENDPOINT),
        cluster_id="",
        controller_id=i32(-1),
        brokers=(),
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


def _delete_records_error(version: int, body: Any, error: ErrorCode) -> Any:
    # DeleteRecordsRequest.getErrorResponse: every requested partition, with no low watermark.
    cls = response_schema(ApiKey.DELETE_RECORDS, version)
    topic_cls = nested(cls, "DeleteRecordsTopicResult")
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    low_watermark=_INVALID_LOW_WATERMARK,
                    error_code=error,
                )
                for p in t.partitions
            ),
        )
        for t in body.topics
    )
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


ROUTES = {
    ApiKey.DESCRIBE_CLUSTER: Route(describe_cluster, _describe_cluster_error),
    ApiKey.DELETE_RECORDS: Route(delete_records, _delete_records_error),
}
