"""``GET /v1/events`` (Server-Sent Events) and what it shares with ``GET /v1/groups/{group}/events``: where a
replay starts, and the broker's own start and stop events beside a group's.

A broker that restarts numbers its events from 1 again under a new ``run_id`` (docs/events.md, "Broker
restarts"), so a reader resuming after ``seq`` N of the old run would skip the new run's first N events. A resume
point from another run (``run_id`` given and not this one's), or above the newest ``seq`` (only a restart makes
one), replays from the start of what is buffered instead.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable

from aiohttp import web

from broker.events.hub import EventHub, Record
from broker.events.names import BROKER_EVENTS

KEEP_ALIVE_S = 15.0
SSE_QUEUE_LIMIT = 10_000
_SEQ = re.compile(r"[0-9]{1,19}")  # a Last-Event-ID taken as a sequence number
_TRUE, _FALSE = frozenset({"true", "1"}), frozenset({"false", "0", ""})


class BadParameter(Exception):
    pass


def broker_events_wanted(request: web.Request) -> bool:
    """``broker_events=true``: the broker's own ``broker_started``/``broker_stopped`` (group ``""``) as well."""
    raw = request.query.get("broker_events", "")
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    shown = repr(raw) if len(raw) <= 40 else repr(raw[:40]) + f"... ({len(raw)} characters)"
    raise BadParameter(f"broker_events must be true or false, got {shown}")


def resume_point(hub: EventHub, since: int | None, run_id: str | None) -> int | None:
    """Where a replay starts: after ``since``, unless it belongs to another run of the broker (then from 0)."""
    if since is None:
        return None
    if (run_id is not None and run_id != hub.run_id) or since > hub.seq:
        return 0
    return since


def broker_history(hub: EventHub, since: int = 0) -> list[Record]:
    """The broker's own start and stop events buffered after ``since`` (the ring of group ``""``)."""
    return [r for r in hub.history("", since) or () if r["event"] in BROKER_EVENTS]


def merged(*parts: Iterable[Record]) -> list[Record]:
    return sorted((record for part in parts for record in part), key=lambda r: r["seq"])


async def stream(
    request: web.Request,
    hub: EventHub,
    streams: set[asyncio.Queue[Record | None]],
    since: int | None,
    run_id: str | None,
    with_broker: bool,
) -> web.StreamResponse:
    group_id = request.query.get("group") or None
    last_event_id = request.headers.get("Last-Event-ID")
    # "All digits" in ASCII and at most 19 of them: str.isdigit() also takes "²", which int() refuses, and
    # int() refuses more than 4,300 digits; either was a 500. Anything else is ignored, as the contract says.
    if since is None and last_event_id and _SEQ.fullmatch(last_event_id):
        since = int(last_event_id)
    since = resume_point(hub, since, run_id)
    queue: asyncio.Queue[Record | None] = asyncio.Queue()
    dropped = 0

    def wanted(record: Record) -> bool:
        if group_id is None or record["group_id"] == group_id:
            return True
        return with_broker and record["group_id"] == "" and record["event"] in BROKER_EVENTS

    def on_event(record: Record) -> None:
        nonlocal dropped
        if not wanted(record):
            return
        if queue.qsize() >= SSE_QUEUE_LIMIT:
            dropped += 1  # a reader this far behind loses events rather than the broker its memory
            return
        queue.put_nowait(record)

    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    # Replay first, then subscribe, with nothing in between: the loop runs neither the coordinator nor
    # any other handler until the next await, so no event falls between the two.
    backlog: list[Record] = []
    if since is not None:
        groups = [group_id] if group_id is not None else list(hub.rings)
        backlog = merged(*(hub.history(name, since) or () for name in groups))
        if group_id is not None and with_broker:
            backlog = merged(backlog, broker_history(hub, since))
    for buffered in backlog:
        queue.put_nowait(buffered)
    unsubscribe: Callable[[], None] = hub.subscribe(on_event)
    streams.add(queue)
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), KEEP_ALIVE_S)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if item is None:
                break
            record = item
            if dropped:
                await response.write(f": {dropped} events dropped: this reader fell behind\n\n".encode())
                dropped = 0
            data = json.dumps(record, separators=(",", ":"), default=str)
            await response.write(f"id: {record['seq']}\nevent: {record['event']}\ndata: {data}\n\n".encode())
    except ConnectionResetError:
        pass
    finally:
        unsubscribe()
        streams.discard(queue)
    return response
