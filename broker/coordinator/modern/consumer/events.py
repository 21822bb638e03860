"""The events of consumer groups, one method per event (format version 2, ``docs/events.md``).

The same hub and names as the classic groups' ``classic/events.py``; every record of a consumer group carries
``group_type: "consumer"`` (``GroupType.CONSUMER``) so a reader can tell the protocols apart. Topics are named (not
ids) for people.
"""

from __future__ import annotations

from typing import Any

from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import Assignment, TopicCatalog
from broker.events import names
from broker.events.hub import GroupEvents

__all__ = ["ConsumerGroupEventLog"]


class ConsumerGroupEventLog:
    __slots__ = ("_hub", "_topics")

    def __init__(self, hub: GroupEvents, topics: TopicCatalog) -> None:
        self._hub = hub
        self._topics = topics

    @property
    def wants_debug(self) -> bool:
        return self._hub.wants_debug

    def _emit(self, event: str, group: ConsumerGroup, fields: dict[str, Any], *, debug: bool = False) -> None:
        fields["group_type"] = GroupType.CONSUMER.value
        self._hub.emit(event, group.group_id, fields, debug=debug)

    def named(self, assignment: Assignment) -> dict[str, list[int]]:
        """An assignment by topic name (a topic no longer known is shown by its id)."""
        shown: dict[str, list[int]] = {}
        for topic_id, partitions in assignment.items():
            info = self._topics.by_id(topic_id)
            shown[info.name if info is not None else str(topic_id)] = sorted(partitions)
        return dict(sorted(shown.items()))

    # -- the group ---------------------------------------------------------------------------------------

    def group_created(self, group: ConsumerGroup) -> None:
        self._emit(names.GROUP_CREATED, group, {})

    def group_deleted(self, group: ConsumerGroup, reason: str) -> None:
        self._emit(names.GROUP_DELETED, group, {"reason": reason})

    def offsets_committed(
        self, group: ConsumerGroup, member_id: str, member_epoch: int, offsets: list[tuple[str, int, int]]
    ) -> None:
        """A debug event, as a classic group's: ``generation_id`` is the member epoch the commit carried (-1 for an
        admin's commit, as a reset's)."""
        fields = {
            "member_id": member_id,
            "generation_id": member_epoch,
            "offsets": [list(committed) for committed in offsets],
        }
        self._emit(names.OFFSETS_COMMITTED, group, fields, debug=True)

    def offsets_deleted(self, group: ConsumerGroup, deleted: list[tuple[str, int]]) -> None:
        """As a classic group's: OffsetDelete's tombstones, as (topic, partition)."""
        self._emit(names.OFFSETS_DELETED, group, {"offsets": [list(key) for key in deleted]})

    def offsets_expired(self, group: ConsumerGroup) -> None:
        """As a classic group's: retention removed the group's last committed offsets (section 8.5)."""
        self._emit(names.OFFSETS_EXPIRED, group, {})

    def state_changed(self, group: ConsumerGroup, old: ConsumerGroupState, new: ConsumerGroupState) -> None:
        fields = {
            "from": old.value,
            "to": new.value,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
        }
        self._emit(names.STATE_CHANGED, group, fields)
        if new is ConsumerGroupState.EMPTY:
            self._emit(names.GROUP_EMPTIED, group, {"group_epoch": group.group_epoch})

    def epoch_bumped(self, group: ConsumerGroup, cause: str, member_id: str | None) -> None:
        fields = {"group_epoch": group.group_epoch, "cause": cause, "member_id": member_id}
        self._emit(names.GROUP_EPOCH_BUMPED, group, fields)

    def target_computed(
        self, group: ConsumerGroup, assignor: str, moved: list[tuple[str, int, str | None, str | None]]
    ) -> None:
        fields = {
            "assignment_epoch": group.assignment_epoch,
            "assignor": assignor,
            "members": len(group.members),
            "moved": [{"topic": t, "partition": p, "from": f, "to": to} for t, p, f, to in moved],
        }
        self._emit(names.TARGET_ASSIGNMENT_COMPUTED, group, fields)

    # -- members -----------------------------------------------------------------------------------------

    def member_joined(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        fields = {
            "member_id": member.member_id,
            "group_instance_id": member.instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "subscribed_topic_names": sorted(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "server_assignor": member.server_assignor,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
        }
        self._emit(names.MEMBER_JOINED, group, fields)

    def member_reconciled(self, group: ConsumerGroup, member: ConsumerMember, previous_epoch: int) -> None:
        fields = {
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "previous_epoch": previous_epoch,
            "state": member.state.name.lower(),
            "assigned": self.named(member.assigned),
            "pending_revocation": self.named(member.pending_revocation),
        }
        self._emit(names.MEMBER_RECONCILED, group, fields)

    def member_left(self, group: ConsumerGroup, member: ConsumerMember, cause: str, reason: str) -> None:
        fields = {
            "member_id": member.member_id,
            "group_instance_id": member.instance_id,
            "cause": cause,
            "reason": reason,
            "member_epoch": member.member_epoch,
        }
        self._emit(names.MEMBER_LEFT, group, fields)

    def member_expired(self, group: ConsumerGroup, member: ConsumerMember, timer: str, timeout_ms: int) -> None:
        fields = {
            "member_id": member.member_id,
            "group_instance_id": member.instance_id,
            "timer": timer,
            "timeout_ms": timeout_ms,
        }
        self._emit(names.MEMBER_EXPIRED, group, fields)

    def member_fenced(self, group: ConsumerGroup, old: ConsumerMember, new_member_id: str, reason: str) -> None:
        fields = {
            "member_id": old.member_id,
            "new_member_id": new_member_id,
            "group_instance_id": old.instance_id,
            "reason": reason,
        }
        self._emit(names.MEMBER_FENCED, group, fields)
