"""``chaos run --group-protocol share``: the consumers are one KIP-932 share group, and the records are judged.

What changes against the other modes (docs/spec/share-groups.md; the runner's schedule, producer and topic are the
same):

- the members are ``broker.chaos.share_consumer`` processes: confluent-kafka ``ShareConsumer``s (librdkafka 2.16's,
  a preview) in one share group on the run's topic, acknowledging implicitly (or, ``--share-ack explicit``, ACCEPTing
  each record), every batch written down before it is acknowledged;
- the broker the runner starts gets a short record lock (``--share-lock-ms``, default 2000 ms) and the session and
  heartbeat flags as its share-group timers (``broker_settings``); before any member fetches, the group gets
  ``share.auto.offset.reset=earliest`` and the lock as group configs (``configure_group``, IncrementalAlterConfigs
  on resource GROUP: the default ``latest`` would skip what the producer wrote before the first ShareFetch, spec
  6.2, trap 10), so a running broker (``--bootstrap``) gets the lock too, within its bounds;
- the kills are SIGKILL (the connection closes: the broker releases the victim's records at once, spec 6.8 and 7)
  or SIGSTOP (the victim stays connected; its records come back when their lock expires, spec 6.6), SIGCONT after
  ``--restart-after`` seconds (``schedule``);
- the drain waits for every produced record to be accepted (or delivered at the delivery limit), or to be below the
  share-partition start offset (SPSO) the broker reports (``ShareRecords.watch``): a worker SIGKILLed after the
  broker applied its acknowledgement and before it wrote the answer down accepted records no file says were;
- the verdict is ``share_judge.judge`` on what the workers wrote (``ShareRecords``): every record delivered and
  accepted, never two members under one lock, never again after acceptance, the redeliveries by cause; the
  broker's own counts (``GET /v1/groups/{group}``: delivered, redelivered and archived totals per share-partition;
  the ``records_released`` events by cause) are reported beside it, not judged;
- per kill: the records the victim held unaccepted, and how long until they were all delivered again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Set
from pathlib import Path
from typing import Any

from broker.chaos import load
from broker.chaos.launch import ChaosError, Incarnation, client_id, spawn_member
from broker.chaos.options import SHARE_ACK_MODES, share_lock_ms
from broker.chaos.protocols import JOINED, detect_cause
from broker.chaos.records import Records
from broker.chaos.schedule import Kill
from broker.chaos.share_judge import Ack, Delivery, Member, Verdict, judge
from broker.control.client import ControlClient, ControlError
from broker.coordinator.config import GroupConfig
from broker.events import names

ADMIN_TIMEOUT_S = 15.0
SPSO_EVERY_S = 1.0
MAX_POLL_RECORDS = 100
#: How long a worker holds each batch before acknowledging it (its --processing-ms): the work a consumer does, and
#: what makes a SIGKILL or SIGSTOP land while the victim holds records often rather than by luck (a poll of records
#: already there takes a few milliseconds).
PROCESSING_MS = 100

JSON = dict[str, Any]

# The broker's defaults for the bounds of the share-group timers (Kafka's GroupCoordinatorConfig and
# ShareGroupConfig, spec 11.1): a value outside its bounds refuses the broker's start, so the runner moves them.
_DEFAULTS = GroupConfig()


def broker_settings(args: argparse.Namespace) -> list[str]:
    """The flags that give the broker the runner starts this record lock and these share-group timers."""
    lock, session, heartbeat = share_lock_ms(args), args.session_timeout_ms, args.heartbeat_interval_ms
    d = _DEFAULTS
    return [
        "--group-share-record-lock-duration-ms", str(lock),
        "--group-share-min-record-lock-duration-ms", str(min(lock, d.share_min_record_lock_duration_ms)),
        "--group-share-max-record-lock-duration-ms", str(max(lock, d.share_max_record_lock_duration_ms)),
        "--group-share-session-timeout-ms", str(session),
        "--group-share-min-session-timeout-ms", str(min(session, d.share_min_session_timeout_ms)),
        "--group-share-max-session-timeout-ms", str(max(session, d.share_max_session_timeout_ms)),
        "--group-share-heartbeat-interval-ms", str(heartbeat),
        "--group-share-min-heartbeat-interval-ms", str(min(heartbeat, d.share_min_heartbeat_interval_ms)),
        "--group-share-max-heartbeat-interval-ms", str(max(heartbeat, d.share_max_heartbeat_interval_ms)),
    ]  # fmt: skip


def configure_group(bootstrap: str, group: str, lock_ms: int) -> int:
    """IncrementalAlterConfigs SET on resource GROUP (spec 11.2): start from the earliest offset, lock ``lock_ms``;
    then the broker's group.share.delivery.count.limit (DescribeConfigs BROKER), which the judge needs to tell an
    archived record from a lost one (a running broker may have its own)."""
    admin = load("confluent", "admin")
    client = admin.AdminClient({"bootstrap.servers": bootstrap, "client.id": "chaos-runner"})
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(lock_ms)}
    entries = [
        admin.ConfigEntry(name, value, incremental_operation=admin.AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = admin.ConfigResource(admin.ResourceType.GROUP, group, incremental_configs=entries)
    try:
        client.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S)[resource].result(
            timeout=ADMIN_TIMEOUT_S
        )
    except Exception as error:
        raise ChaosError(
            f"setting the share group's configs {configs} failed: {error} (a running broker takes a lock within its "
            "group.share.min.record.lock.duration.ms and max: choose --share-lock-ms within them)"
        ) from None
    return delivery_limit(admin, client)


def delivery_limit(admin: Any, client: Any) -> int:
    """group.share.delivery.count.limit as the broker describes it; the default if it does not."""
    try:
        node = next(iter(client.list_topics(timeout=ADMIN_TIMEOUT_S).brokers))
        resource = admin.ConfigResource(admin.ResourceType.BROKER, str(node))
        entries = client.describe_configs([resource], request_timeout=ADMIN_TIMEOUT_S)[resource].result(
            timeout=ADMIN_TIMEOUT_S
        )
        return int(entries["group.share.delivery.count.limit"].value)
    except Exception:  # an older or other broker: Kafka's default, which the runner's own broker has
        return int(_DEFAULTS.share_delivery_count_limit)


def start_worker(
    args: argparse.Namespace, bootstrap: str, topic: str, group: str, workdir: Path, slot: int, incarnation: int
) -> Incarnation:
    """``python -m broker.chaos.share_consumer`` as ``chaos-<slot>-<incarnation>``: its file and log in ``workdir``."""
    name = client_id(slot, incarnation)
    out, log = workdir / f"{name}.records", workdir / f"{name}.log"
    argv = [
        sys.executable, "-m", "broker.chaos.share_consumer", "--bootstrap", bootstrap, "--group", group,
        "--topic", topic, "--client-id", name, "--out", str(out), "--mode", args.share_ack or SHARE_ACK_MODES[0],
        "--max-poll-records", str(MAX_POLL_RECORDS), "--processing-ms", str(PROCESSING_MS),
    ]  # fmt: skip
    return spawn_member(args, argv, slot, incarnation, out, log)


class ShareRecords(Records):
    """The share workers' files (``share_consumer``), read incrementally: their deliveries and acknowledgements.

    ``keys`` counts deliveries by key and ``lines`` all deliveries (the progress line); ``settled`` is what the
    drain waits for; ``finished`` each partition's SPSO as the control API last said (``watch``, ``refresh``)."""

    def __init__(self, limit: int = _DEFAULTS.share_delivery_count_limit) -> None:
        super().__init__()
        self.limit = limit
        self.deliveries: list[Delivery] = []
        self.acks: list[Ack] = []
        self._keys_at: dict[tuple[int, int], str] = {}
        self._accepted: set[str] = set()
        self._at_limit: set[str] = set()
        self.finished: dict[int, int] = {}
        self._control: ControlClient | None = None
        self._group = ""
        self._asked = 0.0

    def watch(self, control: ControlClient, group: str) -> None:
        """Ask the broker for the group's SPSOs (at most once a second, from ``settled``)."""
        self._control, self._group = control, group

    def refresh(self) -> None:
        if self._control is None:
            return
        self._asked = time.monotonic()
        try:
            partitions = self._control.group(self._group).get("share_partitions") or []
        except ControlError:
            return
        self.finished = {int(p["partition"]): int(p["start_offset"]) for p in partitions}

    def read(self, path: Path) -> None:
        position = self._positions.get(path, 0)
        try:
            with path.open("rb") as file:
                file.seek(position)
                chunk = file.read()
        except FileNotFoundError:
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            return  # a torn last line (SIGKILL mid-write) is never read
        member = path.name.removesuffix(".records")
        for raw in chunk[: end + 1].splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if line.get("e") == "batch":
                self._batch(path, member, line)
            elif line.get("e") == "ack":
                self._ack(member, line)
        self._positions[path] = position + end + 1

    def _batch(self, path: Path, member: str, line: JSON) -> None:
        for partition, offset, count, key in line["records"]:
            delivery = Delivery(member, partition, offset, key, count, line["polled_at"], line["at"])
            self.deliveries.append(delivery)
            if key is not None:
                self.keys[key] += 1
                self._keys_at[(partition, offset)] = key
                if count is not None and count >= self.limit:
                    self._at_limit.add(key)
            self.lines += 1
            self.per_file[path.name] += 1

    def _ack(self, member: str, line: JSON) -> None:
        ack = Ack(member, line["partition"], tuple(line["offsets"]), line["at"], line.get("error"))
        self.acks.append(ack)
        if ack.error is None:
            for offset in ack.offsets:
                key = self._keys_at.get((ack.partition, offset))
                if key is not None:
                    self._accepted.add(key)

    def settled(self) -> Set[str]:
        """The keys accepted, delivered at the delivery limit (accepted or archived, either way finished), or below
        their partition's SPSO (finished, the broker says)."""
        if time.monotonic() - self._asked >= SPSO_EVERY_S:
            self.refresh()
        below = {key for (p, o), key in self._keys_at.items() if o < self.finished.get(p, 0)}
        return self._accepted | self._at_limit | below


