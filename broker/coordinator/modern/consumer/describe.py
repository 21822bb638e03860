"""ConsumerGroupDescribe (section 9.3); a consumer group lists itself in ListGroups (``ConsumerGroup.listed``)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.messages import (
    ConsumerGroupDescription,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.types import Assignment, TopicCatalog

__all__ = ["describe"]

E = ErrorCode


def describe(group: ConsumerGroup, topics: TopicCatalog, default_assignor: str) -> ConsumerGroupDescription:
    members = tuple(
        DescribedConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_described(m.assigned, topics),
            target_assignment=_described(group.target_of(m.member_id), topics),
        )
        for m in group.members.values()
    )
    return ConsumerGroupDescription(
        group.group_id,
        E.none,
        None,
        group.state.value,
        group.group_epoch,
        group.assignment_epoch,
        group.preferred_assignor(default_assignor),
        members,
    )


def _described(assignment: Assignment, topics: TopicCatalog) -> tuple[DescribedTopicPartitions, ...]:
    """Partitions of topics no longer in the metadata are left out (section 9.3)."""
    described = []
    for topic_id, partitions in assignment.items():
        info = topics.by_id(topic_id)
        if info is not None:
            described.append(DescribedTopicPartitions(topic_id, info.name, tuple(sorted(partitions))))
    return tuple(sorted(described, key=lambda d: d.topic_name))
