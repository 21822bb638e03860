"""The HTTP control API: watch groups, wait for states, and cause trouble on purpose.

aiohttp on the broker's own event loop, so every handler sees the coordinator between two of its messages,
never in the middle of one. JSON in and out; every error is ``{"error": "..."}`` with a 4xx status.
The contract is ``docs/control-api.yaml`` (OpenAPI 3.1), which the tests check the server against.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from broker.control import bounded_json, cluster_api, console, event_stream, offsets_api, posted_events, share_api
from broker.control.http_guard import GuardedAppRunner, HttpLimits, error_middleware, json_error, read_body, rejected
from broker.control.lag import with_lag, with_offsets
from broker.coordinator.classic.state import GroupState
from broker.coordinator.coordinator import Conflict, UnknownTarget
from broker.coordinator.group_type import GroupType
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.views import ConsumerMemberDetail, GroupDetail, GroupSummary, MemberDetail
from broker.events.hub import Record
from broker.server.faults import FaultSpecError
from broker.server.settings import host_port
from broker.transactions.events import partitions_by_topic
from broker.transactions.state import TxnMetadata, TxnState

if TYPE_CHECKING:
    from broker.control.metrics import BrokerMetrics
    from broker.server.broker import BrokerServer

log = structlog.get_logger("control")

MAX_WAIT_MS = 600_000
# A deleted group is forgotten at once, so Dead is never observable: waiting for it would always time out. Classic
# groups' states, then those only consumer groups have (docs/spec/consumer-groups.md section 3.4).
_STATES = {
    state.value.lower(): state.value
    for state in (*GroupState, *ConsumerGroupState)
    if state not in (GroupState.DEAD, ConsumerGroupState.DEAD)
}
GROUP_TYPES = tuple(group_type.value for group_type in GroupType)
_SETTLED = frozenset({ConsumerGroupState.STABLE.value, ConsumerGroupState.EMPTY.value})  # a rebalance is over
# GET /v1/transactions?state=: "open" (a transaction in flight: Ongoing or Prepare*) or one state, any case.
# PrepareEpochFence is passed through within one call and Dead ids are forgotten at once: neither is ever listed.
_TXN_STATES = {
    state.value.lower(): state
    for state in TxnState
    if state not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
}
OPEN_TXN_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


def _json(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda value: json.dumps(value, default=str))


def _error(status: int, message: str, **extra: Any) -> web.Response:
    return json_error(status, message, **extra)


def _int_param(request: web.Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)  # a ValueError past 4,300 digits too (Python's int max str digits)
    except ValueError:
        raise _BadRequest(f"{name} must be an integer, got {_quoted(raw)}") from None
    if not low <= value <= high:
        raise _BadRequest(f"{name} must be between {low} and {high}, got {_quoted(raw)}")
    return value


def _quoted(raw: str, limit: int = 40) -> str:
    """A client's value in an error message, cut short: a query string may be 8 KB."""
    return repr(raw) if len(raw) <= limit else repr(raw[:limit]) + f"... ({len(raw)} characters)"


class _BadRequest(Exception):
    pass


def group_summary(summary: GroupSummary) -> dict[str, Any]:
    return {
        "group_id": summary.group_id,
        "group_type": summary.group_type,
        "state": summary.state,
        "protocol_type": summary.protocol_type,
        "protocol": summary.protocol,
        "generation_id": summary.generation_id,
        "leader": summary.leader,
        "members": summary.member_count,
        "group_epoch": summary.group_epoch,
        "assignment_epoch": summary.assignment_epoch,
    }


def classic_member(member: MemberDetail, now_ms: int) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "last_heartbeat_age_ms": max(now_ms - member.last_heartbeat_ms, 0),
        "awaiting_join": member.awaiting_join,
        "awaiting_sync": member.awaiting_sync,
        "protocols": list(member.protocols),
        "assignment": member.assignment,
        "assignment_bytes": member.assignment_bytes,
        "is_leader": member.is_leader,
    }