def members(incarnations: list[Incarnation], stopped_at: float | None) -> dict[str, Member]:
    """Each process's life for the judge: SIGKILL, crash, close (SIGTERM, or the stop at ``stopped_at``), stops."""
    found: dict[str, Member] = {}
    for c in incarnations:
        closed = c.signalled_at if c.signalled == "SIGTERM" else stopped_at if c.signalled == "stop" else None
        found[c.client_id] = Member(
            c.client_id,
            killed_at=c.signalled_at if c.signalled == "SIGKILL" else None,
            exited_at=c.exited_at if c.signalled == "crashed" else None,
            closed_at=closed,
            stops=tuple(c.pauses),
        )
    return found


def broker_counts(control: ControlClient, group: str, events: list[JSON]) -> JSON:
    """What the broker says of the same records: its share-partitions' totals, its releases by cause."""
    released: Counter[str] = Counter()
    archived = 0
    for event in events:
        if event.get("event") == names.RECORDS_RELEASED:
            released[str(event.get("cause"))] += int(event.get("records") or 0)
        elif event.get("event") == names.RECORDS_ARCHIVED:
            archived += int(event.get("records") or 0)
    totals: JSON = {"delivered_total": None, "redelivered_total": None, "archived_total": None}
    try:
        partitions = control.group(group).get("share_partitions") or []
        for name in totals:
            totals[name] = sum(int(p.get(name) or 0) for p in partitions)
    except ControlError:
        pass
    return {**totals, "released_events_by_cause": dict(released), "archived_events": archived}


