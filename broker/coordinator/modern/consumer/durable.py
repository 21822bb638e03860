"""KIP-848 consumer groups as durable changes (issue 27; cluster-and-durability.md 2.3 and 3.1, key types 3-8, 16).

Kafka writes ConsumerGroupMetadata (the group epoch), ConsumerGroupMemberMetadata (who a member is and what it
subscribes to), ConsumerGroupTargetAssignmentMetadata/Member (the target) and ConsumerGroupCurrentMemberAssignment
(the member's epochs, state, assigned and pending partitions). Ours are three kinds, each a whole value:
``consumer.group`` (group) -> epochs, subscription metadata, resolved regexes; ``consumer.member`` (group, member)
-> the member metadata and its current assignment together (Kafka's records 5 and 8); ``consumer.target`` (group,
member) -> its target partitions. Written after each heartbeat that changed something (a steady one writes nothing:
the put of an equal value is skipped by the sink) and when members are fenced, expire or the group is deleted.

Loading (``restore.py``, which knows ``ConsumerGroups``; this module is what ``groups.py`` writes with) is
``onLoaded``: members come back with their ids, epochs, states and assignments, each with a fresh
session timer, and one in UNREVOKED_PARTITIONS with a fresh rebalance timer; a member's next heartbeat with its
current epoch is answered as if nothing happened. Without this, librdkafka's consumers take GROUP_ID_NOT_FOUND as
fatal after a restart (3.3).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from broker.changes import Change
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.types import Assignment

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
