"""The ``range`` server-side assignor (section 6.5 of ``docs/spec/consumer-groups.md``, Kafka's ``RangeAssignor``).

Per topic, the members subscribed to it are sorted (static members first by instance id, then the others by member
id) and each takes the next contiguous range of partitions: q = partitions // n each, one more for the first
partitions % n. With equal partition counts that co-partitions: a member gets the same partition numbers of every
topic it shares with the others. It is not sticky: the result depends only on the sorted members and partition
counts, so a member sorting ahead of the others shifts every range (section 6.5, checklist item 65).
"""

from __future__ import annotations

from broker.coordinator.modern.assignors.base import AssignorError, GroupSpec, MemberSpec
from broker.coordinator.modern.types import Assignment, TopicId


def range_order(member: MemberSpec) -> tuple[int, str, str]:
    """Section 6.5: static members (those with an instance id) first, by instance id; then the dynamic ones by member
    id. Instance ids are unique in a group; the member id after it only makes the key total."""
    if member.instance_id is not None:
        return (0, member.instance_id, member.member_id)
    return (1, member.member_id, "")


class RangeAssignor:
    """Kafka's ``RangeAssignor``. Homogeneous and heterogeneous groups take one path: a topic's range is cut among
    the members subscribed to it, which in a homogeneous group is every member (section 6.5)."""

    name = "range"

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        members = sorted(spec.members, key=range_order)
        subscribers: dict[TopicId, list[MemberSpec]] = {}
        for member in members:
            for topic_id in member.topics:
                if topic_id not in spec.partition_counts:
                    # Section 6.6: Kafka's "Member is subscribed to a non-existent topic".
                    raise AssignorError(
                        f"member {member.member_id} is subscribed to topic {topic_id} which has no partition count"
                    )
                subscribers.setdefault(topic_id, []).append(member)

        targets: dict[str, dict[TopicId, frozenset[int]]] = {member.member_id: {} for member in spec.members}
        for topic_id in sorted(subscribers):
            topic_members = subscribers[topic_id]
            quota, extras = divmod(spec.partition_counts[topic_id], len(topic_members))
            start = 0
            for position, member in enumerate(topic_members):
                size = quota + 1 if position < extras else quota
                if size:
                    targets[member.member_id][topic_id] = frozenset(range(start, start + size))
                start += size
        return dict(targets)
