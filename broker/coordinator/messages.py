"""Version-independent requests and results of the group coordinator.

The API layer turns each versioned wire request into one of these and each
result back into the versioned wire response, so the coordinator never sees a
protocol version except where Kafka's behaviour depends on it (``api_version``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.client import LOCAL_CLIENT, Client
from broker.coordinator.group_type import GroupType


@dataclass(slots=True, frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    reason: str | None = None
    api_version: int = 9
    client: Client = LOCAL_CLIENT


@dataclass(slots=True, frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True, frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(slots=True, frozen=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    api_version: int = 5


@dataclass(slots=True, frozen=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True, frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True, frozen=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True, frozen=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[LeftMember, ...] = ()


@dataclass(slots=True, frozen=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1  # only OffsetCommit v1 carries one


@dataclass(slots=True, frozen=True)
class CommitRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    api_version: int = 9


PartitionErrors = tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]


@dataclass(slots=True, frozen=True)
class TxnCommitRequest:
    """TxnOffsetCommit's group part (docs/spec/transactions.md section 5.1): staged under ``producer_id`` until the
    transaction ends. v0-2 carry no group metadata (generation -1, member "", no instance)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(slots=True, frozen=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True, frozen=True)
class GroupOffsets:
    group_id: str
    error: ErrorCode = ErrorCode.none
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


@dataclass(slots=True, frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True, frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode = ErrorCode.none
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(slots=True, frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: GroupType = GroupType.CLASSIC


@dataclass(slots=True, frozen=True)
class OffsetDeleteResult:
    error: ErrorCode
    topics: PartitionErrors = field(default=())


# -- KIP-848 consumer groups (docs/spec/consumer-groups.md) ------------------------------------------------------

TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(slots=True, frozen=True)
class ConsumerHeartbeatRequest:
    """ConsumerGroupHeartbeat (section 2.1); ``None`` is "unchanged since the last heartbeat" for every optional
    field, as on the wire, and ``rebalance_timeout_ms`` -1 likewise."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: TopicIdPartitions | None = None
    api_version: int = 1
    client: Client = LOCAL_CLIENT
    # Issue 30, Kafka 4.0: which topics the member may DESCRIBE, for its regex's resolution (those it may not are
    # dropped, silently); None (ACLs off) is every topic.
    describable: Callable[[str], bool] | None = None


@dataclass(slots=True, frozen=True)
class ConsumerHeartbeatResult:
    """The response (section 2.1, 4.14, 4.15): ``assignment`` None is "no change" (null on the wire)."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicIdPartitions | None = None


@dataclass(slots=True, frozen=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1  # ConsumerGroupDescribe v1: 1 consumer protocol, 0 classic protocol


@dataclass(slots=True, frozen=True)
class ConsumerGroupDescription:
    """One entry of ConsumerGroupDescribe (section 9.3)."""

    group_id: str
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def every_partition(topics: Iterable[tuple[str, Iterable[int]]], error: ErrorCode) -> PartitionErrors:
    """``error`` on every requested partition: the answer to a request refused as a whole whose response has no
    top-level error (OffsetCommit, TxnOffsetCommit)."""
    return tuple((topic, tuple((partition, error) for partition in partitions)) for topic, partitions in topics)
