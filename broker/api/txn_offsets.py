"""TxnOffsetCommit (28): a transactional producer's offset commit (``docs/spec/transactions.md`` 2.7 and 5.1).

Versions (Kafka 4.0 serves 0-5; we serve 0-4):
* v0-1: no leader epoch, no group metadata; COORDINATOR_LOAD_IN_PROGRESS goes out as COORDINATOR_NOT_AVAILABLE.
* v2: CommittedLeaderEpoch.
* v3 (KIP-447): GenerationId, MemberId, GroupInstanceId: zombies are fenced through the group; flexible from here.
* v4: a transaction check failure for an offsets partition not in the transaction is TRANSACTION_ABORTABLE
  instead of INVALID_TXN_STATE.
* v5 is transaction version 2 (the offsets partition is added implicitly); not served, as TV2 is not advertised.

There is no top-level error: a failure of the whole request is repeated on every partition. The order of 5.1:
unknown topics and partitions are set aside first (if none is left, the answer goes out at once), then the group id,
then the transaction coordinator's check, then the group's checks and the staging of the offsets.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.authorization import NOTHING, denied_topics
from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, partition_errors
from broker.api.offsets import known_commits
from broker.coordinator.messages import PartitionErrors, TxnCommitRequest, every_partition
from broker.security.acls import Operation
from broker.transactions.messages import TxnOffsetCheckRequest
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

E = ErrorCode


def txn_offset_commit(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    # 5.1 step 2: KafkaApis answers partitions missing from the metadata itself (per topic when the topic is
    # unknown) and drops them from the request.
    # Issue 30: READ on each topic (the id's WRITE and the group's READ were the authorization gate's).
    denied = (
        NOTHING
        if ctx.authorizer is None
        else denied_topics(ctx, call, "TxnOffsetCommit", Operation.READ, (t.name for t in body.topics))
    )
    known = known_commits(ctx, (t for t in body.topics if t.name not in denied))
    request = TxnCommitRequest(
        group_id=body.group_id,
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
        topics=tuple((name, partitions) for name, partitions in known if partitions),
        generation_id=getattr(body, "generation_id", -1),
        member_id=getattr(body, "member_id", ""),
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    result: PartitionErrors = ()
    if request.topics:
        result = _commit(ctx, version, body.transactional_id, request)
    if version <= 1:
        # KafkaApis: v0-1 clients do not know COORDINATOR_LOAD_IN_PROGRESS as retriable here (2.1).
        loading, unavailable = E.coordinator_load_in_progress, E.coordinator_not_available
        result = tuple((topic, tuple((p, unavailable if e is loading else e) for p, e in ps)) for topic, ps in result)
    if denied:
        refused = E.topic_authorization_failed
        result += tuple(
            (t.name, tuple((p.partition_index, refused) for p in t.partitions)) for t in body.topics if t.name in denied
        )
    return _response(version, body, result)


def _commit(ctx: ApiContext, version: int, transactional_id: str | None, request: TxnCommitRequest) -> PartitionErrors:
    coordinator = ctx.coordinator
    if not coordinator.active:
        return _every_partition(request, E.coordinator_not_available)
    if not request.group_id:
        return _every_partition(request, E.invalid_group_id)  # 5.1 step 3, before the transaction check
    transactions = ctx.transactions  # None when the broker runs without a transaction coordinator
    if transactions is None:
        return _every_partition(request, E.coordinator_not_available)
    # 5.1 step 4: the TC's check beats any group error.
    error = transactions.check_txn_offset_commit(
        TxnOffsetCheckRequest(
            transactional_id=transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            group_id=request.group_id,
            api_version=version,
        )
    )
    if error is not E.none:
        return _every_partition(request, error)
    return coordinator.commit_transactional_offsets(request)


def _every_partition(request: TxnCommitRequest, error: ErrorCode) -> PartitionErrors:
    return every_partition(((topic, (p.partition for p in ps)) for topic, ps in request.topics), error)


def _response(version: int, body: Any, result: PartitionErrors) -> Any:
    """The coordinator's answer plus UNKNOWN_TOPIC_OR_PARTITION for what was set aside, in request order."""
    errors = {(topic, partition): error for topic, partitions in result for partition, error in partitions}
    cls = response_schema(ApiKey.TXN_OFFSET_COMMIT, version)
    topic_cls = nested(cls, "TxnOffsetCommitResponseTopic")
    partition_cls = nested(cls, "TxnOffsetCommitResponsePartition")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=i32(p.partition_index),
                        error_code=errors.get((t.name, p.partition_index), E.unknown_topic_or_partition),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )


def _txn_offset_commit_error(version: int, body: Any, error: ErrorCode) -> Any:
    # TxnOffsetCommitRequest.getErrorResponse: no top-level error, so it goes on every requested partition.
    refused = every_partition(((t.name, (p.partition_index for p in t.partitions)) for t in body.topics), error)
    cls = response_schema(ApiKey.TXN_OFFSET_COMMIT, version)
    return build(cls, throttle_time=NO_THROTTLE, topics=partition_errors(cls, "TxnOffsetCommitResponse", refused))


ROUTES = {ApiKey.TXN_OFFSET_COMMIT: Route(txn_offset_commit, _txn_offset_commit_error)}
