"""The classic group coordinator: a deterministic state machine.

It owns every group's state. Requests arrive as method calls (messages) carrying
version-independent request objects; answers are returned at once or parked as
``Deferred`` values that the coordinator completes later. Time comes from the
injected clock and delayed work goes through the ``Purgatory``. There is no I/O
here: no sockets, no tasks, no sleeping. The event loop is its only executor, and
no method awaits, so each message runs to completion before the next one starts.

Section numbers in comments refer to ``shared/spec/kafka-group-coordinator.md``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, NamedTuple

import structlog
from kio.schema.errors import ErrorCode

from broker.coordinator.config import GroupConfig
from broker.coordinator.group import ClassicGroup, CommittedOffset, GroupState, Member, heartbeat_key
from broker.coordinator.messages import (
    CommitRequest,
    DescribedMember,
    FetchedOffset,
    GroupDescription,
    GroupOffsets,
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    LeftMember,
    ListedGroup,
    OffsetDeleteResult,
    PartitionErrors,
    SyncRequest,
    SyncResult,
)
from broker.coordinator.referee import judge
from broker.events.hub import GroupEvents, LoggedEvents
from broker.timing.clock import Clock, SystemClock
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Purgatory

E = ErrorCode
EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

_EXPIRATION_KEY = ("offsets-expiration",)
# Assignors that revoke before they reassign (KIP-429): a partition may be unowned for one generation.
COOPERATIVE_PROTOCOLS = frozenset({"cooperative-sticky"})


class Cause(NamedTuple):
    """Why a rebalance started: a stable name for counting, the member that set it off, and words for people."""

    name: str
    member_id: str | None
    reason: str


class UnknownTarget(LookupError):
    """A control verb named a group, member or instance the coordinator does not have."""


class Conflict(RuntimeError):
    """A control verb that makes no sense in the group's current state."""


