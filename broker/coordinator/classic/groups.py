"""The classic groups of one coordinator, and the changes to them that every handler makes the same way.

Kafka's ``GroupMetadataManager`` keeps its groups and these shared steps together: creating and deleting a group,
moving it to a new state (and saying so), removing a member or a KIP-394 pending member, extending a member's
session and unloading everything (section 16 of ``docs/spec/group-coordinator.md``). Nothing here decides *when*
to rebalance: the handlers do, through ``rebalance.py``.
"""

from __future__ import annotations

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, ChangeSink
from broker.coordinator.classic import durable
from broker.coordinator.classic.events import GroupEventLog
from broker.coordinator.classic.group import ClassicGroup, discard
from broker.coordinator.classic.member import Member
from broker.coordinator.classic.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import CommitRequest, JoinResult, PartitionErrors, SyncResult
from broker.coordinator.registry import GroupRegistry
from broker.timing.clock import Clock
from broker.timing.keys import heartbeat_key
from broker.timing.purgatory import Purgatory

E = ErrorCode


class ClassicGroups:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        purgatory: Purgatory,
        events: GroupEventLog,
        log: structlog.typing.FilteringBoundLogger,
        registry: GroupRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else GroupRegistry()
        self.config = config
        self.clock = clock
        self.purgatory = purgatory
        self.events = events
        self.log = log
        self.groups = self.registry.classic_groups  # the classic groups of the one registry, in creation order
        self.failures = 0  # operations that raised and were failed (``fail``): each is a coordinator bug
        self.changes: ChangeSink = NULL_CHANGES  # issue 27: where ``store`` writes the group's record
        self.stored: set[str] = set()  # the groups with a record in the data directory

    def store(self, group: ClassicGroup) -> None:
        """The group's GroupMetadata record, where Kafka writes one (``classic/durable.py``)."""
        group.stored()  # what a coordinator move reloads it from (cluster-and-durability.md 2.3)
        if self.changes.enabled:
            self.changes.put(durable.KIND, (group.group_id,), durable.group_value(group))
            self.stored.add(group.group_id)

    # -- groups ------------------------------------------------------------------------------------------

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def live(self, group_id: str) -> ClassicGroup | None:
        """The group, unless it is unknown or Dead (a Dead group is one on its way out)."""
        group = self.groups.get(group_id)
        return None if group is None or group.is_in(DEAD) else group

    def create(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.clock.now_ms(), self.registry.offsets)
        self.registry.add_classic(group)
        self.events.group_created(group)
        return group

    def delete(self, group: ClassicGroup, why: str) -> None:
        """The group goes Dead and is forgotten; its offsets stay in the store (the caller removes them if they
        must go: DeleteGroups does, a conversion to a consumer group keeps them)."""
        self._cancel_group_timers(group)
        group.pending_members.clear()
        self.transition(group, DEAD)
        self.registry.remove(group)
        if group.group_id in self.stored:
            self.stored.discard(group.group_id)
            self.changes.delete(durable.KIND, (group.group_id,))
        self.events.group_deleted(group, why)

    def delete_group(self, group_id: str, why: str) -> None:
        self.delete(self.registry.classic(group_id), why)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        """The join and sync deadlines, and those of the KIP-394 member ids awaiting their second JoinGroup (an Empty
        group may still hold some): no timer outlives the group's current life."""
        purgatory = self.purgatory
        purgatory.cancel(group.join_key)
        purgatory.cancel(group.sync_key)
        for member_id in group.pending_members:
            purgatory.cancel(heartbeat_key(group.group_id, member_id))

    # -- offsets (section 13.1) ----------------------------------------------------------------------------

    def offsets_committed(self, request: CommitRequest, results: PartitionErrors) -> None:
        """A commit is a member's proof of life in a Stable or PreparingRebalance group (Kafka's commitOffset
        reschedules the classic member's heartbeat), and the debug ``offsets_committed`` event."""
        group = self.groups[request.group_id]
        member = group.members.get(request.member_id)
        if member is not None and group.state in (STABLE, PREPARING):
            self.extend_session(member, member.session_timeout_ms)
        events = self.events
        if events.wants_debug:
            committed = [
                (topic, commit.partition, commit.offset)
                for (topic, commits), (_, errors) in zip(request.topics, results, strict=True)
                for commit, (_, error) in zip(commits, errors, strict=True)
                if error is E.none
            ]
            events.offsets_committed(group, request.member_id, request.generation_id, committed)

    def offsets_deleted(self, group_id: str, deleted: list[tuple[str, int]]) -> None:
        self.events.offsets_deleted(self.groups[group_id], deleted)

    def offsets_expired(self, group_id: str) -> None:
        self.events.offsets_expired(self.groups[group_id])

    def transition(self, group: ClassicGroup, state: GroupState) -> None:
        group.transition_to(state, self.clock.now_ms())
        if state is EMPTY:
            self.store(group)
        self.events.state_changed(group)

    # -- members -----------------------------------------------------------------------------------------

    def remove_member(self, group: ClassicGroup, member: Member) -> None:
        """Cancel its session, answer its parked JoinGroup (and SyncGroup) UNKNOWN_MEMBER_ID and drop it.

        The caller says why in an event and decides about rebalancing (``Rebalancer.after_departure``).
        Kafka's removeMemberAndUpdateClassicGroup answers only the JoinGroup; a SyncGroup parked by a member that
        another connection made leave is then never answered (its client times out). We answer it as the kick
        verb does: the client learns at once what it would learn on its next request, and nothing waits forever.
        """
        self.purgatory.cancel(member.heartbeat_key)
        join = group.take_join(member)
        if join is not None:
            join.complete(JoinResult(error=E.unknown_member_id, member_id=""))
        sync = group.take_sync(member)
        if sync is not None:
            sync.complete(SyncResult(E.unknown_member_id))
        group.remove_member(member.member_id)

    def remove_pending_member(self, group: ClassicGroup, member_id: str, why: str) -> None:
        """Forget a KIP-394 member id that never came back with its second JoinGroup (it had no member event)."""
        discard(group.pending_members, member_id)
        self.purgatory.cancel(heartbeat_key(group.group_id, member_id))
        self.log.info("pending member removed", group_id=group.group_id, member_id=member_id, why=why)

    def extend_session(self, member: Member, timeout_ms: int) -> None:
        """Give a member ``timeout_ms`` more to live: the Heartbeat hot path, and every other proof of life.

        Every action under a heartbeat key is this member's expiry (``Sessions.start`` armed it), so an armed
        deadline is only moved, and a fired or cancelled one lends its action to the next.
        """
        expiry = member.expiry
        assert expiry is not None, "a member's session starts when it is added"
        member.heartbeat_timeout_ms = max(timeout_ms, 0)  # last_heartbeat_ms: the new due time minus this
        if self.purgatory.postpone(expiry, timeout_ms):
            return
        member.expiry = self.purgatory.schedule(member.heartbeat_key, timeout_ms, expiry.action)

    # -- an operation that raised ---------------------------------------------------------------------------

    def fail(self, group_id: str, operation: str, error: Exception) -> None:
        """An operation on the group raised: answer everything it had parked and start the group over, Empty.

        Kafka's CoordinatorRuntime fails a write whose operation throws: the request gets the exception's error
        (UNKNOWN_SERVER_ERROR for anything but an ApiException) and a failed timer is logged and dropped
        (``EventBasedCoordinatorTimer``). Its classic groups are not timeline-backed, so what the operation did
        before it threw stays done, and a group can sit in PreparingRebalance with its JoinGroups parked forever
        (``ClassicGroup.selectProtocol`` throwing on a duplicated protocol name did exactly that). We cannot know
        which half of the operation ran, so rather than guess we give the group the one clean state the table
        allows from anywhere: every parked JoinGroup and SyncGroup is answered UNKNOWN_SERVER_ERROR, every member
        (and KIP-394 pending id) is removed with its timers, and the group goes to Empty through
        PreparingRebalance with a new generation, keeping its committed offsets. Clients rejoin as new members
        (their next Heartbeat is told UNKNOWN_MEMBER_ID). Never raises: it is what callers fall back on.
        """
        self.failures += 1
        group = self.groups.get(group_id)
        self.log.error(
            "group operation failed: its parked requests are answered UNKNOWN_SERVER_ERROR and the group restarts",
            group_id=group_id,
            operation=operation,
            state=None if group is None else group.state.value,
            exc_info=error,
        )
        if group is None or group.is_in(DEAD):
            return
        try:
            self._restart(group, operation)
        except Exception:
            self.log.exception("restarting a failed group failed", group_id=group_id, operation=operation)

    def _restart(self, group: ClassicGroup, operation: str) -> None:
        purgatory = self.purgatory
        self._cancel_group_timers(group)
        members = group.forget_members()
        for member in members:
            purgatory.cancel(member.heartbeat_key)
            join, member.join_answer = member.join_answer, None
            if join is not None:
                join.complete(JoinResult(error=E.unknown_server_error, member_id=member.member_id))
            sync, member.sync_answer = member.sync_answer, None
            if sync is not None:
                sync.complete(SyncResult(E.unknown_server_error))
        for member in members:
            self.events.member_left(group, member, "coordinator_error", f"removed because {operation} failed")
        # Empty along the table (Stable and CompletingRebalance go through PreparingRebalance), in a new generation
        # as Kafka's initNextGeneration makes one without members; spelt out, as the step that raised may be that.
        now = self.clock.now_ms()
        if group.state in (STABLE, COMPLETING):
            group.transition_to(PREPARING, now)
            self.events.state_changed(group)
        if group.is_in(PREPARING):
            group.generation_id += 1
            group.protocol_name = None
            group.subscribed_topics = frozenset()
            group.assignment_view = None
            group.transition_to(EMPTY, now)
            self.events.state_changed(group)
            self.events.group_emptied(group)

    # -- unloading (section 16) ----------------------------------------------------------------------------

    def unload_all(self) -> None:
        """Give up every group as Kafka does when it loses the offsets partition: all go Dead."""
        for group in list(self.groups.values()):
            self._unload(group)
        self.registry.remove_all(GroupType.CLASSIC)

    def _unload(self, group: ClassicGroup) -> None:
        state = group.state
        for member in group.members.values():
            self.purgatory.cancel(member.heartbeat_key)
            join = group.take_join(member)
            if join is not None and state is PREPARING:
                join.complete(JoinResult(error=E.not_coordinator, member_id=member.member_id))
            sync = group.take_sync(member)
            if sync is not None and state in (COMPLETING, STABLE):
                sync.complete(SyncResult(E.not_coordinator))
        self._cancel_group_timers(group)
        self.transition(group, DEAD)
