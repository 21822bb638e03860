"""``group-broker chaos run``: kill consumers on a seeded schedule and measure what the group does about it.

The runner starts a producer (``broker.chaos.producer``: keys ``k-000000``, ``k-000001``, ... at ``--rate``) and
``--consumers`` consumer processes (``broker.chaos.consumer``: at-least-once, every record appended to a file
before its offset is committed), waits for the group to be Stable, then every ``--interval`` seconds picks a live
consumer with a seeded RNG and sends it SIGKILL (share ``--kill-ratio``) or SIGTERM (a graceful close:
LeaveGroup), and starts a new incarnation of it ``--restart-after`` seconds later. Each incarnation has the
client id ``chaos-<slot>-<incarnation>``; the broker's ``member_joined`` events tie member ids to client ids.

After ``--duration`` seconds it stops killing, stops the producer, lets the consumers drain until every
acknowledged key has been consumed (bounded by ``--drain-timeout``), and stops them gracefully.

From the broker's group events (control API, ``/v1/groups/{group}/events``), per disruption:

- detect: the kill -> the broker's ``member_expired`` (SIGKILL: session timeout) or ``member_left`` (SIGTERM:
  LeaveGroup) event for the victim's member;
- recover: the kill -> the first ``sync_completed`` after the detection with ``unowned == 0`` (Stable again, every
  partition owned);
- rebalances: ``rebalance_started`` events from the kill to the recovery.

Event times are the broker's ``ts_ms`` (wall clock, epoch ms) against the runner's ``time.time()`` at the kill:
both are the same machine's wall clock. Records: produced (acknowledged), consumed (lines in the consumers'
files), unique, lost (acknowledged keys never consumed), duplicated. Exit 0 when nothing was lost, 1 otherwise.

Without ``--bootstrap`` the runner starts its own broker (``python -m broker serve --port 0 --admin-port 0``) with
the topic, and stops it at the end; with ``--bootstrap HOST:PORT --admin URL`` it uses a running one (the topic is
created if it does not exist).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from broker.chaos import CLIENTS, library_available, missing_library_message
from broker.control.client import ControlClient, ControlError

PROGRAM = "group-broker chaos run"
KEY_PREFIX = "k"
DEFAULT_ADMIN_URL = "http://127.0.0.1:9644"
ADMIN_URL_ENV = "GROUP_BROKER_ADMIN_URL"
BROKER_START_TIMEOUT_S = 30.0
STABLE_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
TICK_S = 0.1
EVENT_POLL_S = 0.25
PLAIN_PROGRESS_EVERY_S = 5.0
# A member's events must come after its kill; the broker stamps whole milliseconds.
CLOCK_SLACK_MS = 2

DESCRIPTION = (
    "Kill consumers of a group on a seeded schedule (SIGKILL or SIGTERM), restart them, and measure how long the "
    "broker takes to notice and the group to recover, and whether any record was lost."
)

JSON = dict[str, Any]
STYLE_TAG = re.compile(r"\[/?[a-z ]+\]")


class ChaosError(Exception):
    """The run cannot go on (the broker did not start, the group never became Stable, ...)."""


# -- arguments -----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``chaos run`` (sensible defaults for a one-minute demo)."""
    parser.description = parser.description or DESCRIPTION
    workload = parser.add_argument_group("workload")
    workload.add_argument("--client", choices=CLIENTS, default="confluent", help="client library (default confluent)")
    workload.add_argument("--consumers", type=int, default=3, metavar="N", help="consumer processes (default 3)")
    workload.add_argument("--partitions", type=int, default=6, metavar="N", help="topic partitions (default 6)")
    workload.add_argument("--topic", default=None, help="topic (default: chaos-<run id>, created if missing)")
    workload.add_argument("--group", default=None, help="consumer group (default: chaos-<run id>)")
    workload.add_argument("--rate", type=float, default=100.0, metavar="R", help="records per second (default 100)")
    workload.add_argument(
        "--assignor", choices=("range", "roundrobin", "cooperative-sticky"), default=None,
        help="partition assignor (default: the client's own)",
    )  # fmt: skip
    workload.add_argument("--session-timeout-ms", type=int, default=6000, metavar="MS", help="default 6000")
    workload.add_argument("--heartbeat-interval-ms", type=int, default=1000, metavar="MS", help="default 1000")

    schedule = parser.add_argument_group("schedule")
    schedule.add_argument("--duration", type=float, default=50.0, metavar="S", help="seconds of chaos (default 50)")
    schedule.add_argument("--interval", type=float, default=8.0, metavar="S", help="seconds between kills (default 8)")
    schedule.add_argument(
        "--kill-ratio", type=float, default=0.75, metavar="P",
        help="share of kills that are SIGKILL; the rest are SIGTERM, a graceful close (default 0.75)",
    )  # fmt: skip
    schedule.add_argument(
        "--restart-after", type=float, default=3.0, metavar="S", help="restart a killed consumer after S s (default 3)"
    )
    schedule.add_argument("--seed", type=int, default=None, help="RNG seed for the schedule (default: random)")
    schedule.add_argument(
        "--drain-timeout", type=float, default=60.0, metavar="S",
        help="after the chaos, wait at most S s for every produced record to be consumed (default 60)",
    )  # fmt: skip

    where = parser.add_argument_group("broker")
    where.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT",
        help="use this running broker (default: start one for the run, and stop it after)",
    )  # fmt: skip
    where.add_argument(
        "--admin", default=None, metavar="URL",
        help=f"its control API, with --bootstrap [env {ADMIN_URL_ENV}; default {DEFAULT_ADMIN_URL}]",
    )  # fmt: skip

    output = parser.add_argument_group("output")
    output.add_argument("--json", default=None, metavar="PATH", help="write the whole report as JSON here")
    output.add_argument(
        "--workdir", default=None, metavar="DIR",
        help="keep the consumers' record files and every process's log here (default: a temporary directory, "
        "deleted at the end unless the run failed or has notes)",
    )  # fmt: skip


