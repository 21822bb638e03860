"""Share groups (KIP-932) in the control API: each share-partition's start and end offsets (SPSO, SPEO) and in-flight
counts in ``GET /v1/groups/{group}``, and the record-level view of ``GET /v1/groups/{group}/share-partitions``: per
run of in-flight offsets its state, delivery count, holder and lock deadline (``coordinator/modern/share/views.py``).

Read at the call, never kept: nothing here runs on the Kafka request path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from broker.control.http_guard import json_error
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.share.views import HeldRecords, SharePartitionView, share_partitions

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

__all__ = ["partition_json", "partitions_of", "routes", "with_share_partitions"]


def partitions_of(server: BrokerServer, group_id: str) -> tuple[SharePartitionView, ...]:
    share = server.coordinator.share
    return share_partitions(group_id, share.partitions, share.topics)


def records_json(run: HeldRecords, now_ms: int) -> dict[str, Any]:
    return {
        "first_offset": run.first_offset,
        "last_offset": run.last_offset,
        "state": run.state,
        "delivery_count": run.delivery_count,
        "member_id": run.member_id,
        "lock_deadline_ms": run.lock_deadline_ms,
        "lock_expires_in_ms": None if run.lock_deadline_ms is None else max(run.lock_deadline_ms - now_ms, 0),
    }


def partition_json(view: SharePartitionView, now_ms: int | None = None) -> dict[str, Any]:
    """One share-partition; with ``now_ms``, its in-flight records too (the record-level view)."""
    found: dict[str, Any] = {
        "topic": view.topic,
        "partition": view.partition,
        "start_offset": view.start_offset,
        "end_offset": view.end_offset,
        "in_flight": view.in_flight,
        "available": view.available,
        "acquired": view.acquired,
        "acknowledged": view.acknowledged,
        "archived": view.archived,
        "delivered_total": view.delivered_total,
        "redelivered_total": view.redelivered_total,
        "archived_total": view.archived_total,
    }
    if now_ms is not None:
        found["records"] = [records_json(run, now_ms) for run in view.records]
    return found


def with_share_partitions(server: BrokerServer, detail: dict[str, Any]) -> dict[str, Any]:
    """A described share group with its share-partitions' offsets and counts (no records: those are their own
    route). Other group types are returned as they are."""
    if detail["group_type"] == GroupType.SHARE:
        detail["share_partitions"] = [partition_json(view) for view in partitions_of(server, detail["group_id"])]
    return detail


def routes(server: BrokerServer) -> list[web.RouteDef]:
    async def share_partitions_route(request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        unknown = sorted(request.query)
        if unknown:
            return json_error(400, f"unknown query parameter(s) {unknown}")
        summary = server.coordinator.group_summary(group_id)
        if summary is None:
            return json_error(404, f"no group {group_id!r}")
        if summary.group_type != GroupType.SHARE:
            return json_error(404, f"group {group_id!r} is a {summary.group_type} group, not a share group")
        now = server.clock.now_ms()
        return web.json_response(
            {
                "group_id": group_id,
                "now_ms": now,
                "partitions": [partition_json(view, now) for view in partitions_of(server, group_id)],
            }
        )

    return [web.get("/v1/groups/{group}/share-partitions", share_partitions_route)]
