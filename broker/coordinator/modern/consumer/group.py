"""A consumer group: members, epochs, the target assignment and who owns what (Kafka's ``ConsumerGroup``,
sections 3.1, 3.4 and 3.5 of ``docs/spec/consumer-groups.md``).

The data and the rules that belong to the data; what happens when (requests, timers) is ``heartbeat.py``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.coordinator.group import OffsetExpiration
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import ListedGroup
from broker.coordinator.modern.assignors.base import MemberSpec
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, TopicId
from broker.coordinator.offset_store import CommittedOffset, Key, OffsetStore

__all__ = ["ConsumerGroup"]

# Subscription metadata (section 4.10): per subscribed topic that exists, its id and partition count.
SubscriptionMetadata = dict[str, tuple[TopicId, int]]


class ConsumerGroup:
    group_type = GroupType.CONSUMER
    kept_without_offsets = False

    def __init__(self, group_id: str, now_ms: int, store: OffsetStore | None = None) -> None:
        self.group_id = group_id
        self._store = store if store is not None else OffsetStore()
        self.created_ms = now_ms
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.targets: dict[str, Assignment] = {}  # member id -> target assignment
        # (topic id, partition) -> the member that owns it, assigned or pending revocation (section 3.5).
        self.owners: dict[tuple[TopicId, int], str] = {}
        self.subscription_metadata: SubscriptionMetadata = {}
        self.metadata_version = -1  # the catalog version the subscription metadata was computed at
        self.resolved_regexes: dict[str, frozenset[str]] = {}  # regex -> topic names, at metadata_version
        # Members not reconciled to the assignment epoch: the state is read after every change, and scanning every
        # member each time made a forming group quadratic. Kept by ``refresh`` and ``recount``.
        self.unreconciled: set[str] = set()
        # The assignor's view of each member at the last target computation, reused while it still holds.
        self.member_specs: dict[str, MemberSpec] = {}
        self.topic_sets: dict[frozenset[str], frozenset[TopicId]] = {}
        self.topic_sets_metadata: SubscriptionMetadata | None = None
        self.state_timestamp_ms = now_ms
        self.last_state = ConsumerGroupState.EMPTY

    # -- state (section 3.4) ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if self.unreconciled:
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def refresh(self, member: ConsumerMember) -> None:
        """Note whether the member is reconciled to the assignment epoch: after every change of its epoch or state."""
        if member.is_reconciled_to(self.assignment_epoch):
            self.unreconciled.discard(member.member_id)
        else:
            self.unreconciled.add(member.member_id)

    def recount(self) -> None:
        """After the assignment epoch moved: every member's standing may have changed."""
        epoch = self.assignment_epoch
        self.unreconciled = {m.member_id for m in self.members.values() if not m.is_reconciled_to(epoch)}

    def is_empty(self) -> bool:
        return not self.members

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_dead(self) -> bool:
        return False  # a consumer group is removed at once (section 3.4: Dead is never stored)

    # -- members and ownership (section 3.5) -----------------------------------------------------------------

    def add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)
        self.refresh(member)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.unreconciled.discard(member_id)
        self._disown(member)
        self.targets.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def set_assignment(self, member: ConsumerMember, assigned: Assignment, pending: Assignment) -> None:
        self._disown(member)
        member.assigned = assigned
        member.pending_revocation = pending
        self._own(member)

    def owned_by_other(self, member_id: str) -> _OwnedByOther:
        return _OwnedByOther(self.owners, member_id)

    def _own(self, member: ConsumerMember) -> None:
        owners = self.owners
        member_id = member.member_id
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    owners[(topic_id, partition)] = member_id

    def _disown(self, member: ConsumerMember) -> None:
        owners = self.owners
        member_id = member.member_id
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if owners.get((topic_id, partition)) == member_id:
                        del owners[(topic_id, partition)]

    def target_of(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, EMPTY_ASSIGNMENT)

    # -- subscriptions ---------------------------------------------------------------------------------------

    def subscribed_names(self, member: ConsumerMember) -> frozenset[str]:
        """The member's effective subscription: names, and the topics its regex resolved to (section 4.9)."""
        regex = member.subscribed_topic_regex
        if not regex:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | self.resolved_regexes.get(regex, frozenset())

    def all_subscribed_names(self) -> frozenset[str]:
        names: set[str] = set()
        for member in self.members.values():
            names |= self.subscribed_names(member)
        return frozenset(names)

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in self.subscribed_names(member) for member in self.members.values())

    def preferred_assignor(self, default: str) -> str:
        """Section 6.2: the assignor most members asked for (ties: the smallest name), else the default."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor is not None)
        if not counts:
            return default
        best = max(counts.values())
        return min(name for name, count in counts.items() if count == best)

    # -- what the offsets manager asks (Kafka's ConsumerGroup.validateOffsetCommit and friends, section 8) ----

    @property
    def offsets(self) -> Mapping[Key, CommittedOffset]:
        return self._store.of(self.group_id)

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode | None:
        """Section 8.1."""
        if generation < 0 and self.is_empty():
            return None  # admin tools, assign()-only consumers
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if api_version < 9:
            return ErrorCode.unsupported_version
        if generation != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        """Transactional: STALE_MEMBER_EPOCH is answered as ILLEGAL_GENERATION and there is no OffsetCommit-v9
        version check (section 8.1)."""
        if generation < 0 and self.is_empty():
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.illegal_generation if generation != member.member_epoch else None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """Section 8.2: OffsetFetch v9 names the member; an admin (null member, epoch < 0) is not checked."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None

    def validate_offset_delete(self) -> ErrorCode | None:
        return None  # in every state (section 8.3), but never a topic a member subscribes to

    def validate_delete_group(self) -> ErrorCode | None:
        return None if self.is_empty() else ErrorCode.non_empty_group  # section 8.4

    def offset_expiration(self) -> OffsetExpiration | None:
        """Section 8.5: offsets of topics no member subscribes to expire from their commit, whatever the state."""
        return _UNSUBSCRIBED_FROM_COMMIT

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, CONSUMER_PROTOCOL_TYPE, self.state.value, GroupType.CONSUMER)


_UNSUBSCRIBED_FROM_COMMIT = OffsetExpiration(keep_subscribed=True)


class _OwnedByOther:
    """``owned_by_other(topic, partition)`` for one member: a callable without a closure per partition check."""

    __slots__ = ("_member_id", "_owners")

    def __init__(self, owners: dict[tuple[TopicId, int], str], member_id: str) -> None:
        self._owners = owners
        self._member_id = member_id

    def __call__(self, topic_id: TopicId, partition: int) -> bool:
        owner = self._owners.get((topic_id, partition))
        return owner is not None and owner != self._member_id
