"""Produce (0) and InitProducerId (22): appends to partition logs, idempotent and transactional producers.

Transactional Produce is TV1 (transactions spec 2.10 and 4.3): we serve Produce up to v11, so a transactional
batch for a partition where the producer has no open transaction is verified with the transaction coordinator,
never implicitly added (that is v12, TV2). The checks follow the order of 2.10: every partition's metadata and
shape first, then one request's transactional batches must come from one producer, then verification and append.
InitProducerId with a transactional id goes to the coordinator (2.4).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i64

from broker.api.authorization import NOTHING, denied_topics
from broker.api.base import (
    NO_RESPONSE,
    NO_THROTTLE,
    ApiContext,
    Call,
    CloseConnection,
    Route,
    error_message,
    millis,
    top_level_error,
)
from broker.security.acls import Operation
from broker.storage.codecs import ZSTD
from broker.storage.partition_log import PartitionLog, StorageFull
from broker.storage.records import (
    TRANSACTIONAL_MASK,
    BatchHeader,
    InflationBudget,
    InvalidBatch,
    split_batches,
    validate_client_batch,
)
from broker.storage.topics import Topic
from broker.transactions.messages import AddPartitionsRequest, InitProducerIdRequest, error_for_version
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

if TYPE_CHECKING:
    from broker.cluster.routing import NodeRoute

log = structlog.get_logger("produce")

_VALID_ACKS = (-1, 0, 1)
_FIRST_ZSTD_VERSION = 7  # KIP-110
_FIRST_CURRENT_LEADER_VERSION = 10  # KIP-951: CurrentLeader and NodeEndpoints, tagged
_FIRST_ABORTABLE_VERSION = 11  # Produce v11 may answer TRANSACTION_ABORTABLE (transactions spec 4.3)
_MAGIC_AT, _ATTRIBUTES_AT = 16, 21  # in a record batch's header
_UNAUTHORIZED = ErrorCode.transactional_id_authorization_failed


class _Outcome:
    __slots__ = ("base_offset", "error", "leader", "log_start_offset", "message")

    def __init__(
        self,
        error: ErrorCode,
        base_offset: int = -1,
        log_start_offset: int = -1,
        message: str | None = None,
        leader: tuple[int, int] | None = None,
    ):
        self.error = error
        self.base_offset = base_offset
        self.log_start_offset = log_start_offset
        self.message = message
        # (leader id, epoch) of a NOT_LEADER_OR_FOLLOWER answer on several nodes: v10+'s CurrentLeader (KIP-951).
        self.leader = leader


def produce(ctx: ApiContext, call: Call, body: Any) -> Any:
    acks = body.acks
    route = ctx.route  # None on one node: it leads every partition
    # One for the whole request: what its compressed batches may decompress to together (records.InflationBudget),
    # from the broker's message.max.bytes, which a client cannot raise (a topic's max.message.bytes it can).
    budget = InflationBudget(ctx.topics.defaults.max_message_bytes)
    transactional_id = getattr(body, "transactional_id", None)
    # Transactions spec 2.10 step 1: transactional data without a transactional id fails every partition.
    unauthorized = transactional_id is None and any(
        _is_transactional(p.records) for t in body.topic_data for p in t.partition_data
    )
    # Step 2 for every partition first (KafkaApis' metadata and shape checks), so that step 3 sees the batches
    # that passed it, as ReplicaManager.handleProduceAppend does.
    shaped: list[tuple[str, list[tuple[int, _Outcome | _Shaped]]]] = []
    # Issue 30: WRITE on each topic, 29 on its partitions (the transactional id's WRITE was the gate's).
    denied = (
        NOTHING
        if ctx.authorizer is None
        else denied_topics(ctx, call, "Produce", Operation.WRITE, (t.name for t in body.topic_data))
    )
    for topic_data in body.topic_data:
        checked: list[tuple[int, _Outcome | _Shaped]] = []
        for partition_data in topic_data.partition_data:
            if topic_data.name in denied:
                checked.append((partition_data.index, _Outcome(ErrorCode.topic_authorization_failed)))
            elif unauthorized:
                reason = "transactional records need the request's transactional id"
                _refused(call, topic_data.name, partition_data.index, _UNAUTHORIZED, reason)
                checked.append((partition_data.index, _Outcome(_UNAUTHORIZED, message=reason)))
            else:
                checked.append(
                    (
                        partition_data.index,
                        _shape(ctx, call, topic_data.name, partition_data.index, partition_data.records),
                    )
                )
        shaped.append((topic_data.name, checked))

    # Step 3: transactional batches of more than one producer in one request refuse it whole, nothing appended.
    # ReplicaManager.handleProduceAppend counts (producer id, epoch) pairs: two epochs of one id refuse it too.
    producers = {
        (entry.header.producer_id, entry.header.producer_epoch)
        for _, checked in shaped
        for _, entry in checked
        if isinstance(entry, _Shaped) and entry.header.is_transactional and entry.header.producer_id >= 0
    }
    outcomes: list[tuple[str, list[tuple[int, _Outcome]]]] = []
    if len(producers) > 1:
        reason = "Transactional records contained more than one producer ID"
        for name, checked in shaped:
            for partition, _ in checked:
                _refused(call, name, partition, ErrorCode.invalid_producer_id_mapping, reason)
        mapping = _Outcome(ErrorCode.invalid_producer_id_mapping, message=reason)
        outcomes = [(name, [(partition, mapping) for partition, _ in checked]) for name, checked in shaped]
    else:
        for name, checked in shaped:
            answered = [
                (
                    partition,
                    entry
                    if isinstance(entry, _Outcome)
                    else _append(ctx, call, entry, acks, budget, transactional_id, route),
                )
                for partition, entry in checked
            ]
            outcomes.append((name, answered))

    if acks == 0:
        failed = [(t, p, o) for t, ps in outcomes for p, o in ps if o.error is not ErrorCode.none]
        if failed:
            topic, partition, outcome = failed[0]
            return CloseConnection(f"acks=0 produce to {topic}-{partition} failed with {outcome.error.name}")
        return NO_RESPONSE
    return _response(call.api_version, outcomes, route)


class _Shaped:
    """A partition's records past step 2 of transactions spec 2.10: the partition exists, one magic-2 batch."""

    __slots__ = ("batch", "header", "log", "partition", "topic")

    def __init__(self, topic: Topic, partition: int, log: PartitionLog, header: BatchHeader, batch: bytes) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.header = header
        self.batch = batch


