"""What every group type answers for itself (Kafka's ``Group`` interface): the offsets manager and the coordinator
ask a group through this, never by its type, so a third type (share groups) adds a class, not a branch.

Validation answers an error code, or None when the request may go on (Kafka throws an ApiException instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from broker.coordinator.group_type import GroupType
from broker.coordinator.offset_store import CommittedOffset, Key

if TYPE_CHECKING:
    from broker.coordinator.messages import CommitRequest, ListedGroup, PartitionErrors

__all__ = ["Group", "GroupKeeper", "OffsetExpiration"]


@dataclass(frozen=True, slots=True)
class OffsetExpiration:
    """Kafka's ``OffsetExpirationCondition``: an offset without an explicit expiry expires ``offsets.retention.ms``
    after its base timestamp: ``state_timestamp_ms`` when set (an Empty classic group: since it emptied), else its
    commit; offsets of topics the group is subscribed to do not expire when ``keep_subscribed``."""

    state_timestamp_ms: int | None = None
    keep_subscribed: bool = False

    def expired(self, stored: CommittedOffset, now_ms: int, retention_ms: int) -> bool:
        if stored.expire_timestamp_ms is not None:
            return now_ms >= stored.expire_timestamp_ms
        base = self.state_timestamp_ms if self.state_timestamp_ms is not None else stored.commit_timestamp_ms
        return now_ms - base >= retention_ms


class Group(Protocol):
    group_id: str
    # Never deleted for having no committed offsets left (a share group: its progress is not committed offsets).
    kept_without_offsets: bool

    @property
    def group_type(self) -> GroupType: ...

    @property
    def state_name(self) -> str:
        """The state as the wire spells it (ListGroups, DescribeGroups, the control API)."""
        ...

    @property
    def offsets(self) -> Mapping[Key, CommittedOffset]:
        """Its committed offsets, read-only (they live in the ``OffsetStore``)."""
        ...

    def is_dead(self) -> bool:
        """On its way out (a classic group's Dead state): the registry's ``live`` does not return it."""
        ...

    def is_empty(self) -> bool:
        """No members: an Empty group left without offsets is deleted by retention and topic deletion."""
        ...

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode | None: ...

    def validate_txn_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode | None: ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None: ...

    def validate_offset_delete(self) -> ErrorCode | None: ...

    def validate_delete_group(self) -> ErrorCode | None: ...

    def is_subscribed_to(self, topic: str) -> bool: ...

    def offset_expiration(self) -> OffsetExpiration | None:
        """How its offsets expire now, or None when none may (Kafka's ``offsetExpirationCondition``)."""
        ...

    def listed(self) -> ListedGroup: ...


class GroupKeeper(Protocol):
    """The groups of one type (``ClassicGroups``, ``ConsumerGroups``): what the offsets manager has them do, by id."""

    failures: int

    def delete_group(self, group_id: str, why: str) -> None:
        """Delete the group (its offsets stay in the store: the caller removes them if they must go)."""
        ...

    def offsets_committed(self, request: CommitRequest, results: PartitionErrors) -> None:
        """After an accepted OffsetCommit: what the type does besides storing (a classic member's proof of life)."""
        ...

    def offsets_deleted(self, group_id: str, deleted: list[tuple[str, int]]) -> None:
        """OffsetDelete removed these partitions' offsets (as requested): the ``offsets_deleted`` event."""
        ...

    def offsets_expired(self, group_id: str) -> None:
        """Retention removed the group's last committed offsets: the ``offsets_expired`` event."""
        ...
