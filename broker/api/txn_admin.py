"""The transaction admin APIs (KIP-664): DescribeProducers (61), DescribeTransactions (65), ListTransactions (66),
and WriteTxnMarkers (27) as an admin's ``abortTransaction`` sends it.

Versions served (transactions spec section 2.2):
* DescribeProducers 0 (flexible): one entry per requested partition, from the partition's producer state (6.3).
* DescribeTransactions 0 (flexible): one entry per requested id, in request order (6.1).
* ListTransactions 0-2 (flexible): v1 adds DurationFilter (KIP-994), v2 TransactionalIdPattern (KIP-1152, a 4.1
  version; served because it only filters, and kafka-python asks for it when given a pattern) (6.2).
* WriteTxnMarkers 1 only: v0 was removed in Kafka 4.0 and v2 (KIP-1228, 4.2) carries a transaction version, which
  this TV1-only broker never writes. A single node never sends it to itself (3.8): a request comes from an admin
  client, so the marker goes into the listed partitions only and the transaction coordinator is not told (6.4).
There is no authorizer: the ACL steps of each API never apply. Without a transaction coordinator (bare handler
tests) DescribeTransactions and ListTransactions answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from broker.api.authorization import denied_topics
from broker.api.base import NO_THROTTLE, ApiContext, Call, RequestIdentity, Route
from broker.security.acls import Operation, ResourceType
from broker.storage.control import Marker, MarkerType
from broker.storage.partition_log import StorageFull
from broker.storage.records import InvalidBatch
from broker.transactions.describe import TxnDescription, TxnList, describe, list_matching
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

E = ErrorCode
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# Errors.UNKNOWN_TOPIC_OR_PARTITION's default message: Kafka's ApiError carries it into ErrorMessage.
_UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


def _timestamp(ms: int) -> datetime.datetime:
    """An int64 millisecond timestamp as kio's datetime field takes it (-1 included: it writes back -1)."""
    return _EPOCH + datetime.timedelta(milliseconds=ms)


# -- DescribeTransactions (65) ----------------------------------------------------------------------------------


def describe_transactions(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 6.1, item 84-85: one entry per id in request order; errors keep the defaults."""
    ids = tuple(body.transactional_ids)
    if ctx.transactions is None:
        answers = [TxnDescription(tid, E.coordinator_not_available) for tid in ids]
    else:
        answers = describe(ctx.transactions.transactions, ids)
    authorizer = ctx.authorizer  # issue 30: DESCRIBE on each transactional id, 53 in its entry
    if authorizer is not None:
        refused, kind = E.transactional_id_authorization_failed, ResourceType.TRANSACTIONAL_ID
        answers = [
            a
            if authorizer.authorize(call.client, "DescribeTransactions", Operation.DESCRIBE, kind, a.transactional_id)
            else TxnDescription(a.transactional_id, refused)
            for a in answers
        ]
    return _described_transactions(call.api_version, answers)


def _described_transactions(version: int, answers: Iterable[TxnDescription]) -> Any:
    cls = response_schema(ApiKey.DESCRIBE_TRANSACTIONS, version)
    state_cls = nested(cls, "TransactionState")
    topic_cls = nested(cls, "TopicData")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(
            build(
                state_cls,
                error_code=answer.error,
                transactional_id=answer.transactional_id,
                transaction_state=answer.state,
                transaction_timeout=datetime.timedelta(milliseconds=answer.timeout_ms),
                transaction_start_time=_timestamp(answer.start_ms),
                producer_id=i64(answer.producer_id),
                producer_epoch=i16(answer.producer_epoch),
                topics=tuple(
                    build(topic_cls, topic=topic, partitions=tuple(map(i32, partitions)))
                    for topic, partitions in answer.partitions
                ),
            )
            for answer in answers
        ),
    )


# -- ListTransactions (66) --------------------------------------------------------------------------------------


def list_transactions(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 6.2, items 86-88. Fields a version lacks keep their "no filter" defaults."""
    if ctx.transactions is None:
        answer = TxnList(E.coordinator_not_available)
    else:
        answer = list_matching(
            ctx.transactions.transactions,
            ctx.transactions.clock.now_ms(),
            tuple(body.state_filters),
            tuple(int(pid) for pid in body.producer_id_filters),
            int(getattr(body, "duration_filter", -1)),
            getattr(body, "transactional_id_pattern", None),
        )
    authorizer = ctx.authorizer
    if authorizer is not None:  # issue 30: only the ids the client may DESCRIBE, silently
        shown = tuple(
            listing
            for listing in answer.listings
            if authorizer.authorize(
                call.client, "ListTransactions", Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                listing.transactional_id, report=False,
            )
        )  # fmt: skip
        answer = dataclasses.replace(answer, listings=shown)
    return _listed_transactions(call.api_version, answer)


def _listed_transactions(version: int, answer: TxnList) -> Any:
    cls = response_schema(ApiKey.LIST_TRANSACTIONS, version)
    state_cls = nested(cls, "TransactionState")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        unknown_state_filters=answer.unknown_state_filters,
        transaction_states=tuple(
            build(
                state_cls,
                transactional_id=listing.transactional_id,
                producer_id=i64(listing.producer_id),
                transaction_state=listing.state,
            )
            for listing in answer.listings
        ),
    )