def _shape(ctx: ApiContext, call: Call, name: str, partition: int, records: bytes | None) -> _Outcome | _Shaped:
    """Step 2 of 2.10, in KafkaApis' order: metadata, then ``ProduceRequest.validateRecords`` (magic, compression
    for the version, exactly one batch)."""
    topic = ctx.topics.get_or_auto_create(name)
    partition_log = topic.log(partition) if topic is not None else None
    if topic is None or partition_log is None:
        return _Outcome(ErrorCode.unknown_topic_or_partition)
    try:
        batches = split_batches(records or b"")
        if batches and batches[0][0].compression == ZSTD and call.api_version < _FIRST_ZSTD_VERSION:
            # ProduceRequest.validateRecords, between the magic check and the one-batch check.
            raise InvalidBatch(
                ErrorCode.unsupported_compression_type,
                f"Produce requests with version {call.api_version} are not allowed to use ZStandard compression",
            )
        if len(batches) != 1:
            # ProduceRequest.validateRecords: v3+ carries exactly one batch per partition.
            raise InvalidBatch(
                ErrorCode.invalid_record,
                "Produce requests with version 3 and above are only allowed to contain exactly one record batch "
                f"per partition; found {len(batches)}",
            )
    except InvalidBatch as error:
        _refused(call, topic.name, partition, error.error, str(error))
        return _Outcome(error.error, message=str(error))
    header, batch = batches[0]
    return _Shaped(topic, partition, partition_log, header, batch)