def consumer_member(member: ConsumerMemberDetail, now_ms: int) -> dict[str, Any]:
    """A consumer group's member; ``assignment`` is what it may own now, as a classic member's is."""
    deadline = member.session_deadline_ms
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "state": member.state,
        "assignment": member.assigned,
        "pending_revocation": member.pending_revocation,
        "target": member.target,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "subscribed_topic_regex": member.subscribed_topic_regex or None,
        "server_assignor": member.server_assignor,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "session_timeout_ms": member.session_timeout_ms,
        # The session runs from the last heartbeat (docs/spec/consumer-groups.md section 7.1): both times follow.
        "session_expires_in_ms": None if deadline is None else max(deadline - now_ms, 0),
        "last_heartbeat_age_ms": None
        if deadline is None
        else max(now_ms - (deadline - member.session_timeout_ms), 0),
    }


def group_detail(group: GroupDetail, now_ms: int) -> dict[str, Any]:
    detail = group_summary(group.summary)
    detail["members"] = [
        consumer_member(member, now_ms) if isinstance(member, ConsumerMemberDetail) else classic_member(member, now_ms)
        for member in group.members
    ]
    detail["pending_members"] = list(group.pending_members)
    detail["state_age_ms"] = max(now_ms - group.state_timestamp_ms, 0)
    detail["subscribed_topics"] = list(group.subscribed_topics) if group.subscribed_topics is not None else None
    return detail


def last_rebalance(records: list[Record], consumer: bool) -> dict[str, Any] | None:
    """The newest rebalance among a group's buffered events: its cause, start, and duration (null while open).

    Classic: from ``rebalance_started`` to the ``sync_completed`` (the group Stable again) or the empty
    ``join_completed`` that ends it. Consumer group: from the first ``group_epoch_bumped`` after it was last Stable
    to the ``state_changed`` to Stable (or Empty) that follows (docs/events.md, "Consumer groups")."""
    start: Record | None = None
    end_ms: int | None = None
    for record in records:
        name = record["event"]
        if consumer:
            if name == "group_epoch_bumped" and (start is None or end_ms is not None):
                start, end_ms = record, None
            elif name == "state_changed" and start is not None and end_ms is None and record["to"] in _SETTLED:
                end_ms = record["ts_ms"]
        elif name == "rebalance_started":
            start, end_ms = record, None
        elif start is not None and end_ms is None and (
            name == "sync_completed" or (name == "join_completed" and record["state"] == "Empty")
        ):
            end_ms = record["ts_ms"]
    if start is None:
        return None
    return {
        "cause": start["cause"],
        "member_id": start.get("member_id"),
        "started_ms": start["ts_ms"],
        "duration_ms": None if end_ms is None else max(end_ms - start["ts_ms"], 0),
    }


def _per_group(series: Mapping[tuple[str, ...], float]) -> dict[str, float]:
    """An event series' counts summed per group (its first label), in one pass over the series."""
    totals: dict[str, float] = {}
    for labels, count in series.items():
        totals[labels[0]] = totals.get(labels[0], 0) + count
    return totals


def transaction_view(meta: TxnMetadata, now_ms: int) -> dict[str, Any]:
    """One transactional id (transactions spec section 3.1); ``start_ms`` and ``duration_ms`` are null unless a
    transaction is open, and a completed one's partitions and groups are already cleared (section 3.8 step 3)."""
    started = meta.state in OPEN_TXN_STATES and meta.txn_start_ms >= 0
    return {
        "transactional_id": meta.transactional_id,
        "state": meta.state.value,
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "transaction_version": meta.transaction_version,
        "txn_timeout_ms": meta.txn_timeout_ms,
        "start_ms": meta.txn_start_ms if started else None,
        "duration_ms": max(now_ms - meta.txn_start_ms, 0) if started else None,
        "last_update_ms": meta.last_update_ms,
        "partitions": partitions_by_topic(meta.partitions),
        "groups": sorted(meta.groups),
    }