# -- DescribeProducers (61) -------------------------------------------------------------------------------------


def describe_producers(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 6.3, items 89-90: per partition, the partition's producer state or UNKNOWN_TOPIC_OR_PARTITION.

    Topics come back in request order, a topic named twice merged into one entry, partitions in request order.
    """
    cls = response_schema(ApiKey.DESCRIBE_PRODUCERS, call.api_version)
    topic_cls = nested(cls, "TopicResponse")
    partition_cls = nested(cls, "PartitionResponse")
    producer_cls = nested(cls, "ProducerState")
    by_topic: dict[str, list[Any]] = {}
    # Issue 30: READ on each topic (KafkaApis.handleDescribeProducersRequest), 29 on its partitions.
    denied = denied_topics(ctx, call, "DescribeProducers", Operation.READ, (t.name for t in body.topics))
    for requested in body.topics:
        topic = ctx.topics.get(requested.name)
        answers = by_topic.setdefault(requested.name, [])
        for index in requested.partition_indexes:
            if requested.name in denied:
                answers.append(
                    build(partition_cls, partition_index=i32(index), error_code=E.topic_authorization_failed,
                          error_message=None, active_producers=())
                )  # fmt: skip
                continue
            partition_log = topic.log(int(index)) if topic is not None else None
            if partition_log is not None and ctx.route is not None and not ctx.route.leads(requested.name, index):
                # Partition.activeProducerState: only the leader's log answers (several nodes).
                answers.append(
                    build(partition_cls, partition_index=i32(index), error_code=E.not_leader_or_follower,
                          error_message=None, active_producers=())
                )  # fmt: skip
                continue
            if partition_log is None:
                answers.append(
                    build(
                        partition_cls,
                        partition_index=i32(index),
                        error_code=E.unknown_topic_or_partition,
                        error_message=_UNKNOWN_PARTITION_MESSAGE,
                        active_producers=(),
                    )
                )
                continue
            producers = tuple(
                build(
                    producer_cls,
                    producer_id=i64(p.producer_id),
                    producer_epoch=i32(p.producer_epoch),
                    last_sequence=i32(p.last_sequence),
                    last_timestamp=i64(p.last_timestamp),
                    coordinator_epoch=i32(p.coordinator_epoch),
                    current_txn_start_offset=i64(p.current_txn_start_offset),
                )
                for p in partition_log.active_producers()
            )
            answers.append(
                build(
                    partition_cls,
                    partition_index=i32(index),
                    error_code=E.none,
                    error_message=None,
                    active_producers=producers,
                )
            )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()),
    )


# -- WriteTxnMarkers (27) ---------------------------------------------------------------------------------------


def write_txn_markers(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Sections 2.9 and 6.4, item 91: each marker into each listed partition, answered per partition.

    The partition's marker checks of section 4.2 apply (TV1: the epoch must not be below the stored one; a
    coordinator epoch below the stored one is TRANSACTION_COORDINATOR_FENCED). The transaction coordinator's
    state is not touched: an admin abort ends the partition's open transaction only, the LSO moves on.
    A ``__consumer_offsets`` partition is not a log here (group offsets are not stored as records), so it is
    answered UNKNOWN_TOPIC_OR_PARTITION where Kafka would complete the group's pending offsets.
    """
    cls = response_schema(ApiKey.WRITE_TXN_MARKERS, call.api_version)
    result_cls = nested(cls, "WritableTxnMarkerResult")
    topic_cls = nested(cls, "WritableTxnMarkerTopicResult")
    partition_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    now = ctx.coordinator.clock.now_ms()
    results = []
    for requested in body.markers:
        kind = MarkerType.COMMIT if requested.transaction_result else MarkerType.ABORT
        pid, epoch, coordinator_epoch = (
            int(requested.producer_id),
            int(requested.producer_epoch),
            int(requested.coordinator_epoch),
        )
        marker = Marker(kind, pid, epoch, coordinator_epoch)
        by_topic: dict[str, list[Any]] = {}
        for topic_request in requested.topics:
            answers = by_topic.setdefault(topic_request.name, [])
            for index in topic_request.partition_indexes:
                error = _write_marker(ctx, topic_request.name, int(index), marker, now)
                answers.append(build(partition_cls, partition_index=i32(index), error_code=error))
        results.append(
            build(
                result_cls,
                producer_id=i64(marker.producer_id),
                topics=tuple(build(topic_cls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items()),
            )
        )
    return build(cls, markers=tuple(results))


def _write_marker(ctx: ApiContext, name: str, partition: int, marker: Marker, now_ms: int) -> ErrorCode:
    topic = ctx.topics.get(name)
    partition_log = topic.log(partition) if topic is not None else None
    if partition_log is None:
        return E.unknown_topic_or_partition
    try:
        partition_log.append_marker(marker, now_ms)
    except InvalidBatch as refused:
        return refused.error
    except StorageFull:
        return E.kafka_storage_error
    ctx.fetches.appended(partition_log)  # a parked read_committed fetch may now see past the LSO
    return E.none


# -- error answers (getErrorResponse) --------------------------------------------------------------------------


def _describe_producers_error(version: int, body: Any, error: ErrorCode) -> Any:
    # DescribeProducersRequest.getErrorResponse: every requested partition, one entry per requested topic.
    cls = response_schema(ApiKey.DESCRIBE_PRODUCERS, version)
    topic_cls = nested(cls, "TopicResponse")
    partition_cls = nested(cls, "PartitionResponse")
    topics = tuple(
        build(
            topic_cls,
            name=t.name,
            partitions=tuple(
                build(
                    partition_cls, partition_index=i32(index), error_code=error, error_message=None, active_producers=()
                )
                for index in t.partition_indexes
            ),
        )
        for t in body.topics
    )
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


def _write_txn_markers_error(version: int, body: Any, error: ErrorCode) -> Any:
    # WriteTxnMarkersRequest.getErrorResponse: every partition of every marker, topics grouped per marker.
    cls = response_schema(ApiKey.WRITE_TXN_MARKERS, version)
    topic_cls = nested(cls, "WritableTxnMarkerTopicResult")
    partition_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    results = []
    for requested in body.markers:
        by_topic: dict[str, list[Any]] = {}
        for t in requested.topics:
            by_topic.setdefault(t.name, []).extend(
                build(partition_cls, partition_index=i32(index), error_code=error) for index in t.partition_indexes
            )
        topics = tuple(build(topic_cls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items())
        results.append(build(nested(cls, "WritableTxnMarkerResult"), producer_id=requested.producer_id, topics=topics))
    return build(cls, markers=tuple(results))


ROUTES = {
    ApiKey.DESCRIBE_TRANSACTIONS: Route(
        describe_transactions,
        # DescribeTransactionsRequest.getErrorResponse: every requested id, every other field at its default.
        lambda version, body, error: _described_transactions(
            version, (TxnDescription(tid, error) for tid in body.transactional_ids)
        ),
        lambda body: RequestIdentity(None, None, None, body.transactional_ids[0] if body.transactional_ids else None),
    ),
    # ListTransactionsRequest.getErrorResponse: the top-level error, nothing listed.
    ApiKey.LIST_TRANSACTIONS: Route(
        list_transactions, lambda version, body, error: _listed_transactions(version, TxnList(error))
    ),
    ApiKey.DESCRIBE_PRODUCERS: Route(describe_producers, _describe_producers_error),
    ApiKey.WRITE_TXN_MARKERS: Route(write_txn_markers, _write_txn_markers_error),
}
