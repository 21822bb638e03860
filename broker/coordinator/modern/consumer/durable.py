"""KIP-848 consumer groups as durable changes (issue 27; cluster-and-durability.md 2.3 and 3.1, key types 3-8, 16).

Kafka writes ConsumerGroupMetadata (the group epoch), ConsumerGroupMemberMetadata (who a member is and what it
subscribes to), ConsumerGroupTargetAssignmentMetadata/Member (the target) and ConsumerGroupCurrentMemberAssignment
(the member's epochs, state, assigned and pending partitions). Ours are three kinds, each a whole value:
``consumer.group`` (group) -> epochs, subscription metadata, resolved regexes; ``consumer.member`` (group, member)
-> the member metadata and its current assignment together (Kafka's records 5 and 8); ``consumer.target`` (group,
member) -> its target partitions. Written after each heartbeat that changed something (a steady one writes nothing:
the put of an equal value is skipped by the sink) and when members are fenced, expire or the group is deleted.

Loading is ``onLoaded``: members come back with their ids, epochs, states and assignments, each with a fresh
session timer, and one in UNREVOKED_PARTITIONS with a fresh rebalance timer; a member's next heartbeat with its
current epoch is answered as if nothing happened. Without this, librdkafka's consumers take GROUP_ID_NOT_FOUND as
fatal after a restart (3.3).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from broker.changes import Change
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.types import Assignment, MemberState

if TYPE_CHECKING:
    from broker.coordinator.modern.consumer.groups import ConsumerGroups

GROUP = "consumer.group"
MEMBER = "consumer.member"
TARGET = "consumer.target"


def assignment_value(assignment: Assignment) -> dict[str, list[int]]:
    return {str(topic_id): sorted(partitions) for topic_id, partitions in assignment.items()}


def assignment_from(value: dict[str, list[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {uuid.UUID(topic_id): frozenset(partitions) for topic_id, partitions in value.items()}


def group_value(group: ConsumerGroup) -> dict[str, Any]:
    return {
        "epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "created_ms": group.created_ms,
        "state_ms": group.state_timestamp_ms,
        "metadata": {name: [str(topic_id), count] for name, (topic_id, count) in group.subscription_metadata.items()},
        "regexes": {regex: sorted(names) for regex, names in group.resolved_regexes.items()},
    }


def member_value(member: ConsumerMember) -> dict[str, Any]:
    return {
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "topics": sorted(member.subscribed_topic_names),
        "regex": member.subscribed_topic_regex,
        "assignor": member.server_assignor,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "epoch": member.member_epoch,
        "previous_epoch": member.previous_member_epoch,
        "state": int(member.state),
        "assigned": assignment_value(member.assigned),
        "pending_revocation": assignment_value(member.pending_revocation),
    }


def records_of(group: ConsumerGroup) -> Iterator[Change]:
    group_id = group.group_id
    yield Change(GROUP, (group_id,), group_value(group))
    for member_id, member in group.members.items():
        yield Change(MEMBER, (group_id, member_id), member_value(member))
    for member_id, target in group.targets.items():
        yield Change(TARGET, (group_id, member_id), {"partitions": assignment_value(target)})


def consumer_records(groups: ConsumerGroups) -> Iterator[Change]:
    for group in groups.groups.values():
        if group.group_id in groups.stored:
            yield from records_of(group)


def load_consumer_groups(groups: ConsumerGroups, changes: Iterable[Change]) -> None:
    built: dict[str, ConsumerGroup] = {}
    state_ms: dict[str, int] = {}
    members: list[tuple[ConsumerGroup, ConsumerMember]] = []
    targets: list[tuple[str, str, dict[str, list[int]]]] = []
    for change in changes:
        value = change.value
        if value is None:
            continue
        group_id = str(change.key[0])
        if change.kind == GROUP:
            group = built[group_id] = groups.new_group(group_id)
            group.group_epoch = value["epoch"]
            group.assignment_epoch = value["assignment_epoch"]
            group.created_ms = value["created_ms"]
            state_ms[group_id] = value["state_ms"]
            group.subscription_metadata = {
                name: (uuid.UUID(topic_id), count) for name, (topic_id, count) in value["metadata"].items()
            }
            group.resolved_regexes = {regex: frozenset(names) for regex, names in value["regexes"].items()}
            group.metadata_version = groups.topics.version  # as computed: no epoch bump at the first heartbeat
        elif change.kind == MEMBER:
            member = ConsumerMember(str(change.key[1]))
            member.instance_id = value["instance_id"]
            member.rack_id = value["rack_id"]
            member.client_id = value["client_id"]
            member.client_host = value["client_host"]
            member.subscribed_topic_names = frozenset(value["topics"])
            member.subscribed_topic_regex = value["regex"]
            member.server_assignor = value["assignor"]
            member.rebalance_timeout_ms = value["rebalance_timeout_ms"]
            member.member_epoch = value["epoch"]
            member.previous_member_epoch = value["previous_epoch"]
            member.state = MemberState(value["state"])
            member.assigned = assignment_from(value["assigned"])
            member.pending_revocation = assignment_from(value["pending_revocation"])
            members.append((built[group_id], member))
        elif change.kind == TARGET:
            targets.append((group_id, str(change.key[1]), value["partitions"]))
    for group in built.values():
        groups.registry.add_consumer(group)
        groups.stored.add(group.group_id)
    for group, member in members:
        group.add_member(member)
    for group_id, member_id, partitions in targets:
        built[group_id].targets[member_id] = assignment_from(partitions)
    for group in built.values():
        group.recount()
        group.last_state = group.state
        group.state_timestamp_ms = state_ms[group.group_id]
    for group, member in members:
        groups.extend_session(group, member)  # a fresh session, its full timeout (onLoaded)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            groups.track_revocation(group, member, rewritten=True)

