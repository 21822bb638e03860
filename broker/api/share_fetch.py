"""ShareFetch (78) and ShareAcknowledge (79): records acquired, acknowledged and released (KIP-932).

Versions (docs/spec/share-groups.md sections 2.3, 2.4, 8.5; flexible from v0): v1-2. v2 adds ShareAcquireMode (1 =
record-limit: MaxRecords is a hard limit) and IsRenewAck (acknowledge type 4 RENEW restarts locks, nothing is
fetched) to ShareFetch, and IsRenewAck to ShareAcknowledge with AcquisitionLockTimeoutMs in its answer. librdkafka
2.16 sends v1; the Java client v2.

The same topic id, even the same partition, may be listed twice in one ShareFetch (librdkafka lists a partition
once to add it to the session and once with its acknowledgements, section 12.7 trap 3): entries are merged by
(topic id, partition). Every partition that carried acknowledgements is answered; a session error is the top-level
ErrorCode of an answer with no partitions. Leaders: one node leads every partition (CurrentLeader -1/-1, no
NodeEndpoints). On several nodes the share-partition leader is the partition leader (KIP-932): a partition this node
does not lead is answered NOT_LEADER_OR_FOLLOWER with its CurrentLeader and the leader's NodeEndpoint, as
KafkaApis.handleShareFetchRequest answers the partitions SharePartitionManager refuses, and never reaches the
share coordinator (nothing acquired, nothing acknowledged there).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i64

from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, millis
from broker.coordinator.modern.share.messages import (
    FetchedPartition,
    PartitionAcks,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
)
from broker.coordinator.modern.share.partition import AckBatch
from broker.timing.deferred import Deferred
from protocol.apis import ApiKey
from protocol.codec import HandEncoded, build, nested, response_schema
from protocol.share_fetch_answers import PartitionAnswer, share_fetch_parts
from protocol.share_fetch_requests import SteadyShareFetch

if TYPE_CHECKING:
    from broker.cluster.routing import NodeRoute

_ZERO_UUID = uuid.UUID(int=0)
_RECORD_LIMIT = 1
_HAND_ENCODED_VERSIONS = (1, 2)  # ShareFetchResponse v1 and v2: the same body (protocol/share_fetch_answers.py)


def _partitions(topics: Any) -> tuple[PartitionAcks, ...]:
    """Topics x partitions, merged by (topic id, partition) in first-seen order, batches in request order (not
    sorted: descending batches are INVALID_REQUEST, KafkaApis.validateAcknowledgementBatches)."""
    merged: dict[tuple[uuid.UUID, int], tuple[list[AckBatch], bool]] = {}
    for topic in topics:
        topic_id = topic.topic_id or _ZERO_UUID
        for p in topic.partitions:
            batches, acknowledged = merged.setdefault((topic_id, p.partition_index), ([], False))
            entries = [
                AckBatch(b.first_offset, b.last_offset, tuple(map(int, b.acknowledge_types)))
                for b in p.acknowledgement_batches
            ]
            batches.extend(entries)
            if entries and not acknowledged:
                merged[(topic_id, p.partition_index)] = (batches, True)
    return tuple(
        PartitionAcks(topic_id, partition, tuple(batches), acknowledged)
        for (topic_id, partition), (batches, acknowledged) in merged.items()
    )


# (topic id, partition) -> (leader id, epoch): the partitions another node leads, with their CurrentLeader.
_Leaders = dict[tuple[uuid.UUID, int], tuple[int, int]]


def _not_led(ctx: ApiContext, route: NodeRoute, partitions: tuple[PartitionAcks, ...]) -> _Leaders:
    """The partitions of a known topic that this node does not lead (SharePartitionManager: the share-partition
    leader is the partition leader, elsewhere NOT_LEADER_OR_FOLLOWER)."""
    refused: _Leaders = {}
    for p in partitions:
        topic = ctx.topics.by_id(p.topic_id)
        if topic is not None and route.partition_error(topic.name, p.partition) is not None:
            refused[(p.topic_id, p.partition)] = route.current_leader(topic.name, p.partition)
    return refused


def _refused(partitions: tuple[PartitionAcks, ...], refused: _Leaders) -> list[FetchedPartition]:
    error = ErrorCode.not_leader_or_follower
    return [
        FetchedPartition(p.topic_id, p.partition, error, acknowledge_error=error if p.acknowledged else ErrorCode.none)
        for p in partitions
        if (p.topic_id, p.partition) in refused
    ]


def _with_refused(answer: ShareAnswer, refused: list[FetchedPartition]) -> ShareAnswer:
    """The coordinator's answer and the refused partitions after it; a top-level error stands alone."""
    if not refused or answer.error is not ErrorCode.none:
        return answer
    return dataclasses.replace(answer, partitions=[*answer.partitions, *refused])


