"""The classic group: data and the rules that belong to the data (Kafka's ``ClassicGroup``).

What happens *when* (requests, timers, parked answers) lives in the handlers of this package; this module only
knows what a group is, who may speak for a member, and which state changes are legal (``state.py``).
Section numbers refer to ``docs/spec/group-coordinator.md`` (4: the data model, 5: the states).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from broker.changes import b64
from broker.coordinator.classic.member import Member, Protocols, shared, shared_protocols
from broker.coordinator.classic.state import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
)
from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, ConsumerProtocolError, decode_subscription
from broker.coordinator.group import OffsetExpiration
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import JoinResult, ListedGroup, SyncResult
from broker.coordinator.offset_store import CommittedOffset, Key, OffsetStore
from broker.timing.deferred import Deferred
from broker.timing.keys import GroupKey, heartbeat_key, join_key, sync_key

# Kafka's canRebalance: the states a rebalance may start from are those PreparingRebalance may follow.
_CAN_REBALANCE = VALID_PREVIOUS_STATES[PREPARING]


def discard(ids: set[str], member_id: str) -> None:
    """``ids.discard(member_id)``, releasing the table once empty: a set never shrinks as it empties, and a group's
    KIP-394 pending ids or not-yet-synced ids fill one for all its members at once (8 KB for 100; issue 17)."""
    ids.discard(member_id)
    if not ids:
        ids.clear()


class MemberError(Exception):
    """A request named a member the group does not recognise (``ClassicGroup.validateMember``)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