class ControlApi:
    def __init__(self, server: BrokerServer, limits: HttpLimits | None = None) -> None:
        """``limits``: time-outs and sizes of the HTTP edge (``http_guard``); the defaults suit a real broker."""
        self.server = server
        self.limits = limits or HttpLimits()
        self.metrics: BrokerMetrics | None = None  # built at the first scrape: prometheus_client loads then
        self._runner: web.AppRunner | None = None
        self._streams: set[asyncio.Queue[Record | None]] = set()
        app = web.Application(middlewares=[error_middleware(self.limits)], client_max_size=self.limits.max_body_bytes)
        app.add_routes(
            [
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
                web.get("/metrics", self.prometheus),
                web.get("/v1/groups", self.list_groups),
                web.get("/v1/groups/{group}", self.describe_group),
                web.get("/v1/groups/{group}/events", self.group_events),
                web.get("/v1/groups/{group}/wait", self.wait),
                web.post("/v1/groups/{group}/members/{member}/kick", self.kick),
                web.post("/v1/groups/{group}/instances/{instance}/fence", self.fence),
                web.post("/v1/groups/{group}/rebalance", self.rebalance),
                *offsets_api.routes(server, self.limits),  # reset, delete offsets, delete the group
                *share_api.routes(server),  # a share group's record-level view
                *cluster_api.routes(server, self.limits),  # the nodes: stop, start, move (issue 29)
                web.get("/v1/transactions", self.list_transactions),
                web.get("/v1/events", self.stream_events),
                web.post("/v1/events", self.post_event),
                web.get("/v1/faults", self.list_faults),
                web.post("/v1/faults", self.add_fault),
                web.delete("/v1/faults", self.clear_faults),
                web.delete("/v1/faults/{rule}", self.delete_fault),
                *console.routes(),  # the web console: /, /groups/{group}, /console/{file}
            ]
        )
        self.app = app

    async def protocol_factory(self) -> Callable[[], asyncio.Protocol]:
        """aiohttp's protocol for one connection, made by what this returns: ``ControlListener`` (the broker's
        control socket, broker/server/control_listener.py) hands every accepted connection to it."""
        self._runner = GuardedAppRunner(self.app, self.limits, shutdown_timeout=1.0, kafka_listener=self._kafka_at)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None  # setup made it
        return server

    def _kafka_at(self) -> str | None:
        """The first Kafka listener's advertised address: what a Kafka client on the control port is told."""
        listeners = self.server.listeners
        return host_port(listeners[0].api.identity.host, listeners[0].api.identity.port) if listeners else None

    async def stop(self) -> None:
        for queue in list(self._streams):
            queue.put_nowait(None)  # ends the stream's handler
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- helpers --------------------------------------------------------------------

    def _now(self) -> int:
        return self.server.clock.now_ms()

    # -- health and metrics -------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        return _json({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        if self.server.ready and self.server.coordinator.active:
            return _json({"status": "ready"})
        # The control port accepts before the state is built (broker/server/control_listener.py): "starting".
        return _json({"status": "stopping" if self.server.stopping else "starting"}, 503)

    async def prometheus(self, request: web.Request) -> web.Response:
        if self.metrics is None:
            # The event series were counted all along (broker/server/event_tally.py): nothing is lost by loading
            # prometheus_client (~5 MB, issue 17) only when someone scrapes.
            from broker.control.metrics import BrokerMetrics

            self.metrics = BrokerMetrics(self.server)
        response = web.Response(body=self.metrics.exposition())
        response.headers["Content-Type"] = self.metrics.content_type
        return response

    # -- groups ---------------------------------------------------------------------------

    async def list_groups(self, request: web.Request) -> web.Response:
        wanted = request.query.get("type") or None
        if wanted is not None and wanted.lower() not in GROUP_TYPES:
            return _error(400, f"type must be one of {list(GROUP_TYPES)}, got {_quoted(wanted)}")
        unknown = sorted(set(request.query) - {"type"})
        if unknown:
            return _error(400, f"unknown query parameter(s) {unknown}")
        summaries = sorted(
            (s for s in self.server.coordinator.group_summaries() if wanted is None or s.group_type == wanted.lower()),
            key=lambda summary: summary.group_id,
        )
        tally = self.server.tally
        counts: dict[str, dict[str, float]] = {
            GroupType.CLASSIC: _per_group(tally.rebalances.values),
            GroupType.CONSUMER: _per_group(tally.epoch_bumps.values),
        }
        return _json(
            {"groups": [with_lag(self.server, self._with_rebalances(group_summary(s), counts)) for s in summaries]}
        )

    def _with_rebalances(self, summary: dict[str, Any], counts: dict[str, dict[str, float]]) -> dict[str, Any]:
        """A listed group's rebalances so far (``/metrics``' counts, since the broker started) and its last one, as
        the buffered events tell it: what the console's groups page shows without reading every group's events."""
        group_id, group_type = summary["group_id"], summary["group_type"]
        # A share group has no rebalances (KIP-932: the assignor just reassigns); it counts none.
        summary["rebalances"] = int(counts.get(group_type, {}).get(group_id, 0))
        summary["last_rebalance"] = last_rebalance(
            list(self.server.events.history(group_id) or ()), group_type == GroupType.CONSUMER
        )
        return summary

    async def describe_group(self, request: web.Request) -> web.Response:
        group = self.server.coordinator.group_detail(request.match_info["group"])
        if group is None:
            return _error(404, f"no group {request.match_info['group']!r}")
        detail = with_offsets(self.server, group_detail(group, self._now()))
        return _json(share_api.with_share_partitions(self.server, detail))

    async def group_events(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        try:
            limit = _int_param(request, "limit", None, 0, 1_000_000)
            since = _int_param(request, "since_seq", 0, 0, 2**62) or 0
            with_broker = event_stream.broker_events_wanted(request)
        except (_BadRequest, event_stream.BadParameter) as bad:
            return _error(400, str(bad))
        hub = self.server.events
        since = event_stream.resume_point(hub, since, request.query.get("run_id") or None) or 0
        history = hub.history(group_id, since)
        if history is None and self.server.coordinator.group_summary(group_id) is None:
            return _error(404, f"no events for group {group_id!r}: the broker has none buffered and no such group")
        # A group whose buffered events have all made way for newer ones has none (the broker's own, if asked).
        records = event_stream.merged(history or (), event_stream.broker_history(hub, since) if with_broker else ())
        if limit is not None:
            records = records[-limit:] if limit > 0 else []
        return _json({"events": records})

    async def wait(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        wanted_state = request.query.get("state")
        state: str | None = None
        if wanted_state:
            state = _STATES.get(wanted_state.lower())
            if state is None:
                return _error(400, f"state must be one of {list(_STATES.values())}, got {wanted_state!r}")
        try:
            members = _int_param(request, "members", None, 0, 2**31 - 1)
            min_generation = _int_param(request, "min_generation", None, 0, 2**31 - 1)
            timeout_ms = _int_param(request, "timeout_ms", 30_000, 0, MAX_WAIT_MS)
        except _BadRequest as bad:
            return _error(400, str(bad))
        unknown = sorted(set(request.query) - {"state", "members", "min_generation", "timeout_ms"})
        if unknown:
            return _error(400, f"unknown query parameter(s) {unknown}")

        coordinator = self.server.coordinator

        def holds() -> GroupDetail | None:
            """The group as it is, if it is as asked; a summary is enough to tell."""
            summary = coordinator.group_summary(group_id)
            if summary is None:
                return None
            if state is not None and summary.state != state:
                return None
            if members is not None and summary.member_count != members:
                return None
            if min_generation is not None and summary.generation_id < min_generation:
                return None
            return coordinator.group_detail(group_id)

        found = holds()
        if found is not None:
            return _json(group_detail(found, self._now()))
        loop = asyncio.get_running_loop()
        done: asyncio.Future[GroupDetail] = loop.create_future()

        def check() -> None:
            if done.done():
                return
            group = holds()
            if group is not None:
                done.set_result(group)

        def on_event(record: Record) -> None:
            # Look after the coordinator's message has run to its end: mid-way, a group may look Stable
            # with the new member already counted and its rebalance not yet started.
            if record["group_id"] == group_id and not done.done():
                loop.call_soon(check)

        unsubscribe = self.server.events.subscribe(on_event)
        try:
            group = await asyncio.wait_for(done, (timeout_ms or 0) / 1000)
        except TimeoutError:
            current = coordinator.group_detail(group_id)
            return _error(
                408,
                f"timed out after {timeout_ms} ms waiting for group {group_id!r}",
                group=group_detail(current, self._now()) if current is not None else None,
            )
        finally:
            unsubscribe()
        return _json(group_detail(group, self._now()))

    # -- transactions ---------------------------------------------------------------------------

    async def list_transactions(self, request: web.Request) -> web.Response:
        """Every transactional id the coordinator holds (open ones, and idle ones until they expire: 3.9)."""
        wanted = request.query.get("state") or None
        unknown = sorted(set(request.query) - {"state"})
        if unknown:
            return _error(400, f"unknown query parameter(s) {unknown}")
        states: frozenset[TxnState] | None = None
        if wanted is not None:
            if wanted.lower() == "open":
                states = OPEN_TXN_STATES
            elif wanted.lower() in _TXN_STATES:
                states = frozenset({_TXN_STATES[wanted.lower()]})
            else:
                choices = ["open", *(state.value for state in _TXN_STATES.values())]
                return _error(400, f"state must be one of {choices}, got {_quoted(wanted)}")
        now = self._now()
        found = sorted(self.server.transactions.transactions.items())
        return _json(
            {
                "transactions": [
                    transaction_view(meta, now) for _, meta in found if states is None or meta.state in states
                ]
            }
        )

    # -- chaos verbs --------------------------------------------------------------------

    async def kick(self, request: web.Request) -> web.Response:
        group_id, member_id = request.match_info["group"], request.match_info["member"]
        try:
            self.server.coordinator.kick(group_id, member_id)
        except UnknownTarget as missing:
            return _error(404, str(missing))
        return _json({"group_id": group_id, "member_id": member_id, "kicked": True})

    async def fence(self, request: web.Request) -> web.Response:
        group_id, instance_id = request.match_info["group"], request.match_info["instance"]
        try:
            old_id, new_id = self.server.coordinator.fence(group_id, instance_id)
        except UnknownTarget as missing:
            return _error(404, str(missing))
        return _json(
            {"group_id": group_id, "group_instance_id": instance_id, "member_id": old_id, "new_member_id": new_id}
        )

    async def rebalance(self, request: web.Request) -> web.Response:
        try:
            self.server.coordinator.force_rebalance(request.match_info["group"])
        except UnknownTarget as missing:
            return _error(404, str(missing))
        except Conflict as conflict:
            return _error(409, str(conflict))
        summary = self.server.coordinator.group_summary(request.match_info["group"])
        assert summary is not None
        return _json(group_summary(summary))

    # -- fault rules ----------------------------------------------------------------------

    async def list_faults(self, request: web.Request) -> web.Response:
        now = self._now()
        return _json({"faults": [rule.to_json(now) for rule in self.server.faults.rules.values()]})

    async def add_fault(self, request: web.Request) -> web.Response:
        try:
            spec = bounded_json.loads(await read_body(request, self.limits))
        except bounded_json.BadJson as bad:
            return rejected(request, 400, str(bad))
        if not isinstance(spec, dict):
            return _error(400, "the body must be a JSON object describing one fault rule")
        try:
            rule = self.server.faults.add(spec)
        except FaultSpecError as bad:
            return _error(400, str(bad))
        log.info("fault rule added", **rule.to_json(self._now()))
        return _json(rule.to_json(self._now()), 201)

    async def delete_fault(self, request: web.Request) -> web.Response:
        rule_id = request.match_info["rule"]
        if not self.server.faults.delete(rule_id):
            return _error(404, f"no fault rule {rule_id!r}")
        log.info("fault rule deleted", id=rule_id)
        return web.Response(status=204)

    async def clear_faults(self, request: web.Request) -> web.Response:
        deleted = self.server.faults.clear()
        log.info("fault rules cleared", deleted=deleted)
        return _json({"deleted": deleted})

    # -- the event stream -------------------------------------------------------------------

    async def post_event(self, request: web.Request) -> web.Response:
        """A chaos runner's ``chaos_action`` (``posted_events``), recorded by the hub; 201 with the record."""
        try:
            group_id, fields = posted_events.parse(await read_body(request, self.limits))
        except posted_events.BadEvent as bad:
            return _error(400, str(bad))
        hub = self.server.events
        hub.emit(posted_events.CHAOS_ACTION, group_id, fields)
        return _json(next(iter(hub.history(group_id, hub.seq - 1) or ()), {}), 201)

    async def stream_events(self, request: web.Request) -> web.StreamResponse:
        """``event_stream.stream``: a replay from ``since_seq`` (or ``Last-Event-ID``) of this run, then live."""
        try:
            since = _int_param(request, "since_seq", None, 0, 2**62)
            with_broker = event_stream.broker_events_wanted(request)
        except (_BadRequest, event_stream.BadParameter) as bad:
            return _error(400, str(bad))
        run_id = request.query.get("run_id") or None
        return await event_stream.stream(request, self.server.events, self._streams, since, run_id, with_broker)
