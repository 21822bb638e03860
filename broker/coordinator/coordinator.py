"""The group coordinator: the one object the API layer and the control API talk to.

It owns every group's state. Requests arrive as method calls carrying version-independent request objects
(``messages.py``); answers are returned at once or parked as ``Deferred`` values completed later. Time comes from
the injected clock and delayed work goes through the ``Purgatory``. There is no I/O here: no sockets, no tasks,
no sleeping. The event loop is its only executor, and no method awaits, so each message runs to completion
before the next one starts.

This class is a facade, as Kafka's ``GroupCoordinatorService``/``GroupCoordinatorShard`` are over
``GroupMetadataManager`` and ``OffsetMetadataManager``: it answers for an unloaded coordinator and routes each
message to its handler: ``classic/`` and ``modern/consumer/`` for membership, ``offsets/`` for committed offsets
(every group type alike, through the ``Group`` protocol of ``group.py``), and one row per group type of ``_types``
for the control API's views and verbs. Every group lives in the one ``GroupRegistry``. Heartbeat, the hot path, is
answered here directly. Section numbers refer to ``docs/spec/group-coordinator.md``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, Change, ChangeSink
from broker.coordinator import replay
from broker.coordinator.classic import admin
from broker.coordinator.classic import durable as classic_durable
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
from broker.coordinator.group_configs import GroupConfigs
from broker.coordinator.group_type import GroupType
from broker.coordinator.lag import LogEndOffset, PartitionOffsets, group_offsets
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
    every_partition,
)
from broker.coordinator.modern.consumer import describe as consumer_describe
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.heartbeat import ConsumerHeartbeatHandler
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.referee import RefereedEventLog
from broker.coordinator.modern.consumer.restore import consumer_records
from broker.coordinator.modern.share.service import ShareCoordinator
from broker.coordinator.modern.types import StaticCatalog, TopicCatalog
from broker.coordinator.moves import PartitionMoves
from broker.coordinator.offset_store import OffsetStore
from broker.coordinator.offsets.manager import OffsetManager, rejected_commit
from broker.coordinator.registry import GroupRegistry, WrongGroupType
from broker.coordinator.type_table import TypeHandlers, type_handlers
from broker.coordinator.verb_errors import Conflict, UnknownTarget
from broker.coordinator.views import GroupDetail, GroupSummary
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
        changes: ChangeSink = NULL_CHANGES,
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
        # Issue 27: every durable change (offsets, groups) goes to ``changes`` before the answer that made it.
        self.changes = changes
        registry = GroupRegistry(OffsetStore(changes))
        self._registry = registry
        classic = ClassicGroups(config, self.clock, self.purgatory, GroupEventLog(self.events), self.log, registry)
        classic.changes = changes
        rebalancer = Rebalancer(classic)
        sessions = Sessions(classic, rebalancer)
        joins = JoinHandler(classic, rebalancer, sessions, new_member_uuid)
        self._classic = classic
        self._sessions = sessions
        self._joins = joins
        self._syncs = SyncHandler(classic, rebalancer, partition_count or (lambda topic: None))
        self._leaves = LeaveHandler(classic, rebalancer)
        consumer = ConsumerGroups(
            config,
            self.clock,
            self.purgatory,
            self.topics,
            RefereedEventLog(self.events, self.topics),
            self.log,
            registry,
            changes=changes,
        )
        self._consumer = consumer
        self._consumer_heartbeats = ConsumerHeartbeatHandler(consumer, classic, _member_id_of(new_member_uuid))
        # The steady-beat hot path reads one attribute, kept by the config setter and shutdown.
        self._steady_beats_served = config.consumer_protocol_enabled
        self._steady = self._consumer_heartbeats.steady
        self.consumer_groups: dict[str, ConsumerGroup] = consumer.groups  # every consumer group by id
        # KIP-932 share groups: their group side and their share-partitions (modern/share/service.py).
        self.group_configs = GroupConfigs(config, changes)
        self.share = ShareCoordinator(
            config, self.group_configs, self.clock, self.purgatory, self.topics, self.events, self.log, registry,
            changes=changes,
        )  # fmt: skip
        self._share_steady = self.share.heartbeat_steady  # bound once: the share-heartbeat hot path calls it
        self._offsets = OffsetManager(
            classic, {GroupType.CLASSIC: classic, GroupType.CONSUMER: consumer, GroupType.SHARE: self.share.groups}
        )
        self._types = type_handlers(
            registry, classic, ClassicVerbs(classic, rebalancer, sessions, joins, new_member_uuid), consumer,
            self.share, lambda: self.config, self.topics, self.log,
        )  # fmt: skip
        self.groups: dict[str, ClassicGroup] = (
            classic.groups
        )  # every classic group by id: the Heartbeat hot path reads it
        self._extend_session = classic.extend_session  # bound once: the Heartbeat hot path calls it
        self._moves = PartitionMoves(registry, classic, sessions, rebalancer, consumer, self.share.groups)

    @property
    def failed_operations(self) -> int:
        """Operations that raised and were failed (``ClassicGroups.fail``): each one is a coordinator bug."""
        return self._classic.failures + self._consumer.failures + self.share.failures

    def group_type(self, group_id: str) -> GroupType | None:
        """The type of a live group, None for an unknown one: group ids are one namespace."""
        group = self._registry.live(group_id)
        return None if group is None else group.group_type

    @property
    def config(self) -> GroupConfig:
        """The settings every handler reads; replacing them takes effect at the next request or timer."""
        return self._classic.config

    @config.setter
    def config(self, config: GroupConfig) -> None:
        self._classic.config = config
        self._consumer.config = config
        self.share.config = config
        self._steady_beats_served = self.active and config.consumer_protocol_enabled

    # -- membership (sections 7-10) ---------------------------------------------------------------------

    # JoinGroup, SyncGroup, LeaveGroup and the control verbs change groups: one that raises fails its group
    # (``ClassicGroups.fail``: parked answers UNKNOWN_SERVER_ERROR, the group Empty) and is itself answered
    # UNKNOWN_SERVER_ERROR, as Kafka's CoordinatorRuntime answers a write whose operation threw.

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        if not self.active:
            return _answered(JoinResult(E.coordinator_not_available, request.member_id))
        if request.group_id in self._registry.share_groups:  # "Group X is not a classic group." (share-groups 2.6)
            return _answered(JoinResult(E.group_id_not_found, request.member_id))
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
        if request.group_id in self._registry.share_groups:
            return _answered(SyncResult(E.group_id_not_found))
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
            return E.group_id_not_found if group_id in self._registry.share_groups else E.unknown_member_id
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
        if group_id in self._registry.share_groups:
            return LeaveResult(E.group_id_not_found)
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

    def share_heartbeat_steady(
        self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str
    ) -> int | None:
        """ShareGroupHeartbeat's hot path (``ShareCoordinator.heartbeat_steady``): a member's steady beat at its
        current epoch. The interval to answer with, or None when the full ``share.heartbeat`` must handle it."""
        return self._share_steady(group_id, member_id, epoch, client_id, client_host)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """One entry of ConsumerGroupDescribe (section 9.3)."""
        if not self.active:
            return ConsumerGroupDescription(group_id, E.coordinator_not_available)
        if not group_id:
            return ConsumerGroupDescription(group_id, E.invalid_group_id)
        try:
            group = self._registry.consumer(group_id)
        except WrongGroupType as wrong:
            return ConsumerGroupDescription(group_id, E.group_id_not_found, str(wrong))
        return consumer_describe.describe(group, self.topics, self.config.consumer_assignors[0])

    def _convert_to_classic(self, group_id: str) -> None:
        """An Empty consumer group becomes a classic one on a JoinGroup, keeping its offsets where they are in the
        store (section 9.4)."""
        self._consumer.delete(self._consumer.groups[group_id], "converted to a classic group")
        self._classic.create(group_id)

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
        with self.changes.atomic():  # one OffsetCommit, one journal entry (Kafka: one batch)
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
            with self.changes.atomic():
                return self._offsets.commit_transactional(request)
        except Exception:
            self._classic.failures += 1
            self.log.exception("TxnOffsetCommit failed", group_id=request.group_id)
            return _every_partition(request, E.unknown_server_error)

    def complete_transaction(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """The end marker of ``producer_id``'s transaction on these groups' offsets partitions (transactions.md
        5.3, replayEndTransactionMarker): COMMIT makes the pending offsets committed, ABORT drops them. Called by
        the transaction coordinator's completion."""
        with self.changes.atomic():
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
        """ListGroups' filters (KIP-518 states, KIP-848 types) are case-insensitive; the classic groups come first,
        each type in the order its groups were created."""
        if not self.active:
            return E.coordinator_not_available, ()
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        return E.none, tuple(
            group.listed()
            for group_type in GroupType
            if not wanted_types or group_type in wanted_types
            for group in self._registry.of_type(group_type).values()
            if not group.is_dead() and (not wanted_states or group.state_name.lower() in wanted_states)
        )

    def delete_groups(self, group_ids: Iterable[str]) -> tuple[tuple[str, ErrorCode], ...]:
        unique = dict.fromkeys(group_ids)  # de-duplicated, first occurrence keeps its place
        if not self.active:
            return tuple((group_id, E.coordinator_not_available) for group_id in unique)
        return tuple((group_id, self._delete_group(group_id)) for group_id in unique)

    def _delete_group(self, group_id: str) -> ErrorCode:
        """Section 14.3 (consumer groups 8.4): only an Empty group goes, with its offsets (the tombstones)."""
        group = self._registry.live(group_id)
        if group is None:
            return E.group_id_not_found
        error = group.validate_delete_group()
        if error is not None:
            return error
        self._types[group.group_type].keeper.delete_group(group_id, "deleted by DeleteGroups")
        self._offsets.delete_group_offsets(group_id)
        return E.none

    # -- the control API: read views and verbs ---------------------------------------------------------
    # Every group type, told apart by ``GroupSummary.group_type``; each type's views and verbs are its row of
    # ``_types`` (a classic group's verbs are ``classic/verbs.py``, a consumer group's ``modern/consumer/verbs.py``).

    def _handlers_of(self, group_id: str) -> TypeHandlers:
        """The group's row; an unknown group's is the classic one, whose verbs answer UnknownTarget."""
        return self._types[self._registry.type_of(group_id) or GroupType.CLASSIC]

    def group_summaries(self) -> tuple[GroupSummary, ...]:
        """Every group: the classic groups in the order they were created, then the consumer groups."""
        return tuple(
            self._types[group_type].summary(group_id)
            for group_type in GroupType
            for group_id, group in list(self._registry.of_type(group_type).items())
            if not group.is_dead()
        )

    def group_summary(self, group_id: str) -> GroupSummary | None:
        group = self._registry.live(group_id)
        return None if group is None else self._types[group.group_type].summary(group_id)

    def group_detail(self, group_id: str) -> GroupDetail | None:
        group = self._registry.live(group_id)
        return None if group is None else self._types[group.group_type].detail(group_id)

    def group_offsets(self, group_id: str, log_end_offset: LogEndOffset) -> tuple[PartitionOffsets, ...] | None:
        """A live group's committed offsets, log end offsets, lags and owners (``lag.py``); on demand only."""
        group = self.group_detail(group_id)
        return None if group is None else group_offsets(group, self._registry.offsets.of(group_id), log_end_offset)

    def kick(self, group_id: str, member_id: str) -> None:
        handlers = self._handlers_of(group_id)
        with self._failing_verb(handlers, group_id, "the kick verb"):
            handlers.kick(group_id, member_id)

    def fence(self, group_id: str, instance_id: str) -> tuple[str, str | None]:
        """(the fenced member id, the id the instance continues under); a consumer group's static member is
        removed instead, so the second is None."""
        handlers = self._handlers_of(group_id)
        with self._failing_verb(handlers, group_id, "the fence verb"):
            return handlers.fence(group_id, instance_id)

    def force_rebalance(self, group_id: str) -> None:
        handlers = self._handlers_of(group_id)
        with self._failing_verb(handlers, group_id, "the rebalance verb"):
            handlers.force_rebalance(group_id)

    @contextmanager
    def _failing_verb(self, handlers: TypeHandlers, group_id: str, operation: str) -> Iterator[None]:
        """A verb that raises unexpectedly fails its group (its type's ``failed``), then still raises: the control
        API reports it."""
        try:
            yield
        except (UnknownTarget, Conflict):
            raise
        except Exception as error:
            handlers.failed(group_id, operation, error)
            raise

    # -- lifecycle --------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Give up every group as Kafka does when it loses the offsets partition (section 16)."""
        self.active = False
        self._steady_beats_served = False
        self._classic.unload_all()
        self._consumer.unload_all()
        self.share.shutdown()
        self._offsets.clear()

    def coordinators_moved(
        self, partitions: Iterable[int], partition_count: int, load_delay_ms: int = 0, offline: Iterable[int] = ()
    ) -> None:
        """Issue 29: these ``__consumer_offsets`` partitions (of ``partition_count``) changed leader. Kafka's unload
        on the old node and load on the new one, for every group hashed to them (``moves.py``); ``offline`` ones
        lost their leader and are only unloaded."""
        self._moves.moved(partitions, partition_count, load_delay_ms, offline)

    # -- durable state (issue 27, cluster-and-durability.md 2.3 and 3.1) --------------------------------------

    def durable_records(self) -> Iterator[Change]:
        """What the groups and offsets hold, as the records a data directory keeps of them."""
        yield from classic_durable.group_records(self._classic.groups.values(), self._classic.stored.__contains__)
        yield from consumer_records(self._consumer)
        yield from self.share.durable_records()
        yield from self.group_configs.durable_records()
        yield from self._registry.offsets.durable_records()
        yield from self._offsets.transactional.durable_records()

    def load(self, changes: Iterable[Change]) -> None:
        """Kafka's replay and onLoaded (``replay.py``): run once, on a fresh coordinator, before the first request."""
        changes = list(changes)
        self.group_configs.load(changes)
        self.share.load(changes)
        replay.load(self._registry, self._classic, self._sessions, self._consumer, self._offsets, changes)


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
    return every_partition(((topic, (p.partition for p in partitions)) for topic, partitions in request.topics), error)


def _answered(result: T) -> Deferred[T]:
    answer: Deferred[T] = Deferred()
    answer.complete(result)
    return answer
