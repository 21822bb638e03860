"""KIP-848 consumer groups written out and loaded back (issue 27): the records of every stored group, and
``onLoaded`` (``GroupMetadataManager`` replaying consumer-group records). The kinds and values are ``durable.py``'s;
this module sits above ``groups.py`` so that imports point one way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator

from broker.changes import Change
from broker.coordinator.modern.consumer.durable import (
    GROUP,
    MEMBER,
    TARGET,
    assignment_from,
    records_of,
)
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.types import MemberState


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

