"""ShareFetch (78) and ShareAcknowledge (79): records acquired, acknowledged and released (KIP-932).

Versions (docs/spec/share-groups.md sections 2.3, 2.4, 8.5; flexible from v0): v1-2. v2 adds ShareAcquireMode (1 =
record-limit: MaxRecords is a hard limit) and IsRenewAck (acknowledge type 4 RENEW restarts locks, nothing is
fetched) to ShareFetch, and IsRenewAck to ShareAcknowledge with AcquisitionLockTimeoutMs in its answer. librdkafka
2.16 sends v1; the Java client v2.

The same topic id, even the same partition, may be listed twice in one ShareFetch (librdkafka lists a partition
once to add it to the session and once with its acknowledgements, section 12.7 trap 3): entries are merged by
(topic id, partition). Every partition that carried acknowledgements is answered; a session error is the top-level
ErrorCode of an answer with no partitions. Leaders: this broker leads every partition (CurrentLeader -1/-1, no
NodeEndpoints).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.static.primitive import i16, i32, i64

from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, millis
from broker.coordinator.modern.share.messages import (
    PartitionAcks,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
)
from broker.coordinator.modern.share.partition import AckBatch
from broker.timing.deferred import Deferred
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_ZERO_UUID = uuid.UUID(int=0)
_RECORD_LIMIT = 1


def _partitions(topics: Any) -> tuple[PartitionAcks, ...]:
    """Topics x partitions, merged by (topic id, partition) in first-seen order, batches in request order (not
    sorted: descending batches are INVALID_REQUEST, KafkaApis.validateAcknowledgementBatches)."""
    merged: dict[tuple[uuid.UUID, int], tuple[list[AckBatch], bool]] = {}
    for topic in topics:
        topic_id = topic.topic_id or _ZERO_UUID
        for p in topic.partitions:
            batches, acknowledged = merged.setdefault((topic_id, p.partition_index), ([], False))
            entries = [
                AckBatch(b.first_offset, b.last_offset, tuple(int(t) for t in b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
            batches.extend(entries)
            if entries and not acknowledged:
                merged[(topic_id, p.partition_index)] = (batches, True)
    return tuple(
        PartitionAcks(topic_id, partition, tuple(batches), acknowledged)
        for (topic_id, partition), (batches, acknowledged) in merged.items()
    )


def share_fetch(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    request = ShareFetchRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        session_epoch=body.share_session_epoch,
        max_wait_ms=millis(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=body.max_bytes,
        max_records=body.max_records,
        batch_size=body.batch_size,
        partitions=_partitions(body.topics),
        forgotten=tuple((t.topic_id or _ZERO_UUID, p) for t in body.forgotten_topics_data for p in t.partitions),
        record_limit=getattr(body, "share_acquire_mode", 0) == _RECORD_LIMIT,
        renew=getattr(body, "is_renew_ack", False),
        api_version=version,
        client=call.client,
    )
    answer = ctx.coordinator.share.fetch(request, call.client.connection)
    if isinstance(answer, Deferred):
        return answer.map(lambda done: fetch_response(version, done))
    return fetch_response(version, answer)


def fetch_response(version: int, answer: ShareAnswer) -> Any:
    cls = response_schema(ApiKey.SHARE_FETCH, version)
    topic_cls = nested(cls, "ShareFetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    acquired_cls = nested(cls, "AcquiredRecords")
    no_leader = build(leader_cls, leader_id=i32(-1), leader_epoch=i32(-1))
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for p in answer.partitions:
        by_topic.setdefault(p.topic_id, []).append(
            build(
                partition_cls,
                partition_index=i32(p.partition),
                error_code=p.error,
                error_message=p.error_message,
                acknowledge_error_code=i16(p.acknowledge_error.value),
                acknowledge_error_message=p.acknowledge_error_message,
                current_leader=no_leader,
                records=p.records if p.records is not None else b"",  # kio writes no null Records
                acquired_records=tuple(
                    build(acquired_cls, first_offset=i64(first), last_offset=i64(last), delivery_count=i16(count))
                    for first, last, count in p.acquired
                ),
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.error_message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=answer.lock_duration_ms),
        responses=tuple(build(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        node_endpoints=(),
    )


def share_acknowledge(ctx: ApiContext, call: Call, body: Any) -> Any:
    request = ShareAcknowledgeRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        session_epoch=body.share_session_epoch,
        partitions=_partitions(body.topics),
        renew=getattr(body, "is_renew_ack", False),
        api_version=call.api_version,
        client=call.client,
    )
    return acknowledge_response(call.api_version, ctx.coordinator.share.acknowledge(request))


def acknowledge_response(version: int, answer: ShareAnswer) -> Any:
    cls = response_schema(ApiKey.SHARE_ACKNOWLEDGE, version)
    topic_cls = nested(cls, "ShareAcknowledgeTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    no_leader = build(nested(cls, "LeaderIdAndEpoch"), leader_id=i32(-1), leader_epoch=i32(-1))
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for p in answer.partitions:
        by_topic.setdefault(p.topic_id, []).append(
            build(
                partition_cls,
                partition_index=i32(p.partition),
                error_code=p.error,
                error_message=p.error_message,
                current_leader=no_leader,
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.error_message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=answer.lock_duration_ms),  # v2+
        responses=tuple(build(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        node_endpoints=(),
    )


ROUTES = {
    ApiKey.SHARE_FETCH: Route(
        share_fetch, lambda version, body, error: fetch_response(version, ShareAnswer(error))
    ),
    ApiKey.SHARE_ACKNOWLEDGE: Route(
        share_acknowledge, lambda version, body, error: acknowledge_response(version, ShareAnswer(error))
    ),
}
