"""Read-only views of groups for the control API and its metrics: what it shows, never the live objects.

The Kafka APIs read groups through ``describe``/``list_groups`` (``messages.py``); the control API shows more
(sessions, parked requests, decoded assignments), so it gets these snapshots instead of the coordinator's
internals. Times are raw timestamps: the reader turns them into ages by its own clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.member import Member
from broker.coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str  # the wire name: "Stable", "PreparingRebalance", ...
    protocol_type: str | None
    protocol: str | None
    generation_id: int
    leader: str | None
    member_count: int


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
class GroupDetail:
    summary: GroupSummary
    members: tuple[MemberDetail, ...]
    pending_members: tuple[str, ...]  # KIP-394 member ids awaiting their second JoinGroup, sorted
    state_timestamp_ms: int
    subscribed_topics: tuple[str, ...] | None  # sorted; None when unknown


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
    if group.protocol_type != "consumer":
        return None
    try:
        return decode_assignment(member.assignment).by_topic()
    except ConsumerProtocolError:
        return None
