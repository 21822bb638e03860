"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37), as Kafka's controller answers them.

Kafka 4 supports CreateTopics 2-7 and DeleteTopics 1-6 (KIP-896 removed the
older versions, and kio carries Kafka 4's schemas), so those are the ranges here.

Two limits are checked before anything is allocated (issue 14's partition bomb):
- max.partitions.per.request: Kafka's controller refuses an operation that would write more than
  MAX_RECORDS_PER_USER_OP (10,000) metadata records, counted as it counts them (CreateTopics: a
  TopicRecord, a ConfigRecord per config and a PartitionRecord per partition of each topic it would
  create; CreatePartitions: a PartitionRecord per partition added), with POLICY_VIOLATION
  "Unable to perform excessively large batch operation.". CreateTopics refuses the whole request.
- max.partitions.per.topic (ours): a topic may not have more partitions, POLICY_VIOLATION for that
  topic alone; checked after everything Kafka checks, so at the defaults Kafka's answer comes first.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from broker.api.authorization import topic_allowed
from broker.api.base import NO_THROTTLE, ApiContext, Call, Refused, Route, error_message
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from broker.storage.topics import InvalidConfig, Topic, check_configs, shown, topic_name_problem
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_DYNAMIC_TOPIC_CONFIG, _DEFAULT_CONFIG = 1, 5
_DEFAULT_REPLICATION_FACTOR = 1
_ZERO_UUID = uuid.UUID(int=0)
_DUPLICATE_NAME = "Duplicate topic name."
_UNKNOWN_TOPIC = "This server does not host this topic-partition."
# EventHandlerExceptionInfo's PolicyViolationException for a BoundedListTooLongException (KAFKA-14996).
_EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."

log = structlog.get_logger("topic_admin")


def create_topics(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.CREATE_TOPICS, version)
    result_cls = nested(cls, "CreatableTopicResult")
    config_cls = nested(cls, "CreatableTopicConfigs") if version >= 5 else None
    counts = Counter(t.name for t in body.topics)
    # Everything is checked before anything is created: a refusal of the whole request leaves nothing behind.
    planned: list[tuple[Any, ErrorCode, str, int, int, list[tuple[int, ...]]]] = []
    records = 0  # metadata records, as ReplicationControlManager.createTopic adds them
    claimed: dict[str, str] = {}  # the topics planned so far, by their names with '.' made '_'
    # Issue 30: CREATE on the cluster, else on each topic (KafkaApis.handleCreateTopicsRequest).
    authorizer = ctx.authorizer
    everywhere = authorizer is None or authorizer.authorize(
        call.client, "CreateTopics", Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, report=False
    )

    for request in body.topics:
        name = request.name
        if counts[name] > 1:
            continue  # ControllerApis answers a duplicated name once, after the rest
        partitions, replication = -1, -1
        assigned: list[tuple[int, ...]] = []
        try:
            if not everywhere and not topic_allowed(ctx, call, "CreateTopics", Operation.CREATE, name):
                raise Refused(ErrorCode.topic_authorization_failed, "Authorization failed.")
            # ReplicationControlManager.createTopics' order: name, existence, configs, then the partitioning.
            problem = topic_name_problem(name)
            if problem is not None:
                raise Refused(ErrorCode.invalid_topic_exception, problem)
            if ctx.topics.get(name) is not None:
                raise Refused(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
            unified = name.replace(".", "_")
            clash = ctx.topics.colliding(name) or claimed.get(unified)
            if clash is not None:
                # '.' and '_' both become '_' in metric names, so Kafka refuses names equal up to them.
                raise Refused(
                    ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {clash}"
                )
            configs = {c.name: c.value for c in request.configs}
            nulls = [c.name for c in request.configs if c.value is None]
            if nulls:
                raise Refused(
                    ErrorCode.invalid_config,
                    f"Null value not supported for topic configs: {shown(','.join(nulls))}",
                )
            try:
                check_configs(configs)
            except InvalidConfig as bad:
                raise Refused(ErrorCode.invalid_config, str(bad)) from None
            partitions, replication, assigned = _partitioning(ctx, request)
            # A TopicRecord, a ConfigRecord per config, a PartitionRecord per partition.
            counted = records + 1 + len(configs) + partitions
            if counted > ctx.topics.max_partitions_per_request:
                return _too_large(ctx, call, body.topics, counted)
            # Ours, checked where Kafka consults its CreateTopicPolicy (whose refusals are POLICY_VIOLATION too),
            # after everything Kafka checks: with both limits at their default, Kafka's answer always comes first.
            _check_topic_size(ctx, name, partitions)
            records = counted
            claimed[unified] = name
            error, message = ErrorCode.none, ""
        except Refused as refusal:
            error, message = refusal.error, refusal.message or ""
            partitions, replication, assigned = -1, -1, []
        planned.append((request, error, message, partitions, replication, assigned))
    results = []
    for request, error, message, partitions, replication, assigned in planned:
        topic: Topic | None = None
        if error is ErrorCode.none and not body.validate_only:
            topic = ctx.topics.create(request.name, partitions, {c.name: c.value for c in request.configs})
            if ctx.route is not None:
                # Its partitions get that many replicas, or exactly the ones assigned (the first running leads).
                ctx.route.layout.add_topic(request.name, replication, assigned)
        # An error result carries Kafka's defaults: no id, -1 counts, an empty config list.
        described: tuple[Any, ...] = ()
        if error is ErrorCode.none and config_cls is not None:
            overrides = topic.configs if topic is not None else {c.name: c.value for c in request.configs}
            described = _describe_configs(ctx, config_cls, overrides)
        results.append(
            _create_result(result_cls, request.name, error, message, topic, partitions, replication, described)
        )
    for name, count in counts.items():
        if count > 1:
            results.append(_create_result(result_cls, name, ErrorCode.invalid_request, _DUPLICATE_NAME))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(results))


def _too_large(ctx: ApiContext, call: Call, topics: Any, records: int) -> Any:
    """The whole CreateTopics refused, as Kafka refuses an operation past MAX_RECORDS_PER_USER_OP.

    ReplicationControlManager adds its records to a BoundedList; the BoundedListTooLongException fails the whole
    controller operation, EventHandlerExceptionInfo makes it a PolicyViolationException, and ControllerApis answers
    it with CreateTopicsRequest.getErrorResponse: that error for every topic of the request, duplicates included.
    """
    _log_refusal(call, "CreateTopics", ctx.topics.max_partitions_per_request, records)
    return _create_topics_error(call.api_version, topics, ErrorCode.policy_violation, _EXCESSIVE_BATCH)


def _create_topics_error(version: int, topics: Any, error: ErrorCode, message: str) -> Any:
    """CreateTopicsRequest.getErrorResponse: ``error`` and ``message`` for every topic of the request."""
    cls = response_schema(ApiKey.CREATE_TOPICS, version)
    result_cls = nested(cls, "CreatableTopicResult")
    return build(
        cls, throttle_time=NO_THROTTLE, topics=tuple(_create_result(result_cls, t.name, error, message) for t in topics)
    )


def _log_refusal(call: Call, api: str, limit: int, records: int) -> None:
    log.warning(
        "topic change refused",
        api=api,
        client_id=call.client.client_id,
        host=call.client.host,
        reason=f"it would create at least {records} metadata records, more than max.partitions.per.request ({limit})",
    )


def _create_result(
    cls: type,
    name: str,
    error: ErrorCode,
    message: str,
    topic: Topic | None = None,
    partitions: int = -1,
    replication: int = -1,
    configs: tuple[Any, ...] = (),
) -> Any:
    return build(
        cls,
        name=name,
        topic_id=topic.topic_id if topic is not None else _ZERO_UUID,
        error_code=error,
        error_message=message or None,
        topic_config_error_code=i16(0),
        num_partitions=i32(partitions),
        replication_factor=i16(replication),
        configs=configs,
    )


def _partitioning(ctx: ApiContext, request: Any) -> tuple[int, int, list[tuple[int, ...]]]:
    """Partition count, replication factor and the manual assignments by partition (empty: placed round robin),
    checked as ReplicationControlManager.createTopic does, in its order."""
    if request.assignments:
        if request.replication_factor != -1:
            raise Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if request.num_partitions != -1:
            raise Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        placed: dict[int, tuple[int, ...]] = {}
        factor: int | None = None
        for assignment in request.assignments:
            if assignment.partition_index in placed:
                raise Refused(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {assignment.partition_index}",
                )
            replicas = tuple(int(broker_id) for broker_id in assignment.broker_ids)
            _check_replicas(ctx, replicas, factor)
            factor = len(replicas)
            _check_some_running(ctx, replicas, assignment.partition_index)
            placed[assignment.partition_index] = replicas
        if any(partition not in placed for partition in range(len(placed))):
            raise Refused(
                ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
            )
        return len(placed), len(placed[0]), [placed[partition] for partition in range(len(placed))]
    if request.replication_factor < -1 or request.replication_factor == 0:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if request.num_partitions < -1 or request.num_partitions == 0:
        raise Refused(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    partitions = request.num_partitions if request.num_partitions != -1 else ctx.topics.default_partitions
    # default.replication.factor: 1 on one node, min(3, N) or --default-replication-factor on N (layout.py).
    default = _DEFAULT_REPLICATION_FACTOR if ctx.route is None else ctx.route.layout.replication_factor
    replication = request.replication_factor if request.replication_factor != -1 else default
    brokers = len(_brokers(ctx))
    if replication > brokers:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication} time(s): The target replication factor of "
            f"{replication} cannot be reached because only {brokers} broker(s) are registered.",
        )
    return partitions, replication, []


def _check_topic_size(ctx: ApiContext, name: str, partitions: int) -> None:
    """Ours (Kafka has no such limit): every partition of a test broker is kept in memory, and listed by Metadata."""
    limit = ctx.topics.max_partitions_per_topic
    if partitions > limit:
        raise Refused(
            ErrorCode.policy_violation,
            f"Topic '{name}' would have {partitions} partitions, more than max.partitions.per.topic ({limit}).",
        )


def _brokers(ctx: ApiContext) -> tuple[int, ...]:
    """The registered brokers: this node alone, or every node of a multi-node broker (stopped ones too, as Kafka
    keeps a fenced broker registered)."""
    return (ctx.identity.node_id,) if ctx.route is None else ctx.route.layout.order


def _check_replicas(ctx: ApiContext, broker_ids: tuple[int, ...], factor: int | None) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment against the registered brokers: not empty, every
    broker registered and named once (checked in id order, as Kafka sorts them), and as many replicas as the
    partitions before (``factor``; CreatePartitions: the topic's)."""
    if not broker_ids:
        raise Refused(
            ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    brokers = _brokers(ctx)
    for broker_id in sorted(broker_ids):
        if broker_id not in brokers:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if factor is not None and len(broker_ids) != factor:
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this is "
            f"not consistent with previous partitions, which have {factor} replica(s).",
        )


def _check_some_running(ctx: ApiContext, broker_ids: tuple[int, ...], partition: int) -> None:
    """A partition whose assigned replicas are all stopped would have no ISR (Kafka: fenced or shutting down)."""
    if ctx.route is not None and not any(ctx.route.layout.up[broker_id] for broker_id in broker_ids):
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"All brokers specified in the manual partition assignment for partition {partition} are fenced or in "
            "controlled shutdown.",
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
    """ControllerApis.deleteTopics: malformed and duplicated entries are answered once each, the rest deleted."""
    version = call.api_version
    cls = response_schema(ApiKey.DELETE_TOPICS, version)
    result_cls = nested(cls, "DeletableTopicResult")
    results: list[Any] = []

    def answer(name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None) -> None:
        results.append(build(result_cls, name=name, topic_id=topic_id, error_code=error, error_message=message))

    if version >= 6:
        wanted = [(t.name, t.topic_id or _ZERO_UUID) for t in body.topics]
    else:
        wanted = [(name, _ZERO_UUID) for name in body.topic_names]
    names: dict[str, int] = {}
    ids: dict[uuid.UUID, int] = {}
    for name, topic_id in wanted:
        if name is None and topic_id == _ZERO_UUID:
            answer(None, _ZERO_UUID, ErrorCode.invalid_request, "Neither topic name nor id were specified.")
        elif name is None:
            ids[topic_id] = ids.get(topic_id, 0) + 1
        elif topic_id == _ZERO_UUID:
            names[name] = names.get(name, 0) + 1
        else:
            answer(name, topic_id, ErrorCode.invalid_request, "You may not specify both topic name and topic id.")
    for name, count in names.items():
        if count > 1:
            answer(name, _ZERO_UUID, ErrorCode.invalid_request, _DUPLICATE_NAME)
    for topic_id, count in ids.items():
        if count > 1:
            answer(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.")
    duplicated_ids = {topic_id for topic_id, count in ids.items() if count > 1}
    doomed: dict[uuid.UUID, Topic] = {}
    for topic_id, count in ids.items():
        if count == 1:
            topic = ctx.topics.by_id(topic_id)
            if topic is not None and not _may_delete(ctx, call, topic.name):
                answer(None, topic_id, ErrorCode.topic_authorization_failed, _DENIED)
            elif topic is None:
                answer(None, topic_id, ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
            else:
                doomed[topic_id] = topic
    for name, count in names.items():
        if count > 1:
            continue
        topic = ctx.topics.get(name)
        if not _may_delete(ctx, call, name):
            answer(name, _ZERO_UUID, ErrorCode.topic_authorization_failed, _DENIED)
        elif topic is None:
            answer(name, _ZERO_UUID, ErrorCode.unknown_topic_or_partition, _UNKNOWN_TOPIC)
        elif topic.topic_id in duplicated_ids or topic.topic_id in doomed:
            # Named and given by id too: neither entry is acted on.
            duplicated_ids.add(topic.topic_id)
            doomed.pop(topic.topic_id, None)
            answer(
                name,
                topic.topic_id,
                ErrorCode.invalid_request,
                "The provided topic name maps to an ID that was already supplied.",
            )
        else:
            doomed[topic.topic_id] = topic
    for topic in doomed.values():
        logs = list(topic.logs)
        ctx.topics.delete(topic)
        if ctx.route is not None:
            # A topic made again under its name starts at epoch 0, after a restart too.
            ctx.route.layout.forget_topic(topic.name, len(logs))
        for log in logs:
            ctx.fetches.log_removed(log)
        answer(topic.name, topic.topic_id, ErrorCode.none, None)
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(results))


_DENIED = "Authorization failed."


def _may_delete(ctx: ApiContext, call: Call, name: str) -> bool:
    """Issue 30: DESCRIBE, then DELETE, on the topic (KafkaApis.handleDeleteTopicsRequest)."""
    return topic_allowed(ctx, call, "DeleteTopics", Operation.DESCRIBE, name) and topic_allowed(
        ctx, call, "DeleteTopics", Operation.DELETE, name
    )


def create_partitions(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.CREATE_PARTITIONS, call.api_version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    counts = Counter(t.name for t in body.topics)
    limit = ctx.topics.max_partitions_per_request
    if len(counts) - sum(1 for c in counts.values() if c > 1) > limit:
        # ReplicationControlManager's results list is a BoundedList too: the whole operation fails, and ControllerApis
        # answers every topic of the request (getErrorResponse) with the PolicyViolationException.
        _log_refusal(call, "CreatePartitions", limit, len(counts))
        return _create_partitions_error(call.api_version, body, ErrorCode.policy_violation, _EXCESSIVE_BATCH)
    # ControllerApis answers each duplicated name once, before the rest.
    results = [
        build(result_cls, name=name, error_code=ErrorCode.invalid_request, error_message=_DUPLICATE_NAME)
        for name, count in counts.items()
        if count > 1
    ]
    growing: list[tuple[Topic, int, list[tuple[int, ...]]]] = []
    records = 0  # PartitionRecords, as ReplicationControlManager.createPartitions adds them
    overflowed = False
    for request in body.topics:
        if counts[request.name] > 1:
            continue
        try:
            if not topic_allowed(ctx, call, "CreatePartitions", Operation.ALTER, request.name):
                raise Refused(ErrorCode.topic_authorization_failed, _DENIED)  # issue 30: ALTER on the topic
            topic = ctx.topics.get(request.name)
            if topic is None:
                # A bare UnknownTopicOrPartitionException: ApiError.fromThrowable sends no message.
                raise Refused(ErrorCode.unknown_topic_or_partition, "")
            if request.count < topic.partitions:
                raise Refused(
                    ErrorCode.invalid_partitions,
                    f"The topic {request.name} currently has {topic.partitions} partition(s); "
                    f"{request.count} would not be an increase.",
                )
            if request.count == topic.partitions:
                raise Refused(ErrorCode.invalid_partitions, f"Topic already has {topic.partitions} partition(s).")
            if request.assignments is not None and len(request.assignments) != request.count - topic.partitions:
                raise Refused(
                    ErrorCode.invalid_replica_assignment,
                    f"Attempted to add {request.count - topic.partitions} additional partition(s), but only "
                    f"{len(request.assignments)} assignment(s) were specified.",
                )
            assigned: list[tuple[int, ...]] = []
            if request.assignments is not None:
                # As many replicas as the topic's first partition (ReplicationControlManager.createPartitions).
                factor = 1 if ctx.route is None else len(ctx.route.layout.leadership(request.name, 0).replicas)
                for index, assignment in enumerate(request.assignments):
                    replicas = tuple(int(broker_id) for broker_id in assignment.broker_ids)
                    _check_replicas(ctx, replicas, factor)
                    _check_some_running(ctx, replicas, topic.partitions + index)
                    assigned.append(replicas)
            counted = records + request.count - topic.partitions
            if overflowed or counted > limit:
                # Kafka's BoundedList overflows here, inside createPartitions' per-topic try: its catch-all answers
                # this topic UNKNOWN_SERVER_ERROR, keeps the records added before the overflow (a partial growth)
                # and fails every later topic the same way (the list stays full). Here the topic is refused whole,
                # with the PolicyViolationException KAFKA-14996 meant for an overly large operation, and so is
                # every later one that would add partitions.
                if not overflowed:
                    _log_refusal(call, "CreatePartitions", limit, counted)
                overflowed = True
                raise Refused(ErrorCode.policy_violation, _EXCESSIVE_BATCH)
            _check_topic_size(ctx, request.name, request.count)
            records = counted
            growing.append((topic, request.count, assigned))
            error, message = ErrorCode.none, ""
        except Refused as refusal:
            error, message = refusal.error, refusal.message or ""
        results.append(build(result_cls, name=request.name, error_code=error, error_message=message or None))
    if not body.validate_only:
        for topic, count, assigned in growing:
            first = topic.partitions
            ctx.topics.add_partitions(topic, count)
            if ctx.route is not None and assigned:
                layout = ctx.route.layout
                layout.add_topic(topic.name, len(layout.leadership(topic.name, 0).replicas), assigned, first)
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _create_partitions_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    """CreatePartitionsRequest.getErrorResponse: ``error`` and its message for every topic of the request."""
    cls = response_schema(ApiKey.CREATE_PARTITIONS, version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    message = error_message(error) if message is None else message
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(build(result_cls, name=t.name, error_code=error, error_message=message) for t in body.topics),
    )


def _delete_topics_error(version: int, body: Any, error: ErrorCode) -> Any:
    # DeleteTopicsRequest.getErrorResponse: every requested topic (v6+ by name or id, before by name), no message.
    cls = response_schema(ApiKey.DELETE_TOPICS, version)
    result_cls = nested(cls, "DeletableTopicResult")
    wanted = (
        [(t.name, t.topic_id or _ZERO_UUID) for t in body.topics]
        if version >= 6
        else [(name, _ZERO_UUID) for name in body.topic_names]
    )
    results = tuple(
        build(result_cls, name=name, topic_id=topic_id, error_code=error, error_message=None)
        for name, topic_id in wanted
    )
    return build(cls, throttle_time=NO_THROTTLE, responses=results)


ROUTES = {
    ApiKey.CREATE_TOPICS: Route(
        create_topics,
        lambda version, body, error: _create_topics_error(version, body.topics, error, error_message(error)),
    ),
    ApiKey.DELETE_TOPICS: Route(delete_topics, _delete_topics_error),
    ApiKey.CREATE_PARTITIONS: Route(create_partitions, _create_partitions_error),
}
