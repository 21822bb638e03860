"""The rebalance engine: the join phase and the sync phase every classic group goes through (sections 7.4-7.8, 8.1).

A rebalance starts (``prepare``), collects JoinGroups until every member has rejoined or the rebalance timeout runs
out (``complete_join``: a new generation, the parked JoinGroups answered), then waits for the leader's SyncGroup,
removing the members that never sent theirs (the sync deadline). The handlers decide *that* a rebalance is due;
this module knows *how*. Kafka: ``GroupMetadataManager.prepareRebalance``, ``completeClassicGroupJoin``,
``maybeCompleteJoinPhase``, ``propagateAssignment``, ``expirePendingSync``.
"""

from __future__ import annotations

from functools import partial

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup, discard
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE
from broker.coordinator.messages import JoinedMember, JoinResult, SyncResult

E = ErrorCode


class Rebalancer:
    def __init__(self, groups: ClassicGroups) -> None:
        self._groups = groups
        self._purgatory = groups.purgatory
        self._events = groups.events

    # -- starting a rebalance (7.4) ---------------------------------------------------------------------

    def prepare_or_complete_join(self, group: ClassicGroup, cause: Cause) -> None:
        """Kafka's maybePrepareRebalanceOrCompleteJoin: start a rebalance, or, in one already, check its end."""
        if group.can_rebalance:
            self.prepare(group, cause)
        else:
            self.maybe_complete_join(group)

    def after_departure(self, group: ClassicGroup, cause: Cause) -> None:
        """Members left or were evicted: a settled group rebalances, a rebalancing one may now be complete."""
        if group.state in (STABLE, COMPLETING):
            self.prepare(group, cause)
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    def prepare(self, group: ClassicGroup, cause: Cause) -> None:
        if group.is_in(COMPLETING):
            for member in group.members.values():
                member.assignment = b""
            self.propagate_assignment(group, E.rebalance_in_progress)
        self._purgatory.cancel(group.sync_key)
        group.not_yet_synced.clear()
        initial = group.is_in(EMPTY)
        if initial:
            # KIP-134: wait for more members before the first generation, up to the rebalance timeout.
            delay = self._groups.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._purgatory.schedule(
                group.join_key, delay, partial(self._on_initial_delay, group.group_id, delay, remaining)
            )
        self._groups.transition(group, PREPARING)
        group.rebalance_started_ms = self._groups.clock.now_ms()
        self._events.rebalance_started(group, cause)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self._schedule_join_deadline(group)

    # -- ending the join phase (7.7, 7.8) -------------------------------------------------------------------

    def maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_in(PREPARING) and group.has_all_members_joined() and group.previous_state is not EMPTY:
            self.complete_join(group)

    def _schedule_join_deadline(self, group: ClassicGroup) -> None:
        self._purgatory.schedule(
            group.join_key, group.rebalance_timeout_ms(), partial(self._on_join_deadline, group.group_id)
        )

    # Timer actions: each one that raises fails the group (``ClassicGroups.fail``) rather than leave it parked.

    def _on_initial_delay(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        try:
            self._initial_delay_passed(group_id, delay_ms, remaining_ms)
        except Exception as error:
            self._groups.fail(group_id, "the initial rebalance delay", error)

    def _on_join_deadline(self, group_id: str) -> None:
        try:
            group = self._groups.get(group_id)
            if group is not None and group.is_in(PREPARING):
                self.complete_join(group)
        except Exception as error:
            self._groups.fail(group_id, "the join deadline", error)

    def _on_sync_deadline(self, group_id: str, generation_id: int) -> None:
        try:
            self._sync_deadline_passed(group_id, generation_id)
        except Exception as error:
            self._groups.fail(group_id, "the sync deadline", error)

    def _initial_delay_passed(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self._groups.get(group_id)
        if group is None or not group.is_in(PREPARING):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self._groups.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._purgatory.schedule(
                group.join_key, new_delay, partial(self._on_initial_delay, group_id, new_delay, new_remaining)
            )
        else:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        self._purgatory.cancel(group.join_key)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._groups.remove_member(group, member)
                self._events.member_left(group, member, "rejoin_timeout", "did not rejoin within the rebalance timeout")
        if group.is_in(DEAD):
            return
        if not self._elect_joined_leader(group) and group.members:
            # Only static members remain and none rejoined: wait another round.
            self._schedule_join_deadline(group)
            return
        group.init_next_generation(self._groups.clock.now_ms())
        self._events.state_changed(group)
        self._events.join_completed(group)
        if group.is_in(EMPTY):
            group.assignment_view = None
            self._groups.store(group)  # Kafka's onCompleteJoin stores the empty group
            self._events.group_emptied(group)
            return
        for member in group.members.values():
            join = group.take_join(member)
            if join is not None:
                join.complete(
                    self.current_generation(group, member.member_id, with_members=group.is_leader(member.member_id))
                )
            self._groups.extend_session(member, member.session_timeout_ms)
            member.is_new = False
            group.not_yet_synced.add(member.member_id)
        self._purgatory.schedule(
            group.sync_key,
            group.rebalance_timeout_ms(),
            partial(self._on_sync_deadline, group.group_id, group.generation_id),
        )

    @staticmethod
    def _elect_joined_leader(group: ClassicGroup) -> bool:
        """7.5: keep the leader if it rejoined, else promote the first member that did."""
        if group.leader_id is None:
            return False
        if group.members[group.leader_id].is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def current_generation(self, group: ClassicGroup, member_id: str, *, with_members: bool) -> JoinResult:
        """The JoinGroup answer for the generation in place; the leader's carries every member's metadata."""
        return JoinResult(
            error=E.none,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=member_list(group) if with_members else (),
        )

    # -- the sync phase (8, 8.1) ----------------------------------------------------------------------------

    def mark_synced(self, group: ClassicGroup, member_id: str) -> None:
        """The member sent its SyncGroup; once all have, the sync deadline is off."""
        not_yet_synced = group.not_yet_synced
        if member_id in not_yet_synced:
            discard(not_yet_synced, member_id)
            if not not_yet_synced:
                self._purgatory.cancel(group.sync_key)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        """Answer every parked SyncGroup: with its assignment, or with ``error`` when the generation is void."""
        for member in group.members.values():
            sync = group.take_sync(member)
            if sync is None:
                continue
            if error is E.none:
                sync.complete(SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name))
            else:
                sync.complete(SyncResult(error))
            # Its session could not expire while it waited; start counting again.
            self._groups.extend_session(member, member.session_timeout_ms)

    def _sync_deadline_passed(self, group_id: str, generation_id: int) -> None:
        """8.1: members that never sent SyncGroup for this generation are removed."""
        group = self._groups.get(group_id)
        if group is None or group.generation_id != generation_id or group.state not in (COMPLETING, STABLE):
            return
        if not group.not_yet_synced:
            return
        laggards = list(group.not_yet_synced)
        for member_id in laggards:
            member = group.members.get(member_id)
            if member is not None:
                self._groups.remove_member(group, member)
                reason = "sent no SyncGroup within the rebalance timeout"
                self._events.member_left(group, member, "sync_timeout", reason)
        why = f"members {laggards} did not sync within the rebalance timeout"
        self.prepare(group, Cause("sync_timeout", laggards[0], why))


def member_list(group: ClassicGroup) -> tuple[JoinedMember, ...]:
    """Every member with its metadata for the selected protocol: what the leader assigns from."""
    name = group.protocol_name
    assert name is not None
    return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(name)) for m in group.members.values())