class MemberError(Exception):
    """A request named a member the group does not recognise (validateMember)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def _java_string_length(text: str) -> int:
    """Kafka measures commit metadata with String.length(): UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class _MemberExpiry:
    """The action under a member's heartbeat key: one small object per member, where a partial takes four."""

    __slots__ = ("coordinator", "group_id", "member_id")

    def __init__(self, coordinator: GroupCoordinator, group_id: str, member_id: str) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.member_id = member_id

    def __call__(self) -> None:
        self.coordinator._on_heartbeat_expired(self.group_id, self.member_id)


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        purgatory: Purgatory | None = None,
        *,
        new_uuid: Callable[[], str] | None = None,
        log: structlog.typing.FilteringBoundLogger | None = None,
        events: GroupEvents | None = None,
        partition_count: Callable[[str], int | None] | None = None,
    ) -> None:
        self.config = config if config is not None else GroupConfig()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.purgatory = purgatory if purgatory is not None else Purgatory(self.clock)
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self.log: structlog.typing.FilteringBoundLogger = log or structlog.get_logger("coordinator")
        self.events: GroupEvents = events if events is not None else LoggedEvents(self.log)
        # Partitions of a topic, for the assignment referee; None when the topic does not exist.
        self._partition_count = partition_count or (lambda topic: None)
        self.groups: dict[str, ClassicGroup] = {}
        self.active = True
        self.purgatory.schedule(_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms, self._expire_offsets)

    # ======================================================================
    # JoinGroup (section 7)
    # ======================================================================

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        pending: Deferred[JoinResult] = Deferred()
        if not self.active:
            return _answer(pending, E.coordinator_not_available, request.member_id)
        if not request.group_id:
            return _answer(pending, E.invalid_group_id, request.member_id)
        config = self.config
        if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
            return _answer(pending, E.invalid_session_timeout, request.member_id)

        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return _answer(pending, E.unknown_member_id, request.member_id)
            group = self._create_group(request.group_id)

        if not self._has_room_for(group, request.member_id):
            if group.has_member(request.member_id):
                group.remove_member(request.member_id)
            self.log.info(
                "join rejected: group is full",
                group_id=group.group_id,
                member_id=request.member_id,
                max_size=config.max_size,
            )
            return _answer(pending, E.group_max_size_reached, "")

        if request.member_id:
            self._join_existing_member(group, request, pending)
        else:
            self._join_new_member(group, request, pending)
        return pending

    def _has_room_for(self, group: ClassicGroup, member_id: str) -> bool:
        """KIP-389 capacity check, before anything else on the group (7.1 step 3)."""
        max_size = self.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            member = group.members.get(member_id)
            if member is not None and member.is_awaiting_join:
                return True
            return group.awaiting_join_count < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest, pending: Deferred[JoinResult]) -> None:
        if group.is_in(DEAD):
            _answer(pending, E.coordinator_not_available, "")
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _answer(pending, E.inconsistent_group_protocol, "")
            return
        instance_id = request.group_instance_id
        prefix = instance_id if instance_id is not None else request.client.client_id
        new_member_id = f"{prefix}-{self._new_uuid()}"

        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                self._replace_static_member(group, request, old_member_id, new_member_id, pending)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, pending)
        elif request.api_version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.pending_join_members.add(new_member_id)
            self.purgatory.schedule(
                heartbeat_key(group.group_id, new_member_id),
                request.session_timeout_ms,
                _MemberExpiry(self, group.group_id, new_member_id),
            )
            pending.complete(JoinResult(error=E.member_id_required, member_id=new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, pending)

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest, pending: Deferred[JoinResult]) -> None:
        member_id = request.member_id
        if group.is_in(DEAD):
            _answer(pending, E.coordinator_not_available, member_id)
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            _answer(pending, E.inconsistent_group_protocol, member_id)
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # Kafka treats this as an internal invariant violation; no real client does it.
                _answer(pending, E.unknown_server_error, member_id)
                return
            self._add_member_and_rebalance(group, request, member_id, pending)
            return
        try:
            member = self._validate_member(group, member_id, request.group_instance_id)
        except MemberError as failure:
            _answer(pending, failure.error, member_id)
            return

        if group.is_in(PREPARING):
            self._update_member_and_rebalance(group, member, request, pending)
        elif group.is_in(COMPLETING):
            if member.matches(request.protocols):
                pending.complete(self._current_generation(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request, pending)
        elif group.is_in(STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, pending)
            else:
                pending.complete(self._current_generation(group, member_id, with_members=False))
        else:
            _answer(pending, E.unknown_member_id, member_id)

    def _add_member_and_rebalance(
        self, group: ClassicGroup, request: JoinRequest, member_id: str, pending: Deferred[JoinResult]
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
        group.add_member(member, pending)
        # A new member cannot heartbeat until it has its id, and its parked request
        # hides a disconnect, so it gets the long new-member timeout instead.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._emit(
            "member_joined",
            group,
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client.client_id,
            client_host=request.client.host,
            protocol_type=request.protocol_type,
            protocols=[name for name, _ in request.protocols],
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            reason=request.reason,
        )
        reason = request.reason or "no reason given"
        self._prepare_rebalance_or_complete_join(
            group, Cause("member_joined", member_id, f"new member {member_id} joined ({reason})")
        )

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, request: JoinRequest, pending: Deferred[JoinResult]
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, pending
        )
        self._emit(
            "member_rejoined",
            group,
            member_id=member.member_id,
            protocols=[name for name, _ in request.protocols],
            state=group.state.value,
            reason=request.reason,
        )
        self._prepare_rebalance_or_complete_join(
            group,
            Cause(
                "member_rejoined",
                member.member_id,
                f"member {member.member_id} rejoined ({request.reason or 'no reason given'})",
            ),
        )

    def _replace_static_member(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        pending: Deferred[JoinResult],
    ) -> None:
        """7.9: a static member came back with an empty member id."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        member = group.members[old_member_id]
        leader_before = group.leader_id or ""
        self._fence(group, member, instance_id, new_member_id, "static_member_replaced", request.reason)
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, pending
        )
        if group.is_in(STABLE):
            if group.select_protocol() == group.protocol_name:
                # No rebalance: the new id takes over the old assignment (KIP-345, KIP-814).
                group.take_join(member)
                skip_assignment = request.api_version >= 9
                is_leader = group.is_leader(new_member_id)
                pending.complete(
                    JoinResult(
                        error=E.none,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=(group.leader_id or "") if skip_assignment else leader_before,
                        skip_assignment=skip_assignment and is_leader,
                        members=self._member_list(group) if skip_assignment and is_leader else (),
                    )
                )
            else:
                self._prepare_rebalance(
                    group,
                    Cause(
                        "static_member_replaced",
                        new_member_id,
                        f"static member {instance_id} rejoined with a new protocol",
                    ),
                )
        elif group.is_in(COMPLETING):
            self._prepare_rebalance(
                group,
                Cause(
                    "static_member_replaced",
                    new_member_id,
                    f"static member {instance_id} replaced during CompletingRebalance",
                ),
            )
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)

    def _fence(
        self, group: ClassicGroup, member: Member, instance_id: str, new_member_id: str, cause: str, reason: str | None
    ) -> None:
        """The static member continues under a new id; whatever the old id had parked is answered FENCED."""
        old_member_id = member.member_id
        old_join = group.take_join(member)
        if old_join is not None:
            old_join.complete(JoinResult(error=E.fenced_instance_id, member_id=old_member_id))
        if member.sync_pending is not None:
            old_sync, member.sync_pending = member.sync_pending, None
            old_sync.complete(SyncResult(error=E.fenced_instance_id))
        # Kafka copies the old member: client id and host stay those of the first join.
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        # An old id's timer left armed expires harmlessly: the group no longer knows that id.
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        self._emit(
            "member_fenced",
            group,
            member_id=old_member_id,
            new_member_id=new_member_id,
            group_instance_id=instance_id,
            client_id=member.client_id,
            cause=cause,
            reason=reason,
        )

    # -- the rebalance engine (7.4-7.8) ---------------------------------------------

    def _prepare_rebalance_or_complete_join(self, group: ClassicGroup, cause: Cause) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, cause)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, cause: Cause) -> None:
        if group.is_in(COMPLETING):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, E.rebalance_in_progress)
        self.purgatory.cancel(group.sync_key)
        group.pending_sync_members.clear()
        initial = group.is_in(EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.purgatory.schedule(
                group.join_key, delay, partial(self._on_initial_delay, group.group_id, delay, remaining)
            )
        self._transition(group, PREPARING)
        group.rebalance_started_ms = self.clock.now_ms()
        self._emit(
            "rebalance_started",
            group,
            generation_id=group.generation_id,
            previous_state=group.previous_state.value,
            members=len(group.members),
            cause=cause.name,
            member_id=cause.member_id,
            reason=cause.reason,
        )
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self.purgatory.schedule(
                    group.join_key,
                    group.rebalance_timeout_ms(),
                    partial(self._on_join_deadline, group.group_id),
                )

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_in(PREPARING) and group.has_all_members_joined() and group.previous_state is not EMPTY:
            self._complete_join(group)

    def _on_initial_delay(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(PREPARING):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.purgatory.schedule(
                group.join_key, new_delay, partial(self._on_initial_delay, group_id, new_delay, new_remaining)
            )
        else:
            self._complete_join(group)

    def _on_join_deadline(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(PREPARING):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.purgatory.cancel(group.join_key)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self.purgatory.cancel(member.heartbeat_key)
                group.remove_member(member.member_id)
                self._emit(
                    "member_left",
                    group,
                    member_id=member.member_id,
                    group_instance_id=None,
                    client_id=member.client_id,
                    cause="rejoin_timeout",
                    reason="did not rejoin within the rebalance timeout",
                )
        if group.is_in(DEAD):
            return
        if not self._elect_joined_leader(group) and group.members:
            # Only static members remain and none rejoined: wait another round.
            self.purgatory.schedule(
                group.join_key, group.rebalance_timeout_ms(), partial(self._on_join_deadline, group.group_id)
            )
            return
        now = self.clock.now_ms()
        group.init_next_generation(now)
        self._emit_state_change(group)
        self._emit(
            "join_completed",
            group,
            generation_id=group.generation_id,
            state=group.state.value,
            protocol_type=group.protocol_type,
            protocol=group.protocol_name,
            leader=group.leader_id,
            members=list(group.members),
        )
        if group.is_in(EMPTY):
            group.assignment_view = None
            self._emit("group_emptied", group, generation_id=group.generation_id)
            return
        for member in group.members.values():
            join = group.take_join(member)
            if join is not None:
                join.complete(
                    self._current_generation(group, member.member_id, with_members=group.is_leader(member.member_id))
                )
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.purgatory.schedule(
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

    def _current_generation(self, group: ClassicGroup, member_id: str, *, with_members: bool) -> JoinResult:
        return JoinResult(
            error=E.none,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=self._member_list(group) if with_members else (),
        )

    @staticmethod
    def _member_list(group: ClassicGroup) -> tuple[JoinedMember, ...]:
        name = group.protocol_name
        assert name is not None
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(name)) for m in group.members.values())

    # ======================================================================
    # SyncGroup (section 8)
    # ======================================================================

    def sync(self, request: SyncRequest) -> Deferred[SyncResult]:
        pending: Deferred[SyncResult] = Deferred()
        if not self.active:
            return _sync_error(pending, E.coordinator_not_available)
        if not request.group_id:
            return _sync_error(pending, E.invalid_group_id)
        group = self.groups.get(request.group_id)
        if group is None or group.is_in(EMPTY):
            return _sync_error(pending, E.unknown_member_id)
        if group.is_in(DEAD):
            return _sync_error(pending, E.coordinator_not_available)
        try:
            member = self._validate_member(group, request.member_id, request.group_instance_id)
        except MemberError as failure:
            return _sync_error(pending, failure.error)
        if request.generation_id != group.generation_id:
            return _sync_error(pending, E.illegal_generation)
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return _sync_error(pending, E.inconsistent_group_protocol)

        if group.is_in(PREPARING):
            return _sync_error(pending, E.rebalance_in_progress)
        if group.is_in(COMPLETING):
            member.sync_pending = pending
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, request.assignments)
            return pending
        # Stable
        self._remove_pending_sync_member(group, member.member_id)
        pending.complete(SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name))
        return pending

    def _store_assignment(self, group: ClassicGroup, assignments: Iterable[tuple[str, bytes]]) -> None:
        sent = list(assignments)
        by_member = dict(sent)  # duplicate member ids: the last one wins
        missing = [m for m in group.members if m not in by_member]
        if missing:
            self.log.warning("leader left members without an assignment", group_id=group.group_id, members=missing)
        for member_id, member in group.members.items():
            member.assignment = by_member.get(member_id, b"")
        # An in-memory store never fails, so the group becomes Stable at once.
        self._propagate_assignment(group, E.none)
        self._transition(group, STABLE)
        self._referee(group, sent)

    def _referee(self, group: ClassicGroup, sent: list[tuple[str, bytes]]) -> None:
        """Report the generation's assignment; for the consumer protocol, judge it. Never changes an answer."""
        protocol = group.protocol_name
        verdict = None
        if group.protocol_type == "consumer" and protocol is not None:
            verdict = judge(
                sent,
                {member_id: member.metadata(protocol) for member_id, member in group.members.items()},
                group.assignment_view,
                self._partition_count,
                cooperative=protocol in COOPERATIVE_PROTOCOLS,
            )
        # Only owners matter to the next generation's "moved": members without partitions are left out.
        group.assignment_view = (
            {member_id: owned for member_id, owned in verdict.assignments.items() if owned}
            if verdict is not None
            else None
        )
        self._emit(
            "sync_completed",
            group,
            generation_id=group.generation_id,
            protocol=protocol,
            assignments=verdict.assignments if verdict is not None else None,
            moved=[
                {"topic": m.topic, "partition": m.partition, "from": m.from_member, "to": m.to_member}
                for m in verdict.moved
            ]
            if verdict is not None
            else None,
            unowned=verdict.unowned if verdict is not None else None,
            rebalance_ms=self.clock.now_ms() - group.rebalance_started_ms,
            rebalance_protocol=(
                ("cooperative" if protocol in COOPERATIVE_PROTOCOLS else "eager") if verdict is not None else None
            ),
            assignment_bytes={m.member_id: len(m.assignment) for m in group.members.values()},
        )
        if verdict is not None:
            for violation in verdict.violations:
                self._emit(
                    "referee_violation",
                    group,
                    generation_id=group.generation_id,
                    kind=violation.kind,
                    topic=violation.topic,
                    partition=violation.partition,
                    members=list(violation.members),
                )

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            sync = member.sync_pending
            if sync is None:
                continue
            member.sync_pending = None
            if error is E.none:
                sync.complete(SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name))
            else:
                sync.complete(SyncResult(error))
            # Its session could not expire while it waited; start counting again.
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        pending_sync = group.pending_sync_members
        if member_id in pending_sync:
            pending_sync.discard(member_id)
            if not pending_sync:
                self.purgatory.cancel(group.sync_key)

    def _on_sync_deadline(self, group_id: str, generation_id: int) -> None:
        """8.1: members that never sent SyncGroup for this generation are removed."""
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id or group.state not in (COMPLETING, STABLE):
            return
        if not group.pending_sync_members:
            return
        laggards = list(group.pending_sync_members)
        for member_id in laggards:
            member = group.remove_member(member_id)
            if member is not None:
                self.purgatory.cancel(member.heartbeat_key)
                self._emit(
                    "member_left",
                    group,
                    member_id=member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    cause="sync_timeout",
                    reason="sent no SyncGroup within the rebalance timeout",
                )
        self._prepare_rebalance(
            group,
            Cause("sync_timeout", laggards[0], f"members {laggards} did not sync within the rebalance timeout"),
        )

    # ======================================================================
    # Heartbeat (section 9): the hot path
    # ======================================================================

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        if not self.active:
            return E.coordinator_not_available
        if not group_id:
            return E.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        state = group.state
        if state is DEAD:
            return E.coordinator_not_available
        member = group.members.get(member_id)
        # A known member under its own instance id is what _validate_member would return (a static member's
        # instance id always maps to its member id); anything else takes the full check.
        if member is None or (group_instance_id is not None and member.group_instance_id != group_instance_id):
            try:
                member = self._validate_member(group, member_id, group_instance_id)
            except MemberError as failure:
                return failure.error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if state is EMPTY:
            return E.unknown_member_id
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return E.rebalance_in_progress if state is PREPARING else E.none

    # ======================================================================
    # LeaveGroup (section 10)
    # ======================================================================

    def leave(self, group_id: str, leaving: Iterable[LeavingMember]) -> LeaveResult:
        if not self.active:
            return LeaveResult(E.coordinator_not_available)
        if not group_id:
            return LeaveResult(E.invalid_group_id)
        identities = list(leaving)
        group = self.groups.get(group_id)
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
            if group.state in (STABLE, COMPLETING):
                self._prepare_rebalance_or_complete_join(group, cause)
            elif group.is_in(PREPARING):
                self._maybe_complete_join(group)
        return LeaveResult(E.none, tuple(answers))

    def _leave_one(self, group: ClassicGroup, identity: LeavingMember) -> ErrorCode:
        reason = identity.reason or "not provided"
        if not identity.member_id:
            member_id = group.static_member_id(identity.group_instance_id)
            if member_id is None:
                return E.unknown_member_id
            self._remove_member(group, group.members[member_id], "member_left", cause="leave_group", reason=reason)
            return E.none
        if group.is_pending_member(identity.member_id):
            group.pending_join_members.discard(identity.member_id)
            self.purgatory.cancel(heartbeat_key(group.group_id, identity.member_id))
            self.log.info("pending member left", group_id=group.group_id, member_id=identity.member_id, reason=reason)
            return E.none
        try:
            member = self._validate_member(group, identity.member_id, identity.group_instance_id)
        except MemberError as failure:
            return failure.error
        self._remove_member(group, member, "member_left", cause="leave_group", reason=reason)
        return E.none

    def _remove_member(self, group: ClassicGroup, member: Member, event: str, **fields: Any) -> None:
        """Cancel its timer, answer its parked JoinGroup, drop it. The caller decides about rebalancing."""
        self.purgatory.cancel(member.heartbeat_key)
        join = group.take_join(member)
        if join is not None:
            join.complete(JoinResult(error=E.unknown_member_id, member_id=""))
        group.remove_member(member.member_id)
        self._emit(
            event,
            group,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            **fields,
        )

    # ======================================================================
    # Timers on members (section 11)
    # ======================================================================

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        # Every action under a heartbeat key is this member's expiry, so an armed one is only moved,
        # and a fired or cancelled one lends its action to the next.
        expiry = member.expiry
        if expiry is not None and self.purgatory.postpone(expiry, timeout_ms):
            member.last_heartbeat_ms = expiry.deadline - max(timeout_ms, 0)
            return
        member.last_heartbeat_ms = self.clock.now_ms()
        action = expiry.action if expiry is not None else self._expiry_action(group, member)
        member.expiry = self.purgatory.schedule(member.heartbeat_key, timeout_ms, action)

    def _expiry_action(self, group: ClassicGroup, member: Member) -> Callable[[], None]:
        return _MemberExpiry(self, group.group_id, member.member_id)

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return
        if group.is_pending_member(member_id):
            group.pending_join_members.discard(member_id)
            self.log.info("pending member expired", group_id=group_id, member_id=member_id)
            self._maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        # A new member's parked JoinGroup is no proof of life: it gets the long new-member timeout instead.
        self._expire_member(group, member, "new_member_timeout" if member.is_new else "session_timeout")

    def _expire_member(self, group: ClassicGroup, member: Member, cause: str) -> None:
        """onExpireHeartbeat: a session expiry, or a kick that takes the same path."""
        silence_ms = self.clock.now_ms() - member.last_heartbeat_ms
        self._remove_member(
            group,
            member,
            "member_expired",
            since_last_heartbeat_ms=silence_ms,
            session_timeout_ms=member.session_timeout_ms,
            cause=cause,
        )
        if cause == "kicked":
            reason = f"member {member.member_id} was kicked through the control API"
            why = Cause("member_kicked", member.member_id, reason)
        else:
            reason = f"member {member.member_id} sent no heartbeat for {silence_ms} ms"
            why = Cause("member_expired", member.member_id, reason)
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, why)
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)

    # ======================================================================
    # Member validation (shared by Join/Sync/Heartbeat/Leave/OffsetCommit)
    # ======================================================================

    @staticmethod
    def _validate_member(group: ClassicGroup, member_id: str, group_instance_id: str | None) -> Member:
        if group_instance_id is not None:
            static_id = group.static_members.get(group_instance_id)
            if static_id is None:
                raise MemberError(E.unknown_member_id)
            if static_id != member_id:
                raise MemberError(E.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise MemberError(E.unknown_member_id)
        return member

    # ======================================================================
    # Offsets (section 13)
    # ======================================================================

    def commit_offsets(self, request: CommitRequest) -> PartitionErrors:
        error = self._validate_commit(request)
        if error is not None:
            return tuple(
                (topic, tuple((p.partition, error) for p in partitions)) for topic, partitions in request.topics
            )
        group = self.groups[request.group_id]
        now = self.clock.now_ms()
        expire_at = now + request.retention_time_ms if request.retention_time_ms != -1 else None
        max_bytes = self.config.offset_metadata_max_bytes
        answer = []
        committed: list[list[object]] = []
        for topic, partitions in request.topics:
            results = []
            for commit in partitions:
                metadata = commit.metadata or ""
                if _java_string_length(metadata) > max_bytes:
                    results.append((commit.partition, E.offset_metadata_too_large))
                    continue
                timestamp = commit.commit_timestamp_ms if commit.commit_timestamp_ms != -1 else now
                group.offsets[(topic, commit.partition)] = CommittedOffset(
                    commit.offset, commit.leader_epoch, metadata, timestamp, expire_at
                )
                results.append((commit.partition, E.none))
                committed.append([topic, commit.partition, commit.offset])
            answer.append((topic, tuple(results)))
        if self.events.wants_debug:
            self._emit(
                "offsets_committed",
                group,
                debug=True,
                member_id=request.member_id,
                generation_id=request.generation_id,
                offsets=committed,
            )
        return tuple(answer)

    def _validate_commit(self, request: CommitRequest) -> ErrorCode | None:
        if not self.active:
            return E.coordinator_not_available
        group = self.groups.get(request.group_id)
        generation = request.generation_id
        if group is None:
            if generation < 0:
                self._create_group(request.group_id)  # a "simple" group, for assign() and admin commits
                return None
            return E.group_id_not_found if request.api_version >= 9 else E.illegal_generation
        if group.is_in(DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_in(EMPTY):
            return None
        if generation < 0 and not request.member_id and request.group_instance_id is None:
            return E.unknown_member_id  # only members may commit into an active group
        try:
            member = self._validate_member(group, request.member_id, request.group_instance_id)
        except MemberError as failure:
            return failure.error
        if generation != group.generation_id:
            return E.illegal_generation
        if group.is_in(COMPLETING):
            return E.rebalance_in_progress
        if group.state in (STABLE, PREPARING):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return None

    def fetch_offsets(
        self,
        group_id: str,
        topics: Iterable[tuple[str, Iterable[int]]] | None,
        require_stable: bool = False,
    ) -> GroupOffsets:
        if not self.active:
            return GroupOffsets(group_id, E.coordinator_not_available)
        group = self.groups.get(group_id)
        offsets = {} if group is None or group.is_in(DEAD) else group.offsets
        if topics is None:
            by_topic: dict[str, list[FetchedOffset]] = {}
            for (topic, partition), stored in offsets.items():
                by_topic.setdefault(topic, []).append(_fetched(partition, stored))
            return GroupOffsets(group_id, E.none, tuple((t, tuple(ps)) for t, ps in by_topic.items()))
        answer = []
        for topic, partitions in topics:
            answer.append((topic, tuple(_fetched(p, offsets.get((topic, p))) for p in partitions)))
        return GroupOffsets(group_id, E.none, tuple(answer))

    def _expire_offsets(self) -> None:
        """13.2: the periodic retention sweep; Empty groups left without offsets are deleted."""
        now = self.clock.now_ms()
        retention_ms = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            base = _expiration_base(group)
            if base is not None and group.offsets:
                for key, stored in list(group.offsets.items()):
                    if base == "subscription" and group.is_subscribed_to(key[0]):
                        continue
                    if stored.expire_timestamp_ms is not None:
                        expired = now >= stored.expire_timestamp_ms
                    else:
                        started = group.state_timestamp_ms if base == "state" else stored.commit_timestamp_ms
                        expired = now - started >= retention_ms
                    if expired:
                        del group.offsets[key]
                if not group.offsets:
                    self._emit("offsets_expired", group)
            if group.is_in(EMPTY) and not group.offsets:
                self._delete_group(group, "empty group without offsets expired")
        self.purgatory.schedule(_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms, self._expire_offsets)

    # ======================================================================
    # Describe / List / Delete / OffsetDelete (section 14)
    # ======================================================================

    def describe(self, group_id: str) -> GroupDescription:
        if not self.active:
            return GroupDescription(group_id, E.coordinator_not_available, state="")
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return GroupDescription(group_id)
        stable = group.is_in(STABLE)
        protocol = group.protocol_name if stable else None
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if protocol is not None else b"",
                m.assignment,
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id,
            E.none,
            group.state.value,
            group.protocol_type or "",
            protocol or "",
            members,
        )

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, tuple[ListedGroup, ...]]:
        if not self.active:
            return E.coordinator_not_available, ()
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return E.none, ()
        listed = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_in(DEAD) and (not wanted_states or g.state.value.lower() in wanted_states)
        )
        return E.none, listed

    def delete_groups(self, group_ids: Iterable[str]) -> tuple[tuple[str, ErrorCode], ...]:
        answer = []
        for group_id in dict.fromkeys(group_ids):  # de-duplicated, first occurrence keeps its place
            if not self.active:
                answer.append((group_id, E.coordinator_not_available))
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(DEAD):
                answer.append((group_id, E.group_id_not_found))
            elif not group.is_in(EMPTY):
                answer.append((group_id, E.non_empty_group))
            else:
                self._delete_group(group, "deleted by DeleteGroups")
                answer.append((group_id, E.none))
        return tuple(answer)

    def delete_offsets(self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]]) -> OffsetDeleteResult:
        if not self.active:
            return OffsetDeleteResult(E.coordinator_not_available)
        if not group_id:
            return OffsetDeleteResult(E.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return OffsetDeleteResult(E.group_id_not_found)
        if not group.is_in(EMPTY) and group.protocol_type != "consumer":
            return OffsetDeleteResult(E.non_empty_group)
        answer = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                answer.append((topic, tuple((p, E.group_subscribed_to_topic) for p in partitions)))
                continue
            for partition in partitions:
                group.offsets.pop((topic, partition), None)
            answer.append((topic, tuple((p, E.none) for p in partitions)))
        return OffsetDeleteResult(E.none, tuple(answer))

    def on_topic_deleted(self, topic: str) -> None:
        """GroupCoordinator.onPartitionsDeleted: drop the topic's offsets; Empty groups left bare go too."""
        for group in list(self.groups.values()):
            doomed = [key for key in group.offsets if key[0] == topic]
            for key in doomed:
                del group.offsets[key]
            if doomed and group.is_in(EMPTY) and not group.offsets:
                self._delete_group(group, f"its last offsets belonged to deleted topic {topic}")

    # ======================================================================
    # Control verbs (the control API's chaos tools; not part of Kafka)
    # ======================================================================

    def _live_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            raise UnknownTarget(f"no group {group_id!r}")
        return group

    def kick(self, group_id: str, member_id: str) -> None:
        """Evict a member now, down the same path as a session expiry."""
        group = self._live_group(group_id)
        if group.is_pending_member(member_id):
            group.pending_join_members.discard(member_id)
            self.purgatory.cancel(heartbeat_key(group_id, member_id))
            self.log.info("pending member kicked", group_id=group_id, member_id=member_id)
            self._maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownTarget(f"group {group_id!r} has no member {member_id!r}")
        if member.sync_pending is not None:
            # A session expiry cannot catch a member with a parked SyncGroup; a kick can, and must answer it.
            sync, member.sync_pending = member.sync_pending, None
            sync.complete(SyncResult(E.unknown_member_id))
        self._expire_member(group, member, "kicked")

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
        self.purgatory.cancel(member.heartbeat_key)
        self._fence(group, member, instance_id, new_member_id, "fenced", "fenced through the control API")
        if group.is_in(COMPLETING):
            # The leader assigned to the old id; as with a static replacement, the generation must be redone.
            reason = f"static member {instance_id} fenced during CompletingRebalance"
            self._prepare_rebalance(group, Cause("member_fenced", new_member_id, reason))
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)
        return old_member_id, new_member_id

    def has_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def force_rebalance(self, group_id: str) -> None:
        group = self._live_group(group_id)
        if group.is_in(EMPTY):
            raise Conflict(f"group {group_id!r} is Empty: there are no members to rebalance")
        if group.is_in(PREPARING):
            raise Conflict(f"group {group_id!r} is already rebalancing")
        self._prepare_rebalance(group, Cause("forced", None, "forced through the control API"))

    # ======================================================================
    # Lifecycle
    # ======================================================================

    def shutdown(self) -> None:
        """Give up every group as Kafka does when it loses the offsets partition (section 16)."""
        self.active = False
        for group in list(self.groups.values()):
            self._unload_group(group)
        self.groups.clear()

    def _unload_group(self, group: ClassicGroup) -> None:
        state = group.state
        for member in group.members.values():
            self.purgatory.cancel(member.heartbeat_key)
            join = group.take_join(member)
            if join is not None and state is PREPARING:
                join.complete(JoinResult(error=E.not_coordinator, member_id=member.member_id))
            if member.sync_pending is not None:
                sync, member.sync_pending = member.sync_pending, None
                if state in (COMPLETING, STABLE):
                    sync.complete(SyncResult(E.not_coordinator))
        for member_id in group.pending_join_members:
            self.purgatory.cancel(heartbeat_key(group.group_id, member_id))
        self.purgatory.cancel(group.join_key)
        self.purgatory.cancel(group.sync_key)
        self._transition(group, DEAD)

    def _create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.clock.now_ms())
        self.groups[group_id] = group
        self._emit("group_created", group)
        return group

    def _delete_group(self, group: ClassicGroup, why: str) -> None:
        group.offsets.clear()
        self.purgatory.cancel(group.join_key)
        self.purgatory.cancel(group.sync_key)
        self._transition(group, DEAD)
        del self.groups[group.group_id]
        self._emit("group_deleted", group, reason=why)

    # ======================================================================
    # Events
    # ======================================================================

    def _emit(self, event: str, group: ClassicGroup, *, debug: bool = False, **fields: Any) -> None:
        self.events.emit(event, group.group_id, fields, debug=debug)

    def _transition(self, group: ClassicGroup, state: GroupState) -> None:
        group.transition_to(state, self.clock.now_ms())
        self._emit_state_change(group)

    def _emit_state_change(self, group: ClassicGroup) -> None:
        fields = {"from": group.previous_state.value, "to": group.state.value, "generation_id": group.generation_id}
        self.events.emit("state_changed", group.group_id, fields)


def _answer(pending: Deferred[JoinResult], error: ErrorCode, member_id: str) -> Deferred[JoinResult]:
    pending.complete(JoinResult(error=error, member_id=member_id))
    return pending


def _sync_error(pending: Deferred[SyncResult], error: ErrorCode) -> Deferred[SyncResult]:
    pending.complete(SyncResult(error))
    return pending


def _fetched(partition: int, stored: CommittedOffset | None) -> FetchedOffset:
    if stored is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, stored.offset, stored.leader_epoch, stored.metadata)


def _expiration_base(group: ClassicGroup) -> str | None:
    """Which clock an offset's retention counts from (13.2), or None when nothing expires."""
    if not group.protocol_type:
        return "commit"  # a simple group: standalone consumers and admin commits
    if group.is_in(EMPTY):
        return "state"
    if group.protocol_type == "consumer" and group.is_in(STABLE) and group.subscribed_topics is not None:
        return "subscription"
    return None
