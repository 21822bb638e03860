"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37), as Kafka's controller answers them.

Kafka 4 supports CreateTopics 2-7 and DeleteTopics 1-6 (KIP-896 removed the
older versions, and kio carries Kafka 4's schemas), so those are the ranges here.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from broker.api.base import NO_THROTTLE, ApiContext, Call
from broker.topics import InvalidConfig, Topic, check_configs, is_valid_topic_name
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_DYNAMIC_TOPIC_CONFIG, _DEFAULT_CONFIG = 1, 5
_DEFAULT_REPLICATION_FACTOR = 1
_BROKERS = 1
_ZERO_UUID = uuid.UUID(int=0)


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def create_topics(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.CREATE_TOPICS, call.api_version)
    result_cls = nested(cls, "CreatableTopicResult")
    config_cls = nested(cls, "CreatableTopicConfigs")
    counts = Counter(t.name for t in body.topics)
    results = []
    for request in body.topics:
        name = request.name
        topic: Topic | None = None
        partitions, replication = -1, -1
        try:
            if counts[name] > 1:
                raise _Refused(ErrorCode.invalid_request, "Found multiple entries for this topic.")
            if not is_valid_topic_name(name):
                raise _Refused(ErrorCode.invalid_topic_exception, f"Topic name {name!r} is illegal.")
            if ctx.topics.get(name) is not None:
                raise _Refused(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
            partitions, replication = _partitioning(ctx, request)
            configs = {c.name: c.value for c in request.configs}
            try:
                check_configs(configs)
            except InvalidConfig as bad:
                raise _Refused(ErrorCode.invalid_config, str(bad)) from None
            if not body.validate_only:
                topic = ctx.topics.create(name, partitions, {k: v for k, v in configs.items() if v is not None})
            error, message = ErrorCode.none, ""
        except _Refused as refusal:
            error, message = refusal.error, str(refusal)
            partitions, replication = -1, -1
        described = None
        if error is ErrorCode.none:
            overrides = topic.configs if topic is not None else {c.name: c.value for c in request.configs}
            described = _describe_configs(ctx, config_cls, overrides)
        results.append(
            build(
                result_cls,
                name=name,
                topic_id=topic.topic_id if topic is not None else _ZERO_UUID,
                error_code=error,
                error_message=message or None,
                topic_config_error_code=i16(0),
                num_partitions=i32(partitions),
                replication_factor=i16(replication),
                configs=described,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(results))


def _partitioning(ctx: ApiContext, request: Any) -> tuple[int, int]:
    """Partition count and replication factor, checked as ReplicationControlManager.createTopic does."""
    if request.assignments:
        if request.num_partitions != -1:
            raise _Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        if request.replication_factor != -1:
            raise _Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replicationFactor was not set to -1.",
            )
        indexes = sorted(a.partition_index for a in request.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(ErrorCode.invalid_replica_assignment, "Partitions must be numbered consecutively from 0.")
        for assignment in request.assignments:
            _check_replicas(ctx, assignment.broker_ids)
        return len(indexes), len(request.assignments[0].broker_ids)
    partitions = request.num_partitions if request.num_partitions != -1 else ctx.topics.default_partitions
    replication = request.replication_factor if request.replication_factor != -1 else _DEFAULT_REPLICATION_FACTOR
    if partitions <= 0:
        raise _Refused(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    if replication <= 0:
        raise _Refused(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if replication > _BROKERS:
        raise _Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication} time(s): The target replication factor of "
            f"{replication} cannot be reached because only {_BROKERS} broker(s) are registered.",
        )
    return partitions, replication


def _check_replicas(ctx: ApiContext, broker_ids: Any) -> None:
    if not broker_ids:
        raise _Refused(
            ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
        )
    if len(set(broker_ids)) != len(broker_ids):
        raise _Refused(
            ErrorCode.invalid_replica_assignment, "The manual partition assignment includes duplicate replicas."
        )
    for broker_id in broker_ids:
        if broker_id != ctx.identity.node_id:
            raise _Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )


def _describe_configs(ctx: ApiContext, cls: type, overrides: dict[str, Any]) -> tuple[Any, ...]:
    defaults = ctx.topics.defaults
    effective: dict[str, tuple[str | None, int]] = {
        "max.message.bytes": (str(defaults.max_message_bytes), _DEFAULT_CONFIG),
        "retention.bytes": (str(defaults.retention_bytes), _DEFAULT_CONFIG),
        "retention.ms": (str(defaults.retention_ms), _DEFAULT_CONFIG),
    }
    for name, value in overrides.items():
        effective[name] = (value, _DYNAMIC_TOPIC_CONFIG)
    return tuple(
        build(cls, name=name, value=value, read_only=False, config_source=i8(source), is_sensitive=False)
        for name, (value, source) in sorted(effective.items())
    )


def delete_topics(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.DELETE_TOPICS, version)
    result_cls = nested(cls, "DeletableTopicResult")
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    names = Counter(name for name, _ in wanted if name is not None)
    ids = Counter(topic_id for _, topic_id in wanted if topic_id is not None and topic_id.int != 0)
    doomed: list[Topic] = []
    results = []
    for name, topic_id in wanted:
        by_id = topic_id is not None and topic_id.int != 0
        topic: Topic | None = None
        error, message = ErrorCode.none, None
        if name is not None and by_id:
            error, message = ErrorCode.invalid_request, "You may not specify both topic name and topic id."
        elif (name is not None and names[name] > 1) or (by_id and ids[topic_id] > 1):
            error, message = ErrorCode.invalid_request, "Duplicate topic name or id."
        elif by_id:
            topic = ctx.topics.by_id(topic_id)
            if topic is None:
                error, message = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
        else:
            topic = ctx.topics.get(name) if name is not None else None
            if topic is None:
                error, message = ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        if topic is not None and topic not in doomed:
            doomed.append(topic)
        results.append(
            build(
                result_cls,
                name=topic.name if topic is not None else name,
                topic_id=topic.topic_id if topic is not None else (topic_id or _ZERO_UUID),
                error_code=error,
                error_message=message,
            )
        )
    for topic in doomed:
        ctx.topics.delete(topic)
        for log in topic.logs:
            ctx.fetches.log_removed(log)
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(results))


def create_partitions(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.CREATE_PARTITIONS, call.api_version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    counts = Counter(t.name for t in body.topics)
    results = []
    for request in body.topics:
        try:
            if counts[request.name] > 1:
                raise _Refused(ErrorCode.invalid_request, "Duplicate topic name.")
            topic = ctx.topics.get(request.name)
            if topic is None:
                raise _Refused(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
            if request.count < topic.partitions:
                raise _Refused(
                    ErrorCode.invalid_partitions,
                    f"The topic {request.name} currently has {topic.partitions} partition(s); "
                    f"{request.count} would not be an increase.",
                )
            if request.count == topic.partitions:
                raise _Refused(ErrorCode.invalid_partitions, f"Topic already has {topic.partitions} partition(s).")
            if request.assignments is not None:
                if len(request.assignments) != request.count - topic.partitions:
                    raise _Refused(
                        ErrorCode.invalid_replica_assignment,
                        f"Attempted to add {request.count - topic.partitions} additional partition(s), but only "
                        f"{len(request.assignments)} assignment(s) were specified.",
                    )
                for assignment in request.assignments:
                    _check_replicas(ctx, assignment.broker_ids)
            if not body.validate_only:
                ctx.topics.add_partitions(topic, request.count)
            error, message = ErrorCode.none, ""
        except _Refused as refusal:
            error, message = refusal.error, str(refusal)
        results.append(build(result_cls, name=request.name, error_code=error, error_message=message or None))
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))
