"""What fault rules need from a request: who sent it, and an answer that is nothing but an error.

Error answers are shaped as Kafka's ``getErrorResponse`` shapes them; the coordinator never sees the request.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from broker.api.base import ERROR_MESSAGES, NO_THROTTLE, partition_errors
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema


def error_response(api_key: int, version: int, body: Any, error: ErrorCode) -> Any:
    # The handler modules load with the broker's state, after its first answer (issue 17); a fault rule is armed
    # through the control API, which starts after them, so these find them loaded.
    from broker.api.configs import error_answer as configs_error_answer
    from broker.api.consumer_groups import describe_error_response, heartbeat_response
    from broker.api.membership import join_response, sync_response
    from broker.api.transactions import add_partitions_response, error_only
    from broker.coordinator.messages import ConsumerHeartbeatResult, JoinResult, SyncResult

    cls = response_schema(api_key, version)
    if api_key == ApiKey.JOIN_GROUP:
        return join_response(version, JoinResult(error=error, member_id=body.member_id))
    if api_key == ApiKey.SYNC_GROUP:
        return sync_response(version, SyncResult(error))
    if api_key in (ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP):
        return build(cls, throttle_time=NO_THROTTLE, error_code=error, members=())
    if api_key == ApiKey.OFFSET_COMMIT:
        every_partition = tuple((t.name, tuple((p.partition_index, error) for p in t.partitions)) for t in body.topics)
        return build(
            cls, throttle_time=NO_THROTTLE, topics=partition_errors(cls, "OffsetCommitResponse", every_partition)
        )
    if api_key == ApiKey.OFFSET_FETCH:
        return _offset_fetch_error(cls, version, body, error)
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        # ErrorMessage and MemberId null, epoch and interval 0, Assignment null (consumer-groups.md section 4.1).
        return heartbeat_response(version, ConsumerHeartbeatResult(error))
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        return describe_error_response(version, body.group_ids, error)
    if api_key == ApiKey.FIND_COORDINATOR:
        nowhere = {"error_code": error, "node_id": i32(-1), "host": "", "port": i32(-1)}
        message = ERROR_MESSAGES.get(error, error.name.upper())
        if version < 4:
            return build(cls, throttle_time=NO_THROTTLE, error_message=message, **nowhere)
        coordinator_cls = nested(cls, "Coordinator")
        entries = tuple(
            build(coordinator_cls, key=key, error_message=message, **nowhere) for key in body.coordinator_keys
        )
        return build(cls, throttle_time=NO_THROTTLE, coordinators=entries)
    if api_key in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
        return error_only(api_key, version, error)
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        requested = ((t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions)
        return add_partitions_response(version, ((tp, error) for tp in requested))
    if api_key == ApiKey.INIT_PRODUCER_ID:
        # InitProducerIdResponse on error: no producer id, no epoch (RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH).
        return build(cls, throttle_time=NO_THROTTLE, error_code=error, producer_id=i64(-1), producer_epoch=i16(-1))
    if api_key == ApiKey.TXN_OFFSET_COMMIT:
        # TxnOffsetCommitRequest.getErrorResponse: no top-level error, so it goes on every requested partition.
        every_partition = tuple((t.name, tuple((p.partition_index, error) for p in t.partitions)) for t in body.topics)
        return build(
            cls, throttle_time=NO_THROTTLE, topics=partition_errors(cls, "TxnOffsetCommitResponse", every_partition)
        )
    if api_key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return configs_error_answer(api_key, version, body, error)
    raise ValueError(f"no error response for api key {api_key}")


def _offset_fetch_error(cls: type, version: int, body: Any, error: ErrorCode) -> Any:
    if version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        groups = tuple(build(group_cls, group_id=g.group_id, topics=(), error_code=error) for g in body.groups)
        return build(cls, throttle_time=NO_THROTTLE, groups=groups)
    if version >= 2:
        return build(cls, throttle_time=NO_THROTTLE, topics=(), error_code=error)
    # v0-1 carry no group-level error: it goes on every requested partition.
    topic_cls = nested(cls, "OffsetFetchResponseTopic")
    partition_cls = nested(cls, "OffsetFetchResponsePartition")
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=i32(p),
                    committed_offset=i64(-1),
                    metadata="",
                    error_code=error,
                )
                for p in t.partition_indexes
            ),
        )
        for t in body.topics or ()
    )
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


def request_transactional_id(api_key: int, body: Any) -> str | None:
    """The transactional id a request names: the transaction APIs' and Produce's field (AddPartitionsToTxn v0-3
    calls it V3AndBelowTransactionalId), or FindCoordinator's key when it asks for a transaction coordinator."""
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return getattr(body, "v3_and_below_transactional_id", None)
    if api_key == ApiKey.FIND_COORDINATOR:
        if getattr(body, "key_type", 0) != 1:
            return None
        keys = getattr(body, "coordinator_keys", None)
        return keys[0] if keys else getattr(body, "key", None)
    return getattr(body, "transactional_id", None)


def request_identity(api_key: int, body: Any) -> tuple[str | None, str | None, str | None]:
    """(group id, member id, group instance id) as far as the request names them; the client id is the
    connection's (the request header's), which the connection adds."""
    group_id = getattr(body, "group_id", None)
    member_id = getattr(body, "member_id", None)
    instance_id = getattr(body, "group_instance_id", None)
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        # Its field is InstanceId, and null there means "unchanged" (consumer-groups.md section 2.1): a rule on an
        # instance id matches the heartbeats that carry it (the joining ones), not the ones that leave it out.
        return group_id, member_id, body.instance_id
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        return (body.group_ids[0] if body.group_ids else None), None, None
    if api_key == ApiKey.LEAVE_GROUP and getattr(body, "members", None):
        first = body.members[0]
        member_id, instance_id = first.member_id or None, first.group_instance_id
    elif api_key == ApiKey.OFFSET_FETCH and getattr(body, "groups", None):
        first = body.groups[0]
        group_id, member_id = first.group_id, getattr(first, "member_id", None)
    elif api_key == ApiKey.FIND_COORDINATOR and getattr(body, "key_type", 0) == 0:
        keys = getattr(body, "coordinator_keys", None)
        group_id = keys[0] if keys else getattr(body, "key", None)
    return group_id, member_id, instance_id
