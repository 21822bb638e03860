"""AddPartitionsToTxn (24), AddOffsetsToTxn (25) and EndTxn (26): the transaction coordinator's APIs.

Versions served (transactions spec section 2.2; we are choice B of section 2.3, TV1 only, with no
``transaction.version`` feature advertised):
* AddPartitionsToTxn 0-3: the client form. v4-5 are the broker-to-broker batched form (VerifyOnly, a top-level
  error) that no client sends; we do not serve them.
* AddOffsetsToTxn 0-4: v2 may answer PRODUCER_FENCED, v4 TRANSACTION_ABORTABLE.
* EndTxn 0-4 only: v5 is TV2, whose EndTxn bumps the epoch; a TV1 client must never see that (section 8).
InitProducerId with a transactional id is broker/api/produce.py's, like the idempotent one.
Below the versions of section 2.1, PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH (messages.error_for_version).
Without a transaction coordinator (bare handler tests) every request answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.authorization import denied_topics
from broker.api.base import NO_THROTTLE, ApiContext, Call, RequestIdentity, Route
from broker.security.acls import Operation
from broker.transactions.messages import (
    AddOffsetsRequest,
    AddPartitionsRequest,
    EndTxnRequest,
    TopicPartition,
    error_for_version,
)
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

E = ErrorCode


def add_partitions_to_txn(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 2.5, v0-3: a bad partition refuses the whole request (step 2), else the TC's one answer."""
    partitions = tuple(
        (topic.name, int(partition)) for topic in body.v3_and_below_topics for partition in topic.partitions
    )
    # Issue 30: WRITE on each topic (the id's WRITE was the authorization gate's). As KafkaApis: the denied
    # topics' partitions TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED, nothing added.
    denied = denied_topics(ctx, call, "AddPartitionsToTxn", Operation.WRITE, (name for name, _ in partitions))
    if denied:
        refused, spared = E.topic_authorization_failed, E.operation_not_attempted
        return add_partitions_response(
            call.api_version, ((tp, refused if tp[0] in denied else spared) for tp in partitions)
        )
    if ctx.transactions is None:
        return add_partitions_response(call.api_version, ((tp, E.coordinator_not_available) for tp in partitions))
    result = ctx.transactions.add_partitions(
        AddPartitionsRequest(
            body.v3_and_below_transactional_id,
            int(body.v3_and_below_producer_id),
            int(body.v3_and_below_producer_epoch),
            partitions,
        )
    )
    answers = ((tp, error_for_version("AddPartitionsToTxn", call.api_version, e)) for tp, e in result.partitions)
    return add_partitions_response(call.api_version, answers)


def add_partitions_response(version: int, answers: Iterable[tuple[TopicPartition, ErrorCode]]) -> Any:
    """The v0-3 response: one result per requested partition, topics in the order they first appear."""
    cls = response_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    topic_cls = nested(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested(cls, "AddPartitionsToTxnPartitionResult")
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in answers:
        by_topic.setdefault(topic, []).append(
            build(partition_cls, partition_index=i32(partition), partition_error_code=error)
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            build(topic_cls, name=name, results_by_partition=tuple(results)) for name, results in by_topic.items()
        ),
    )


def add_offsets_to_txn(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 2.6: the group's ``__consumer_offsets`` partition joins the transaction (TV1)."""
    if ctx.transactions is None:
        error = E.coordinator_not_available
    else:
        error = ctx.transactions.add_offsets(
            AddOffsetsRequest(body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.group_id)
        )
    return error_only(
        ApiKey.ADD_OFFSETS_TO_TXN, call.api_version, error_for_version("AddOffsetsToTxn", call.api_version, error)
    )


def end_txn(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Section 2.8 with 3.6 (TV1): the epoch never changes, so the client's next transaction goes on with it."""
    if ctx.transactions is None:
        error = E.coordinator_not_available
    else:
        error = ctx.transactions.end_txn(
            EndTxnRequest(body.transactional_id, int(body.producer_id), int(body.producer_epoch), body.committed)
        ).error
    return error_only(ApiKey.END_TXN, call.api_version, error_for_version("EndTxn", call.api_version, error))


def error_only(api_key: int, version: int, error: ErrorCode) -> Any:
    """AddOffsetsToTxn's and EndTxn's (v0-4) response: a throttle time and an error code."""
    return build(response_schema(api_key, version), throttle_time=NO_THROTTLE, error_code=error)


def _add_partitions_error(version: int, body: Any, error: ErrorCode) -> Any:
    # AddPartitionsToTxnRequest.getErrorResponse (v0-3): the error on every requested partition.
    requested = ((t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions)
    return add_partitions_response(version, ((tp, error) for tp in requested))


ROUTES = {
    ApiKey.ADD_PARTITIONS_TO_TXN: Route(
        add_partitions_to_txn,
        _add_partitions_error,
        # v0-3 call its transactional id V3AndBelowTransactionalId.
        lambda body: RequestIdentity(None, None, None, body.v3_and_below_transactional_id),
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Route(
        add_offsets_to_txn, lambda version, body, error: error_only(ApiKey.ADD_OFFSETS_TO_TXN, version, error)
    ),
    ApiKey.END_TXN: Route(end_txn, lambda version, body, error: error_only(ApiKey.END_TXN, version, error)),
}
