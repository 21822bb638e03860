"""The version-free requests and answers of the share-group APIs (sections 2.1-2.5 of ``docs/spec/share-groups.md``),
between ``broker/api/share_*.py`` and the share coordinator (``service.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.client import LOCAL_CLIENT, Client
from broker.coordinator.modern.share.partition import AckBatch
from broker.coordinator.modern.types import TopicId

__all__ = [
    "AcknowledgedPartition",
    "FetchedPartition",
    "PartitionAcks",
    "ShareAcknowledgeRequest",
    "ShareAnswer",
    "ShareFetchRequest",
    "ShareGroupDescription",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResult",
    "ShareMemberDescription",
    "ShareOffset",
]

TopicIdPartitions = tuple[tuple[TopicId, tuple[int, ...]], ...]


@dataclass(slots=True, frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client: Client = LOCAL_CLIENT


@dataclass(slots=True, frozen=True)
class ShareHeartbeatResult:
    """``assignment`` None is "no change" (null on the wire, section 2.1)."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicIdPartitions | None = None


@dataclass(slots=True, frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[TopicId, str, tuple[int, ...]], ...]  # (topic id, name, partitions)


@dataclass(slots=True, frozen=True)
class ShareGroupDescription:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ShareMemberDescription, ...] = ()


@dataclass(slots=True, frozen=True)
class PartitionAcks:
    """One partition of a ShareFetch or ShareAcknowledge: its acknowledgement batches (merged when the topic or the
    partition was listed more than once, section 12.7 trap 3)."""

    topic_id: TopicId
    partition: int
    batches: tuple[AckBatch, ...] = ()
    acknowledged: bool = False  # it carried an AcknowledgementBatches array with entries


@dataclass(slots=True, frozen=True)
class ShareFetchRequest:
    group_id: str | None
    member_id: str | None
    session_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    partitions: tuple[PartitionAcks, ...]
    forgotten: tuple[tuple[TopicId, int], ...] = ()
    record_limit: bool = False  # v2 ShareAcquireMode 1
    renew: bool = False  # v2 IsRenewAck
    api_version: int = 1
    client: Client = LOCAL_CLIENT
    # Several nodes (issue 29): whether this node does not lead a partition. The share-partition leader is the
    # partition leader (KIP-932), so a session partition whose leader moved away acquires nothing here and is
    # answered NOT_LEADER_OR_FOLLOWER; None on one node.
    not_led: Callable[[TopicId, int], bool] | None = None


@dataclass(slots=True, frozen=True)
class ShareAcknowledgeRequest:
    group_id: str | None
    member_id: str | None
    session_epoch: int
    partitions: tuple[PartitionAcks, ...]
    renew: bool = False
    api_version: int = 1
    client: Client = LOCAL_CLIENT


@dataclass(slots=True)
class FetchedPartition:
    topic_id: TopicId
    partition: int
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acknowledge_error: ErrorCode = ErrorCode.none
    acknowledge_error_message: str | None = None
    records: Sequence[bytes] = ()  # the stored batches' bytes, in offset order (answered one after the other)
    acquired: list[tuple[int, int, int]] = field(default_factory=list)


AcknowledgedPartition = FetchedPartition


@dataclass(slots=True)
class ShareAnswer:
    """A ShareFetch's or ShareAcknowledge's answer: a top-level error, or its partitions."""

    error: ErrorCode
    error_message: str | None = None
    lock_duration_ms: int = 0
    partitions: list[FetchedPartition] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class ShareOffset:
    """DescribeShareGroupOffsets' partition (section 10.2)."""

    partition: int
    start_offset: int
    leader_epoch: int = 0
    lag: int = -1
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