def argument_problems(args: argparse.Namespace) -> list[str]:
    """What makes these options unable to make a run (empty when they can)."""
    problems = []
    if args.consumers < 1:
        problems.append("--consumers must be at least 1")
    if args.partitions < 1:
        problems.append("--partitions must be at least 1")
    if not args.rate > 0:
        problems.append("--rate must be positive")
    if not args.duration > 0:
        problems.append("--duration must be positive")
    if not args.interval > 0:
        problems.append("--interval must be positive")
    if not 0 <= args.kill_ratio <= 1:
        problems.append("--kill-ratio must be between 0 and 1")
    if args.restart_after < 0:
        problems.append("--restart-after must not be negative")
    if args.drain_timeout < 0:
        problems.append("--drain-timeout must not be negative")
    if args.session_timeout_ms < 1:
        problems.append("--session-timeout-ms must be positive")
    if not 0 < args.heartbeat_interval_ms < args.session_timeout_ms:
        problems.append("--heartbeat-interval-ms must be positive and below --session-timeout-ms")
    if args.admin is not None and args.bootstrap is None:
        problems.append("--admin needs --bootstrap (without it the runner starts its own broker)")
    if args.client == "aiokafka" and args.assignor == "cooperative-sticky":
        problems.append("aiokafka has no cooperative rebalance protocol: no --assignor cooperative-sticky")
    for name in ("topic", "group"):
        value = getattr(args, name)
        if value is not None and (not value or any(c.isspace() for c in value) or ":" in value):
            problems.append(f"--{name} must be a non-empty name without spaces or ':'")
    return problems


