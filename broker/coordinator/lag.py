"""A group's committed offsets beside each partition's log end offset: what ``kafka-consumer-groups.sh --describe``
prints (CURRENT-OFFSET, LOG-END-OFFSET, LAG and the owning member).

Read-only and computed on demand (the control API, ``/metrics`` at scrape time, the CLI through them): nothing here
runs on the heartbeat path. The coordinator does not import storage, so the log end offset comes from a function the
caller hands in: the partition's high watermark, what Kafka's tool reads with ListOffsets ``latest`` under
``read_uncommitted``; None when the partition is not known (a deleted topic, a partition that never existed).

One row per partition that the group has a committed offset for or that a member owns now, sorted by topic and
partition. A classic group's owner comes from its members' decoded consumer-protocol assignments, a consumer group's
(KIP-848) from what each member may own now. As Kafka's tool, the lag is ``LEO - committed`` and unknown (None, "-"
in a table) when either side is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.coordinator.offset_store import CommittedOffset, Key
from broker.coordinator.views import ConsumerMemberDetail, GroupDetail

__all__ = ["LogEndOffset", "PartitionOffsets", "group_offsets", "total_lag"]

#: (topic, partition) -> the partition's log end offset (high watermark), None when there is no such partition.
LogEndOffset = Callable[[str, int], "int | None"]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    topic: str
    partition: int
    committed_offset: int | None  # None: the group has committed nothing for it
    log_end_offset: int | None  # None: the partition is not known
    lag: int | None  # log_end_offset - committed_offset; None when either is None
    member_id: str | None  # the owning member (its consumer id); None when no member owns it
    client_id: str | None
    host: str | None


@dataclass(frozen=True, slots=True)
class _Owner:
    member_id: str
    client_id: str
    host: str


def group_offsets(
    group: GroupDetail, committed: Mapping[Key, CommittedOffset], log_end_offset: LogEndOffset
) -> tuple[PartitionOffsets, ...]:
    """The rows of one group (see the module's docstring), from its detail view and its committed offsets."""
    owners = _owners(group)
    rows: list[PartitionOffsets] = []
    for key in sorted(set(committed) | set(owners)):
        topic, partition = key
        stored = committed.get(key)
        offset = None if stored is None else stored.offset
        end = log_end_offset(topic, partition)
        owner = owners.get(key)
        rows.append(
            PartitionOffsets(
                topic,
                partition,
                offset,
                end,
                None if offset is None or end is None else end - offset,
                None if owner is None else owner.member_id,
                None if owner is None else owner.client_id,
                None if owner is None else owner.host,
            )
        )
    return tuple(rows)


def total_lag(rows: Iterable[PartitionOffsets]) -> int:
    """The sum of the known lags (kafka-exporter's and Burrow's total lag of a group)."""
    return sum(row.lag for row in rows if row.lag is not None)


def _owners(group: GroupDetail) -> dict[Key, _Owner]:
    owners: dict[Key, _Owner] = {}
    for member in group.members:
        assignment = member.assigned if isinstance(member, ConsumerMemberDetail) else member.assignment
        if not assignment:
            continue  # a classic member whose assignment is not the consumer protocol's, or nothing yet
        owner = _Owner(member.member_id, member.client_id, member.client_host)
        for topic, partitions in assignment.items():
            for partition in partitions:
                owners.setdefault((topic, partition), owner)
    return owners
