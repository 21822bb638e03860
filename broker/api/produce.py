"""Produce (0) and InitProducerId (22): appends to partition logs, idempotent producers, no transactions."""

from __future__ import annotations

from typing import Any

import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from broker.api.base import NO_RESPONSE, NO_THROTTLE, ApiContext, Call, CloseConnection
from broker.storage.codecs import ZSTD
from broker.storage.partition_log import StorageFull
from broker.storage.records import InflationBudget, InvalidBatch, split_batches, validate_client_batch
from broker.storage.topics import Topic
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

log = structlog.get_logger("produce")

_VALID_ACKS = (-1, 0, 1)
_FIRST_ZSTD_VERSION = 7  # KIP-110


class _Outcome:
    __slots__ = ("base_offset", "error", "log_start_offset", "message")

    def __init__(self, error: ErrorCode, base_offset: int = -1, log_start_offset: int = -1, message: str | None = None):
        self.error = error
        self.base_offset = base_offset
        self.log_start_offset = log_start_offset
        self.message = message


def produce(ctx: ApiContext, call: Call, body: Any) -> Any:
    acks = body.acks
    # One for the whole request: what its compressed batches may decompress to together (records.InflationBudget),
    # from the broker's message.max.bytes, which a client cannot raise (a topic's max.message.bytes it can).
    budget = InflationBudget(ctx.topics.defaults.max_message_bytes)
    outcomes: list[tuple[str, list[tuple[int, _Outcome]]]] = []
    for topic_data in body.topic_data:
        answered = []
        for partition_data in topic_data.partition_data:
            outcome = _append(ctx, call, topic_data.name, partition_data.index, partition_data.records, acks, budget)
            answered.append((partition_data.index, outcome))
        outcomes.append((topic_data.name, answered))

    if acks == 0:
        failed = [(t, p, o) for t, ps in outcomes for p, o in ps if o.error is not ErrorCode.none]
        if failed:
            topic, partition, outcome = failed[0]
            return CloseConnection(f"acks=0 produce to {topic}-{partition} failed with {outcome.error.name}")
        return NO_RESPONSE
    return _response(call.api_version, outcomes)


def _append(
    ctx: ApiContext,
    call: Call,
    name: str,
    partition: int,
    records: bytes | None,
    acks: int,
    budget: InflationBudget,
) -> _Outcome:
    """One partition, checked in KafkaApis' order: metadata, batch shape, acks, then the log's own checks."""
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
        if acks not in _VALID_ACKS:
            return _Outcome(ErrorCode.invalid_required_acks)
        header, batch = batches[0]
        index = validate_client_batch(header, batch, topic.max_message_bytes, budget)
        if header.is_transactional:
            raise InvalidBatch(ErrorCode.invalid_txn_state, "this broker has no transaction coordinator")
        base_offset = partition_log.append(header, batch, index)
    except InvalidBatch as error:
        _refused(call, topic, partition, error.error, str(error))
        return _Outcome(error.error, message=str(error))
    except StorageFull as error:
        _refused(call, topic, partition, ErrorCode.kafka_storage_error, str(error))
        return _Outcome(ErrorCode.kafka_storage_error, message=str(error))
    ctx.fetches.appended(partition_log)
    return _Outcome(ErrorCode.none, base_offset, partition_log.log_start_offset)


def _refused(call: Call, topic: Topic, partition: int, error: ErrorCode, reason: str) -> None:
    log.warning(
        "produce refused",
        topic=topic.name,
        partition=partition,
        error=error.name,
        reason=reason,
        client_id=call.client.client_id,
        host=call.client.host,
    )


def _response(version: int, outcomes: list[tuple[str, list[tuple[int, _Outcome]]]]) -> Any:
    cls = response_schema(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    return build(
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


def init_producer_id(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Idempotent producers get a fresh id at epoch 0 every time, as Kafka does without a transactional id."""
    transactional_id = body.transactional_id
    producer_id, epoch, error = -1, -1, ErrorCode.none
    if transactional_id is None:
        producer_id, epoch = next(ctx.producer_ids), 0
    elif transactional_id == "":
        error = ErrorCode.invalid_request
    else:
        # Transactions are not offered: no broker hosts a transaction coordinator.
        error = ErrorCode.coordinator_not_available
    cls = response_schema(ApiKey.INIT_PRODUCER_ID, call.api_version)
    return build(
        cls, throttle_time=NO_THROTTLE, error_code=error, producer_id=i64(producer_id), producer_epoch=i16(epoch)
    )
