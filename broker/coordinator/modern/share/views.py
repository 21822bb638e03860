"""What the control API shows of a share group (ours, not Kafka's): the summary and detail every group type has
(``coordinator/views.py``), and the share-partitions with a record-level view of who holds what and how often each
record came back."""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.share.group import SHARE_PROTOCOL_TYPE, ShareGroup
from broker.coordinator.modern.share.partition import RecordState, SharePartition
from broker.coordinator.modern.share.partitions import SharePartitions
from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, TopicCatalog
from broker.coordinator.views import ConsumerMemberDetail, GroupDetail, GroupSummary, named

__all__ = ["HeldRecords", "SharePartitionView", "share_detail", "share_partitions", "summarize_share"]


def summarize_share(group: ShareGroup) -> GroupSummary:
    return GroupSummary(
        group.group_id,
        group.state.value,
        SHARE_PROTOCOL_TYPE,
        "simple",
        group.group_epoch,
        None,
        len(group.members),
        GroupType.SHARE,
        group.group_epoch,
        group.assignment_epoch,
    )


def share_detail(group: ShareGroup, topics: TopicCatalog, session_timeout_ms: int) -> GroupDetail:
    members = tuple(
        ConsumerMemberDetail(
            m.member_id,
            None,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.member_epoch,
            m.previous_member_epoch,
            "stable",
            named(m.assigned, topics),
            named(EMPTY_ASSIGNMENT, topics),
            named(group.target_of(m.member_id), topics),
            m.subscribed_topic_names,
            "",
            "simple",
            0,
            session_timeout_ms,
            m.last_heartbeat_ms + session_timeout_ms,
        )
        for m in group.members.values()
    )
    return GroupDetail(summarize_share(group), members, (), group.state_timestamp_ms, tuple(sorted(group.subscribed)))


@dataclass(frozen=True, slots=True)
class HeldRecords:
    """A run of in-flight offsets in one state, delivery count and holder."""

    first_offset: int
    last_offset: int
    state: str  # "available", "acquired", "acknowledged", "archived"
    delivery_count: int
    member_id: str | None
    lock_deadline_ms: int | None


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int  # SPSO
    end_offset: int  # SPEO
    in_flight: int
    available: int
    acquired: int
    acknowledged: int
    archived: int
    delivered_total: int
    redelivered_total: int
    archived_total: int
    records: tuple[HeldRecords, ...]


def share_partitions(
    group_id: str, partitions: SharePartitions, topics: TopicCatalog
) -> tuple[SharePartitionView, ...]:
    views = []
    for (_, topic_id, partition), share in partitions.of_group(group_id):
        info = topics.by_id(topic_id)
        views.append(_view(info.name if info is not None else str(topic_id), partition, share))
    return tuple(sorted(views, key=lambda v: (v.topic, v.partition)))


def _view(topic: str, partition: int, share: SharePartition) -> SharePartitionView:
    runs: list[list[object]] = []
    for run in share.runs:
        deadline = run.lock.deadline_ms if run.lock is not None else None
        shape = (run.state.name.lower(), run.delivery_count, run.member_id, deadline)
        if runs and runs[-1][1] == run.first - 1 and tuple(runs[-1][2:]) == shape:
            runs[-1][1] = run.last
        else:
            runs.append([run.first, run.last, *shape])
    counts = share.counts()
    return SharePartitionView(
        topic,
        partition,
        share.start_offset,
        share.end_offset,
        share.in_flight(),
        counts["available"],
        counts["acquired"],
        counts["acknowledged"],
        counts["archived"],
        share.delivered,
        share.redelivered,
        share.archived_total,
        tuple(HeldRecords(*run) for run in runs),  # type: ignore[arg-type]
    )


_ = RecordState  # the states the views name, lower-cased
