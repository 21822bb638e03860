"""The classic group and its members: data and the rules that belong to the data.

What happens *when* (requests, timers, parked answers) lives in
``coordinator.py``; this module only knows what a group is and which state
changes are legal, mirroring Kafka's ``ClassicGroup``/``ClassicGroupMember``.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass

from broker.coordinator.messages import JoinResult, SyncResult
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Deadline

Protocols = tuple[tuple[str, bytes], ...]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

_CAN_REBALANCE = frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY})


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


class Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "expiry",
        "group_instance_id",
        "heartbeat_key",
        "is_new",
        "join_pending",
        "last_heartbeat_ms",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_pending",
    )

    def __init__(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_pending: Deferred[JoinResult] | None = None
        self.sync_pending: Deferred[SyncResult] | None = None
        self.is_new = False
        self.heartbeat_key = heartbeat_key(group_id, member_id)
        self.expiry: Deadline | None = None  # the armed deadline under heartbeat_key, when known
        self.last_heartbeat_ms = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_pending is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """A parked request proves the member is alive, unless it has never had an answer."""
        return not self.is_new and (self.join_pending is not None or self.sync_pending is not None)

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(protocol_name)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.DEAD
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.awaiting_join_count = 0
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.join_key = ("join", group_id)
        self.sync_key = ("sync", group_id)
        # For events only: when the current rebalance began, and the last generation's decoded assignment.
        self.rebalance_started_ms = now_ms
        self.assignment_view: dict[str, dict[str, list[int]]] | None = None

    # -- state -----------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def can_rebalance(self) -> bool:
        return self.state in _CAN_REBALANCE

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition(f"group {self.group_id!r} cannot go from {self.state.value} to {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- members -----------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add_member(self, member: Member, join: Deferred[JoinResult] | None) -> None:
        if member.group_instance_id is not None and member.group_instance_id in self.static_members:
            raise ValueError(f"instance {member.group_instance_id!r} is already a member")
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name, _ in member.protocols:
            self.supported_protocols[name] += 1
        if join is not None:
            member.join_pending = join
            self.awaiting_join_count += 1
        self.pending_join_members.discard(member.member_id)

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        for name, _ in member.protocols:
            self.supported_protocols[name] -= 1
            if self.supported_protocols[name] <= 0:
                del self.supported_protocols[name]
        if member.join_pending is not None:
            self.awaiting_join_count -= 1
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join: Deferred[JoinResult] | None,
    ) -> None:
        for name, _ in member.protocols:
            self.supported_protocols[name] -= 1
            if self.supported_protocols[name] <= 0:
                del self.supported_protocols[name]
        for name, _ in protocols:
            self.supported_protocols[name] += 1
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join is not None and member.join_pending is None:
            self.awaiting_join_count += 1
        elif join is None and member.join_pending is not None:
            self.awaiting_join_count -= 1
        member.join_pending = join

    def take_join(self, member: Member) -> Deferred[JoinResult] | None:
        """Detach the member's parked JoinGroup, keeping the awaiting count right."""
        join = member.join_pending
        if join is not None:
            member.join_pending = None
            self.awaiting_join_count -= 1
        return join

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
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
        return len(self.members) == self.awaiting_join_count and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_pending is None]

    # -- protocols ---------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.is_in(GroupState.EMPTY):
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
        """Topics the group consumes, from the members' ConsumerProtocol subscriptions."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            self.subscribed_topics = None if self.members else frozenset()
            return
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(parse_subscription_topics(member.metadata(self.protocol_name)))
            except (KeyError, ValueError, struct.error, UnicodeDecodeError):
                self.subscribed_topics = None
                return
        self.subscribed_topics = frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        if self.is_in(GroupState.EMPTY):
            return False
        if self.subscribed_topics is None:
            return self.protocol_type == "consumer"
        return topic in self.subscribed_topics

    # -- generations ---------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.update_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = frozenset()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocol subscription (any version: they share the prefix)."""
    version, count = struct.unpack_from(">hi", metadata, 0)
    if version < 0 or count < 0:
        raise ValueError("not a consumer protocol subscription")
    offset = 6
    topics = []
    for _ in range(count):
        (length,) = struct.unpack_from(">h", metadata, offset)
        offset += 2
        if length < 0 or offset + length > len(metadata):
            raise ValueError("truncated topic name")
        topics.append(metadata[offset : offset + length].decode())
        offset += length
    return topics