def share_fetch(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    partitions = _partitions(body.topics)
    route = ctx.route  # None on one node: it leads every partition
    leaders: _Leaders = {}
    if route is not None:
        leaders = _not_led(ctx, route, partitions)
    refused = _refused(partitions, leaders) if leaders else []
    request = ShareFetchRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        session_epoch=body.share_session_epoch,
        # A refused partition is an error answered at once (as a Fetch with an erroneous partition), not parked.
        max_wait_ms=0 if refused else millis(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=body.max_bytes,
        max_records=body.max_records,
        batch_size=body.batch_size,
        partitions=tuple(p for p in partitions if (p.topic_id, p.partition) not in leaders) if leaders else partitions,
        forgotten=tuple((t.topic_id or _ZERO_UUID, p) for t in body.forgotten_topics_data for p in t.partitions),
        record_limit=getattr(body, "share_acquire_mode", 0) == _RECORD_LIMIT,
        renew=getattr(body, "is_renew_ack", False),
        api_version=version,
        client=call.client,
        not_led=_not_led_check(ctx, route) if route is not None else None,
    )
    answer = ctx.coordinator.share.fetch(request, call.client.connection)
    if isinstance(answer, Deferred):
        return answer.map(lambda done: _fetch_answer(ctx, version, done, refused, leaders, route))
    return _fetch_answer(ctx, version, answer, refused, leaders, route)


# Topic ids of the steady path by their 16 bytes: a client polls the same one, and uuid.UUID(bytes=...) is a Python
# call. Bounded: emptied when it holds more ids than a broker has topics in any test or benchmark here.
_TOPIC_IDS: dict[bytes, uuid.UUID] = {}
_TOPIC_IDS_HELD = 1024


def share_fetch_steady(ctx: ApiContext, call: Call, fetch: SteadyShareFetch) -> Any:
    """``share_fetch`` for the steady ShareFetch v1 the connection pipeline decoded by hand (one partition or none,
    no forgotten topics: ``protocol/share_fetch_requests.py``), on one node (the pipeline sends a multi-node
    broker's frames the generic way): the same ``ShareFetchRequest`` as ``share_fetch`` builds from kio's body, the
    same coordinator call and the same answer (tests/wire/test_share_fetch_fast_path.py compares the bytes)."""
    (
        _, _, group_id, member_id, epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size, raw_topic,
        partition, ranges,
    ) = fetch  # fmt: skip
    acks: PartitionAcks | None = None
    if raw_topic is not None:
        topic_id = _TOPIC_IDS.get(raw_topic)
        if topic_id is None:
            if len(_TOPIC_IDS) >= _TOPIC_IDS_HELD:
                _TOPIC_IDS.clear()
            topic_id = _TOPIC_IDS[raw_topic] = uuid.UUID(bytes=raw_topic)
        batches = tuple(AckBatch(first, last, types) for first, last, types in ranges)
        acks = PartitionAcks(topic_id, partition, batches, bool(batches))

    def request() -> ShareFetchRequest:
        return ShareFetchRequest(
            group_id=group_id,
            member_id=member_id,
            session_epoch=epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_records=max_records,
            batch_size=batch_size,
            partitions=() if acks is None else (acks,),
            api_version=call.api_version,
            client=call.client,
        )

    share, connection = ctx.coordinator.share, call.client.connection
    # A one-partition session's steady poll without the generic request (``ShareFetcher.fetch_steady``); anything
    # else, or a coordinator not active, the full ``fetch``.
    answer = share.fetch_steady(
        group_id, member_id, epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size, acks, request,
        connection,
    )  # fmt: skip
    if answer is None:
        answer = share.fetch(request(), connection)
    if isinstance(answer, Deferred):
        return answer.map(lambda done: fetch_answer(call.api_version, done))
    return fetch_answer(call.api_version, answer)


def _not_led_check(ctx: ApiContext, route: NodeRoute) -> Callable[[uuid.UUID, int], bool]:
    """For the share coordinator: whether a session partition is led elsewhere now (it acquires nothing here)."""

    def not_led(topic_id: uuid.UUID, partition: int) -> bool:
        topic = ctx.topics.by_id(topic_id)
        return topic is not None and not route.leads(topic.name, partition)

    return not_led


def _fetch_answer(
    ctx: ApiContext,
    version: int,
    answer: ShareAnswer,
    refused: list[FetchedPartition],
    leaders: _Leaders,
    route: NodeRoute | None,
) -> Any:
    answer = _with_refused(answer, refused)
    if route is not None:
        # Session partitions the coordinator found led elsewhere: their CurrentLeader too.
        for p in answer.partitions:
            key = (p.topic_id, p.partition)
            if p.error is ErrorCode.not_leader_or_follower and key not in leaders:
                topic = ctx.topics.by_id(p.topic_id)
                if topic is not None:
                    leaders[key] = route.current_leader(topic.name, p.partition)
    return fetch_answer(version, answer, leaders, route)


def fetch_answer(
    version: int, answer: ShareAnswer, leaders: _Leaders | None = None, route: NodeRoute | None = None
) -> Any:
    """The handler's answer: v1-2 encoded by hand when it is sent (every share consumer's poll is a ShareFetch), the
    same bytes as ``fetch_response`` through kio (tests/protocol/test_share_fetch_answers.py, tests/api)."""
    if version not in _HAND_ENCODED_VERSIONS:
        return fetch_response(version, answer, leaders, route)
    return HandEncoded(partial(_fetch_body, answer, leaders, route))


def _fetch_body(answer: ShareAnswer, leaders: _Leaders | None, route: NodeRoute | None) -> list[bytes]:
    """``fetch_response``'s fields as ``share_fetch_parts`` takes them: partitions grouped by topic in first-seen
    order, CurrentLeader -1/-1 unless the partition is led elsewhere, the endpoints of the leaders named."""
    seen: set[int] = set()
    by_topic: dict[uuid.UUID, list[PartitionAnswer]] = {}
    for p in answer.partitions:
        found = leaders.get((p.topic_id, p.partition)) if leaders else None
        if found is None:
            leader_id, leader_epoch = -1, -1
        else:
            leader_id, leader_epoch = found
            if leader_id >= 0:
                seen.add(leader_id)
        row = (
            p.partition, p.error, p.error_message, p.acknowledge_error, p.acknowledge_error_message, leader_id,
            leader_epoch, p.records, p.acquired,
        )  # fmt: skip
        rows = by_topic.get(p.topic_id)
        if rows is None:
            by_topic[p.topic_id] = [row]
        else:
            rows.append(row)
    endpoints = (
        [(node, host, port, None) for node, host, port in route.leader_endpoints(seen)]
        if route is not None and seen
        else []
    )
    return share_fetch_parts(
        answer.error, answer.error_message, answer.lock_duration_ms, list(by_topic.items()), endpoints
    )


def _leader_of(
    leader_cls: Any, leaders: _Leaders, topic_id: uuid.UUID, partition: int, no_leader: Any, seen: set[int]
) -> Any:
    found = leaders.get((topic_id, partition)) if leaders else None
    if found is None:
        return no_leader
    if found[0] >= 0:
        seen.add(found[0])
    return build(leader_cls, leader_id=i32(found[0]), leader_epoch=i32(found[1]))


def _endpoints(cls: Any, route: NodeRoute | None, seen: set[int]) -> tuple[Any, ...]:
    """The NodeEndpoints of the leaders named in CurrentLeader (KafkaApis.handleShareFetchRequest)."""
    if route is None or not seen:
        return ()
    endpoint_cls = nested(cls, "NodeEndpoint")
    return tuple(
        endpoint_cls(node_id=BrokerId(node), host=host, port=i32(port), rack=None)
        for node, host, port in route.leader_endpoints(seen)
    )


def fetch_response(
    version: int, answer: ShareAnswer, leaders: _Leaders | None = None, route: NodeRoute | None = None
) -> Any:
    cls = response_schema(ApiKey.SHARE_FETCH, version)
    topic_cls = nested(cls, "ShareFetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    acquired_cls = nested(cls, "AcquiredRecords")
    no_leader = build(leader_cls, leader_id=i32(-1), leader_epoch=i32(-1))
    known = leaders or {}
    seen: set[int] = set()
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
                current_leader=_leader_of(leader_cls, known, p.topic_id, p.partition, no_leader, seen),
                records=b"".join(p.records),  # kio writes no null Records
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
        node_endpoints=_endpoints(cls, route, seen),
    )


def share_acknowledge(ctx: ApiContext, call: Call, body: Any) -> Any:
    partitions = _partitions(body.topics)
    route = ctx.route
    leaders: _Leaders = {}
    if route is not None:
        leaders = _not_led(ctx, route, partitions)
    request = ShareAcknowledgeRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        session_epoch=body.share_session_epoch,
        partitions=tuple(p for p in partitions if (p.topic_id, p.partition) not in leaders) if leaders else partitions,
        renew=getattr(body, "is_renew_ack", False),
        api_version=call.api_version,
        client=call.client,
    )
    answer = ctx.coordinator.share.acknowledge(request)
    if leaders:
        # ShareAcknowledge has one error per partition: the acknowledgement's.
        refused = [
            FetchedPartition(p.topic_id, p.partition, ErrorCode.not_leader_or_follower)
            for p in partitions
            if (p.topic_id, p.partition) in leaders
        ]
        answer = _with_refused(answer, refused)
    return acknowledge_response(call.api_version, answer, leaders, route)


def acknowledge_response(
    version: int, answer: ShareAnswer, leaders: _Leaders | None = None, route: NodeRoute | None = None
) -> Any:
    cls = response_schema(ApiKey.SHARE_ACKNOWLEDGE, version)
    topic_cls = nested(cls, "ShareAcknowledgeTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    no_leader = build(leader_cls, leader_id=i32(-1), leader_epoch=i32(-1))
    known = leaders or {}
    seen: set[int] = set()
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for p in answer.partitions:
        by_topic.setdefault(p.topic_id, []).append(
            build(
                partition_cls,
                partition_index=i32(p.partition),
                error_code=p.error,
                error_message=p.error_message,
                current_leader=_leader_of(leader_cls, known, p.topic_id, p.partition, no_leader, seen),
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.error_message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=answer.lock_duration_ms),  # v2+
        responses=tuple(build(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        node_endpoints=_endpoints(cls, route, seen),
    )


ROUTES = {
    ApiKey.SHARE_FETCH: Route(
        share_fetch, lambda version, body, error: fetch_response(version, ShareAnswer(error))
    ),
    ApiKey.SHARE_ACKNOWLEDGE: Route(
        share_acknowledge, lambda version, body, error: acknowledge_response(version, ShareAnswer(error))
    ),
}
