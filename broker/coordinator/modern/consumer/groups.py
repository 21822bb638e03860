"""The consumer groups of one coordinator, and the changes every handler makes the same way.

Kafka's ``GroupMetadataManager`` keeps these steps together for consumer groups: creating and deleting a group,
fencing a member (section 4.13), the session and rebalance timers (7.1, 7.3), refreshing the subscription
metadata and resolving regular expressions (4.9, 4.10), and computing a new target assignment (4.11).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from broker.changes import NULL_CHANGES, ChangeSink
from broker.coordinator.config import GroupConfig
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import CommitRequest, PartitionErrors
from broker.coordinator.modern.assignors import ASSIGNORS
from broker.coordinator.modern.assignors.base import GroupSpec, MemberSpec
from broker.coordinator.modern.consumer import durable
from broker.coordinator.modern.consumer.events import ConsumerGroupEventLog
from broker.coordinator.modern.consumer.group import ConsumerGroup, SubscriptionMetadata
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.regex import resolve
from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, MemberState, TopicCatalog, TopicId
from broker.coordinator.registry import GroupRegistry
from broker.timing.clock import Clock
from broker.timing.keys import consumer_rebalance_key, consumer_session_key
from broker.timing.purgatory import Purgatory

__all__ = ["ConsumerGroups"]


class ConsumerGroups:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        purgatory: Purgatory,
        topics: TopicCatalog,
        events: ConsumerGroupEventLog,
        log: structlog.typing.FilteringBoundLogger,
        registry: GroupRegistry | None = None,
        *,
        changes: ChangeSink = NULL_CHANGES,
    ) -> None:
        self.registry = registry if registry is not None else GroupRegistry()
        self.changes = changes  # issue 27: consumer.* records (modern/consumer/durable.py)
        self.stored: set[str] = set()  # the groups with records in the data directory
        self.config = config
        self.clock = clock
        self.purgatory = purgatory
        self.topics = topics
        self.events = events
        self.log = log
        self.groups = self.registry.consumer_groups  # the consumer groups of the one registry, in creation order
        self.failures = 0
        self._stored_targets: dict[str, int] = {}  # group id -> the assignment epoch whose targets were stored

    # -- groups ----------------------------------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def new_group(self, group_id: str) -> ConsumerGroup:
        """A group not registered yet (``register`` makes it one of ours)."""
        return ConsumerGroup(group_id, self.clock.now_ms(), self.registry.offsets)

    def register(self, group: ConsumerGroup) -> None:
        self.registry.add_consumer(group)
        self.events.group_created(group)

    def create(self, group_id: str) -> ConsumerGroup:
        group = self.new_group(group_id)
        self.register(group)
        return group

    def store(self, group: ConsumerGroup, member_id: str | None) -> None:
        """After a heartbeat: the group's record, the member's, and the targets (all of them when the target was
        recomputed, else the member's). Values equal to the stored ones are not written (the sink skips them)."""
        changes = self.changes
        group_id = group.group_id
        with changes.atomic():
            changes.put(durable.GROUP, (group_id,), durable.group_value(group))
            self.stored.add(group_id)
            member = None if member_id is None else group.members.get(member_id)
            if member is not None:
                changes.put(durable.MEMBER, (group_id, member.member_id), durable.member_value(member))
            if group.assignment_epoch != self._stored_targets.get(group_id):
                self._stored_targets[group_id] = group.assignment_epoch
                for target_id, target in group.targets.items():
                    changes.put(
                        durable.TARGET, (group_id, target_id), {"partitions": durable.assignment_value(target)}
                    )
            elif member is not None:
                changes.put(
                    durable.TARGET, (group_id, member.member_id),
                    {"partitions": durable.assignment_value(group.target_of(member.member_id))},
                )  # fmt: skip

    def _unstore_members(self, group: ConsumerGroup, member_ids: Iterable[str]) -> None:
        changes = self.changes
        if changes.enabled and group.group_id in self.stored:
            for member_id in member_ids:
                changes.delete(durable.MEMBER, (group.group_id, member_id))
                changes.delete(durable.TARGET, (group.group_id, member_id))

    def delete(self, group: ConsumerGroup, why: str) -> None:
        """Forgotten with its timers; its offsets stay in the store (the caller removes them if they must go)."""
        for member in list(group.members.values()):
            self.cancel_timers(group, member)
        if self.changes.enabled and group.group_id in self.stored:
            with self.changes.atomic():
                self._unstore_members(group, list(group.members))
                self.changes.delete(durable.GROUP, (group.group_id,))
            self.stored.discard(group.group_id)
            self._stored_targets.pop(group.group_id, None)
        self.registry.remove(group)
        self.events.group_deleted(group, why)

    def delete_group(self, group_id: str, why: str) -> None:
        self.delete(self.registry.consumer(group_id), why)

    def offsets_committed(self, request: CommitRequest, results: PartitionErrors) -> None:
        """The debug ``offsets_committed`` event; nothing more: a consumer group's session is kept by its
        heartbeats alone (section 8.1)."""
        events = self.events
        if events.wants_debug:
            committed = [
                (topic, commit.partition, commit.offset)
                for (topic, commits), (_, errors) in zip(request.topics, results, strict=True)
                for commit, (_, error) in zip(commits, errors, strict=True)
                if error.value == 0
            ]
            events.offsets_committed(self.groups[request.group_id], request.member_id, request.generation_id, committed)

    def offsets_deleted(self, group_id: str, deleted: list[tuple[str, int]]) -> None:
        self.events.offsets_deleted(self.groups[group_id], deleted)

    def offsets_expired(self, group_id: str) -> None:
        self.events.offsets_expired(self.groups[group_id])

    def note_state(self, group: ConsumerGroup) -> None:
        """Say so when the derived state (section 3.4) moved since the last change."""
        state = group.state
        if state is not group.last_state:
            old, group.last_state = group.last_state, state
            group.state_timestamp_ms = self.clock.now_ms()
            self.events.state_changed(group, old, state)

    def unload_all(self) -> None:
        """Section 7.7: nothing is sent to members; they learn NOT_COORDINATOR on their next heartbeat."""
        for group in self.groups.values():
            for member in group.members.values():
                self.cancel_timers(group, member)
        self.registry.remove_all(GroupType.CONSUMER)

    # -- fencing (section 4.13) ------------------------------------------------------------------------------

    def fence(self, group: ConsumerGroup, member: ConsumerMember, cause: str, reason: str) -> None:
        """Remove the member, free its partitions and bump the group epoch by one; the target is recomputed by
        the next heartbeat of any member (the group is Assigning until then)."""
        self.fence_all(group, ((member, reason),), cause)

    def fence_all(self, group: ConsumerGroup, members: Iterable[tuple[ConsumerMember, str]], cause: str) -> None:
        """Fence several members of one request together (GMM consumerGroupFenceMembers: LeaveGroup removing
        many members, section 10.3): each is removed as ``fence`` does, and the group epoch moves by one for all."""
        last: ConsumerMember | None = None
        gone = []
        for member, reason in members:
            self.cancel_timers(group, member)
            group.remove_member(member.member_id)
            self.events.member_left(group, member, cause, reason)
            gone.append(member.member_id)
            last = member
        if last is None:
            return
        self.bump_epoch(group, f"member_{cause}", last.member_id)
        if group.members:
            self.refresh_metadata(group, force=True)
        self.note_state(group)
        if self.changes.enabled and group.group_id in self.stored:
            with self.changes.atomic():
                self._unstore_members(group, gone)
                self.store(group, None)

    def fence_silently(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Drop a static member being replaced by its successor (section 4.7): no epoch bump, timers gone."""
        self.cancel_timers(group, member)
        group.remove_member(member.member_id)
        self._unstore_members(group, (member.member_id,))

    def bump_epoch(self, group: ConsumerGroup, cause: str, member_id: str | None) -> None:
        group.group_epoch += 1
        self.events.epoch_bumped(group, cause, member_id)

    def cancel_timers(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self.purgatory.cancel(consumer_session_key(group.group_id, member.member_id))
        self.purgatory.cancel(consumer_rebalance_key(group.group_id, member.member_id))
        member.session = None
        member.revoking_since_epoch = None

    # -- timers (sections 7.1, 7.3) --------------------------------------------------------------------------

    def extend_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout_ms = self.config.consumer_session_timeout_ms
        session = member.session
        if session is not None and self.purgatory.postpone(session, timeout_ms):
            return
        group_id, member_id = group.group_id, member.member_id
        member.session = self.purgatory.schedule(
            consumer_session_key(group_id, member_id), timeout_ms, lambda: self._session_expired(group_id, member_id)
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        member.session = None
        self.events.member_expired(group, member, "session", self.config.consumer_session_timeout_ms)
        self.fence(group, member, "expired", "session timeout")

    def track_revocation(self, group: ConsumerGroup, member: ConsumerMember, rewritten: bool) -> None:
        """Section 4.12: entering UNREVOKED_PARTITIONS (or being rewritten in it) arms the rebalance timer with
        the member's RebalanceTimeoutMs; any other state cancels it."""
        key = consumer_rebalance_key(group.group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            if member.revoking_since_epoch is not None:
                self.purgatory.cancel(key)
                member.revoking_since_epoch = None
            return
        if member.revoking_since_epoch is not None and not rewritten:
            return
        epoch = member.member_epoch
        member.revoking_since_epoch = epoch
        group_id, member_id = group.group_id, member.member_id
        self.purgatory.schedule(
            key, member.rebalance_timeout_ms, lambda: self._revocation_expired(group_id, member_id, epoch)
        )

    def _revocation_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or member.member_epoch != epoch:
            return
        member.revoking_since_epoch = None
        self.events.member_expired(group, member, "rebalance", member.rebalance_timeout_ms)
        self.fence(group, member, "expired", "did not revoke its partitions within its rebalance timeout")

    # -- subscriptions (sections 4.9, 4.10) ------------------------------------------------------------------

    def refresh_metadata(
        self, group: ConsumerGroup, *, force: bool = False, describable: Callable[[str], bool] | None = None
    ) -> bool:
        """Recompute the regex resolutions and the subscription metadata if the catalog changed (or ``force``);
        True when the metadata differs from the stored one (the caller bumps the group epoch). ``describable``:
        the topics the heartbeat's member may DESCRIBE (ACLs, Kafka 4.0's refreshRegularExpressions), None all."""
        version = self.topics.version
        if not force and version == group.metadata_version:
            return False
        names = [name for name in self.topics.names() if describable is None or describable(name)]
        group.resolved_regexes = {
            regex: resolve(regex, names)
            for regex in {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        }
        group.metadata_version = version
        metadata = self.subscription_metadata(group)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def subscription_metadata(self, group: ConsumerGroup) -> SubscriptionMetadata:
        metadata: SubscriptionMetadata = {}
        for name in sorted(group.all_subscribed_names()):
            info = self.topics.by_name(name)
            if info is not None and info.partitions > 0:
                metadata[name] = (info.topic_id, info.partitions)
        return metadata

    # -- the target assignment (section 4.11) ----------------------------------------------------------------

    def compute_target(self, group: ConsumerGroup) -> None:
        """Run the group's assignor over every member and store the new target at the group epoch.

        This runs once per heartbeat that finds the group epoch ahead (every join of a forming group), so its cost
        is per member and per *moved* partition: members with the same subscription share one topic set, and what
        moved is read from the members whose target changed, not from every partition of the group.
        """
        assignor_name = group.preferred_assignor(self.config.consumer_assignors[0])
        metadata = group.subscription_metadata
        # Topic-id sets by subscription, kept while the metadata is the same object, so that an unchanged member's
        # cached spec is recognised by identity.
        if group.topic_sets_metadata is not metadata:
            group.topic_sets = {}
            group.topic_sets_metadata = metadata
        topic_ids = group.topic_sets
        specs = []
        old_targets = group.targets
        cached = group.member_specs
        fresh: dict[str, MemberSpec] = {}
        for member_id, member in group.members.items():
            names = group.subscribed_names(member)
            topics = topic_ids.get(names)
            if topics is None:
                topics = topic_ids[names] = frozenset(metadata[name][0] for name in names if name in metadata)
            target = old_targets.get(member_id, EMPTY_ASSIGNMENT)
            # A member whose topics, target and identity did not change keeps its spec: most of them, when one
            # member joins a large group (a frozen dataclass costs more to build than the rest of its turn).
            member_spec = cached.get(member_id)
            if (
                member_spec is None
                or member_spec.target is not target
                or member_spec.topics is not topics
                or member_spec.instance_id != member.instance_id
                or member_spec.rack_id != member.rack_id
            ):
                member_spec = MemberSpec(member_id, member.instance_id, member.rack_id, topics, target)
            fresh[member_id] = member_spec
            specs.append(member_spec)
        group.member_specs = fresh
        counts = {topic_id: partitions for topic_id, partitions in metadata.values()}
        homogeneous = len({member_spec.topics for member_spec in specs}) <= 1
        spec = GroupSpec(tuple(specs), counts, homogeneous=homogeneous)
        result = ASSIGNORS[assignor_name].assign(spec)
        targets: dict[str, Assignment] = {}
        lost: dict[tuple[TopicId, int], str] = {}
        gained: dict[tuple[TopicId, int], str] = {}
        for member_id in group.members:
            new = result.get(member_id, EMPTY_ASSIGNMENT)
            old = old_targets.get(member_id, EMPTY_ASSIGNMENT)
            if new == old:
                targets[member_id] = old
                continue
            frozen = {topic_id: frozenset(partitions) for topic_id, partitions in new.items() if partitions}
            targets[member_id] = frozen
            for topic_id in old.keys() | frozen.keys():
                before = old.get(topic_id, _NOTHING)
                after = frozen.get(topic_id, _NOTHING)
                for partition in before - after:
                    lost[(topic_id, partition)] = member_id
                for partition in after - before:
                    gained[(topic_id, partition)] = member_id
        moved: list[tuple[str, int, str | None, str | None]] = []
        names_of: dict[TopicId, str] = {}
        for key in lost.keys() | gained.keys():
            topic_id = key[0]
            name = names_of.get(topic_id)
            if name is None:
                info = self.topics.by_id(topic_id)
                name = names_of[topic_id] = info.name if info is not None else str(topic_id)
            moved.append((name, key[1], lost.get(key), gained.get(key)))
        moved.sort(key=lambda move: (move[0], move[1]))
        group.targets = targets
        group.assignment_epoch = group.group_epoch
        group.recount()
        self.events.target_computed(group, assignor_name, moved)


_NOTHING: frozenset[int] = frozenset()
