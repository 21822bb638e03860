"""The events of share groups, one method per event (format version 2, ``docs/events.md``, "Share groups").

Group events have the consumer groups' names and fields with ``group_type: "share"``; the records' life has its own
(``records_acquired``, ``records_acknowledged``, ``records_released`` with its cause, ``records_archived``). Offsets
are given as ``[first, last]`` ranges, topics by name (a deleted topic by its id).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.share.group import SHARE_PROTOCOL_TYPE, ShareGroup
from broker.coordinator.modern.share.member import ShareMember
from broker.coordinator.modern.share.state import ShareGroupState
from broker.coordinator.modern.types import Assignment, TopicCatalog, TopicId
from broker.events import names
from broker.events.hub import GroupEvents

__all__ = ["ShareEventLog", "offset_ranges"]

_SHARE = GroupType.SHARE.value  # read once: an Enum member's value is a Python-level lookup, twice a ShareFetch


def offset_ranges(offsets: Iterable[int]) -> list[list[int]]:
    """Sorted offsets as ``[first, last]`` runs."""
    runs: list[list[int]] = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return runs


class ShareEventLog:
    __slots__ = ("_hub", "_topics")

    def __init__(self, hub: GroupEvents, topics: TopicCatalog) -> None:
        self._hub = hub
        self._topics = topics

    @property
    def wants_debug(self) -> bool:
        return self._hub.wants_debug

    def _emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        fields["group_type"] = _SHARE
        self._hub.emit(event, group_id, fields, debug=debug)

    def topic_name(self, topic_id: TopicId) -> str:
        info = self._topics.by_id(topic_id)
        return info.name if info is not None else str(topic_id)

    def named(self, assignment: Assignment) -> dict[str, list[int]]:
        return dict(sorted((self.topic_name(t), sorted(p)) for t, p in assignment.items()))

    # -- the group ---------------------------------------------------------------------------------------------

    def group_created(self, group: ShareGroup) -> None:
        self._emit(names.GROUP_CREATED, group.group_id, {})

    def group_deleted(self, group: ShareGroup, reason: str) -> None:
        self._emit(names.GROUP_DELETED, group.group_id, {"reason": reason})

    def state_changed(self, group: ShareGroup, old: ShareGroupState, new: ShareGroupState) -> None:
        fields = {"from": old.value, "to": new.value, "group_epoch": group.group_epoch,
                  "assignment_epoch": group.assignment_epoch}  # fmt: skip
        self._emit(names.STATE_CHANGED, group.group_id, fields)
        if new is ShareGroupState.EMPTY:
            self._emit(names.GROUP_EMPTIED, group.group_id, {"group_epoch": group.group_epoch})

    def epoch_bumped(self, group: ShareGroup, cause: str, member_id: str | None) -> None:
        fields = {"group_epoch": group.group_epoch, "cause": cause, "member_id": member_id}
        self._emit(names.GROUP_EPOCH_BUMPED, group.group_id, fields)

    def target_computed(self, group: ShareGroup) -> None:
        fields = {
            "assignment_epoch": group.assignment_epoch,
            "assignor": "simple",
            "members": len(group.members),
            "targets": {m: self.named(t) for m, t in sorted(group.targets.items())},
        }
        self._emit(names.TARGET_ASSIGNMENT_COMPUTED, group.group_id, fields)

    # -- members -----------------------------------------------------------------------------------------------

    def member_joined(self, group: ShareGroup, member: ShareMember) -> None:
        fields = {
            "member_id": member.member_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "protocol_type": SHARE_PROTOCOL_TYPE,
            "subscribed_topic_names": list(member.subscribed_topic_names),
        }
        self._emit(names.SHARE_MEMBER_JOINED, group.group_id, fields)

    def member_reconciled(self, group: ShareGroup, member: ShareMember) -> None:
        fields = {
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "previous_epoch": member.previous_member_epoch,
            "state": "stable",
            "assigned": self.named(member.assigned),
            "pending_revocation": {},
        }
        self._emit(names.MEMBER_RECONCILED, group.group_id, fields)

    def member_left(self, group: ShareGroup, member: ShareMember, cause: str, reason: str) -> None:
        fields = {"member_id": member.member_id, "group_instance_id": None, "cause": cause, "reason": reason,
                  "member_epoch": member.member_epoch}  # fmt: skip
        self._emit(names.MEMBER_LEFT, group.group_id, fields)

    def member_expired(self, group: ShareGroup, member: ShareMember, timeout_ms: int) -> None:
        fields = {"member_id": member.member_id, "group_instance_id": None, "timer": "session",
                  "timeout_ms": timeout_ms}  # fmt: skip
        self._emit(names.MEMBER_EXPIRED, group.group_id, fields)

    # -- records (the share-partitions) --------------------------------------------------------------------------

    def records_acquired(
        self, group_id: str, topic_id: TopicId, partition: int, member_id: str, ranges: list[tuple[int, int, int]],
        lock_ms: int,
    ) -> None:  # fmt: skip
        records = redelivered = 0
        listed = []
        for first, last, count in ranges:  # one pass: every ShareFetch that acquires emits this
            listed.append([first, last, count])
            records += last - first + 1
            if count > 1:
                redelivered += last - first + 1
        fields = {
            "member_id": member_id,
            "topic": self.topic_name(topic_id),
            "partition": partition,
            "ranges": listed,
            "records": records,
            "redelivered": redelivered,
            "lock_duration_ms": lock_ms,
        }
        self._emit(names.RECORDS_ACQUIRED, group_id, fields)

    def records_acknowledged(
        self, group_id: str, topic_id: TopicId, partition: int, member_id: str, accepted: int, rejected: int,
        rejected_records: Sequence[tuple[int, int]] = (),
    ) -> None:  # fmt: skip
        fields = {"member_id": member_id, "topic": self.topic_name(topic_id), "partition": partition,
                  "accepted": accepted, "rejected": rejected}  # fmt: skip
        if rejected_records:  # REJECT and GAP archive them: which, and at what delivery count
            fields["rejected_offsets"] = offset_ranges(offset for offset, _ in rejected_records)
            fields["rejected_delivery_count"] = max(count for _, count in rejected_records)
        self._emit(names.RECORDS_ACKNOWLEDGED, group_id, fields)

    def records_released(
        self, group_id: str, topic_id: TopicId, partition: int, member_id: str | None, cause: str, offsets: list[int]
    ) -> None:
        fields = {"member_id": member_id, "topic": self.topic_name(topic_id), "partition": partition,
                  "cause": cause, "offsets": offset_ranges(offsets), "records": len(offsets)}  # fmt: skip
        self._emit(names.RECORDS_RELEASED, group_id, fields)

    def records_archived(
        self, group_id: str, topic_id: TopicId, partition: int, member_id: str | None, cause: str,
        archived: list[tuple[int, int]],
    ) -> None:  # fmt: skip
        fields = {
            "member_id": member_id,
            "topic": self.topic_name(topic_id),
            "partition": partition,
            "cause": cause,
            "offsets": offset_ranges(offset for offset, _ in archived),
            "records": len(archived),
            "delivery_count": max((count for _, count in archived), default=0),
        }
        self._emit(names.RECORDS_ARCHIVED, group_id, fields)

    def session_opened(self, group_id: str, member_id: str, partitions: int) -> None:
        self._emit(names.SHARE_SESSION_OPENED, group_id, {"member_id": member_id, "partitions": partitions})

    def session_closed(self, group_id: str, member_id: str, cause: str) -> None:
        self._emit(names.SHARE_SESSION_CLOSED, group_id, {"member_id": member_id, "cause": cause})
