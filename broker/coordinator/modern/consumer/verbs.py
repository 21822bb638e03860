"""The control API's verbs for consumer groups: kick a member, remove a static member, force a new target. Not Kafka.

As for classic groups (``coordinator/classic/verbs.py``), each verb causes on purpose what something in Kafka causes,
down the same code path (``ConsumerGroups.fence``, ``bump_epoch``) so the group's events and timers follow as they
would. Section numbers refer to ``docs/spec/consumer-groups.md``.
"""

from __future__ import annotations

from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.verb_errors import Conflict, UnknownTarget

__all__ = ["ConsumerVerbs"]


class ConsumerVerbs:
    def __init__(self, groups: ConsumerGroups) -> None:
        self._groups = groups

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownTarget(f"no group {group_id!r}")
        return group

    def kick(self, group_id: str, member_id: str) -> None:
        """Fence the member as a LeaveGroup naming it would (section 10.3; 4.13's fencing): it is removed, its
        partitions are free, the group epoch is bumped. Its next heartbeat gets UNKNOWN_MEMBER_ID and the client
        re-joins with epoch 0."""
        group = self._group(group_id)
        member = group.members.get(member_id)
        if member is None:
            raise UnknownTarget(f"group {group_id!r} has no member {member_id!r}")
        self._groups.fence(group, member, "kicked", "kicked through the control API")

    def fence(self, group_id: str, instance_id: str) -> str:
        """Remove the static member holding the instance id, as Kafka's ``removeMembersFromConsumerGroup`` (a
        LeaveGroup by instance id, section 7.5) does; returns its member id. Unlike a classic group's fence nobody
        takes the instance over: it is free, and the old process's next heartbeat is told UNKNOWN_MEMBER_ID
        ("Instance id ... is unknown."), so it re-joins as a new member."""
        group = self._group(group_id)
        member_id = group.static_members.get(instance_id)
        member = group.members.get(member_id) if member_id is not None else None
        if member is None:
            raise UnknownTarget(f"group {group_id!r} has no static member with instance id {instance_id!r}")
        self._groups.fence(group, member, "removed", "removed through the control API")
        return member.member_id

    def force_rebalance(self, group_id: str) -> None:
        """Bump the group epoch so that the next heartbeat of any member computes a new target (section 6.1).

        The subscription metadata is refreshed first, so a topic change not yet noticed is in it. With a sticky
        assignor (``uniform``) or a deterministic one (``range``) an unchanged group gets the same target: nothing
        moves, every member only moves to the new epoch.
        """
        group = self._group(group_id)
        if group.is_empty():
            raise Conflict(f"group {group_id!r} is Empty: there are no members to rebalance")
        if group.state is ConsumerGroupState.ASSIGNING:
            raise Conflict(f"group {group_id!r} is already Assigning: its next heartbeat computes a new target")
        self._groups.refresh_metadata(group, force=True)
        self._groups.bump_epoch(group, "forced", None)
        self._groups.note_state(group)