# -- processes -------------------------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """The children import ``broker.chaos``: put this checkout first on their path, unbuffer their output."""
    root = str(Path(__file__).resolve().parent.parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": root + (os.pathsep + path if path else "")}


def spawn(argv: list[str], stdout: IO[bytes] | int, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
    """A child in its own session: a Ctrl-C on the terminal reaches only the runner, which stops every child
    itself (consumers gracefully, in order) instead of having them all interrupted at once."""
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=child_env(), start_new_session=True
    )


@dataclass
class Incarnation:
    """One consumer process: slot ``slot``, its ``incarnation``-th start."""

    slot: int
    incarnation: int
    process: subprocess.Popen[bytes]
    out: Path
    log: Path
    started_at: float
    signalled: str | None = None  # "SIGKILL" / "SIGTERM" sent by the schedule, or "stop" at the end
    signalled_at: float | None = None
    exited_at: float | None = None

    @property
    def client_id(self) -> str:
        return client_id(self.slot, self.incarnation)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def client_id(slot: int, incarnation: int) -> str:
    return f"chaos-{slot}-{incarnation}"


class Records:
    """The consumers' record files, read incrementally: ``partition offset key`` per complete line."""

    def __init__(self) -> None:
        self.keys: Counter[str] = Counter()
        self.lines = 0
        self.per_file: Counter[str] = Counter()
        self._positions: dict[Path, int] = {}

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
            return  # nothing complete yet (a process killed mid-line leaves a torn last line: never counted)
        for line in chunk[: end + 1].decode("utf-8", errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            self.keys[parts[2]] += 1
            self.lines += 1
            self.per_file[path.name] += 1
        self._positions[path] = position + end + 1


@dataclass
class Produced:
    """The producer's final status: keys ``0 .. sent-1`` except ``unacked`` were acknowledged."""

    sent: int = 0
    acked: int = 0
    unacked: list[int] = field(default_factory=list)
    done: bool = False
    ready: bool = False
    errors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Produced:
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        return cls(
            sent=int(status.get("sent", 0)),
            acked=int(status.get("acked", 0)),
            unacked=[int(i) for i in status.get("unacked", [])],
            done=bool(status.get("done", False)),
            ready=bool(status.get("ready", False)),
            errors=dict(status.get("errors", {})),
        )

    def keys(self) -> set[str]:
        missing = set(self.unacked)
        return {f"{KEY_PREFIX}-{i:06d}" for i in range(self.sent) if i not in missing}


class Broker:
    """The broker the run uses: started by the runner (``managed``), or a running one."""

    def __init__(self, bootstrap: str, admin: str, process: subprocess.Popen[bytes] | None = None) -> None:
        self.bootstrap = bootstrap
        self.admin = admin
        self.process = process
        self.run_id: str | None = None

    @property
    def managed(self) -> bool:
        return self.process is not None

    @classmethod
    def start(cls, topic: str, partitions: int, log_path: Path) -> Broker:
        """``python -m broker serve`` on free ports; its JSON log lines (stderr) go on to ``log_path``."""
        argv = [
            sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0",
            "--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
            "--topic", f"{topic}:{partitions}", "--log-format", "json",
        ]  # fmt: skip
        process = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        found: dict[str, JSON] = {}
        ready = threading.Event()

        def follow() -> None:
            assert process.stderr is not None
            with log_path.open("wb") as log:
                for raw in process.stderr:
                    log.write(raw)
                    log.flush()
                    if ready.is_set():
                        continue
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(line, dict) and line.get("event") in ("broker listening", "control api listening"):
                        found[line["event"]] = line
                        if len(found) == 2:
                            ready.set()
            ready.set()  # the broker exited: stop waiting

        threading.Thread(target=follow, name="broker-log", daemon=True).start()
        if not ready.wait(BROKER_START_TIMEOUT_S) or len(found) < 2:
            stop_process(process, STOP_TIMEOUT_S)
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            missing = sorted({"broker listening", "control api listening"} - set(found))
            raise ChaosError(f"the broker did not start (no {', '.join(missing)} log line); its log ends:\n{tail}")
        kafka, control = found["broker listening"], found["control api listening"]
        return cls(f"127.0.0.1:{kafka['port']}", f"http://{control['host']}:{control['port']}", process)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        return stop_process(self.process, STOP_TIMEOUT_S)


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


# -- the group's events ------------------------------------------------------------------------------------------


class EventFollower:
    """Polls ``/v1/groups/{group}/events?since_seq=`` in a thread, and the group's summary for the progress line."""

    def __init__(self, control: ControlClient, group: str) -> None:
        self.control = control
        self.group = group
        self.events: list[JSON] = []
        self.summary: JSON | None = None
        self.errors: Counter[str] = Counter()
        self._last_seq = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        last_summary = 0.0
        while not self._stop.wait(EVENT_POLL_S):
            self.poll()
            if time.monotonic() - last_summary >= 1.0:
                last_summary = time.monotonic()
                with contextlib.suppress(ControlError):
                    self.summary = self.control.group(self.group)

    def poll(self) -> None:
        try:
            new = self.control.events(self.group, since_seq=self._last_seq)
        except ControlError as error:
            if error.status != 404:  # 404: the broker has not seen the group yet
                self.errors[str(error)] += 1
            return
        with self._lock:
            for event in new:
                if isinstance(event.get("seq"), int) and event["seq"] > self._last_seq:
                    self.events.append(event)
                    self._last_seq = event["seq"]

    def snapshot(self) -> list[JSON]:
        with self._lock:
            return list(self.events)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll()


# -- measurements ------------------------------------------------------------------------------------------------


@dataclass
class Kill:
    number: int
    slot: int
    incarnation: int
    pid: int
    signal: str
    at: float  # time.time() when the signal was sent
    t: float  # seconds since the schedule started
    restarted_as: str | None = None
    restarted_at: float | None = None
    measured: JSON = field(default_factory=dict)

    @property
    def client_id(self) -> str:
        return client_id(self.slot, self.incarnation)


def member_clients(events: list[JSON]) -> dict[str, str]:
    """member id -> client id, from member_joined (and a static member's replacement)."""
    clients: dict[str, str] = {}
    for event in events:
        if event.get("event") == "member_joined" and event.get("member_id"):
            clients[event["member_id"]] = str(event.get("client_id"))
    return clients


def measure(kill: Kill, events: list[JSON], clients: dict[str, str], next_kill: Kill | None) -> JSON:
    """Detection, recovery and rebalances of one disruption, from the group's events."""
    kill_ms = kill.at * 1000
    victims = {member for member, client in clients.items() if client == kill.client_id}
    after = [e for e in events if e.get("ts_ms", 0) >= kill_ms - CLOCK_SLACK_MS]
    result: JSON = {
        "member_ids": sorted(victims),
        "detected": False,
        "detect_event": None,
        "detect_cause": None,
        "detect_s": None,
        "recovered": False,
        "recover_s": None,
        "recover_generation": None,
        "rebalances": None,
        "rejoin_s": None,
        "overlapped": False,
    }
    detection = next(
        (e for e in after if e.get("event") in ("member_expired", "member_left") and e.get("member_id") in victims),
        None,
    )
    if detection is None:
        return result
    result.update(
        detected=True,
        detect_event=detection["event"],
        detect_cause=detection.get("cause"),
        detect_s=round((detection["ts_ms"] - kill_ms) / 1000, 3),
    )
    recovery = next(
        (
            e
            for e in after
            if e["seq"] > detection["seq"] and e.get("event") == "sync_completed" and e.get("unowned") == 0
        ),
        None,
    )
    if recovery is not None:
        result.update(
            recovered=True,
            recover_s=round((recovery["ts_ms"] - kill_ms) / 1000, 3),
            recover_generation=recovery.get("generation_id"),
            rebalances=sum(1 for e in after if e.get("event") == "rebalance_started" and e["seq"] < recovery["seq"]),
        )
        result["overlapped"] = next_kill is not None and next_kill.at * 1000 < recovery["ts_ms"]
    if kill.restarted_as is not None:
        newcomers = {member for member, client in clients.items() if client == kill.restarted_as}
        rejoined = next(
            (
                e
                for e in after
                if e.get("event") == "sync_completed"
                and e.get("unowned") == 0
                and any((e.get("assignments") or {}).get(member) for member in newcomers)
            ),
            None,
        )
        if rejoined is not None:
            result["rejoin_s"] = round((rejoined["ts_ms"] - kill_ms) / 1000, 3)
    return result


def stats(values: list[float]) -> JSON:
    if not values:
        return {"count": 0, "mean": None, "max": None, "min": None}
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
    }


def summarize(kills: list[JSON]) -> JSON:
    def of(subset: list[JSON]) -> JSON:
        return {
            "kills": len(subset),
            "detected": sum(1 for k in subset if k["detected"]),
            "recovered": sum(1 for k in subset if k["recovered"]),
            "detect_s": stats([k["detect_s"] for k in subset if k["detect_s"] is not None]),
            "recover_s": stats([k["recover_s"] for k in subset if k["recover_s"] is not None]),
            "rebalances": stats([float(k["rebalances"]) for k in subset if k["rebalances"] is not None]),
        }

    return {
        **of(kills),
        "by_signal": {name: of([k for k in kills if k["signal"] == name]) for name in ("SIGKILL", "SIGTERM")},
    }


# -- display -----------------------------------------------------------------------------------------------------


class Display:
    """A live status line on a terminal (rich), plain lines otherwise."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.console: Console | None = None
        self._live: Live | None = None
        self._last_plain = -math.inf
        if sys.stdout.isatty():
            self.console = Console()
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:6.1f}s"

    def say(self, message: str) -> None:
        """One line above the status line; ``message`` may carry rich style tags ([red]...[/red])."""
        if self.console is not None:
            self.console.print(f"[dim]{self.elapsed()}[/dim] {message}", highlight=False)
        else:
            print(f"[{self.elapsed()}] {STYLE_TAG.sub('', message)}", flush=True)

    def progress(self, phase: str, kills: int, produced: int, consumed: int, summary: JSON | None) -> None:
        if summary is not None:
            members = summary.get("members")
            count = len(members) if isinstance(members, list) else members
            group = f"{summary.get('state')} gen {summary.get('generation_id')}, {count} members"
        else:
            group = "-"
        line = f"{phase:<8} | kills {kills} | produced {produced} | consumed {consumed} | {group}"
        if self._live is not None:
            self._live.update(Text(f"{self.elapsed()} {line}", no_wrap=True, overflow="ellipsis"))
        elif time.monotonic() - self._last_plain >= PLAIN_PROGRESS_EVERY_S:
            self._last_plain = time.monotonic()
            print(f"[{self.elapsed()}] {line}", flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


KILL_COLUMNS = ("#", "at", "consumer", "signal", "detected by", "detect", "recover", "rebal", "rejoin")


def kill_row(kill: JSON) -> tuple[str, ...]:
    """One line of the kill table: times in seconds from the kill; "detected by" is the event's cause."""
    return (
        str(kill["number"]),
        f"{kill['t_s']:.1f}",
        kill["client_id"],
        kill["signal"],
        "-" if kill["detect_event"] is None else str(kill["detect_cause"] or kill["detect_event"]),
        fmt_s(kill["detect_s"]),
        fmt_s(kill["recover_s"]) + ("*" if kill["overlapped"] else ""),
        "-" if kill["rebalances"] is None else str(kill["rebalances"]),
        fmt_s(kill["rejoin_s"]),
    )


def summary_rows(summary: JSON) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name, part in [("all", summary), *summary["by_signal"].items()]:
        if part["kills"]:
            rows.append((
                name, str(part["kills"]), str(part["detected"]), str(part["recovered"]),
                f"{fmt_s(part['detect_s']['mean'])} / {fmt_s(part['detect_s']['max'])}",
                f"{fmt_s(part['recover_s']['mean'])} / {fmt_s(part['recover_s']['max'])}",
            ))  # fmt: skip
    return rows


SUMMARY_COLUMNS = ("", "kills", "detected", "recovered", "detect mean/max", "recover mean/max")
LEGEND = (
    "seconds; at: since the chaos started; detect: kill -> member_expired/member_left; recover: kill -> Stable with "
    "every partition owned; rebal: rebalances in between; rejoin: kill -> the restarted consumer owns partitions"
)


def records_line(report: JSON) -> str:
    records = report["records"]
    return (
        f"records: produced {records['produced']}, consumed {records['consumed']}, unique {records['unique']}, "
        f"lost {records['lost']}, duplicated {records['duplicated']}"
    )


def print_report(report: JSON) -> None:
    console = Console(width=None if sys.stdout.isatty() else 100)
    title = f"{len(report['kills'])} kills ({report['config']['client']}, seed {report['config']['seed']})"
    table = Table(
        title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False, caption=LEGEND, caption_justify="left"
    )
    for column in KILL_COLUMNS:
        left = column in ("consumer", "signal", "detected by")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    table.columns[KILL_COLUMNS.index("detected by")].min_width = len("session_timeout")
    for kill in report["kills"]:
        table.add_row(*kill_row(kill))
    console.print(table)
    totals = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in SUMMARY_COLUMNS:
        totals.add_column(column, justify="right" if column else "left")
    for row in summary_rows(report["summary"]):
        totals.add_row(*row)
    console.print(totals)
    verdict = "[bold green]OK[/]" if report["ok"] else "[bold red]FAILED[/]"
    console.print(f"{records_line(report)}  {verdict}", highlight=False)
    if any(kill["overlapped"] for kill in report["kills"]):
        console.print("* the next kill came before this recovery", highlight=False)
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)