def _append(
    ctx: ApiContext,
    call: Call,
    shaped: _Shaped,
    acks: int,
    budget: InflationBudget,
    transactional_id: str | None = None,
    route: NodeRoute | None = None,
) -> _Outcome:
    """One partition past steps 2 and 3: acks, leadership, the batch's own checks, verification (step 4), the
    log's checks."""
    topic, partition, partition_log, header = shaped.topic, shaped.partition, shaped.log, shaped.header
    try:
        if acks not in _VALID_ACKS:
            return _Outcome(ErrorCode.invalid_required_acks)
        if route is not None:
            not_led = _leader_refusal(route, topic, partition, acks)
            if not_led is not None:
                _refused(call, topic.name, partition, not_led.error, not_led.message or not_led.error.name)
                return not_led
        index = validate_client_batch(header, shaped.batch, topic.max_message_bytes, budget)
        if header.is_transactional and not partition_log.has_ongoing_transaction(header.producer_id):
            # Only a partition's first batch of a transaction is verified (transactions spec 4.3).
            refused = _verify(ctx, call, transactional_id, topic.name, partition, header)
            if refused is not None:
                raise InvalidBatch(refused, f"transaction verification failed: {refused.name}")
        base_offset = partition_log.append(header, shaped.batch, index)
    except InvalidBatch as error:
        _refused(call, topic.name, partition, error.error, str(error))
        return _Outcome(error.error, message=str(error))
    except StorageFull as error:
        _refused(call, topic.name, partition, ErrorCode.kafka_storage_error, str(error))
        return _Outcome(ErrorCode.kafka_storage_error, message=str(error))
    ctx.fetches.appended(partition_log)
    return _Outcome(ErrorCode.none, base_offset, partition_log.log_start_offset)


def _leader_refusal(route: NodeRoute, topic: Topic, partition: int, acks: int) -> _Outcome | None:
    """Several nodes: ReplicaManager.appendToLocalLog's getPartitionOrException (NOT_LEADER_OR_FOLLOWER at a
    node that does not lead it, with the leader it knows), then Partition.appendRecordsToLeader's acks=all check
    of the ISR against min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing appended)."""
    error = route.partition_error(topic.name, partition)
    if error is not None:
        # Partition.appendRecordsToLeader's message.
        reason = f"Leader not local for partition {topic.name}-{partition} on broker {route.node_id}"
        return _Outcome(error, message=reason, leader=route.current_leader(topic.name, partition))
    if acks == -1:
        in_sync, required = route.in_sync(topic.name, partition), topic.min_insync_replicas
        if in_sync < required:
            return _Outcome(
                ErrorCode.not_enough_replicas,
                message=f"The size of the current ISR {in_sync} is insufficient to satisfy the min.isr requirement "
                f"of {required} for partition {topic.name}-{partition}",
            )
    return None


def _is_transactional(records: bytes | None) -> bool:
    """Whether the first batch is a transactional magic-2 batch (``ProduceRequest``'s transactional flag)."""
    return (
        records is not None
        and len(records) > _ATTRIBUTES_AT + 1
        and records[_MAGIC_AT] == 2
        and bool(records[_ATTRIBUTES_AT + 1] & TRANSACTIONAL_MASK)
    )


def _verify(
    ctx: ApiContext, call: Call, transactional_id: str | None, topic: str, partition: int, header: BatchHeader
) -> ErrorCode | None:
    """TV1 verification (transactions spec 4.3): does (pid, epoch) have the partition in its ongoing transaction?
    The TC's answer becomes Produce's error as ``AddPartitionsToTxnManager`` maps it; None to append."""
    if ctx.transactions is None:
        return ErrorCode.invalid_txn_state
    result = ctx.transactions.verify_partitions(
        AddPartitionsRequest(transactional_id, header.producer_id, header.producer_epoch, ((topic, partition),))
    )
    error = result.partitions[0][1] if result.partitions else result.error
    if error is ErrorCode.none:
        return None
    if error is ErrorCode.transaction_abortable:
        # "Partition was not added to the transaction": retriable only for clients that know error 120.
        return error if call.api_version >= _FIRST_ABORTABLE_VERSION else ErrorCode.invalid_txn_state
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch  # Produce always answers 47, never 90 (section 8)
    if error is ErrorCode.concurrent_transactions:
        return ErrorCode.not_enough_replicas  # retriable (section 4.3 table)
    return error  # INVALID_PRODUCER_ID_MAPPING, INVALID_REQUEST


def _refused(call: Call, topic: str, partition: int, error: ErrorCode, reason: str) -> None:
    log.warning(
        "produce refused",
        topic=topic,
        partition=partition,
        error=error.name,
        reason=reason,
        client_id=call.client.client_id,
        host=call.client.host,
    )


