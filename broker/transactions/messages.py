"""Version-independent requests and results of the transaction coordinator.

The API layer turns each versioned request into one of these and each result back into the versioned response.
Where Kafka's behaviour depends on the version it is passed as ``transaction_version`` (1 = TV1, 2 = TV2:
EndTxn v5, AddPartitionsToTxn v5, Produce v12, TxnOffsetCommit v5; transactions spec section 2.3) or, for
TxnOffsetCommit, ``api_version``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

# Kafka's partitionFor, one implementation for groups and transactional ids (cluster-and-durability.md 1.1, 1.3).
from broker.cluster.hashing import java_string_hash as java_string_hash
from broker.cluster.hashing import partition_for as partition_for

TopicPartition = tuple[str, int]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: Internal topics are never write-authorized for AddPartitionsToTxn (section 2.5 step 2).
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


@dataclass(slots=True, frozen=True)
class InitProducerIdRequest:
    transactional_id: str | None  # None: an idempotent-only producer
    transaction_timeout_ms: int
    producer_id: int = -1  # v3+ expected pid (KIP-360)
    producer_epoch: int = -1  # v3+ expected epoch


@dataclass(slots=True, frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True, frozen=True)
class AddPartitionsRequest:
    """AddPartitionsToTxn (v0-3 client form, one transaction of the v4+ form) or a TV2 implicit add."""

    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    transaction_version: int = 1


@dataclass(slots=True, frozen=True)
class PartitionsResult:
    """``error`` is the transaction's one answer; ``partitions`` carries it (or the per-partition errors)."""

    error: ErrorCode
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


@dataclass(slots=True, frozen=True)
class AddOffsetsRequest:
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    group_id: str
    transaction_version: int = 1  # AddOffsetsToTxn is TV1; TxnOffsetCommit v5's implicit add is TV2


@dataclass(slots=True, frozen=True)
class TxnOffsetCheckRequest:
    """The TC side of TxnOffsetCommit (section 5.1 step 4): verify (v0-4) or add (v5) the group's partition."""

    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    group_id: str
    api_version: int


@dataclass(slots=True, frozen=True)
class EndTxnRequest:
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    committed: bool
    transaction_version: int = 1  # 2 for EndTxn v5


@dataclass(slots=True, frozen=True)
class EndTxnResult:
    """``producer_id``/``producer_epoch`` are what EndTxn v5 answers: -1/-1 on every error (section 2.8)."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True, frozen=True)
class TxnMarker:
    """One control batch to append (section 3.8 step 2; its format is section 4.1)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int = 0  # constant on one node (section 3.8, "C")


@dataclass(slots=True, frozen=True)
class Completion:
    """A finished transaction: what the API layer applies (section 3.8 step 2), in partition order.

    ``markers`` are the data partitions' control batches; ``groups`` are the groups whose pending offsets of
    ``producer_id`` commit or abort (the group coordinator's completion, section 5.3).
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    markers: tuple[TxnMarker, ...]
    groups: tuple[str, ...]


#: Below these versions PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH (section 2.1, KafkaApis).
_FENCED_REWRITTEN_BELOW = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


def error_for_version(api: str, api_version: int, error: ErrorCode) -> ErrorCode:
    """The old-version rewrite of section 2.1, for the API layer: ``api`` is the API's Kafka name."""
    if error is ErrorCode.producer_fenced and api_version < _FENCED_REWRITTEN_BELOW.get(api, 0):
        return ErrorCode.invalid_producer_epoch
    return error
