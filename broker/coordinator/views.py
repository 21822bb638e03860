"""Read-only views of groups for the control API and its metrics: what it shows, never the live objects.

The Kafka APIs read groups through ``describe``/``list_groups`` (``messages.py``); the control API shows more
(sessions, parked requests, decoded assignments, a consumer group's epochs and each member's reconciliation), so it
gets these snapshots instead of the coordinator's internals. Times are raw timestamps: the reader turns them into
ages by its own clock. Both kinds of group share one summary and one detail; ``group_type`` tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.member import Member
from broker.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.types import Assignment, TopicCatalog

#: By topic name, partitions sorted: what the control API shows of an assignment.
TopicPartitions = dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str  # the wire name: "Stable", "PreparingRebalance", "Assigning", ...
    protocol_type: str | None
    protocol: str | None  # a consumer group's: its assignor (docs/spec/consumer-groups.md section 6.2)
    generation_id: int  # a consumer group's: its group epoch
    leader: str | None  # always None for a consumer group: the broker assigns
    member_count: int
    group_type: GroupType = GroupType.CLASSIC
    group_epoch: int | None = None  # consumer groups only (section 3.1), as assignment_epoch
    assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class MemberDetail:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat_ms: int
    awaiting_join: bool  # a JoinGroup of it is parked
    awaiting_sync: bool  # a SyncGroup of it is parked
    protocols: tuple[str, ...]
    assignment: dict[str, list[int]] | None  # decoded consumer-protocol assignment; None when not decodable
    assignment_bytes: int
    is_leader: bool


@dataclass(frozen=True, slots=True)
class ConsumerMemberDetail:
    """A consumer group's member (sections 3.2, 3.3): where its reconciliation stands."""

    member_id: str
    group_instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    member_epoch: int  # -2 for a static member that left for now (section 4.4)
    previous_member_epoch: int
    state: str  # "stable", "unrevoked_partitions", "unreleased_partitions" or "unknown" (MemberState, lower-cased)
    assigned: TopicPartitions  # what it may own now
    pending_revocation: TopicPartitions  # what it must give up before its epoch advances
    target: TopicPartitions  # its share of the target assignment
    subscribed_topic_names: tuple[str, ...]  # sorted
    subscribed_topic_regex: str  # "" for none
    server_assignor: str | None
    rebalance_timeout_ms: int
    session_timeout_ms: int  # the broker's, the same for every member (section 7.1)
    session_deadline_ms: int | None  # when its session expires without a heartbeat; None when no timer runs


@dataclass(frozen=True, slots=True)
class GroupDetail:
    summary: GroupSummary
    members: tuple[MemberDetail | ConsumerMemberDetail, ...]  # ConsumerMemberDetail in consumer groups only
    pending_members: tuple[str, ...]  # KIP-394 member ids awaiting their second JoinGroup, sorted
    state_timestamp_ms: int
    subscribed_topics: tuple[str, ...] | None  # sorted; None when unknown (a consumer group's: regexes resolved)


def summarize(group: ClassicGroup) -> GroupSummary:
    return GroupSummary(
        group.group_id,
        group.state.value,
        group.protocol_type,
        group.protocol_name,
        group.generation_id,
        group.leader_id,
        len(group.members),
    )


def detail(group: ClassicGroup) -> GroupDetail:
    subscribed = group.subscribed_topics
    return GroupDetail(
        summarize(group),
        tuple(_member_detail(group, member) for member in group.members.values()),
        tuple(sorted(group.pending_members)),
        group.state_timestamp_ms,
        tuple(sorted(subscribed)) if subscribed is not None else None,
    )


def _member_detail(group: ClassicGroup, member: Member) -> MemberDetail:
    return MemberDetail(
        member.member_id,
        member.group_instance_id,
        member.client_id,
        member.client_host,
        member.session_timeout_ms,
        member.rebalance_timeout_ms,
        member.last_heartbeat_ms,
        member.is_awaiting_join,
        member.is_awaiting_sync,
        tuple(name for name, _ in member.protocols),
        _assignment(group, member),
        len(member.assignment),
        group.is_leader(member.member_id),
    )


def _assignment(group: ClassicGroup, member: Member) -> dict[str, list[int]] | None:
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    try:
        return decode_assignment(member.assignment).by_topic()
    except ConsumerProtocolError:
        return None


# -- consumer groups (KIP-848, docs/spec/consumer-groups.md) ------------------------------------------------------


def summarize_consumer(group: ConsumerGroup, default_assignor: str) -> GroupSummary:
    """The group epoch stands in for the generation, so waiting for a later "generation" works for both kinds."""
    return GroupSummary(
        group.group_id,
        group.state.value,
        CONSUMER_PROTOCOL_TYPE,
        group.preferred_assignor(default_assignor),
        group.group_epoch,
        None,
        len(group.members),
        GroupType.CONSUMER,
        group.group_epoch,
        group.assignment_epoch,
    )


def consumer_detail(
    group: ConsumerGroup, topics: TopicCatalog, default_assignor: str, session_timeout_ms: int
) -> GroupDetail:
    return GroupDetail(
        summarize_consumer(group, default_assignor),
        tuple(_consumer_member(group, member, topics, session_timeout_ms) for member in group.members.values()),
        (),
        group.state_timestamp_ms,
        tuple(sorted(group.all_subscribed_names())),
    )


def _consumer_member(
    group: ConsumerGroup, member: ConsumerMember, topics: TopicCatalog, session_timeout_ms: int
) -> ConsumerMemberDetail:
    session = member.session
    return ConsumerMemberDetail(
        member.member_id,
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.member_epoch,
        member.previous_member_epoch,
        member.state.name.lower(),
        named(member.assigned, topics),
        named(member.pending_revocation, topics),
        named(group.target_of(member.member_id), topics),
        tuple(sorted(member.subscribed_topic_names)),
        member.subscribed_topic_regex,
        member.server_assignor,
        member.rebalance_timeout_ms,
        session_timeout_ms,
        session.due_ms if session is not None and session.live else None,
    )


def named(assignment: Assignment, topics: TopicCatalog) -> TopicPartitions:
    """An assignment by topic name, in name order (a topic no longer known is shown by its id)."""
    shown: TopicPartitions = {}
    for topic_id, partitions in assignment.items():
        info = topics.by_id(topic_id)
        shown[info.name if info is not None else str(topic_id)] = sorted(partitions)
    return dict(sorted(shown.items()))
