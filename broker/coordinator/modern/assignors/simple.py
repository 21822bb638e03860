"""The share groups' ``simple`` assignor (KIP-932; Kafka's ``SimpleAssignor`` with its homogeneous and heterogeneous
builders, section 5 of ``docs/spec/share-groups.md``).

Unlike the consumer groups' assignors, a partition may go to several members: with M members and P partitions each
partition should have ``ceil(M / P)`` members (the desired sharing) and member i about
``ceil(precise * (i + 1)) - ceil(precise * i)`` partitions, ``precise = sharing * P / M``. The previous target is kept
where it fits those quotas (stickiness), then under-shared partitions go to the members with the fewest. Balance wins
over stickiness. Homogeneous groups are balanced over all their partitions; heterogeneous ones topic by topic, over
the members subscribed to each topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.coordinator.modern.assignors.base import GroupSpec, MemberSpec
from broker.coordinator.modern.types import Assignment, TopicId

__all__ = ["SimpleAssignor"]

Partition = tuple[TopicId, int]


class SimpleAssignor:
    name = "simple"

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        members = sorted(spec.members, key=lambda m: m.member_id)  # member-id order, as Kafka's builder sorts
        chosen: dict[str, set[Partition]] = {m.member_id: set() for m in members}
        if spec.homogeneous and members:
            partitions = _partitions(sorted(members[0].topics), spec)
            _share(members, partitions, chosen)
        else:
            for topic_id in sorted({t for m in members for t in m.topics}):
                subscribed = [m for m in members if topic_id in m.topics]
                _share(subscribed, _partitions([topic_id], spec), chosen)
        targets: dict[str, Assignment] = {}
        for member_id, picked in chosen.items():
            by_topic: dict[TopicId, set[int]] = {}
            for topic_id, partition in picked:
                by_topic.setdefault(topic_id, set()).add(partition)
            targets[member_id] = {topic_id: frozenset(parts) for topic_id, parts in by_topic.items()}
        return targets


def _partitions(topic_ids: Sequence[TopicId], spec: GroupSpec) -> list[Partition]:
    return [(topic_id, p) for topic_id in topic_ids for p in range(spec.partition_counts.get(topic_id, 0))]


def _share(members: Sequence[MemberSpec], partitions: Sequence[Partition], chosen: dict[str, set[Partition]]) -> None:
    """Give each of ``partitions`` its desired number of ``members``, adding to ``chosen``."""
    count, size = len(partitions), len(members)
    if not count or not size:
        return
    sharing = -(-size // count)  # ceil(M / P)
    total = sharing * count
    quotas = {m.member_id: -(-total * (i + 1) // size) - -(-total * i // size) for i, m in enumerate(members)}
    holders: dict[Partition, set[str]] = {p: set() for p in partitions}
    taken = dict.fromkeys(quotas, 0)
    # Stickiness: what each member had, within its quota and the partition's sharing.
    for member in members:
        member_id = member.member_id
        previous = sorted((t, p) for t, parts in member.target.items() for p in parts if (t, p) in holders)
        for partition in previous:
            if taken[member_id] < quotas[member_id] and len(holders[partition]) < sharing:
                holders[partition].add(member_id)
                taken[member_id] += 1
    # Then the under-shared partitions, least-shared first, each to the member with the most room left.
    order = {m.member_id: i for i, m in enumerate(members)}
    for partition in sorted(partitions, key=lambda p: len(holders[p])):
        while len(holders[partition]) < sharing:
            room = [m for m in quotas if taken[m] < quotas[m] and m not in holders[partition]]
            if not room:
                break
            pick = min(room, key=lambda m: (taken[m] - quotas[m], order[m]))
            holders[partition].add(pick)
            taken[pick] += 1
    # Every partition has at least one member whatever the quotas left (the greedy pass can corner itself).
    for held in holders.values():
        if not held:
            pick = min(quotas, key=lambda m: (taken[m], order[m]))
            held.add(pick)
            taken[pick] += 1
    for partition, held in holders.items():
        for member_id in held:
            chosen[member_id].add(partition)
