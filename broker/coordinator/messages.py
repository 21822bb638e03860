"""Version-independent requests and results of the group coordinator.

The API layer turns each versioned wire request into one of these and each
result back into the versioned wire response, so the coordinator never sees a
protocol version except where Kafka's behaviour depends on it (``api_version``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


@dataclass(slots=True, frozen=True)
class Client:
    """Who sent a request: from the request header and the socket."""

    client_id: str = ""
    host: str = "/127.0.0.1"  # rendered like Java's InetAddress.toString()


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
    client: Client = Client()


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
    group_type: str = "classic"


@dataclass(slots=True, frozen=True)
class OffsetDeleteResult:
    error: ErrorCode
    topics: PartitionErrors = field(default=())
