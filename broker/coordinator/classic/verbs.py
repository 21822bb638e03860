"""The control API's verbs: kick a member, fence a static member, force a rebalance. Not part of Kafka.

Each verb causes on purpose what a failure would cause, down the same code path: a kick is a session expiry, a
fence is a static member taken over by another process, a forced rebalance is what any trigger starts.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.join import JoinHandler
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.sessions import Sessions
from broker.coordinator.classic.state import COMPLETING, EMPTY, PREPARING
from broker.coordinator.messages import SyncResult
from broker.coordinator.verb_errors import Conflict, UnknownTarget


class ClassicVerbs:
    def __init__(
        self,
        groups: ClassicGroups,
        rebalancer: Rebalancer,
        sessions: Sessions,
        joins: JoinHandler,
        new_uuid: Callable[[], str],
    ) -> None:
        self._groups = groups
        self._rebalancer = rebalancer
        self._sessions = sessions
        self._joins = joins
        self._new_uuid = new_uuid

    def _live_group(self, group_id: str) -> ClassicGroup:
        group = self._groups.live(group_id)
        if group is None:
            raise UnknownTarget(f"no group {group_id!r}")
        return group

    def kick(self, group_id: str, member_id: str) -> None:
        """Evict a member now, down the same path as a session expiry."""
        group = self._live_group(group_id)
        if group.is_pending_member(member_id):
            self._groups.remove_pending_member(group, member_id, "kicked through the control API")
            self._rebalancer.maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownTarget(f"group {group_id!r} has no member {member_id!r}")
        sync = group.take_sync(member)
        if sync is not None:
            # A session expiry cannot catch a member with a parked SyncGroup; a kick can, and must answer it.
            sync.complete(SyncResult(ErrorCode.unknown_member_id))
        self._sessions.expire(group, member, "kicked")

    def fence(self, group_id: str, instance_id: str) -> tuple[str, str]:
        """As if another process took the static instance over: the old member id is fenced from now on.

        The new id heartbeats for nobody, so the session timeout later removes it and the group rebalances,
        which is what happens in Kafka when the process that took over dies at once. Returns (old, new) ids.
        """
        group = self._live_group(group_id)
        old_member_id = group.static_member_id(instance_id)
        if old_member_id is None:
            raise UnknownTarget(f"group {group_id!r} has no static member with instance id {instance_id!r}")
        member = group.members[old_member_id]
        new_member_id = f"{instance_id}-{self._new_uuid()}"
        self._groups.purgatory.cancel(member.heartbeat_key)
        self._joins.fence(group, member, instance_id, new_member_id, "fenced", "fenced through the control API")
        if group.is_in(COMPLETING):
            # The leader assigned to the old id; as with a static replacement, the generation must be redone.
            reason = f"static member {instance_id} fenced during CompletingRebalance"
            self._rebalancer.prepare(group, Cause("member_fenced", new_member_id, reason))
        elif group.is_in(PREPARING):
            self._rebalancer.maybe_complete_join(group)
        return old_member_id, new_member_id

    def force_rebalance(self, group_id: str) -> None:
        group = self._live_group(group_id)
        if group.is_in(EMPTY):
            raise Conflict(f"group {group_id!r} is Empty: there are no members to rebalance")
        if group.is_in(PREPARING):
            raise Conflict(f"group {group_id!r} is already rebalancing")
        self._rebalancer.prepare(group, Cause("forced", None, "forced through the control API"))
