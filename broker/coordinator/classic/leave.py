"""LeaveGroup (section 10 of ``docs/spec/group-coordinator.md``; Kafka's ``classicGroupLeave``).

One request may name several members (KIP-345 batch leave, v3+), each by member id or by instance id, and gets
an answer per member. The removals come first; the group rebalances (or finishes its join phase) once, after.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.member import Member
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.state import DEAD
from broker.coordinator.messages import LeaveResult, LeavingMember, LeftMember

E = ErrorCode


class LeaveHandler:
    def __init__(self, groups: ClassicGroups, rebalancer: Rebalancer) -> None:
        self._groups = groups
        self._rebalancer = rebalancer

    def leave(self, group_id: str, leaving: Iterable[LeavingMember]) -> LeaveResult:
        if not group_id:
            return LeaveResult(E.invalid_group_id)
        identities = list(leaving)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveResult(
                E.none, tuple(LeftMember(i.member_id, i.group_instance_id, E.unknown_member_id) for i in identities)
            )
        if group.is_in(DEAD):
            return LeaveResult(E.coordinator_not_available)
        answers = []
        removed = []
        for identity in identities:
            error = self._leave_one(group, identity)
            answers.append(LeftMember(identity.member_id, identity.group_instance_id, error))
            if error is E.none:
                removed.append(identity.member_id or identity.group_instance_id)
        if removed:
            cause = Cause("member_left", removed[0], f"members {removed} left the group")
            self._rebalancer.after_departure(group, cause)
        return LeaveResult(E.none, tuple(answers))

    def _leave_one(self, group: ClassicGroup, identity: LeavingMember) -> ErrorCode:
        reason = identity.reason or "not provided"
        if not identity.member_id:
            member_id = group.static_member_id(identity.group_instance_id)
            if member_id is None:
                return E.unknown_member_id
            self._remove(group, group.members[member_id], reason)
            return E.none
        if group.is_pending_member(identity.member_id):
            self._groups.remove_pending_member(group, identity.member_id, f"left the group ({reason})")
            return E.none
        try:
            member = group.validate_member(identity.member_id, identity.group_instance_id)
        except MemberError as failure:
            return failure.error
        self._remove(group, member, reason)
        return E.none

    def _remove(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._groups.remove_member(group, member)
        self._groups.events.member_left(group, member, "leave_group", reason)
