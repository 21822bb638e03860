"""What a coordinator move does to the groups (issue 29; cluster-and-durability.md 2.1-2.6).

Kafka's ``CoordinatorRuntime`` unloads a ``__consumer_offsets`` partition from the node that stops leading it and
loads it on the new leader. Unloading cancels every timer of the partition and runs
``GroupMetadataManager.onUnloaded``: a classic group goes Dead, its parked JoinGroups (PreparingRebalance) and
SyncGroups (CompletingRebalance, Stable) answered NOT_COORDINATOR; a consumer or share group's members are told
nothing and learn NOT_COORDINATOR from their next heartbeat. Loading replays the partition's records and runs
``onLoaded``: a classic group comes back as its last GroupMetadata record says (Stable with that generation,
protocol, leader, member ids and assignments, or Empty), a consumer group with every epoch and assignment; every
member's session (and a revoking consumer member's rebalance timer) starts afresh with its full timeout.

The nodes of this process share one coordinator, so the state does not travel: a group that is what its records
say (a classic group Stable or Empty, every consumer and share group, whose every change is a record) keeps its
objects; a classic group in a rebalance, which has moved on from its record, is put back to that record
(``ClassicGroup.record``), exactly what a replay would rebuild; a classic group that never had one (its first
rebalance) keeps nothing but its committed offsets, as Kafka's offset replay recreates an Empty group for them,
and is forgotten without any. Between the unload and the load (a load delay: the routing answers
COORDINATOR_LOAD_IN_PROGRESS meanwhile) no timer of the partition runs. No I/O: the purgatory times the load.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from kio.schema.errors import ErrorCode

from broker.cluster.hashing import partition_for
from broker.coordinator.classic import durable as classic_durable
from broker.coordinator.classic.events import Cause
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.sessions import Sessions
from broker.coordinator.classic.state import DEAD, EMPTY, STABLE
from broker.coordinator.messages import JoinResult, SyncResult
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.share.groups import ShareGroups
from broker.coordinator.modern.types import MemberState
from broker.coordinator.registry import GroupRegistry
from broker.timing.keys import coordinator_load_key, heartbeat_key, share_session_key

E = ErrorCode

__all__ = ["PartitionMoves"]


class PartitionMoves:
    """Unload and load of ``__consumer_offsets`` partitions, for the groups hashed to them."""

    def __init__(
        self,
        registry: GroupRegistry,
        classic: ClassicGroups,
        sessions: Sessions,
        rebalancer: Rebalancer,
        consumer: ConsumerGroups,
        share: ShareGroups,
    ) -> None:
        self._registry = registry
        self._classic = classic
        self._sessions = sessions
        self._rebalancer = rebalancer
        self._consumer = consumer
        self._share = share
        self._purgatory = classic.purgatory
        self._log = classic.log

    def groups_of(self, partitions: Iterable[int], partition_count: int) -> list[str]:
        """The ids of the groups hashed to ``partitions`` (GroupCoordinatorService.partitionFor), any type."""
        wanted = set(partitions)
        return [group_id for group_id in self._registry.groups if partition_for(group_id, partition_count) in wanted]

    def moved(
        self, partitions: Iterable[int], partition_count: int, load_delay_ms: int = 0, offline: Iterable[int] = ()
    ) -> None:
        """The partitions changed leader: unloaded from the old one, loaded on the new one after ``load_delay_ms``
        (what the routing answers COORDINATOR_LOAD_IN_PROGRESS for meanwhile). ``offline`` ones have no leader
        left: unloaded only, loaded when a node leads them again (a move of its own)."""
        self.unload(offline, partition_count)
        partitions = sorted(set(partitions))
        self.unload(partitions, partition_count)
        if load_delay_ms <= 0:
            self.load(partitions, partition_count)
            return
        for partition in partitions:
            self._purgatory.schedule(
                coordinator_load_key(partition), load_delay_ms, partial(self.load, (partition,), partition_count)
            )

    # -- unload (CoordinatorRuntime's unload, GroupMetadataManager.onUnloaded) ---------------------------------

    def unload(self, partitions: Iterable[int], partition_count: int) -> None:
        partitions = list(partitions)
        if not partitions:
            return
        for partition in partitions:
            self._purgatory.cancel(coordinator_load_key(partition))  # a load still pending from an earlier move
        for group_id in self.groups_of(partitions, partition_count):
            try:
                self._unload_group(group_id)
            except Exception as error:
                self._failed(group_id, "its unload", error)

    def _unload_group(self, group_id: str) -> None:
        registry = self._registry
        classic = registry.classic_groups.get(group_id)
        if classic is not None:
            self._unload_classic(classic)
            return
        consumer = registry.consumer_groups.get(group_id)
        if consumer is not None:
            for member in consumer.members.values():
                self._consumer.cancel_timers(consumer, member)
            return
        share = registry.share_groups.get(group_id)
        if share is not None:
            for member_id in share.members:
                self._purgatory.cancel(share_session_key(group_id, member_id))

    def _unload_classic(self, group: ClassicGroup) -> None:
        """onUnloaded: parked JoinGroups and SyncGroups answered NOT_COORDINATOR with the member's id, every timer
        of the group cancelled; then what a replay of its records would bring back (``_reload``)."""
        if group.is_in(DEAD):
            return
        purgatory = self._purgatory
        for member in group.members.values():
            purgatory.cancel(member.heartbeat_key)
            # Kafka answers the JoinGroups of a PreparingRebalance group and the SyncGroups of a Completing or
            # Stable one: no other state parks either, so answering whatever is parked is the same table.
            join = group.take_join(member)
            if join is not None:
                join.complete(JoinResult(error=E.not_coordinator, member_id=member.member_id))
            sync = group.take_sync(member)
            if sync is not None:
                sync.complete(SyncResult(E.not_coordinator))
        purgatory.cancel(group.join_key)
        purgatory.cancel(group.sync_key)
        for member_id in group.pending_members:
            purgatory.cancel(heartbeat_key(group.group_id, member_id))
        group.pending_members.clear()  # KIP-394 ids are not in any record
        group.not_yet_synced.clear()  # nor is who has not synced yet: no sync deadline after a load
        if group.recorded and group.record is None and group.state in (STABLE, EMPTY):
            return  # the group is what its last record says: the replay would rebuild it as it is
        self._reload(group)

    def _reload(self, group: ClassicGroup) -> None:
        """The group as its last GroupMetadata record says (the rebalance in flight forgotten, as a replay forgets
        it: cluster-and-durability.md 2.3), in place; without a record, an Empty group if it has offsets."""
        state_before = group.state
        before = (group.state.value, group.generation_id, len(group.members))
        record = group.record
        group.forget_members()
        group.new_member_added = False
        if record is None and not group.offsets:
            self._log.info("group forgotten by a coordinator move: it had no record", group_id=group.group_id)
            self._classic.delete(group, "its coordinator moved before its first generation was stored")
            return
        group.previous_state, group.state = DEAD, EMPTY  # replay: as stored, not a transition
        group.state_timestamp_ms = self._classic.clock.now_ms()
        if record is None:
            group.generation_id = 0
            group.protocol_type = group.protocol_name = None
            group.subscribed_topics = frozenset()
        else:
            classic_durable.rebuild(group, record)
            if not group.members:
                group.subscribed_topics = frozenset()
            group.stored()
        # Not a transition of the state table (Kafka's group went Dead and a new one was replayed): the event says
        # where the group was and where it is, so that whoever follows the states stays right.
        group.previous_state = state_before
        self._classic.events.state_changed(group)
        self._log.info(
            "group reloaded from its last record by a coordinator move",
            group_id=group.group_id, before=before,
            after=(group.state.value, group.generation_id, len(group.members)),
        )  # fmt: skip

    # -- load (GroupMetadataManager.onLoaded) -------------------------------------------------------------------

    def load(self, partitions: Iterable[int], partition_count: int) -> None:
        """Every member of the partitions' groups gets a fresh session with its full timeout, and a consumer
        member revoking partitions a fresh rebalance timer (K§7.7); a classic group over ``group.max.size``
        rebalances at once, so that its members can commit before it is trimmed (onLoaded)."""
        for group_id in self.groups_of(partitions, partition_count):
            try:
                self._load_group(group_id)
            except Exception as error:
                self._failed(group_id, "its load", error)

    def _failed(self, group_id: str, operation: str, error: Exception) -> None:
        """A group whose unload or load raised (a coordinator bug): a classic one starts over Empty with its parked
        answers given (``ClassicGroups.fail``), any other is logged and counted; the other groups still move."""
        if group_id in self._registry.classic_groups:
            self._classic.fail(group_id, operation, error)
        else:
            self._consumer.failures += 1
            self._log.error("group move failed", group_id=group_id, operation=operation, exc_info=error)

    def _load_group(self, group_id: str) -> None:
        registry = self._registry
        classic = registry.classic_groups.get(group_id)
        if classic is not None:
            if classic.is_in(DEAD):
                return
            for classic_member in classic.members.values():
                self._sessions.start(classic, classic_member, classic_member.session_timeout_ms)
            max_size = self._classic.config.max_size
            if len(classic.members) > max_size and classic.can_rebalance:
                reason = f"freshly-loaded group {group_id} is over capacity {max_size}"
                self._rebalancer.prepare(classic, Cause("over_capacity", None, reason))
            return
        consumer = registry.consumer_groups.get(group_id)
        if consumer is not None:
            for member in consumer.members.values():
                self._consumer.extend_session(consumer, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._consumer.track_revocation(consumer, member, rewritten=True)
            return
        share = registry.share_groups.get(group_id)
        if share is not None:
            for share_member in share.members.values():
                self._share.arm_session(share, share_member)
