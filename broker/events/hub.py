"""Group events: one record per change of a group, fanned out to the log, a file, ring buffers and watchers.

The coordinator only calls ``emit``; it never learns where a record goes. The record format is the
documented, versioned input of the analytics pipeline (``docs/events.md``): add fields freely, but never
rename or remove one without raising ``FORMAT_VERSION`` (``names.py``).
"""

from __future__ import annotations

import collections
import json
import logging
import logging.handlers
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from broker.events.names import FORMAT_VERSION
from broker.log import generation, get_logger, level_enabled
from broker.setting import Setting
from broker.timing.clock import Clock

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

Record = dict[str, Any]
Subscriber = Callable[[Record], None]

# The hub's settings, declared here once (broker/setting.py) and collected by broker/config/settings.py: the event
# log file and the rings the control API reads. Here rather than in a module of their own: this one is on serve's
# start-up path already, and every module more delays the first answer (issue 17).
EVENT_LOG = Setting("event_log", None, str, "append group events to this JSON-lines file (schema: docs/events.md)")
EVENT_LOG_MAX_BYTES = Setting(
    "event_log_max_bytes", 100 * 1024 * 1024, int, "rotate the event log when it reaches this size"
)
EVENT_LOG_BACKUPS = Setting("event_log_backups", 5, int, "rotated event logs to keep (PATH.1 is the newest)")
EVENT_BUFFER_SIZE = Setting("event_buffer_size", 1000, int, "events kept in memory per group for the control API")
EVENT_BUFFER_TOTAL = Setting(
    "event_buffer_total", 10_000, int, "events kept in memory for all groups together (oldest go first)"
)


class GroupEvents(Protocol):
    """What the coordinator emits into."""

    #: False when debug-level events would be dropped anyway, so the caller can skip building them.
    wants_debug: bool

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None: ...


class LoggedEvents:
    """Events as structlog lines only: what a coordinator without a hub (unit tests) emits into."""

    def __init__(self, log: FilteringBoundLogger | None = None) -> None:
        self.log = log or get_logger("coordinator")
        self.wants_debug = True

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        (self.log.debug if debug else self.log.info)(event, group_id=group_id, **fields)


class EventFile:
    """The JSON-lines event log, rotated by size (``logging``'s RotatingFileHandler does the renaming)."""

    def __init__(
        self, path: str, max_bytes: int = EVENT_LOG_MAX_BYTES.default, backups: int = EVENT_LOG_BACKUPS.default
    ) -> None:
        self.path = path
        self._handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def write(self, line: str) -> None:
        self._handler.emit(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def close(self) -> None:
        self._handler.close()


class EventHub:
    """Stamps each event (schema version, sequence, time, run id) and hands it to every sink."""

    def __init__(
        self,
        clock: Clock,
        *,
        ring_size: int = EVENT_BUFFER_SIZE.default,
        buffer_total: int = EVENT_BUFFER_TOTAL.default,
        debug: bool = False,
        file: EventFile | None = None,
        log: FilteringBoundLogger | None = None,
    ) -> None:
        self.clock = clock
        self.run_id = uuid.uuid4().hex[:12]
        self.wants_debug = debug
        self.ring_size = ring_size
        self.buffer_total = buffer_total
        self.file = file
        self.log = log or get_logger("events")  # structlog, imported at the first event
        self.seq = 0
        self.rings: dict[str, collections.deque[Record]] = {}
        # (seq, group) of buffered records, oldest first: a budget across all rings keeps memory bounded however
        # many groups and members there are (a 100,000-member broker would otherwise hold 100,000 joins).
        self._buffered: collections.deque[tuple[int, str]] = collections.deque()
        self._subscribers: list[Subscriber] = []
        # Whether self.log writes info lines, as of the logging configuration's generation (broker/log.py): at
        # --log-level warning the structlog call alone was half of an event's cost (two per ShareFetch).
        self._info_generation = -1
        self._info_enabled = True

    def _logs_info(self) -> bool:
        if self._info_generation != generation():
            self._info_enabled = level_enabled(self.log, logging.INFO)
            self._info_generation = generation()  # read after: the check may run the set-up (broker/log.py)
        return self._info_enabled

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        if debug and not self.wants_debug:
            return
        self.seq += 1
        record: Record = {
            "v": FORMAT_VERSION,
            "seq": self.seq,
            "ts_ms": self.clock.now_ms(),
            "run_id": self.run_id,
            "event": event,
            "group_id": group_id,
        }
        record.update(fields)
        self._buffer(group_id, record)
        if self.file is not None:
            self.file.write(json.dumps(record, separators=(",", ":"), default=str))
        if debug:
            self.log.debug(event, group_id=group_id, seq=self.seq, **fields)
        elif self._logs_info():
            self.log.info(event, group_id=group_id, seq=self.seq, **fields)
        for subscriber in list(self._subscribers):
            try:
                subscriber(record)
            except Exception:  # a watcher's failure must never stop the coordinator half-way through a step
                self.log.exception("event subscriber failed", subscriber=repr(subscriber), group_event=event)

    def _buffer(self, group_id: str, record: Record) -> None:
        ring = self.rings.get(group_id)
        if ring is None:
            ring = self.rings[group_id] = collections.deque(maxlen=self.ring_size)
        ring.append(record)
        buffered = self._buffered
        buffered.append((record["seq"], group_id))
        # Entries a full ring already dropped are still counted here, so this may evict a little early; the
        # bound is what matters: never more than buffer_total records in all rings together.
        while len(buffered) > self.buffer_total:
            seq, oldest_group = buffered.popleft()
            oldest = self.rings.get(oldest_group)
            if oldest and oldest[0]["seq"] == seq:
                oldest.popleft()
                if not oldest:
                    del self.rings[oldest_group]

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every record from now on; returns the function that stops it."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def history(self, group_id: str, since_seq: int = 0, limit: int | None = None) -> Iterator[Record] | None:
        """The group's buffered records after ``since_seq``, oldest first; None for a group never seen."""
        ring = self.rings.get(group_id)
        if ring is None:
            return None
        records = [r for r in ring if r["seq"] > since_seq]
        if limit is not None:
            records = records[-limit:] if limit > 0 else []
        return iter(records)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
