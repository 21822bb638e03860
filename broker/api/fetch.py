"""Fetch (1) and ListOffsets (2): reading partition logs.

Fetch sessions (KIP-227) are answered sessionless: every response is a full
response with session_id 0, which tells a client to keep sending full fetches
(kafka-python then stays on session 0/0, as docs/spec/client-traps.md G5 observed). Every
requested partition is answered, empty or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i64

from broker.api.authorization import NOTHING, denied_topics
from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, millis
from broker.security.acls import Operation, ResourceType
from broker.storage.delayed_fetch import FetchPosition, available_bytes
from broker.storage.partition_log import LEADER_EPOCH, PartitionLog
from broker.storage.topics import Topic, TopicRegistry
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

if TYPE_CHECKING:
    from broker.cluster.routing import NodeRoute

_READ_COMMITTED = 1
_INITIAL_EPOCH, _FINAL_EPOCH = 0, -1
_NO_EPOCH = -1

# ListOffsets special timestamps.
_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL, _LATEST_TIERED = -1, -2, -3, -4, -5


def leader_epoch_error(requested: int) -> ErrorCode | None:
    """Partition.checkCurrentLeaderEpoch: the one leader epoch here is 0."""
    if requested == _NO_EPOCH:
        return None
    if requested < LEADER_EPOCH:
        return ErrorCode.fenced_leader_epoch
    if requested > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    return None


class _Read:
    """One requested partition: where it is, or why it cannot be read."""

    __slots__ = ("current", "diverging", "error", "leader", "log", "max_bytes", "offset", "partition")

    def __init__(self, partition: int, error: ErrorCode, log: PartitionLog | None, offset: int, max_bytes: int):
        self.partition = partition
        self.error = error
        self.log = log
        self.offset = offset
        self.max_bytes = max_bytes
        self.current = _NO_EPOCH  # the request's CurrentLeaderEpoch, checked again when a parked fetch completes
        # Several nodes only: (leader id, epoch) for a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer
        # (CurrentLeader), and the (epoch, end offset) a LastFetchedEpoch diverges at (DivergingEpoch).
        self.leader: tuple[int, int] | None = None
        self.diverging: tuple[int, int] | None = None


def fetch(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.FETCH, version)
    session_epoch = getattr(body, "session_epoch", _FINAL_EPOCH)
    if session_epoch not in (_INITIAL_EPOCH, _FINAL_EPOCH):
        # An incremental fetch: no session was ever handed out, so none is found (FetchManager.newContext).
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=i32(0),
            responses=(),
        )

    by_id = version >= 13
    route = ctx.route  # None on one node: it leads every partition, in epoch 0
    requested: list[tuple[Any, Topic | None, list[_Read]]] = []
    authorizer = ctx.authorizer  # issue 30: READ on each topic, 29 on its partitions (spec 10)
    for fetch_topic in body.topics:
        topic = ctx.topics.by_id(fetch_topic.topic_id) if by_id else ctx.topics.get(fetch_topic.topic)
        missing = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        name = topic.name if topic is not None else None if by_id else fetch_topic.topic
        if (
            authorizer is not None
            and name is not None
            and not authorizer.authorize(call.client, "Fetch", Operation.READ, ResourceType.TOPIC, name)
        ):
            topic, missing = None, ErrorCode.topic_authorization_failed
        reads = []
        for p in fetch_topic.partitions:
            log = topic.log(p.partition) if topic is not None else None
            error = missing if topic is None else ErrorCode.unknown_topic_or_partition if log is None else None
            read = _Read(p.partition, ErrorCode.none, log, p.fetch_offset, p.partition_max_bytes)
            if error is None:
                current = read.current = getattr(p, "current_leader_epoch", _NO_EPOCH)
                if route is None:
                    error = leader_epoch_error(current)
                elif topic is not None and log is not None:
                    error = _routed(route, topic.name, p, current, read, log)
            if error is None and read.diverging is None and log is not None and not _in_range(log, p.fetch_offset):
                error = ErrorCode.offset_out_of_range
            read.error = error or ErrorCode.none
            reads.append(read)
        requested.append((fetch_topic.topic_id if by_id else fetch_topic.topic, topic, reads))

    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    answer = _responder(cls, version, requested, body.max_bytes, read_committed, ctx.topics, route)
    reads = [r for _, _, rs in requested for r in rs]
    max_wait_ms = millis(body.max_wait)
    failed = any(r.error is not ErrorCode.none for r in reads)
    if route is not None and not failed:
        failed = any(r.diverging is not None for r in reads)  # a divergence is answered at once, as an error
    # A read_committed fetch counts only what lies below the LSO, so it wakes when a marker moves the LSO
    # (transactions.md 4.6: the marker append calls DelayedFetches.appended, as a data append does).
    positions = [FetchPosition(r.log, r.offset, r.max_bytes, read_committed) for r in reads if r.log is not None]
    if max_wait_ms <= 0 or not reads or failed or available_bytes(positions) >= body.min_bytes:
        return answer()
    return ctx.fetches.park(positions, body.min_bytes, max_wait_ms, answer)


def _routed(
    route: NodeRoute, topic: str, p: Any, current: int, read: _Read, log: PartitionLog
) -> ErrorCode | None:
    """Several nodes: Partition.fetchRecords' checks at this node. Its leadership and ``current`` epoch
    (checkCurrentLeaderEpoch; the CurrentLeader goes with NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH), then
    a v12+ LastFetchedEpoch against the epoch cache (Partition.readFromLocalLog): an epoch the cache cannot end,
    or a fetch offset below the log start, is OFFSET_OUT_OF_RANGE; when the cache ends that epoch below the fetch
    offset (or knows a lower one only), the answer is a DivergingEpoch and no records."""
    error = route.partition_error(topic, p.partition, current)
    if error is not None:
        if error is ErrorCode.not_leader_or_follower or error is ErrorCode.fenced_leader_epoch:
            read.leader = route.current_leader(topic, p.partition)
        return error
    last_fetched = getattr(p, "last_fetched_epoch", _NO_EPOCH)
    if last_fetched >= 0:
        epoch, end_offset = route.layout.end_offset_for(topic, p.partition, last_fetched)
        if epoch < 0 or end_offset < 0 or p.fetch_offset < log.log_start_offset:
            return ErrorCode.offset_out_of_range
        if epoch < last_fetched or end_offset < p.fetch_offset:
            read.diverging = (epoch, end_offset)
    return None


def _in_range(log: PartitionLog, offset: int) -> bool:
    return log.log_start_offset <= offset <= log.high_watermark


def _responder(
    cls: Any,
    version: int,
    requested: list[tuple[Any, Topic | None, list[_Read]]],
    max_bytes: int,
    committed: bool,
    registry: TopicRegistry,
    route: NodeRoute | None = None,
) -> Callable[[], Any]:
    """The response as it stands when called: a parked fetch reads the logs when it completes."""
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    # KIP-320 and KIP-951, several nodes only (one node never answers them): v12+ CurrentLeader and DivergingEpoch,
    # v16+ NodeEndpoints.
    leader_cls = nested(cls, "LeaderIdAndEpoch") if route is not None and version >= 12 else None
    leaders: set[int] = set()
    aborted_cls = nested(cls, "AbortedTransaction")
    key = "topic_id" if version >= 13 else "topic"
    # transactions.md 4.6: null for read_uncommitted (librdkafka logs an error on entries there), a list (maybe
    # empty) for read_committed.
    no_aborted = () if committed else None

    def answer() -> Any:
        budget = max_bytes
        at_least_one = True  # KIP-74: until one partition returns data
        topics = []
        for topic_key, topic, reads in requested:
            partitions = []
            for read in reads:
                log = read.log
                error = read.error
                if error is ErrorCode.none and (
                    log is None
                    or topic is None
                    or registry.by_id(topic.topic_id) is not topic
                    or topic.log(read.partition) is not log
                ):
                    error = ErrorCode.unknown_topic_or_partition  # deleted while the fetch was parked
                # The leader moved while the fetch was parked: DelayedFetch.tryComplete completes it (cases A and E)
                # and readFromLocalLog answers with the request's CurrentLeaderEpoch checked first
                # (Partition.getLocalLog): FENCED_LEADER_EPOCH for an epoch the move made old, even at a node that
                # leads again; NOT_LEADER_OR_FOLLOWER for an unchecked one (-1) at a node that no longer leads.
                if error is ErrorCode.none and route is not None and topic is not None:
                    moved = route.partition_error(topic.name, read.partition, read.current)
                    if moved is not None:
                        error = moved
                        read.leader = route.current_leader(topic.name, read.partition)
                if error is ErrorCode.none and log is not None and not _in_range(log, read.offset):
                    error = ErrorCode.offset_out_of_range  # retention moved the log start past a parked fetch
                if error is not ErrorCode.none or log is None:
                    answered = _partition(partition_cls, read.partition, error, -1, -1, -1, no_aborted, b"")
                    if leader_cls is not None and read.leader is not None:
                        answered = _with_leader(answered, leader_cls, read.leader, leaders)
                    partitions.append(answered)
                    continue
                if leader_cls is not None and read.diverging is not None:
                    # Partition.fetchRecords: the divergence point and the offsets, no records.
                    epoch, end_offset = read.diverging
                    diverged = _partition(
                        partition_cls, read.partition, ErrorCode.none, log.high_watermark, log.last_stable_offset,
                        log.log_start_offset, no_aborted, b"",
                    )  # fmt: skip
                    diverging_cls = nested(cls, "EpochEndOffset")
                    diverging = diverging_cls(epoch=i32(epoch), end_offset=i64(end_offset))
                    partitions.append(dataclasses.replace(diverged, diverging_epoch=diverging))
                    continue
                limit = min(read.max_bytes, budget)
                aborted: tuple[Any, ...] | None = None
                if committed:
                    # Only batches below the LSO, with the aborted transactions they overlap, in ABORT-marker
                    # order (section 4.6); aborted data and markers stay in: the client filters.
                    records, aborted_txns = log.read_committed(read.offset, limit, at_least_one=at_least_one)
                    aborted = tuple(
                        build(aborted_cls, producer_id=txn.producer_id, first_offset=i64(txn.first_offset))
                        for txn in aborted_txns
                    )
                else:
                    records = log.read(read.offset, limit, at_least_one=at_least_one)
                if records:
                    budget -= len(records)
                    at_least_one = False
                partitions.append(
                    _partition(
                        partition_cls,
                        read.partition,
                        ErrorCode.none,
                        log.high_watermark,
                        log.last_stable_offset,
                        log.log_start_offset,
                        aborted,
                        records,
                    )
                )
            topics.append(build(topic_cls, **{key: topic_key}, partitions=tuple(partitions)))
        extra: dict[str, Any] = {}
        if leaders and route is not None and version >= 16:
            endpoint_cls = nested(cls, "NodeEndpoint")
            extra["node_endpoints"] = tuple(
                endpoint_cls(node_id=BrokerId(node), host=host, port=i32(port), rack=None)
                for node, host, port in route.leader_endpoints(leaders)
            )
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=i32(0),
            responses=tuple(topics),
            **extra,
        )

    return answer


def _with_leader(answered: Any, leader_cls: Any, leader: tuple[int, int], leaders: set[int]) -> Any:
    leader_id, epoch = leader
    if leader_id >= 0:
        leaders.add(leader_id)
    return dataclasses.replace(
        answered, current_leader=leader_cls(leader_id=BrokerId(leader_id), leader_epoch=i32(epoch))
    )


def _partition(
    cls: Any,
    index: int,
    error: ErrorCode,
    high_watermark: int,
    last_stable_offset: int,
    log_start_offset: int,
    aborted: tuple[Any, ...] | None,
    records: bytes | None,
) -> Any:
    return build(
        cls,
        partition_index=i32(index),
        error_code=error,
        high_watermark=i64(high_watermark),
        last_stable_offset=i64(last_stable_offset),
        log_start_offset=i64(log_start_offset),
        aborted_transactions=aborted,
        preferred_read_replica=i32(-1),
        records=records,
    )


def list_offsets(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.LIST_OFFSETS, version)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    route = ctx.route  # None on one node: it leads every partition, in epoch 0
    seen: dict[tuple[str, int], int] = {}
    for t in body.topics:
        for p in t.partitions:
            seen[(t.name, p.partition_index)] = seen.get((t.name, p.partition_index), 0) + 1

    # Issue 30: DESCRIBE on each topic, 29 on its partitions (spec 10).
    denied = (
        NOTHING
        if ctx.authorizer is None
        else denied_topics(ctx, call, "ListOffsets", Operation.DESCRIBE, (t.name for t in body.topics))
    )

    def answer(name: str, p: Any) -> Any:
        error, timestamp, offset = ErrorCode.none, -1, -1
        topic = ctx.topics.get(name) if name not in denied else None
        log = topic.log(p.partition_index) if topic is not None else None
        if name in denied:
            error = ErrorCode.topic_authorization_failed
        elif seen[(name, p.partition_index)] > 1:
            error = ErrorCode.invalid_request  # KafkaApis refuses partitions listed twice
        elif log is None:
            error = ErrorCode.unknown_topic_or_partition
        elif route is None:
            error = leader_epoch_error(getattr(p, "current_leader_epoch", _NO_EPOCH)) or ErrorCode.none
        else:
            current = getattr(p, "current_leader_epoch", _NO_EPOCH)
            error = route.partition_error(name, p.partition_index, current) or ErrorCode.none
        epoch = -1
        if error is ErrorCode.none and log is not None:
            found = _offset_for(log, p.timestamp, committed)
            if found is not None:
                offset, timestamp = found
                index = p.partition_index
                epoch = LEADER_EPOCH if route is None else _epoch_of(route, name, index, p.timestamp, offset)
        return build(
            partition_cls,
            partition_index=p.partition_index,
            error_code=error,
            timestamp=i64(timestamp),
            offset=i64(offset),
            leader_epoch=i32(epoch if offset >= 0 else -1),
        )

    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(topic_cls, name=t.name, partitions=tuple(answer(t.name, p) for p in t.partitions))
            for t in body.topics
        ),
    )


def _epoch_of(route: NodeRoute, topic: str, partition: int, timestamp: int, offset: int) -> int:
    """The leader epoch ListOffsets gives an offset on several nodes: for the latest the leader's current epoch
    (Partition.fetchOffsetForTimestamp), else the epoch the offset was written in, which the epoch cache holds
    (UnifiedLog.fetchOffsetByTimestamp: epochForOffset, or the found batch's partitionLeaderEpoch)."""
    if timestamp == _LATEST:
        return route.current_leader(topic, partition)[1]
    return route.layout.epoch_for_offset(topic, partition, offset)


def _offset_for(log: PartitionLog, timestamp: int, committed: bool) -> tuple[int, int] | None:
    if timestamp == _LATEST:
        return log.last_fetchable_offset(read_committed=committed), -1
    if timestamp in (_EARLIEST, _EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == _LATEST_TIERED:
        return None  # no tiered storage: Kafka answers -1
    found = log.max_timestamp_offset() if timestamp == _MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    # transactions.md 4.7 (Partition.fetchOffsetForTimestamp): an answer at or past the last fetchable offset (the
    # LSO under READ_COMMITTED) is not given: offset -1, timestamp -1, NONE.
    if found is not None and found[0] >= log.last_fetchable_offset(read_committed=committed):
        return None
    return found


def _fetch_error(version: int, body: Any, error: ErrorCode) -> Any:
    """FetchRequest.getErrorResponse: the top-level error (v7+) and the request's session id; before v13 the error
    on every requested partition too (FetchResponse.partitionResponse: no offsets, no records), for the versions
    without a top-level error."""
    cls = response_schema(ApiKey.FETCH, version)
    topics: tuple[Any, ...] = ()
    if version < 13:
        topic_cls = nested(cls, "FetchableTopicResponse")
        partition_cls = nested(cls, "PartitionData")
        topics = tuple(
            build(
                topic_cls,
                topic=t.topic,
                partitions=tuple(
                    _partition(partition_cls, p.partition, error, -1, -1, -1, None, None) for p in t.partitions
                ),
            )
            for t in body.topics
        )
    session_id = i32(getattr(body, "session_id", 0))
    return build(cls, throttle_time=NO_THROTTLE, error_code=error, session_id=session_id, responses=topics)


def _list_offsets_error(version: int, body: Any, error: ErrorCode) -> Any:
    # ListOffsetsRequest.getErrorResponse: every requested partition, offset and timestamp unknown (-1).
    cls = response_schema(ApiKey.LIST_OFFSETS, version)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    unknown = {"error_code": error, "timestamp": i64(-1), "offset": i64(-1), "leader_epoch": i32(-1)}
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(build(partition_cls, partition_index=p.partition_index, **unknown) for p in t.partitions),
        )
        for t in body.topics
    )
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


ROUTES = {
    ApiKey.FETCH: Route(fetch, _fetch_error),
    ApiKey.LIST_OFFSETS: Route(list_offsets, _list_offsets_error),
}