class ClassicGroup:
    group_type = GroupType.CLASSIC
    kept_without_offsets = False

    def __init__(self, group_id: str, now_ms: int, store: OffsetStore | None = None) -> None:
        self.group_id = group_id
        self._store = store if store is not None else OffsetStore()
        self.state = EMPTY
        self.previous_state = DEAD
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, awaiting their second JoinGroup.
        self.pending_members: set[str] = set()
        # Members of the current generation that have not sent their SyncGroup (Kafka's pendingSyncMembers).
        self.not_yet_synced: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.awaiting_join_count = 0
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.join_key: GroupKey = join_key(group_id)
        self.sync_key: GroupKey = sync_key(group_id)
        # For events only: when the current rebalance began, and the last generation's decoded assignment.
        self.rebalance_started_ms = now_ms
        self.assignment_view: dict[str, dict[str, list[int]]] | None = None
        # Kafka's last GroupMetadata record of the group (cluster-and-durability.md 2.3): ``recorded`` once one
        # was written (``ClassicGroups.store``); ``record`` its content, materialised only from the first change
        # after it (a rebalance moving on from it), None while the group is still what it says. A coordinator move
        # reloads a rebalancing group from it, as Kafka's new coordinator replays the log (coordinator/moves.py).
        self.recorded = False
        self.record: dict[str, Any] | None = None

    # -- state -----------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.is_in(EMPTY)

    def is_dead(self) -> bool:
        return self.is_in(DEAD)

    @property
    def can_rebalance(self) -> bool:
        return self.state in _CAN_REBALANCE

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(f"group {self.group_id!r} cannot go from {self.state.value} to {state.value}")
        if state is PREPARING:
            self.leave_record()
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def leave_record(self) -> None:
        """About to change what its last record says: keep that record's content (a Stable or Empty recorded group
        is exactly its record, so nothing is copied before). Called by every change of members or generation."""
        if self.recorded and self.record is None and (self.state is STABLE or self.state is EMPTY):
            self.record = record_value(self)

    def stored(self) -> None:
        """Its record was just written: the group is what it says again."""
        self.recorded = True
        self.record = None

    # -- members -----------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Member:
        """The member a request speaks for; a static member's instance id must still map to this member id."""
        if group_instance_id is not None:
            static_id = self.static_members.get(group_instance_id)
            if static_id is None:
                raise MemberError(ErrorCode.unknown_member_id)
            if static_id != member_id:
                raise MemberError(ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            raise MemberError(ErrorCode.unknown_member_id)
        return member

    def add_member(self, member: Member, join: Deferred[JoinResult] | None) -> None:
        self.leave_record()
        if member.group_instance_id is not None and member.group_instance_id in self.static_members:
            raise ValueError(f"instance {member.group_instance_id!r} is already a member")
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self._count_protocols(member.protocols, 1)
        if join is not None:
            member.join_answer = join
            self.awaiting_join_count += 1
        discard(self.pending_members, member.member_id)

    def adopt_member_id(self, member: Member, member_id: str) -> None:
        """Make an equal ``member_id`` object the member's own, if it was the last added (the order is kept)."""
        if member_id != member.member_id or next(reversed(self.members), None) != member_id:
            return
        del self.members[member_id]
        self.members[member_id] = member
        if self.leader_id == member_id:
            self.leader_id = member_id
        member.member_id = member_id

    def remove_member(self, member_id: str) -> Member | None:
        if member_id not in self.members:
            return None
        self.leave_record()
        member = self.members.pop(member_id)
        self._count_protocols(member.protocols, -1)
        if member.join_answer is not None:
            self.awaiting_join_count -= 1
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        discard(self.pending_members, member_id)
        discard(self.not_yet_synced, member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join: Deferred[JoinResult] | None,
    ) -> None:
        self.leave_record()
        self._count_protocols(member.protocols, -1)
        self._count_protocols(protocols, 1)
        member.protocols = shared_protocols(protocols)
        member.rebalance_timeout_ms = shared(rebalance_timeout_ms)
        member.session_timeout_ms = shared(session_timeout_ms)
        if join is not None and member.join_answer is None:
            self.awaiting_join_count += 1
        elif join is None and member.join_answer is not None:
            self.awaiting_join_count -= 1
        member.join_answer = join

    def take_join(self, member: Member) -> Deferred[JoinResult] | None:
        """Detach the member's parked JoinGroup, keeping the awaiting count right."""
        join = member.join_answer
        if join is not None:
            member.join_answer = None
            self.awaiting_join_count -= 1
        return join

    def take_sync(self, member: Member) -> Deferred[SyncResult] | None:
        """Detach the member's parked SyncGroup, so that exactly one path answers it."""
        sync = member.sync_answer
        member.sync_answer = None
        return sync

    def forget_members(self) -> list[Member]:
        """Drop every member and all bookkeeping about them at once; returns them (their answers still parked).

        Only for a group whose bookkeeping cannot be trusted any more (``ClassicGroups.fail``): it does not
        rely on the counters being right, it resets them.
        """
        self.leave_record()
        members = list(self.members.values())
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.not_yet_synced.clear()
        self.supported_protocols.clear()
        self.awaiting_join_count = 0
        self.leader_id = None
        return members

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        self.leave_record()
        member = self.members.pop(old_id)
        member.member_id = new_id
        member.heartbeat_key = heartbeat_key(self.group_id, new_id)
        member.expiry = None  # that deadline is the old id's; the new id gets its own
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        # Kafka leaves the old id in pendingSyncMembers; so do we (it only matters to the sync deadline).
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_answer is None]

    # -- protocols ---------------------------------------------------------------

    def _count_protocols(self, protocols: Protocols, delta: int) -> None:
        """Kafka's incSupportedProtocols/decSupportedProtocols: members supporting each protocol name."""
        supported = self.supported_protocols
        for name, _ in protocols:
            supported[name] += delta
            if supported[name] <= 0:
                del supported[name]

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.is_in(EMPTY):
            return bool(protocol_type) and bool(names)
        member_count = len(self.members)
        return protocol_type == self.protocol_type and any(
            self.supported_protocols.get(name, 0) == member_count for name in names
        )

    def candidate_protocols(self) -> set[str]:
        count = len(self.members)
        return {name for name, supporters in self.supported_protocols.items() if supporters == count}

    def select_protocol(self, members: list[Member] | None = None) -> str:
        voters = list(self.members.values()) if members is None else members
        if not voters:
            raise ValueError("cannot select a protocol for a group without members")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(member.vote(candidates) for member in voters)
        # most votes wins; ties go to the protocol voted first (Kafka: hash order, any is fine)
        return votes.most_common(1)[0][0]

    def update_subscribed_topics(self) -> None:
        """Topics the group consumes, from the members' ConsumerProtocol subscriptions (None: unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            self.subscribed_topics = None if self.members else frozenset()
            return
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
            except (KeyError, ConsumerProtocolError):
                self.subscribed_topics = None
                return
        self.subscribed_topics = frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        if self.is_in(EMPTY):
            return False
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    # -- generations ---------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.update_subscribed_topics()
            self.transition_to(COMPLETING, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = frozenset()
            self.transition_to(EMPTY, now_ms)
        self.not_yet_synced.clear()

    # -- what the offsets manager asks (Kafka's ClassicGroup.validateOffsetCommit and friends) -------------------

    @property
    def offsets(self) -> Mapping[Key, CommittedOffset]:
        return self._store.of(self.group_id)

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode | None:
        """Section 13.1; a commit that passes from a member of a Stable or PreparingRebalance group also extends its
        session (``ClassicGroups.offsets_committed``)."""
        if self.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.is_in(EMPTY):
            return None
        if generation < 0 and not member_id and instance_id is None:
            return ErrorCode.unknown_member_id  # only members may commit into an active group
        error = self._member_generation_error(member_id, instance_id, generation)
        if error is None and self.is_in(COMPLETING):
            return ErrorCode.rebalance_in_progress
        return error

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        """transactions.md 5.1 step 5: no REBALANCE_IN_PROGRESS in any state, and the session is not refreshed."""
        if self.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.is_in(EMPTY):
            return None
        if generation >= 0 or member_id or instance_id is not None:
            return self._member_generation_error(member_id, instance_id, generation)
        return None  # an anonymous (v0-2) commit into a non-empty group is accepted (5.6)

    def _member_generation_error(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        """The member check and then the generation check both offset commits make (validateOffsetCommit's order)."""
        try:
            self.validate_member(member_id, instance_id)
        except MemberError as failure:
            return failure.error
        return ErrorCode.illegal_generation if generation != self.generation_id else None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        return None  # OffsetFetch names no member before v9, and a classic group does not check it (13.3)

    def validate_offset_delete(self) -> ErrorCode | None:
        """Section 14.4: an Empty group, or one using the consumer protocol (only unsubscribed topics go)."""
        if not self.is_in(EMPTY) and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.non_empty_group
        return None

    def validate_delete_group(self) -> ErrorCode | None:
        """Only an Empty group may go: members must leave first (section 14.3)."""
        return None if self.is_in(EMPTY) else ErrorCode.non_empty_group

    def offset_expiration(self) -> OffsetExpiration | None:
        """Section 13.2: a simple group's offsets count from their commit, an Empty group's from when it emptied, a
        Stable consumer-protocol group's unsubscribed topics from their commit; any other group keeps them."""
        if not self.protocol_type:
            return _FROM_COMMIT  # a simple group: standalone consumers and admin commits
        if self.is_in(EMPTY):
            return OffsetExpiration(state_timestamp_ms=self.state_timestamp_ms)
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.is_in(STABLE) and self.subscribed_topics is not None:
            return _UNSUBSCRIBED_FROM_COMMIT
        return None

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, GroupType.CLASSIC)


def record_value(group: ClassicGroup) -> dict[str, Any]:
    """The content of the group's GroupMetadata record as it is now (``classic/durable.py`` keeps it)."""
    protocol = group.protocol_name
    members = []
    for member in group.members.values():
        subscription = next((data for name, data in member.protocols if name == protocol), b"")
        members.append({
            "id": member.member_id,
            "instance_id": member.group_instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "session_timeout_ms": member.session_timeout_ms,
            "subscription": b64(subscription),
            "assignment": b64(member.assignment),
        })  # fmt: skip
    return {
        "protocol_type": group.protocol_type,
        "generation": group.generation_id,
        "protocol": protocol,
        "leader": group.leader_id,
        # When it became Empty: what offset retention counts from (Kafka's currentStateTimestamp).
        "state_ms": group.state_timestamp_ms if not members else None,
        "members": members,
    }


_FROM_COMMIT = OffsetExpiration()
_UNSUBSCRIBED_FROM_COMMIT = OffsetExpiration(keep_subscribed=True)
