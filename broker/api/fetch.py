"""Fetch (1) and ListOffsets (2): reading partition logs.

Fetch sessions (KIP-227) are answered sessionless: every response is a full
response with session_id 0, which tells a client to keep sending full fetches
(kafka-python then stays on session 0/0, as docs/spec/client-traps.md G5 observed). Every
requested partition is answered, empty or not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, millis
from broker.storage.delayed_fetch import FetchPosition, available_bytes
from broker.storage.partition_log import LEADER_EPOCH, PartitionLog
from broker.storage.topics import Topic, TopicRegistry
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

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

    __slots__ = ("error", "log", "max_bytes", "offset", "partition")

    def __init__(self, partition: int, error: ErrorCode, log: PartitionLog | None, offset: int, max_bytes: int):
        self.partition = partition
        self.error = error
        self.log = log
        self.offset = offset
        self.max_bytes = max_bytes


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
    requested: list[tuple[Any, Topic | None, list[_Read]]] = []
    for fetch_topic in body.topics:
        topic = ctx.topics.by_id(fetch_topic.topic_id) if by_id else ctx.topics.get(fetch_topic.topic)
        missing = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        reads = []
        for p in fetch_topic.partitions:
            log = topic.log(p.partition) if topic is not None else None
            error = missing if topic is None else ErrorCode.unknown_topic_or_partition if log is None else None
            if error is None:
                error = leader_epoch_error(getattr(p, "current_leader_epoch", _NO_EPOCH))
            if error is None and log is not None and not _in_range(log, p.fetch_offset):
                error = ErrorCode.offset_out_of_range
            reads.append(_Read(p.partition, error or ErrorCode.none, log, p.fetch_offset, p.partition_max_bytes))
        requested.append((fetch_topic.topic_id if by_id else fetch_topic.topic, topic, reads))

    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    answer = _responder(cls, version, requested, body.max_bytes, read_committed, ctx.topics)
    reads = [r for _, _, rs in requested for r in rs]
    max_wait_ms = millis(body.max_wait)
    failed = any(r.error is not ErrorCode.none for r in reads)
    # A read_committed fetch counts only what lies below the LSO, so it wakes when a marker moves the LSO
    # (transactions.md 4.6: the marker append calls DelayedFetches.appended, as a data append does).
    positions = [FetchPosition(r.log, r.offset, r.max_bytes, read_committed) for r in reads if r.log is not None]
    if max_wait_ms <= 0 or not reads or failed or available_bytes(positions) >= body.min_bytes:
        return answer()
    return ctx.fetches.park(positions, body.min_bytes, max_wait_ms, answer)


def _in_range(log: PartitionLog, offset: int) -> bool:
    return log.log_start_offset <= offset <= log.high_watermark


def _responder(
    cls: Any,
    version: int,
    requested: list[tuple[Any, Topic | None, list[_Read]]],
    max_bytes: int,
    committed: bool,
    registry: TopicRegistry,
) -> Callable[[], Any]:
    """The response as it stands when called: a parked fetch reads the logs when it completes."""
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
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
                if error is ErrorCode.none and log is not None and not _in_range(log, read.offset):
                    error = ErrorCode.offset_out_of_range  # retention moved the log start past a parked fetch
                if error is not ErrorCode.none or log is None:
                    partitions.append(_partition(partition_cls, read.partition, error, -1, -1, -1, no_aborted, b""))
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
        return build(
            cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=i32(0), responses=tuple(topics)
        )

    return answer


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
    seen: dict[tuple[str, int], int] = {}
    for t in body.topics:
        for p in t.partitions:
            seen[(t.name, p.partition_index)] = seen.get((t.name, p.partition_index), 0) + 1

    def answer(name: str, p: Any) -> Any:
        error, timestamp, offset = ErrorCode.none, -1, -1
        topic = ctx.topics.get(name)
        log = topic.log(p.partition_index) if topic is not None else None
        if seen[(name, p.partition_index)] > 1:
            error = ErrorCode.invalid_request  # KafkaApis refuses partitions listed twice
        elif log is None:
            error = ErrorCode.unknown_topic_or_partition
        else:
            error = leader_epoch_error(getattr(p, "current_leader_epoch", _NO_EPOCH)) or ErrorCode.none
        if error is ErrorCode.none and log is not None:
            found = _offset_for(log, p.timestamp, committed)
            if found is not None:
                offset, timestamp = found
        return build(
            partition_cls,
            partition_index=p.partition_index,
            error_code=error,
            timestamp=i64(timestamp),
            offset=i64(offset),
            leader_epoch=i32(LEADER_EPOCH if offset >= 0 else -1),
        )

    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(topic_cls, name=t.name, partitions=tuple(answer(t.name, p) for p in t.partitions))
            for t in body.topics
        ),
    )


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
