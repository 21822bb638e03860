"""Offsets and lag for the control API, ``/metrics`` and the pytest plugin: the coordinator's offsets view
(``broker/coordinator/lag.py``) over the broker's own partitions, and its JSON.

The log end offset is the partition's high watermark (what ``kafka-consumer-groups.sh`` reads with ListOffsets
``latest``, read_uncommitted). Read at the call, never kept: nothing of this runs on the Kafka request path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinator.lag import LogEndOffset, PartitionOffsets, total_lag

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

__all__ = ["group_offsets", "log_end_offsets", "offsets_json", "total_lag", "with_lag", "with_offsets"]


def log_end_offsets(server: BrokerServer) -> LogEndOffset:
    """The server's partitions' high watermarks, None for a partition it does not have (never auto-created)."""
    topics = server.topics

    def log_end_offset(topic: str, partition: int) -> int | None:
        found = topics.get(topic)
        log = None if found is None else found.log(partition)
        return None if log is None else log.high_watermark

    return log_end_offset


def group_offsets(server: BrokerServer, group_id: str) -> tuple[PartitionOffsets, ...] | None:
    """A live group's rows, None for no such group."""
    return server.coordinator.group_offsets(group_id, log_end_offsets(server))


def offsets_json(rows: tuple[PartitionOffsets, ...]) -> list[dict[str, Any]]:
    return [
        {
            "topic": row.topic,
            "partition": row.partition,
            "committed_offset": row.committed_offset,
            "log_end_offset": row.log_end_offset,
            "lag": row.lag,
            "member_id": row.member_id,
            "client_id": row.client_id,
            "host": row.host,
        }
        for row in rows
    ]


def with_lag(server: BrokerServer, summary: dict[str, Any]) -> dict[str, Any]:
    """A listed group (``GET /v1/groups``) with its total lag, the sum of its partitions' known lags."""
    summary["lag"] = total_lag(group_offsets(server, summary["group_id"]) or ())
    return summary


def with_offsets(server: BrokerServer, detail: dict[str, Any]) -> dict[str, Any]:
    """A described group (``GET /v1/groups/{group}``) with its offsets per partition and its total lag."""
    rows = group_offsets(server, detail["group_id"]) or ()
    detail["offsets"] = offsets_json(rows)
    detail["lag"] = total_lag(rows)
    return detail
