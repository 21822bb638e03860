"""Metadata (3): one node is the whole cluster, leader and only replica of every partition; with ``--nodes N``
(issue 29) the running nodes are the brokers, each partition has the leader, epoch, replicas and ISR the cluster
layout gives it (cluster-and-durability.md 4.1), LEADER_NOT_AVAILABLE when no replica runs, and the controller is the
lowest running node."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.base import NO_AUTHORIZED_OPERATIONS, NO_THROTTLE, ApiContext, Call, InvalidRequest, Route
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from broker.storage.topics import Topic, is_valid_topic_name
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_ZERO_UUID = uuid.UUID(int=0)


def metadata(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.METADATA, version)
    broker_cls = nested(cls, "MetadataResponseBroker")
    topic_cls = nested(cls, "MetadataResponseTopic")
    partition_cls = nested(cls, "MetadataResponsePartition")
    identity = ctx.identity
    node = i32(identity.node_id)

    route = ctx.route

    def partition(topic: Topic, index: int) -> Any:
        if route is None:
            return build(
                partition_cls, error_code=ErrorCode.none, partition_index=i32(index), leader_id=node,
                leader_epoch=i32(0), replica_nodes=(node,), isr_nodes=(node,), offline_replicas=(),
            )  # fmt: skip
        layout = route.layout
        leadership = layout.leadership(topic.name, index)
        replicas = leadership.replicas
        return build(
            partition_cls,
            error_code=ErrorCode.none if leadership.leader >= 0 else ErrorCode.leader_not_available,
            partition_index=i32(index),
            leader_id=i32(leadership.leader),
            leader_epoch=i32(leadership.epoch),
            replica_nodes=tuple(i32(n) for n in replicas),
            isr_nodes=tuple(i32(n) for n in replicas if layout.up[n]),
            offline_replicas=tuple(i32(n) for n in replicas if not layout.up[n]),
        )

    authorizer = ctx.authorizer  # issue 30: DESCRIBE on each topic, CREATE to auto-create (spec 10)
    with_operations = authorizer is not None and getattr(body, "include_topic_authorized_operations", False)

    def describe(topic: Topic) -> Any:
        partitions = tuple(partition(topic, index) for index in range(topic.partitions))
        operations = NO_AUTHORIZED_OPERATIONS
        if with_operations:
            assert authorizer is not None
            operations = i32(authorizer.authorized_operations(call.client, ResourceType.TOPIC, topic.name))
        return build(
            topic_cls,
            error_code=ErrorCode.none,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=False,
            partitions=partitions,
            topic_authorized_operations=operations,
        )

    def may(operation: Operation, resource_type: ResourceType, name: str, report: bool = True) -> bool:
        if authorizer is None:
            return True
        return authorizer.authorize(call.client, "Metadata", operation, resource_type, name, report=report)

    def missing(name: str | None, error: ErrorCode, topic_id: Any = None) -> Any:
        return build(
            topic_cls,
            error_code=error,
            name=name,
            topic_id=topic_id if topic_id is not None else _ZERO_UUID,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        )

    requested = body.topics
    if version in (10, 11) and requested:
        _refuse_topic_ids(cls, version, requested)
    if requested is None or (version == 0 and not requested):
        # Every topic: those the client may not DESCRIBE are left out, as Kafka does (logged at DEBUG there).
        everything = ctx.topics.all()
        topics = tuple(describe(t) for t in everything if may(Operation.DESCRIBE, ResourceType.TOPIC, t.name, False))
    else:
        # v0-3 always allowed auto-creation; v4+ asks for it explicitly.
        allow_create = getattr(body, "allow_auto_topic_creation", True)
        answered = []
        for entry in requested:
            name = entry.name
            topic_id = getattr(entry, "topic_id", None)
            if name is None:
                found = ctx.topics.by_id(topic_id) if topic_id is not None else None
                answered.append(describe(found) if found else missing(None, ErrorCode.unknown_topic_id, topic_id))
                continue
            if authorizer is not None:
                # Denied DESCRIBE: 29, whether the topic exists or not (existence is not revealed); auto-creation
                # needs CREATE on the cluster or on the topic, else 29 too (KafkaApis.handleTopicMetadataRequest).
                if not may(Operation.DESCRIBE, ResourceType.TOPIC, name):
                    answered.append(missing(name, ErrorCode.topic_authorization_failed))
                    continue
                if allow_create and ctx.topics.get(name) is None and is_valid_topic_name(name):
                    creatable = may(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, False) or may(
                        Operation.CREATE, ResourceType.TOPIC, name
                    )
                    if not creatable:
                        if ctx.settings is None or ctx.settings.auto_create_topics:
                            answered.append(missing(name, ErrorCode.topic_authorization_failed))
                            continue
                        allow_create = False
            topic = ctx.topics.get_or_auto_create(name) if allow_create else ctx.topics.get(name)
            if topic is not None:
                answered.append(describe(topic))
            elif not is_valid_topic_name(name):
                answered.append(missing(name, ErrorCode.invalid_topic_exception))
            else:
                answered.append(missing(name, ErrorCode.unknown_topic_or_partition))
        topics = tuple(answered)

    if route is None:
        brokers: tuple[Any, ...] = (
            build(broker_cls, node_id=node, host=identity.host, port=i32(identity.port), rack=None),
        )
        controller = node
    else:
        brokers = tuple(
            build(broker_cls, node_id=i32(n), host=route.endpoints[n][0], port=i32(route.endpoints[n][1]), rack=None)
            for n in route.layout.running()
            if n in route.endpoints
        )
        controller = i32(route.layout.controller())
    cluster_operations = NO_AUTHORIZED_OPERATIONS
    if authorizer is not None and getattr(body, "include_cluster_authorized_operations", False):
        cluster_operations = i32(authorizer.authorized_operations(call.client, ResourceType.CLUSTER, CLUSTER_NAME))
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=identity.cluster_id,
        controller_id=controller,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
        error_code=ErrorCode.none,
    )


def _refuse_topic_ids(cls: type, version: int, requested: Any) -> None:
    """v10 and v11 carry a topic id and a nullable name, but look topics up by name only: KafkaApis'
    handleTopicMetadataRequest throws InvalidRequestException for a null name or a topic id, and
    MetadataRequest.getErrorResponse answers every requested topic with INVALID_REQUEST (a null name as ""),
    no brokers, no cluster id, controller -1."""
    if any(entry.name is None for entry in requested):
        reason = f"Topic name can not be null for version {version}"
    elif any(entry.topic_id is not None for entry in requested):  # kio reads the zero uuid (no id) as None
        reason = f"Topic IDs are not supported in requests for version {version}"
    else:
        return
    topic_cls = nested(cls, "MetadataResponseTopic")
    topics = tuple(
        build(
            topic_cls,
            error_code=ErrorCode.invalid_request,
            name=entry.name if entry.name is not None else "",
            topic_id=entry.topic_id if entry.topic_id is not None else _ZERO_UUID,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        )
        for entry in requested
    )
    answer = build(
        cls,
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=i32(-1),
        topics=topics,
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )
    raise InvalidRequest(reason, answer)


def _metadata_error(version: int, body: Any, error: ErrorCode) -> Any:
    """MetadataRequest.getErrorResponse: the error on every requested topic (a null name as ""), no brokers, no
    partitions, the top-level ErrorCode (v13) left NONE; a request for every topic gets no topic at all."""
    cls = response_schema(ApiKey.METADATA, version)
    topic_cls = nested(cls, "MetadataResponseTopic")
    topics = tuple(
        build(
            topic_cls,
            error_code=error,
            name=t.name or "",
            topic_id=getattr(t, "topic_id", None) or _ZERO_UUID,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        )
        for t in body.topics or ()
    )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=i32(-1),
        topics=topics,
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        error_code=ErrorCode.none,
    )


ROUTES = {ApiKey.METADATA: Route(metadata, _metadata_error)}
