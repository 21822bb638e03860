"""The group coordinator: the one object the API layer and the control API talk to.

It owns every group's state. Requests arrive as method calls carrying version-independent request objects
(``messages.py``); answers are returned at once or parked as ``Deferred`` values completed later. Time comes from
the injected clock and delayed work goes through the ``Purgatory``. There is no I/O here: no sockets, no tasks,
no sleeping. The event loop is its only executor, and no method awaits, so each message runs to completion
before the next one starts.

This class is a facade, as Kafka's ``GroupCoordinatorService``/``GroupCoordinatorShard`` are over
``GroupMetadataManager`` and ``OffsetMetadataManager``: it answers for an unloaded coordinator and routes each
message to its handler: ``classic/`` for membership, ``offsets.py`` for committed offsets, ``classic/verbs.py``
(``modern/consumer/verbs.py`` for consumer groups) for the control API's verbs. Heartbeat, the hot path, is answered
here directly. Section numbers refer to ``docs/spec/group-coordinator.md``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import structlog
from kio.schema.errors import ErrorCode

from broker.coordinator.classic import admin
from broker.coordinator.classic.events import GroupEventLog
from broker.coordinator.classic.group import ClassicGroup, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.join import JoinHandler
from broker.coordinator.classic.leave import LeaveHandler
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.sessions import Sessions
from broker.coordinator.classic.state import DEAD, EMPTY, PREPARING
from broker.coordinator.classic.sync import SyncHandler
from broker.coordinator.classic.verbs import ClassicVerbs
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import (
    CommitRequest,
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    GroupDescription,
    GroupOffsets,
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
    TxnCommitRequest,
)
from broker.coordinator.modern.consumer import describe as consumer_describe
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.heartbeat import ConsumerHeartbeatHandler
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.referee import RefereedEventLog
from broker.coordinator.modern.consumer.verbs import ConsumerVerbs
from broker.coordinator.modern.types import StaticCatalog, TopicCatalog
from broker.coordinator.offsets import OffsetManager, rejected_commit
from broker.coordinator.verb_errors import Conflict, UnknownTarget
from broker.coordinator.views import (
    GroupDetail,
    GroupSummary,
    consumer_detail,
    detail,
    summarize,
    summarize_consumer,
)
from broker.events.hub import GroupEvents, LoggedEvents
from broker.timing.clock import Clock, SystemClock
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Purgatory

__all__ = ["Conflict", "GroupCoordinator", "UnknownTarget"]

E = ErrorCode
T = TypeVar("T")


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
        topics: TopicCatalog | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.purgatory = purgatory if purgatory is not None else Purgatory(self.clock)
        self.log: structlog.typing.FilteringBoundLogger = log or structlog.get_logger("coordinator")
        self.events: GroupEvents = events if events is not None else LoggedEvents(self.log)
        self.active = True
        self.topics: TopicCatalog = topics if topics is not None else StaticCatalog()
        config = config if config is not None else GroupConfig()
        new_member_uuid = new_uuid or random_uuid
        # Each handler is built on those it calls; nothing calls back up but a timer's action.
        classic = ClassicGroups(config, self.clock, self.purgatory, GroupEventLog(self.events), self.log)
        rebalancer = Rebalancer(classic)
        sessions = Sessions(classic, rebalancer)
        joins = JoinHandler(classic, rebalancer, sessions, new_member_uuid)
        self._classic = classic
        self._sessions = sessions
        self._joins = joins
        self._syncs = SyncHandler(classic, rebalancer, partition_count or (lambda topic: None))
        self._leaves = LeaveHandler(classic, rebalancer)
        consumer = ConsumerGroups(
            config, self.clock, self.purgatory, self.topics, RefereedEventLog(self.events, self.topics), self.log
        )
        self._consumer = consumer
        self._consumer_heartbeats = ConsumerHeartbeatHandler(consumer, classic, _member_id_of(new_member_uuid))
        # The steady-beat hot path reads one attribute, kept by the config setter and shutdown.
        self._steady_beats_served = config.consumer_protocol_enabled
        self._steady = self._consumer_heartbeats.steady
        self.consumer_groups: dict[str, ConsumerGroup] = consumer.groups  # every consumer group by id
        self._offsets = OffsetManager(classic, consumer)
        self._verbs = ClassicVerbs(classic, rebalancer, sessions, joins, new_member_uuid)
        self._consumer_verbs = ConsumerVerbs(consumer)
        self.groups: dict[str, ClassicGroup] = classic.groups  # every group by id
        self._extend_session = classic.extend_session  # bound once: the Heartbeat hot path calls it

    @property
    def failed_operations(self) -> int:
        """Operations that raised and were failed (``ClassicGroups.fail``): each one is a coordinator bug."""
        return self._classic.failures + self._consumer.failures

    def group_type(self, group_id: str) -> str | None:
        """ "classic" or "consumer" for a live group, None for an unknown one: group ids are one namespace."""
        if group_id in self._consumer.groups:
            return "consumer"
        return None if self._classic.live(group_id) is None else "classic"

    @property
    def config(self) -> GroupConfig:
        """The settings every handler reads; replacing them takes effect at the next request or timer."""
        return self._classic.config

    @config.setter
    def config(self, config: GroupConfig) -> None:
        self._classic.config = config
        self._consumer.config = config
        self._steady_beats_served = self.active and config.consumer_protocol_enabled

    # -- membership (sections 7-10) ---------------------------------------------------------------------

    # JoinGroup, SyncGroup, LeaveGroup and the control verbs change groups: one that raises fails its group
    # (``ClassicGroups.fail``: parked answers UNKNOWN_SERVER_ERROR, the group Empty) and is itself answered
    # UNKNOWN_SERVER_ERROR, as Kafka's CoordinatorRuntime answers a write whose operation threw.

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        if not self.active:
            return _answered(JoinResult(E.coordinator_not_available, request.member_id))
        consumer_group = self._consumer.get(request.group_id)
        if consumer_group is not None:
            # Section 9.4. A non-empty consumer group takes no classic-protocol member: online migration (10.3)
            # is not implemented, so this answers as Kafka does under group.consumer.migration.policy=disabled.
            if not consumer_group.is_empty():
                return _answered(JoinResult(E.inconsistent_group_protocol, request.member_id))
            self._convert_to_classic(request.group_id)
        try:
            return self._joins.join(request)
        except Exception as error:
            self._classic.fail(request.group_id, "a JoinGroup", error)
            return _answered(JoinResult(E.unknown_server_error, request.member_id))

    def sync(self, request: SyncRequest) -> Deferred[SyncResult]:
        if not self.active:
            return _answered(SyncResult(E.coordinator_not_available))
        try:
            return self._syncs.sync(request)
        except Exception as error:
            self._classic.fail(request.group_id, "a SyncGroup", error)
            return _answered(SyncResult(E.unknown_server_error))

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        """Section 9; the hot path (every Heartbeat of every member), so it is answered here, in one call."""
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
        # A known member under its own instance id is what validate_member would return (a static member's
        # instance id always maps to its member id); anything else takes the full check.
        if member is None or (group_instance_id is not None and member.group_instance_id != group_instance_id):
            try:
                member = group.validate_member(member_id, group_instance_id)
            except MemberError as failure:
                return failure.error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if state is EMPTY:
            return E.unknown_member_id
        self._extend_session(member, member.session_timeout_ms)
        return E.rebalance_in_progress if state is PREPARING else E.none

    def leave(self, group_id: str, leaving: Iterable[LeavingMember]) -> LeaveResult:
        if not self.active:
            return LeaveResult(E.coordinator_not_available)
        if group_id in self._consumer.groups:
            return self._consumer_leave(group_id, leaving)
        try:
            return self._leaves.leave(group_id, leaving)
        except Exception as error:
            self._classic.fail(group_id, "a LeaveGroup", error)
            return LeaveResult(E.unknown_server_error)

    def has_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    # -- KIP-848 consumer groups (docs/spec/consumer-groups.md) ------------------------------------------

    def consumer_heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat (section 4): join, heartbeat, reconcile and leave, all in one request."""
        if not self.active:
            return ConsumerHeartbeatResult(E.coordinator_not_available)
        try:
            return self._consumer_heartbeats.heartbeat(request)
        except Exception:
            # A coordinator bug. UNKNOWN_SERVER_ERROR is fatal to librdkafka (section 12.7 trap 3), so the member is
            # told to find the coordinator again and send a full heartbeat, which rebuilds what it needs.
            self._consumer.failures += 1
            self.log.exception("ConsumerGroupHeartbeat failed", group_id=request.group_id, member_id=request.member_id)
            return ConsumerHeartbeatResult(E.coordinator_not_available)

    def consumer_heartbeat_steady(self, group_id: str, member_id: str, epoch: int, client_id: str) -> int | None:
        """The hot path: a reconciled member's beat with every optional field null. The heartbeat interval to
        answer with, or None when the full ``consumer_heartbeat`` must handle it (nothing was changed then)."""
        if not self._steady_beats_served:
            return None
        try:
            return self._steady(group_id, member_id, epoch, client_id)
        except Exception:
            self._consumer.failures += 1
            self.log.exception("ConsumerGroupHeartbeat failed", group_id=group_id, member_id=member_id)
            return None

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """One entry of ConsumerGroupDescribe (section 9.3)."""
        if not self.active:
            return ConsumerGroupDescription(group_id, E.coordinator_not_available)
        if not group_id:
            return ConsumerGroupDescription(group_id, E.invalid_group_id)
        group = self._consumer.get(group_id)
        if group is None:
            if self._classic.live(group_id) is not None:
                return ConsumerGroupDescription(
                    group_id, E.group_id_not_found, f"Group {group_id} is not a consumer group."
                )
            return ConsumerGroupDescription(group_id, E.group_id_not_found, f"Group {group_id} not found.")
        return consumer_describe.describe(group, self.topics, self.config.consumer_assignors[0])

    def _convert_to_classic(self, group_id: str) -> None:
        """An Empty consumer group becomes a classic one on a JoinGroup, keeping its offsets (section 9.4)."""
        old = self._consumer.groups[group_id]
        offsets = dict(old.offsets)
        self._consumer.delete(old, "converted to a classic group")
        self._classic.create(group_id).offsets.update(offsets)

    def _consumer_leave(self, group_id: str, leaving: Iterable[LeavingMember]) -> LeaveResult:
        """LeaveGroup against a consumer group (section 10.3): any member, by member id or by instance id."""
        group = self._consumer.groups[group_id]
        answers = []
        fenced: dict[str, tuple[ConsumerMember, str]] = {}
        for identity in leaving:
            instance_id = identity.group_instance_id
            if instance_id is None:
                member = group.members.get(identity.member_id)
                error = E.none if member is not None else E.unknown_member_id
            else:
                holder = group.static_members.get(instance_id)
                member = None if holder is None else group.members.get(holder)
                if member is None:
                    error = E.unknown_member_id
                elif identity.member_id and identity.member_id != member.member_id:
                    member, error = None, E.fenced_instance_id
                else:
                    error = E.none
            if member is not None:
                fenced.setdefault(member.member_id, (member, identity.reason or "removed by LeaveGroup"))
            answers.append(LeftMember(identity.member_id, instance_id, error))
        # Fenced together, with one epoch bump (Kafka's consumerGroupFenceMembers).
        self._consumer.fence_all(group, list(fenced.values()), "removed")
        return LeaveResult(E.none, tuple(answers))

    # -- offsets (sections 13, 14.4) ------------------------------------------------------------------------

    def commit_offsets(self, request: CommitRequest) -> PartitionErrors:
        if not self.active:
            return rejected_commit(request, E.coordinator_not_available)
        return self._offsets.commit(request)

    def fetch_offsets(
        self,
        group_id: str,
        topics: Iterable[tuple[str, Iterable[int]]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> GroupOffsets:
        # require_stable (KIP-447, transactions.md 5.4) answers UNSTABLE_OFFSET_COMMIT for pending txn offsets.
        if not self.active:
            return GroupOffsets(group_id, E.coordinator_not_available)
        return self._offsets.fetch(group_id, topics, member_id, member_epoch, require_stable)

    def commit_transactional_offsets(self, request: TxnCommitRequest) -> PartitionErrors:
        """TxnOffsetCommit's group side (transactions.md 5.1 steps 3, 5 and 6), after the TC's check: the offsets
        are staged under the producer id until ``complete_transaction``."""
        if not self.active:
            return _every_partition(request, E.coordinator_not_available)
        if not request.group_id:
            return _every_partition(request, E.invalid_group_id)
        try:
            return self._offsets.commit_transactional(request)
        except Exception:
            self._classic.failures += 1
            self.log.exception("TxnOffsetCommit failed", group_id=request.group_id)
            return _every_partition(request, E.unknown_server_error)

    def complete_transaction(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """The end marker of ``producer_id``'s transaction on these groups' offsets partitions (transactions.md
        5.3, replayEndTransactionMarker): COMMIT makes the pending offsets committed, ABORT drops them. Called by
        the transaction coordinator's completion."""
        self._offsets.transactional.complete(producer_id, group_ids, commit)

    def delete_offsets(self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]]) -> OffsetDeleteResult:
        if not self.active:
            return OffsetDeleteResult(E.coordinator_not_available)
        return self._offsets.delete(group_id, topics)

    def on_topic_deleted(self, topic: str) -> None:
        self._offsets.on_topic_deleted(topic)

    # -- describe / list / delete (section 14) ------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        if not self.active:
            return GroupDescription(group_id, E.coordinator_not_available, state="")
        return admin.describe(self._classic, group_id)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, tuple[ListedGroup, ...]]:
        if not self.active:
            return E.coordinator_not_available, ()
        states, types = tuple(states), tuple(types)
        classic = admin.list_groups(self._classic, states, types)
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        consumer: tuple[ListedGroup, ...] = ()
        if not wanted_types or "consumer" in wanted_types:
            consumer = tuple(
                consumer_describe.listed(group)
                for group in self._consumer.groups.values()
                if not wanted_states or group.state.value.lower() in wanted_states
            )
        return E.none, classic + consumer

    def delete_groups(self, group_ids: Iterable[str]) -> tuple[tuple[str, ErrorCode], ...]:
        unique = dict.fromkeys(group_ids)  # de-duplicated, first occurrence keeps its place
        if not self.active:
            return tuple((group_id, E.coordinator_not_available) for group_id in unique)
        return tuple((group_id, self._delete_group(group_id)) for group_id in unique)

    def _delete_group(self, group_id: str) -> ErrorCode:
        consumer_group = self._consumer.get(group_id)
        if consumer_group is None:
            error = admin.delete_group(self._classic, group_id)
        elif not consumer_group.is_empty():
            return E.non_empty_group  # section 8.4
        else:
            self._consumer.delete(consumer_group, "deleted by DeleteGroups")
            error = E.none
        if error is E.none:
            # transactions.md 5.5: allowed with open transactions; the tombstones remove their pending offsets, so
            # a later COMMIT marker does not bring them back.
            self._offsets.transactional.remove(group_id)
        return error

    # -- the control API: read views and verbs ---------------------------------------------------------
    # Both kinds of group, told apart by ``GroupSummary.group_type``; a consumer group's verbs are
    # ``modern/consumer/verbs.py`` (docs/spec/consumer-groups.md), a classic group's ``control_verbs.py``.

    def group_summaries(self) -> tuple[GroupSummary, ...]:
        """Every group but Dead ones: the classic groups in the order they were created, then the consumer groups."""
        default_assignor = self.config.consumer_assignors[0]
        classic = tuple(summarize(group) for group in self.groups.values() if not group.is_in(DEAD))
        return classic + tuple(summarize_consumer(group, default_assignor) for group in self.consumer_groups.values())

    def group_summary(self, group_id: str) -> GroupSummary | None:
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            return summarize_consumer(consumer_group, self.config.consumer_assignors[0])
        group = self._classic.live(group_id)
        return None if group is None else summarize(group)

    def group_detail(self, group_id: str) -> GroupDetail | None:
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            config = self.config
            return consumer_detail(
                consumer_group, self.topics, config.consumer_assignors[0], config.consumer_session_timeout_ms
            )
        group = self._classic.live(group_id)
        return None if group is None else detail(group)

    def kick(self, group_id: str, member_id: str) -> None:
        with self._failing_verb(group_id, "the kick verb"):
            if group_id in self._consumer.groups:
                self._consumer_verbs.kick(group_id, member_id)
            else:
                self._verbs.kick(group_id, member_id)

    def fence(self, group_id: str, instance_id: str) -> tuple[str, str | None]:
        """(the fenced member id, the id the instance continues under); a consumer group's static member is
        removed instead, so the second is None."""
        with self._failing_verb(group_id, "the fence verb"):
            if group_id in self._consumer.groups:
                return self._consumer_verbs.fence(group_id, instance_id), None
            return self._verbs.fence(group_id, instance_id)

    def force_rebalance(self, group_id: str) -> None:
        with self._failing_verb(group_id, "the rebalance verb"):
            if group_id in self._consumer.groups:
                self._consumer_verbs.force_rebalance(group_id)
            else:
                self._verbs.force_rebalance(group_id)

    @contextmanager
    def _failing_verb(self, group_id: str, operation: str) -> Iterator[None]:
        """A verb that raises unexpectedly fails its group, then still raises: the control API reports it.

        A consumer group is not restarted (nothing of it is parked); the failure is counted and logged, as a failed
        ConsumerGroupHeartbeat is."""
        consumer = group_id in self._consumer.groups
        try:
            yield
        except (UnknownTarget, Conflict):
            raise
        except Exception as error:
            if consumer:
                self._consumer.failures += 1
                self.log.exception(f"{operation} failed", group_id=group_id)
            else:
                self._classic.fail(group_id, operation, error)
            raise

    # -- lifecycle --------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Give up every group as Kafka does when it loses the offsets partition (section 16)."""
        self.active = False
        self._steady_beats_served = False
        self._classic.unload_all()
        self._consumer.unload_all()


def random_uuid() -> str:
    """A random (version 4) UUID as Java's UUID.toString() writes it: what ``str(uuid.uuid4())`` gives, in a
    third of its time (every member id of a formation takes one: issue 17)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the IETF variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _member_id_of(new_uuid: Callable[[], str]) -> Callable[[], str]:
    """A member id for ConsumerGroupHeartbeat v0 (the broker names the member): Kafka's Uuid in URL-safe base64."""

    def new_member_id() -> str:
        raw = new_uuid().replace("-", "")
        try:
            return base64.urlsafe_b64encode(bytes.fromhex(raw)).decode().rstrip("=")
        except ValueError:
            return raw

    return new_member_id


def _every_partition(request: TxnCommitRequest, error: ErrorCode) -> PartitionErrors:
    """A TxnOffsetCommit failure of the whole request, repeated on every partition (it has no top-level error)."""
    return tuple((topic, tuple((p.partition, error) for p in partitions)) for topic, partitions in request.topics)


def _answered(result: T) -> Deferred[T]:
    answer: Deferred[T] = Deferred()
    answer.complete(result)
    return answer