# -- the run -----------------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.run_id = uuid.uuid4().hex[:8]
        self.topic: str = args.topic or f"chaos-{self.run_id}"
        self.group: str = args.group or f"chaos-{self.run_id}"
        self.seed: int = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        self.rng = random.Random(self.seed)
        self.display = Display()
        self.broker: Broker | None = None
        self.control: ControlClient | None = None
        self.follower: EventFollower | None = None
        self.producer: subprocess.Popen[bytes] | None = None
        self.producer_status = workdir / "producer.json"
        self.slots: dict[int, Incarnation] = {}
        self.incarnations: list[Incarnation] = []
        self.restarts: dict[int, float] = {}  # slot -> time.time() to start the next incarnation
        self.kills: list[Kill] = []
        self.records = Records()
        self.notes: list[str] = []
        self.schedule_started: float | None = None
        self.chaos_ended: float | None = None
        self.drained: float | None = None
        self.phase = "starting"
        self.producer_exited = False

    # -- processes

    def start_consumer(self, slot: int, incarnation: int) -> Incarnation:
        assert self.broker is not None
        name = client_id(slot, incarnation)
        out, log = self.workdir / f"{name}.records", self.workdir / f"{name}.log"
        argv = [
            sys.executable, "-m", "broker.chaos.consumer", "--client", self.args.client,
            "--bootstrap", self.broker.bootstrap, "--group", self.group, "--topic", self.topic,
            "--client-id", name, "--out", str(out),
            "--session-timeout-ms", str(self.args.session_timeout_ms),
            "--heartbeat-interval-ms", str(self.args.heartbeat_interval_ms),
        ]  # fmt: skip
        if self.args.assignor is not None:
            argv += ["--assignor", self.args.assignor]
        with log.open("wb") as stderr:
            process = spawn(argv, stdout=stderr, stderr=subprocess.STDOUT)
        consumer = Incarnation(slot, incarnation, process, out, log, time.time())
        self.slots[slot] = consumer
        self.incarnations.append(consumer)
        return consumer

    def start_producer(self) -> None:
        assert self.broker is not None
        argv = [
            sys.executable, "-m", "broker.chaos.producer", "--client", self.args.client,
            "--bootstrap", self.broker.bootstrap, "--topic", self.topic, "--status", str(self.producer_status),
            "--rate", str(self.args.rate), "--prefix", KEY_PREFIX, "--partitions", str(self.args.partitions),
            "--client-id", "chaos-producer",
        ]  # fmt: skip
        with (self.workdir / "producer.log").open("wb") as stderr:
            self.producer = spawn(argv, stdout=stderr, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + BROKER_START_TIMEOUT_S
        while not Produced.load(self.producer_status).ready:
            if self.producer.poll() is not None:
                raise ChaosError(f"the producer exited with {self.producer.returncode}: {self.tail('producer.log')}")
            if time.monotonic() > deadline:
                raise ChaosError(f"the producer was not ready after {BROKER_START_TIMEOUT_S:.0f}s")
            time.sleep(TICK_S)

    def tail(self, name: str, chars: int = 1500) -> str:
        path = self.workdir / name
        return path.read_text(errors="replace")[-chars:].strip() if path.exists() else ""

    def reap(self) -> None:
        """Notice exits: a process the schedule did not stop has crashed (it is restarted like a killed one)."""
        now = time.time()
        for consumer in self.incarnations:
            if consumer.exited_at is not None or consumer.alive:
                continue
            consumer.exited_at = now
            if consumer.signalled is None:
                consumer.signalled = "crashed"
                self.notes.append(
                    f"{consumer.client_id} exited by itself with {consumer.process.returncode}: "
                    f"{self.tail(consumer.log.name, 300)}"
                )
                self.display.say(f"[red]{consumer.client_id} crashed[/red] (exit {consumer.process.returncode})")
                if self.slots.get(consumer.slot) is consumer and consumer.slot not in self.restarts:
                    self.restarts[consumer.slot] = now + self.args.restart_after
            elif consumer.signalled == "SIGTERM" and consumer.process.returncode != 0:
                self.notes.append(f"{consumer.client_id} exited with {consumer.process.returncode} after SIGTERM")
        for consumer in self.incarnations:  # a graceful close that hangs becomes a SIGKILL
            if (
                consumer.signalled == "SIGTERM"
                and consumer.alive
                and consumer.signalled_at is not None
                and now - consumer.signalled_at > STOP_TIMEOUT_S
            ):
                self.notes.append(f"{consumer.client_id} did not exit {STOP_TIMEOUT_S:.0f}s after SIGTERM: SIGKILL")
                consumer.process.kill()
                consumer.signalled_at = None
        producer = self.producer
        if self.phase == "chaos" and not self.producer_exited and producer is not None and producer.poll() is not None:
            self.producer_exited = True
            self.notes.append(f"the producer stopped early (exit {producer.returncode})")
            self.display.say(f"[red]the producer stopped early[/red] (exit {producer.returncode})")

    def restart_due(self) -> None:
        now = time.time()
        for slot, due in sorted(self.restarts.items()):
            old = self.slots[slot]
            if now < due or old.alive:  # a SIGTERMed consumer gets to finish closing first
                continue
            del self.restarts[slot]
            new = self.start_consumer(slot, old.incarnation + 1)
            for kill in self.kills:
                if kill.slot == slot and kill.incarnation == old.incarnation:
                    kill.restarted_as, kill.restarted_at = new.client_id, new.started_at
            self.display.say(f"restarted slot {slot} as {new.client_id} (pid {new.process.pid})")

    def kill_one(self) -> None:
        assert self.schedule_started is not None
        number = len(self.kills) + 1
        how = "SIGKILL" if self.rng.random() < self.args.kill_ratio else "SIGTERM"
        live = sorted(slot for slot, c in self.slots.items() if c.alive and c.signalled is None)
        if not live:
            self.notes.append(f"kill #{number} skipped: no live consumer")
            self.display.say(f"kill #{number} skipped: no live consumer")
            return
        victim = self.slots[self.rng.choice(live)]
        victim.process.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        at = time.time()
        victim.signalled, victim.signalled_at = how, at
        kill = Kill(number, victim.slot, victim.incarnation, victim.process.pid, how, at, at - self.schedule_started)
        self.kills.append(kill)
        self.restarts[victim.slot] = at + self.args.restart_after
        style = "red" if how == "SIGKILL" else "yellow"
        self.display.say(f"kill #{number}: [{style}]{how}[/{style}] {victim.client_id} (pid {victim.process.pid})")

    def tick(self) -> None:
        self.reap()
        self.restart_due()
        for consumer in self.incarnations:
            self.records.read(consumer.out)
        produced = Produced.load(self.producer_status).acked
        summary = self.follower.summary if self.follower is not None else None
        self.display.progress(self.phase, len(self.kills), produced, self.records.lines, summary)

    # -- phases

    def setup(self) -> None:
        if self.args.bootstrap is None:
            self.display.say("starting a broker")
            self.broker = Broker.start(self.topic, self.args.partitions, self.workdir / "broker.log")
        else:
            admin = self.args.admin or os.environ.get(ADMIN_URL_ENV) or DEFAULT_ADMIN_URL
            self.broker = Broker(self.args.bootstrap, admin)
        self.control = ControlClient(self.broker.admin)
        try:
            self.control.health()
        except ControlError as error:
            raise ChaosError(str(error)) from None
        self.display.say(
            f"broker {self.broker.bootstrap} (control API {self.broker.admin}), topic {self.topic} "
            f"({self.args.partitions} partitions), group {self.group}, {self.args.consumers} {self.args.client} "
            f"consumers, seed {self.seed}"
        )
        self.follower = EventFollower(self.control, self.group)
        self.follower.start()
        self.start_producer()
        for slot in range(self.args.consumers):
            self.start_consumer(slot, 0)
        self.wait_stable("the consumers to join")

    def wait_stable(self, what: str, timeout_s: float = STABLE_TIMEOUT_S) -> bool:
        """Until the group is Stable with every consumer in it, ticking; ChaosError at the start, False later."""
        assert self.control is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.tick()
            try:
                self.control.wait(self.group, state="Stable", members=self.args.consumers, timeout_ms=500)
                return True
            except ControlError as error:
                if error.status != 408:
                    raise ChaosError(f"waiting for {what}: {error}") from None
        if self.schedule_started is None:
            raise ChaosError(f"the group {self.group} was not Stable with {self.args.consumers} members "
                             f"after {timeout_s:.0f}s, waiting for {what}")  # fmt: skip
        self.notes.append(f"the group was not Stable with {self.args.consumers} members {timeout_s:.0f}s after {what}")
        return False

    def chaos(self) -> None:
        self.phase = "chaos"
        self.schedule_started = start = time.time()
        self.display.say(
            f"chaos for {self.args.duration:g}s: a kill every {self.args.interval:g}s "
            f"({self.args.kill_ratio:.0%} SIGKILL), restarts after {self.args.restart_after:g}s"
        )
        next_kill = start + self.args.interval
        end = start + self.args.duration
        while time.time() < end:
            if time.time() >= next_kill:
                self.kill_one()
                next_kill += self.args.interval
            self.tick()
            time.sleep(TICK_S)
        self.chaos_ended = time.time()

    def stop_producer(self) -> Produced:
        self.phase = "draining"
        assert self.producer is not None
        code = stop_process(self.producer, STOP_TIMEOUT_S)
        produced = Produced.load(self.producer_status)
        if code != 0 or not produced.done:
            self.notes.append(f"the producer exited with {code}: {self.tail('producer.log', 500)}")
        if produced.unacked:
            self.notes.append(f"{len(produced.unacked)} records sent but not acknowledged: {produced.errors}")
        self.display.say(f"producer stopped: {produced.acked} records acknowledged")
        return produced

    def drain(self, produced: Produced) -> None:
        """Restarts still due, then until every acknowledged key is consumed and the group is whole again."""
        wanted = produced.keys()
        deadline = time.monotonic() + self.args.drain_timeout
        while time.monotonic() < deadline:
            self.tick()
            if not self.restarts and wanted <= self.records.keys.keys():
                break
            time.sleep(TICK_S)
        else:
            missing = len(wanted - self.records.keys.keys())
            self.notes.append(f"drain timed out after {self.args.drain_timeout:g}s with {missing} records unconsumed")
        # Let the last disruption settle so it can be measured: Stable with every consumer, then the events.
        self.wait_stable("the last restart", timeout_s=max(10.0, self.args.session_timeout_ms / 1000 * 3))
        time.sleep(2 * EVENT_POLL_S)
        self.drained = time.time()
        self.display.say(f"drained: {self.records.lines} records consumed")

    def stop_consumers(self) -> None:
        self.phase = "stopping"
        for consumer in self.slots.values():
            if consumer.alive:
                consumer.signalled = consumer.signalled or "stop"
                consumer.process.terminate()
        for consumer in self.slots.values():
            try:
                code = consumer.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                consumer.process.kill()
                code = consumer.process.wait()
                self.notes.append(f"{consumer.client_id} did not close within {STOP_TIMEOUT_S:.0f}s: SIGKILL")
            if code != 0 and consumer.signalled == "stop":
                self.notes.append(f"{consumer.client_id} exited with {code} at the end: {self.tail(consumer.log.name)}")
        for consumer in self.incarnations:
            self.records.read(consumer.out)

    def kill_everything(self) -> None:
        """Whatever still runs (after an error or an interrupt): SIGTERM, a few seconds to close, then SIGKILL."""
        processes = [c.process for c in self.incarnations] + ([self.producer] if self.producer else [])
        running = [p for p in processes if p.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + 5
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.follower is not None:
            self.follower.stop()
        if self.broker is not None:
            self.broker.stop()

    # -- the report

    def report(self, produced: Produced, finished_at: float) -> JSON:
        assert self.broker is not None and self.follower is not None
        events = self.follower.snapshot()
        run_ids = sorted({str(e.get("run_id")) for e in events})
        clients = member_clients(events)
        kills: list[JSON] = []
        for index, kill in enumerate(self.kills):
            following = self.kills[index + 1] if index + 1 < len(self.kills) else None
            kills.append({
                "number": kill.number,
                "t_s": round(kill.t, 3),
                "at": kill.at,
                "slot": kill.slot,
                "incarnation": kill.incarnation,
                "client_id": kill.client_id,
                "pid": kill.pid,
                "signal": kill.signal,
                "restarted_as": kill.restarted_as,
                "restart_s": None if kill.restarted_at is None else round(kill.restarted_at - kill.at, 3),
                **measure(kill, events, clients, following),
            })  # fmt: skip
        for row in kills:
            if not row["member_ids"]:
                self.notes.append(f"kill #{row['number']} ({row['client_id']}): it had not joined the group yet")
            elif not row["detected"]:
                self.notes.append(f"kill #{row['number']} ({row['client_id']}) was never detected by the broker")
            elif not row["recovered"]:
                self.notes.append(f"kill #{row['number']} ({row['client_id']}): no recovery (sync with unowned 0)")
        wanted = produced.keys()
        seen = self.records.keys
        lost = sorted(wanted - seen.keys())
        unexpected = sorted(set(seen) - wanted)
        duplicated = sum(n - 1 for n in seen.values() if n > 1)
        if produced.acked == 0:
            self.notes.append("no record was acknowledged: nothing to check")
        start = self.schedule_started
        rebalances = [e for e in events if e.get("event") == "rebalance_started"]
        records: JSON = {
            "sent": produced.sent,
            "produced": len(wanted),
            "unacked": len(produced.unacked),
            "consumed": self.records.lines,
            "unique": len(seen),
            "lost": len(lost),
            "duplicated": duplicated,
            "unexpected": len(unexpected),
            "lost_keys": lost[:100],
            "duplicated_keys": sorted(k for k, n in seen.items() if n > 1)[:100],
        }
        return {
            "version": 1,
            "ok": not lost and produced.acked > 0,
            "config": {
                "client": self.args.client,
                "consumers": self.args.consumers,
                "partitions": self.args.partitions,
                "topic": self.topic,
                "group": self.group,
                "rate": self.args.rate,
                "assignor": self.args.assignor,
                "session_timeout_ms": self.args.session_timeout_ms,
                "heartbeat_interval_ms": self.args.heartbeat_interval_ms,
                "duration_s": self.args.duration,
                "interval_s": self.args.interval,
                "kill_ratio": self.args.kill_ratio,
                "restart_after_s": self.args.restart_after,
                "drain_timeout_s": self.args.drain_timeout,
                "seed": self.seed,
            },
            "broker": {
                "bootstrap": self.broker.bootstrap,
                "admin": self.broker.admin,
                "managed": self.broker.managed,
                "run_ids": run_ids,
            },
            "chaos_started_at": start,
            "chaos_ended_at": self.chaos_ended,
            "finished_at": finished_at,
            "records": records,
            "kills": kills,
            "summary": summarize(kills),
            "group": {
                "events": len(events),
                "rebalances": len(rebalances),
                # from the first kill's clock start to the end of the drain, before the consumers were stopped
                "rebalances_during_run": sum(
                    1
                    for e in rebalances
                    if start is not None and start * 1000 <= e["ts_ms"] <= (self.drained or 0) * 1000
                ),
                "generation": max((e.get("generation_id") or 0 for e in events), default=0),
                "event_errors": dict(self.follower.errors),
            },
            "consumers": [
                {
                    "client_id": c.client_id,
                    "slot": c.slot,
                    "incarnation": c.incarnation,
                    "pid": c.process.pid,
                    "member_ids": sorted(m for m, client in clients.items() if client == c.client_id),
                    "started_at": c.started_at,
                    "stopped_by": c.signalled,
                    "exit_code": c.process.returncode,
                    "records": self.records.per_file[c.out.name],
                }
                for c in self.incarnations
            ],
            "notes": self.notes,
            "workdir": str(self.workdir),
        }

    def execute(self) -> JSON:
        try:
            self.setup()
            self.chaos()
            produced = self.stop_producer()
            self.drain(produced)
            self.stop_consumers()
            assert self.follower is not None
            self.follower.stop()
            return self.report(produced, time.time())
        finally:
            self.display.close()
            self.kill_everything()


def run(args: argparse.Namespace) -> int:
    """Run the scenario ``args`` describes; 0 when no acknowledged record was lost, 1 otherwise, 2 for bad options."""
    problems = argument_problems(args)
    if problems:
        print(f"{PROGRAM}: error: {'; '.join(problems)}", file=sys.stderr)
        return 2
    if not library_available(args.client):
        print(f"{PROGRAM}: error: {missing_library_message(args.client)}", file=sys.stderr)
        return 2
    keep = args.workdir is not None
    workdir = Path(args.workdir) if keep else Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    chaos = Run(args, workdir)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = chaos.execute()
    except ChaosError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        if keep or any(workdir.iterdir()):
            print(f"{PROGRAM}: logs are in {workdir}", file=sys.stderr)
        else:
            workdir.rmdir()
        if args.json is not None:
            write_json(args.json, {"version": 1, "ok": False, "error": str(error), "workdir": str(workdir)})
        return 1
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted; logs are in {workdir}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_report(report)
    if args.json is not None:
        write_json(args.json, report)
    if not keep and report["ok"] and not report["notes"]:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs and record files: {workdir}")
    return 0 if report["ok"] else 1


def write_json(path: str, report: JSON) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(report, file, indent=2)
        file.write("\n")


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.chaos.runner", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    problems = argument_problems(args)
    if problems:
        parser.error("; ".join(problems))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