def verify(
    produced: Set[str], records: ShareRecords, incarnations: list[Incarnation], lock_ms: int, stopped_at: float | None
) -> Verdict:
    records.refresh()
    return judge(produced, records.deliveries, records.acks, members(incarnations, stopped_at), lock_ms / 1000,
                 records.limit, records.finished)  # fmt: skip


def report(
    records: ShareRecords, produced: Set[str], incarnations: list[Incarnation], kills: list[Kill],
    events: list[JSON], control: ControlClient, group: str, lock_ms: int, stopped_at: float | None,
    notes_out: list[str],
) -> JSON:
    """The report's ``share`` (and, under ``kills``, the per-kill rows the runner puts in the report's own): the
    verdict, the start offsets it was given, the broker's counts. Its notes are appended to ``notes_out``."""
    verdict = verify(produced, records, incarnations, lock_ms, stopped_at)
    rows = kill_reports(kills, records, events, verdict.accepted_deliveries)
    notes_out.extend(notes(verdict, rows))
    return {
        **verdict.json(), "lock_ms": lock_ms, "delivery_limit": records.limit, "kills": rows,
        "start_offsets": {str(p): o for p, o in sorted(records.finished.items())},
        "broker": broker_counts(control, group, events),
    }  # fmt: skip


def kill_reports(kills: list[Kill], records: ShareRecords, events: list[JSON], accepted: Set[Delivery]) -> list[JSON]:
    """Per kill: whom, how, the records the victim held (delivered to it by a poll begun before the signal, never
    accepted by it, not delivered again before the signal: a SIGSTOPped poll returns after the SIGCONT what the
    broker acquired for it before), how long until every one of them was delivered again and to whom; and the
    broker's member_expired/member_left for it, if any (for a SIGSTOP, before its SIGCONT: its close at the end of
    the run is no detection)."""
    clients = {
        e["member_id"]: str(e.get("client_id")) for e in events if e.get("event") in JOINED and e.get("member_id")
    }
    by_record: dict[tuple[int, int], list[Delivery]] = {}
    for d in records.deliveries:
        by_record.setdefault((d.partition, d.offset), []).append(d)
    rows = []
    for kill in kills:
        victim = kill.client_id
        back: list[float] = []
        back_to: set[str] = set()
        held = 0
        for found in by_record.values():
            mine = [d for d in found if d.member == victim and d.polled_at <= kill.at and d not in accepted]
            if not mine:
                continue
            count = max(d.delivery_count or 0 for d in mine)
            later = sorted((d for d in found if (d.delivery_count or 0) > count), key=lambda d: d.at)
            if later and later[0].at < kill.at:
                continue  # delivered again before this signal: not the victim's any more
            partition, offset = found[0].partition, found[0].offset
            if not later and offset < records.finished.get(partition, 0):
                continue  # accepted: the victim's acknowledgement reached the broker, its answer died with it
            held += 1
            if later:
                back.append(later[0].at - kill.at)
                back_to.add(later[0].member)
        member_ids = {m for m, c in clients.items() if c == victim}
        until_ms = kill.restarted_at * 1000 if kill.signal == "SIGSTOP" and kill.restarted_at else float("inf")
        gone = next(
            (e for e in events if e.get("event") in (names.MEMBER_EXPIRED, names.MEMBER_LEFT)
             and e.get("member_id") in member_ids and kill.at * 1000 - 2 <= e.get("ts_ms", 0) <= until_ms),
            None,
        )  # fmt: skip
        rows.append({
            "number": kill.number, "t_s": round(kill.t, 3), "at": kill.at, "slot": kill.slot,
            "incarnation": kill.incarnation, "client_id": victim, "pid": kill.pid, "signal": kill.signal,
            "restarted_as": kill.restarted_as,
            "restart_s": None if kill.restarted_at is None else round(kill.restarted_at - kill.at, 3),
            "member_ids": sorted(member_ids),
            "held": held, "came_back": len(back), "back_s": round(max(back), 3) if back else None,
            "came_back_to": sorted(back_to),
            "detect_event": None if gone is None else gone["event"],
            "detect_cause": None if gone is None else detect_cause(gone),
            "detect_s": None if gone is None else round((gone["ts_ms"] - kill.at * 1000) / 1000, 3),
        })  # fmt: skip
    return rows


def summarize(kills: list[JSON]) -> JSON:
    """Per signal: kills, records held, came back, the longest and mean time for a victim's records to come back."""

    def of(subset: list[JSON]) -> JSON:
        back = [k["back_s"] for k in subset if k["back_s"] is not None]
        return {
            "kills": len(subset),
            "held": sum(k["held"] for k in subset),
            "came_back": sum(k["came_back"] for k in subset),
            "back_s": {"mean": round(statistics.fmean(back), 3) if back else None, "max": max(back, default=None)},
        }

    return {**of(kills), "by_signal": {s: of([k for k in kills if k["signal"] == s]) for s in ("SIGKILL", "SIGSTOP")}}


def notes(verdict: Verdict, kills: list[JSON]) -> list[str]:
    found = []
    for row in kills:
        if row["held"] > row["came_back"]:
            found.append(
                f"kill #{row['number']} ({row['client_id']}): {row['held'] - row['came_back']} of the {row['held']} "
                "records it held never came back"
            )
    if verdict.archived:
        found.append(f"{len(verdict.archived)} records reached the delivery limit unaccepted: archived")
    return found
