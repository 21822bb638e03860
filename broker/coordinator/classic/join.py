"""JoinGroup (section 7 of ``docs/spec/group-coordinator.md``; Kafka's ``classicGroupJoin``).

A JoinGroup either creates a member (7.2, 7.6; with KIP-394's two steps from v4), rejoins a known one (7.3) or,
with a known ``group.instance.id`` and no member id, replaces a static member (7.9, KIP-345). A new or changed
member starts or re-checks a rebalance (``rebalance.py``); the answer is parked until the join phase ends,
unless the current generation can answer at once. Fencing a static member's old id lives here too: it is what
a static replacement does, and what the control API's fence verb does on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.member import Member, Protocols
from broker.coordinator.classic.rebalance import Rebalancer, member_list
from broker.coordinator.classic.sessions import Sessions
from broker.coordinator.classic.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE
from broker.coordinator.messages import JoinRequest, JoinResult, SyncResult
from broker.timing.deferred import Deferred

E = ErrorCode


class JoinHandler:
    def __init__(
        self, groups: ClassicGroups, rebalancer: Rebalancer, sessions: Sessions, new_uuid: Callable[[], str]
    ) -> None:
        self._groups = groups
        self._rebalancer = rebalancer
        self._sessions = sessions
        self._new_uuid = new_uuid
        self._events = groups.events

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        answer: Deferred[JoinResult] = Deferred()
        if not request.group_id:
            return _answered(answer, E.invalid_group_id, request.member_id)
        protocols = unique_protocols(request.protocols)
        if protocols is not request.protocols:
            self._groups.log.info(
                "join lists a protocol name more than once: the first of each name is kept",
                group_id=request.group_id,
                member_id=request.member_id,
                client_id=request.client.client_id,
                client_host=request.client.host,
                protocols=[name for name, _ in request.protocols],
            )
            request = replace(request, protocols=protocols)
        config = self._groups.config
        if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
            return _answered(answer, E.invalid_session_timeout, request.member_id)

        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return _answered(answer, E.unknown_member_id, request.member_id)
            group = self._groups.create(request.group_id)

        if not self._has_room_for(group, request.member_id):
            member = group.members.get(request.member_id)
            if member is not None:
                # Kafka's group.remove(memberId): no event, no rebalance. Its heartbeat timer would expire without
                # effect; cancelling it (remove_member) keeps every armed heartbeat key a member's.
                self._groups.remove_member(group, member)
            self._groups.log.info(
                "join rejected: group is full",
                group_id=group.group_id,
                member_id=request.member_id,
                max_size=config.max_size,
            )
            return _answered(answer, E.group_max_size_reached, "")

        if request.member_id:
            self._join_existing_member(group, request, answer)
        else:
            self._join_new_member(group, request, answer)
        return answer

    def _has_room_for(self, group: ClassicGroup, member_id: str) -> bool:
        """KIP-389 capacity check, before anything else on the group (7.1 step 3)."""
        max_size = self._groups.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            member = group.members.get(member_id)
            if member is not None and member.is_awaiting_join:
                return True
            return group.awaiting_join_count < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest, answer: Deferred[JoinResult]) -> None:
        """7.2: a JoinGroup without a member id."""
        if group.is_in(DEAD):
            _answered(answer, E.coordinator_not_available, "")
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _answered(answer, E.inconsistent_group_protocol, "")
            return
        instance_id = request.group_instance_id
        prefix = instance_id if instance_id is not None else request.client.client_id
        new_member_id = f"{prefix}-{self._new_uuid()}"

        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                self._replace_static_member(group, request, old_member_id, new_member_id, answer)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, answer)
        elif request.api_version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            self._sessions.await_second_join(group, new_member_id, request.session_timeout_ms)
            answer.complete(JoinResult(error=E.member_id_required, member_id=new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, answer)

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest, answer: Deferred[JoinResult]) -> None:
        """7.3: a JoinGroup naming a member id (a pending one completes KIP-394's second step)."""
        member_id = request.member_id
        if group.is_in(DEAD):
            _answered(answer, E.coordinator_not_available, member_id)
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _answered(answer, E.inconsistent_group_protocol, member_id)
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # Kafka treats this as an internal invariant violation; no real client does it.
                _answered(answer, E.unknown_server_error, member_id)
                return
            self._add_member_and_rebalance(group, request, member_id, answer)
            return
        try:
            member = group.validate_member(member_id, request.group_instance_id)
        except MemberError as failure:
            _answered(answer, failure.error, member_id)
            return

        rebalancer = self._rebalancer
        if group.is_in(PREPARING):
            self._update_member_and_rebalance(group, member, request, answer)
        elif group.is_in(COMPLETING):
            if member.matches(request.protocols):
                answer.complete(
                    rebalancer.current_generation(group, member_id, with_members=group.is_leader(member_id))
                )
            else:
                self._update_member_and_rebalance(group, member, request, answer)
        elif group.is_in(STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, answer)
            else:
                answer.complete(rebalancer.current_generation(group, member_id, with_members=False))
        else:
            _answered(answer, E.unknown_member_id, member_id)

    def _add_member_and_rebalance(
        self, group: ClassicGroup, request: JoinRequest, member_id: str, answer: Deferred[JoinResult]
    ) -> None:
        """7.6: a new member is created with its JoinGroup parked."""
        member = Member(
            group.group_id,
            member_id,
            request.group_instance_id,
            request.client.client_id,
            request.client.host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
        )
        member.is_new = True
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add_member(member, answer)
        # A new member cannot heartbeat until it has its id, and its parked request
        # hides a disconnect, so it gets the long new-member timeout instead.
        self._sessions.start(group, member, self._groups.config.new_member_join_timeout_ms)
        self._events.member_joined(group, member_id, request)
        reason = request.reason or "no reason given"
        self._rebalancer.prepare_or_complete_join(
            group, Cause("member_joined", member_id, f"new member {member_id} joined ({reason})")
        )

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, request: JoinRequest, answer: Deferred[JoinResult]
    ) -> None:
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, answer)
        self._events.member_rejoined(group, member, request)
        reason = f"member {member.member_id} rejoined ({request.reason or 'no reason given'})"
        self._rebalancer.prepare_or_complete_join(group, Cause("member_rejoined", member.member_id, reason))

    def _replace_static_member(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        answer: Deferred[JoinResult],
    ) -> None:
        """7.9: a static member came back with an empty member id."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        member = group.members[old_member_id]
        leader_before = group.leader_id or ""
        self.fence(group, member, instance_id, new_member_id, "static_member_replaced", request.reason)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, answer)
        if group.is_in(STABLE):
            if group.select_protocol() == group.protocol_name:
                # No rebalance: the new id takes over the old assignment (KIP-345, KIP-814).
                group.take_join(member)
                skip_assignment = request.api_version >= 9
                is_leader = group.is_leader(new_member_id)
                answer.complete(
                    JoinResult(
                        error=E.none,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=(group.leader_id or "") if skip_assignment else leader_before,
                        skip_assignment=skip_assignment and is_leader,
                        members=member_list(group) if skip_assignment and is_leader else (),
                    )
                )
            else:
                reason = f"static member {instance_id} rejoined with a new protocol"
                self._rebalancer.prepare(group, Cause("static_member_replaced", new_member_id, reason))
        elif group.is_in(COMPLETING):
            reason = f"static member {instance_id} replaced during CompletingRebalance"
            self._rebalancer.prepare(group, Cause("static_member_replaced", new_member_id, reason))
        elif group.is_in(PREPARING):
            self._rebalancer.maybe_complete_join(group)

    def fence(
        self, group: ClassicGroup, member: Member, instance_id: str, new_member_id: str, cause: str, reason: str | None
    ) -> None:
        """The static member continues under a new id; whatever the old id had parked is answered FENCED."""
        old_member_id = member.member_id
        old_join = group.take_join(member)
        if old_join is not None:
            old_join.complete(JoinResult(error=E.fenced_instance_id, member_id=old_member_id))
        old_sync = group.take_sync(member)
        if old_sync is not None:
            old_sync.complete(SyncResult(error=E.fenced_instance_id))
        # Kafka copies the old member: client id and host stay those of the first join.
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        # An old id's timer left armed expires harmlessly: the group no longer knows that id.
        self._sessions.start(group, member, member.session_timeout_ms)
        if group.state is STABLE:  # Kafka stores the group when a static member is replaced without a rebalance
            self._groups.store(group)
        self._events.member_fenced(group, old_member_id, member, cause, reason)


def unique_protocols(protocols: Protocols) -> Protocols:
    """The member's protocols with each name once, the first occurrence kept (the same tuple when already so).

    JoinGroup's protocol list is declared keyed by name (``"mapKey": true`` in JoinGroupRequest.json), and
    everything in Kafka that reads a member's protocols by name takes the first entry of that name
    (``ClassicGroupMember.metadata`` and ``vote``). But Kafka's generated ``JoinGroupRequestProtocolCollection``
    is a multi-collection that keeps duplicates, and ``ClassicGroup.incrementSupportedProtocols`` counts each
    entry, so a member listing ``range`` twice counts as two supporters: no protocol has exactly as many
    supporters as the group has members, ``selectProtocol`` throws when the join phase ends, and the group is
    stuck in PreparingRebalance with its JoinGroups parked. Kafka's own consumer never sends duplicates (it
    refuses two assignors of one name: ``ConsumerPartitionAssignor.getAssignorInstances``), so we keep the keyed
    reading Kafka's readers agree on and drop the repeats at the door: nothing malformed reaches the counting or
    the timers. Rejecting the join instead (INCONSISTENT_GROUP_PROTOCOL) would refuse a member Kafka accepts.
    """
    if len(protocols) < 2 or len({name for name, _ in protocols}) == len(protocols):
        return protocols
    seen: set[str] = set()
    kept = []
    for name, metadata in protocols:
        if name not in seen:
            seen.add(name)
            kept.append((name, metadata))
    return tuple(kept)


def _answered(answer: Deferred[JoinResult], error: ErrorCode, member_id: str) -> Deferred[JoinResult]:
    answer.complete(JoinResult(error=error, member_id=member_id))
    return answer
