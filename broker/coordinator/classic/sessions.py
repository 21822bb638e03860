"""Member sessions: starting them and acting when one lapses (section 11 of ``docs/spec/group-coordinator.md``).

A session starts when a member is added (with the long new-member timeout, KIP-345) or takes a new id, and every
proof of life extends it (``ClassicGroups.extend_session``). When it lapses the member is evicted and the group
rebalances (Kafka's ``onExpireHeartbeat``). A KIP-394 pending member id waits under the same key for its second
JoinGroup. A kick from the control API goes down the eviction path too.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.member import Member
from broker.coordinator.classic.rebalance import Rebalancer
from broker.timing.keys import HeartbeatKey, heartbeat_key
from broker.timing.purgatory import KeyedAction


class MemberExpiry(KeyedAction):
    """The action under every member's heartbeat key: one object per coordinator, told the key that lapsed.

    The key is ``heartbeat_key(group_id, member_id)``, so it names the member; a per-member object cost ~70 B
    of the kilobyte a member may take (issue 17).
    """

    __slots__ = ("sessions",)

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def fire(self, key: Hashable) -> None:
        _, group_id, member_id = cast(HeartbeatKey, key)
        try:
            self.sessions.on_expired(group_id, member_id)
        except Exception as error:
            # An expiry that raised half-way must not leave the group rebalancing forever (ClassicGroups.fail).
            self.sessions.fail(group_id, f"the session expiry of {member_id}", error)


class Sessions:
    def __init__(self, groups: ClassicGroups, rebalancer: Rebalancer) -> None:
        self._groups = groups
        self._rebalancer = rebalancer
        self._expiry = MemberExpiry(self)

    def start(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        """Arm the member's expiry under its (new) heartbeat key; from here on only ``extend_session`` moves it."""
        member.heartbeat_timeout_ms = max(timeout_ms, 0)  # the purgatory arms a negative delay as 0
        member.expiry = expiry = self._groups.purgatory.schedule(member.heartbeat_key, timeout_ms, self._expiry)
        # Share the purgatory's key (a KIP-394 pending id armed it first): one tuple per member, not two, and
        # one member id string, not the one handed out and the equal one the second JoinGroup decoded.
        key = member.heartbeat_key = cast(HeartbeatKey, expiry.key)
        if key[2] is not member.member_id:
            group.adopt_member_id(member, key[2])

    def await_second_join(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        """KIP-394: the member id just handed out is pending until it comes back, for at most a session."""
        group.pending_members.add(member_id)
        self._groups.purgatory.schedule(heartbeat_key(group.group_id, member_id), timeout_ms, self._expiry)

    def fail(self, group_id: str, operation: str, error: Exception) -> None:
        self._groups.fail(group_id, operation, error)

    def on_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.live(group_id)
        if group is None:
            return
        if group.is_pending_member(member_id):
            self._groups.remove_pending_member(group, member_id, "no second JoinGroup within the session timeout")
            self._rebalancer.maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        # A new member's parked JoinGroup is no proof of life: it gets the long new-member timeout instead.
        self.expire(group, member, "new_member_timeout" if member.is_new else "session_timeout")

    def expire(self, group: ClassicGroup, member: Member, cause: str) -> None:
        """onExpireHeartbeat: a session expiry, or a kick that takes the same path."""
        silence_ms = self._groups.clock.now_ms() - member.last_heartbeat_ms
        self._groups.remove_member(group, member)
        self._groups.events.member_expired(group, member, silence_ms, cause)
        if cause == "kicked":
            reason = f"member {member.member_id} was kicked through the control API"
            why = Cause("member_kicked", member.member_id, reason)
        else:
            reason = f"member {member.member_id} sent no heartbeat for {silence_ms} ms"
            why = Cause("member_expired", member.member_id, reason)
        self._rebalancer.after_departure(group, why)