def _response(
    version: int, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]], route: NodeRoute | None = None
) -> Any:
    cls = response_schema(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    response = build(
        cls,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            build(
                topic_cls,
                name=name,
                partition_responses=tuple(
                    build(
                        partition_cls,
                        index=i32(partition),
                        error_code=outcome.error,
                        base_offset=i64(outcome.base_offset),
                        log_append_time=None,  # CreateTime topics answer -1
                        log_start_offset=i64(outcome.log_start_offset),
                        record_errors=(),
                        error_message=outcome.message,
                    )
                    for partition, outcome in partitions
                ),
            )
            for name, partitions in outcomes
        ),
    )
    if route is not None and version >= _FIRST_CURRENT_LEADER_VERSION:
        response = _with_current_leaders(cls, response, outcomes, route)
    return response


def _with_current_leaders(
    cls: Any, response: Any, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]], route: NodeRoute
) -> Any:
    """KIP-951 for v10+ (KafkaApis.handleProduceRequest): each NOT_LEADER_OR_FOLLOWER partition's CurrentLeader,
    and the response's NodeEndpoints of those leaders; the response as it was when there is none."""
    if not any(outcome.leader is not None for _, partitions in outcomes for _, outcome in partitions):
        return response
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    leaders: set[int] = set()
    topics = []
    for topic, (_, partitions) in zip(response.responses, outcomes, strict=True):
        answered = []
        for entry, (_, outcome) in zip(topic.partition_responses, partitions, strict=True):
            if outcome.leader is not None:
                leader, epoch = outcome.leader
                entry = dataclasses.replace(
                    entry, current_leader=leader_cls(leader_id=BrokerId(leader), leader_epoch=i32(epoch))
                )
                if leader >= 0:
                    leaders.add(leader)
            answered.append(entry)
        topics.append(dataclasses.replace(topic, partition_responses=tuple(answered)))
    endpoint_cls = nested(cls, "NodeEndpoint")
    endpoints = tuple(
        endpoint_cls(node_id=BrokerId(node), host=host, port=i32(port), rack=None)
        for node, host, port in route.leader_endpoints(leaders)
    )
    return dataclasses.replace(response, responses=tuple(topics), node_endpoints=endpoints)


def init_producer_id(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Idempotent producers get a fresh id at epoch 0 every time, as Kafka does without a transactional id;
    a transactional id goes to the transaction coordinator (transactions spec 2.4, 3.4)."""
    transactional_id = body.transactional_id
    producer_id, epoch, error = -1, -1, ErrorCode.none
    if transactional_id is None:
        producer_id, epoch = next(ctx.producer_ids), 0
    elif transactional_id == "":
        error = ErrorCode.invalid_request
    elif ctx.transactions is None:
        error = ErrorCode.coordinator_not_available  # bare handler tests: no transaction coordinator
    else:
        result = ctx.transactions.init_producer_id(
            InitProducerIdRequest(
                transactional_id,
                millis(body.transaction_timeout),
                int(getattr(body, "producer_id", -1)),  # v3+ (KIP-360)
                int(getattr(body, "producer_epoch", -1)),
            )
        )
        error = error_for_version("InitProducerId", call.api_version, result.error)
        producer_id, epoch = result.producer_id, result.producer_epoch
    cls = response_schema(ApiKey.INIT_PRODUCER_ID, call.api_version)
    return build(
        cls, throttle_time=NO_THROTTLE, error_code=error, producer_id=i64(producer_id), producer_epoch=i16(epoch)
    )


def _produce_error(version: int, body: Any, error: ErrorCode) -> Any:
    """ProduceRequest.getErrorResponse: every partition gets the error, no offsets. With acks=0 it returns null,
    and RequestHandlerHelper.sendErrorOrCloseConnection then closes the connection: the producer hears of the
    failure by reconnecting, as with a failed acks=0 append above."""
    if body.acks == 0:
        return CloseConnection(f"acks=0 produce failed with {error.name}")
    refused = _Outcome(error, message=error_message(error))
    return _response(version, [(t.name, [(p.index, refused) for p in t.partition_data]) for t in body.topic_data])


ROUTES = {
    ApiKey.PRODUCE: Route(produce, _produce_error),
    # InitProducerIdResponse on error: no producer id, no epoch (RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH).
    ApiKey.INIT_PRODUCER_ID: Route(
        init_producer_id, top_level_error(ApiKey.INIT_PRODUCER_ID, producer_id=i64(-1), producer_epoch=i16(-1))
    ),
}
