"""``chaos run --broker-restart-every S``: the runner SIGKILLs its own broker every S seconds and starts it again.

The broker the run starts then has a data directory (``<workdir>/broker-data``) and fixed ports (``launch``), so
the same command brings back the same broker where every client looks for it. The restarts have their own timer,
at S, 2S, 3S, ... seconds after the chaos starts; consumer kills go on at ``--interval`` as before. A restart is
done in the runner's loop: SIGKILL, the same command again, and back once both listeners log (``down_ms``); then
the new broker's ``broker_started`` event, read from the control API's event stream (``since_seq=0``: the event
is in the broker's own ring, group ``""``), says what it loaded from the directory and how long that took.

What a restart costs the clients is read from the consumers' commit files (``consumer --commits``): for each
consumer that was running at the kill, the milliseconds from the kill to its first acknowledged commit after it.
The same files check durability: a batch that starts below the offset of a commit acknowledged before the batch
came was delivered again although its offsets were committed (``duplicated_after_commit``, which must be 0, like
``lost``): a commit acknowledged and then forgotten by the restarted broker shows up here.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.chaos.launch import Broker, ChaosError, Incarnation
from broker.chaos.measure import EventFollower
from broker.control.client import ControlClient, ControlError
from broker.events import names

# How long the replayed event stream gets to yield the new broker's broker_started (it is among its first events).
STARTED_EVENT_TIMEOUT_S = 5.0
# The directory of the restarted broker, under the run's workdir.
DATA_DIR = "broker-data"

JSON = dict[str, Any]


@dataclass
class Restart:
    """One broker restart: when it was killed, how long until it listened again, and what it said it loaded."""

    number: int
    at: float  # time.time() at the SIGKILL
    t: float  # seconds since the chaos started
    down_ms: float
    up_at: float  # time.time() once it listened again
    run_id: str | None = None
    load_ms: float | None = None
    loaded: JSON | None = None
    clean_shutdown: bool | None = None
    note: str | None = None


@dataclass
class BrokerRestarts:
    """The restart timer (every ``every_s`` seconds from the chaos's start) and the restarts made so far."""

    every_s: float
    restarts: list[Restart] = field(default_factory=list)
    next_at: float | None = None

    def start(self, chaos_started: float) -> None:
        self.next_at = chaos_started + self.every_s

    def due(self, now: float) -> bool:
        return self.next_at is not None and now >= self.next_at

    def restart(self, broker: Broker, follower: EventFollower, control: ControlClient, chaos_started: float) -> Restart:
        """SIGKILL the broker and start it again; ChaosError if it does not come back."""
        assert self.next_at is not None
        self.next_at += self.every_s
        follower.pause()  # refused polls while it is down are the point, not errors
        at = time.time()
        try:
            broker.restart()
        except ChaosError as error:
            raise ChaosError(f"broker restart #{len(self.restarts) + 1}: {error}") from None
        up_at = time.time()
        follower.resume()
        down_ms = round((up_at - at) * 1000, 1)
        restart = Restart(len(self.restarts) + 1, at, round(at - chaos_started, 3), down_ms, up_at)
        started = broker_started_event(control)
        if started is None:
            restart.note = f"no {names.BROKER_STARTED} event within {STARTED_EVENT_TIMEOUT_S:.0f}s of the restart"
        else:
            restart.run_id = started.get("run_id")
            restart.load_ms = started.get("load_ms")
            restart.loaded = started.get("loaded")
            restart.clean_shutdown = started.get("clean_shutdown")
        self.restarts.append(restart)
        return restart


def broker_started_event(control: ControlClient) -> JSON | None:
    """The running broker's ``broker_started`` event, from the replay of its buffered events; None if not seen."""
    deadline = time.monotonic() + STARTED_EVENT_TIMEOUT_S
    try:
        stream = control.stream_events(since_seq=0, timeout=STARTED_EVENT_TIMEOUT_S)
    except ControlError:
        return None
    try:
        for event in stream:
            if event.get("event") == names.BROKER_STARTED:
                return event
            if time.monotonic() > deadline:
                break
    except ControlError:  # the read timed out: nothing more buffered
        return None
    finally:
        if isinstance(stream, Generator):  # closing the generator closes the connection
            stream.close()
    return None


# -- the consumers' commit files -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    """One acknowledged commit: who, when its batch came, when the broker acknowledged it, and its offsets."""

    client_id: str
    received: float
    acked: float
    ranges: tuple[tuple[int, int, int], ...]  # (partition, first offset of the batch, committed offset)


def read_commits(incarnations: Iterable[Incarnation]) -> list[Commit]:
    """Every complete line of every consumer's commit file (a line torn by a SIGKILL is left out)."""
    commits: list[Commit] = []
    for consumer in incarnations:
        if consumer.commits is None:
            continue
        try:
            text = consumer.commits.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines(keepends=True):
            commit = parse_commit(consumer.client_id, line)
            if commit is not None:
                commits.append(commit)
    return commits


def parse_commit(client_id: str, line: str) -> Commit | None:
    """``<received> <acked> p:first:next ...`` (``consumer.Sink.committed``); None for a torn or foreign line."""
    if not line.endswith("\n"):
        return None
    parts = line.split()
    ranges: list[tuple[int, int, int]] = []
    try:
        received, acked = float(parts[0]), float(parts[1])
        for part in parts[2:]:
            partition, first, offset = (int(n) for n in part.split(":"))
            ranges.append((partition, first, offset))
    except (ValueError, IndexError):  # a line torn in the middle, a range without three numbers
        return None
    return Commit(client_id, received, acked, tuple(ranges)) if ranges else None


def ended_at(consumer: Incarnation) -> float | None:
    """When this consumer process was signalled or exited, whichever came first; None while it runs."""
    ended = [t for t in (consumer.signalled_at, consumer.exited_at) if t is not None]
    return min(ended) if ended else None


def first_commits(restart: Restart, incarnations: list[Incarnation], commits: list[Commit]) -> list[JSON]:
    """Per consumer running at the kill: ms from the kill to its first commit acknowledged by the new broker (None:
    none), and ms from the kill to the consumer's own end, when the schedule (or a crash) ended it before the run's.

    By the new broker: acknowledged once it listened. A commit acknowledged between the SIGKILL and then was the
    old broker's answer, sent before it died (a consumer noted one a millisecond after the kill)."""
    rows = []
    for consumer in incarnations:
        ended = ended_at(consumer)
        if consumer.commits is None or consumer.started_at > restart.at or (ended is not None and ended <= restart.at):
            continue
        acked = [c.acked for c in commits if c.client_id == consumer.client_id and c.acked > restart.up_at]
        stopped = None if ended is None or consumer.signalled == "stop" else round((ended - restart.at) * 1000, 1)
        rows.append({
            "client_id": consumer.client_id,
            "first_commit_ms": round((min(acked) - restart.at) * 1000, 1) if acked else None,
            "stopped_after_ms": stopped,
        })  # fmt: skip
    return rows


def commits_gone_back(commits: list[Commit]) -> list[JSON]:
    """Batches that start below an offset whose commit was acknowledged before the batch came: records
    delivered again although committed (at-least-once allows duplicates only of what was not committed).

    Per partition, the highest committed offset acknowledged so far is walked forward in time; a batch received
    after it that starts below it re-read committed records."""
    events: list[tuple[float, int, Commit]] = []  # (time, 0 = ack / 1 = receipt, commit): an ack first on a tie
    for commit in commits:
        events.append((commit.acked, 0, commit))
        events.append((commit.received, 1, commit))
    events.sort(key=lambda e: (e[0], e[1]))
    committed: dict[int, tuple[int, str]] = {}  # partition -> (offset, by whom)
    gone_back = []
    for _, kind, commit in events:
        for partition, first, offset in commit.ranges:
            if kind == 0:
                if offset > committed.get(partition, (-1, ""))[0]:
                    committed[partition] = (offset, commit.client_id)
                continue
            high, by = committed.get(partition, (-1, ""))
            if first < high:
                gone_back.append({
                    "partition": partition, "client_id": commit.client_id, "first_offset": first,
                    "received_at": commit.received, "committed_offset": high, "committed_by": by,
                    "records": min(high, offset) - first,
                })  # fmt: skip
    return gone_back


def restart_reports(restarts: list[Restart], incarnations: list[Incarnation]) -> list[JSON]:
    """The report's ``broker_restarts``."""
    commits = read_commits(incarnations)
    return [
        {
            "number": r.number,
            "at": r.at,
            "t_s": r.t,
            "down_ms": r.down_ms,
            "run_id": r.run_id,
            "load_ms": r.load_ms,
            "loaded": r.loaded,
            "clean_shutdown": r.clean_shutdown,
            "first_commits": first_commits(r, incarnations, commits),
            "note": r.note,
        }
        for r in restarts
    ]


def restart_notes(reports: list[JSON]) -> list[str]:
    """What a restart did not show: its broker_started event, or a consumer's commit after it."""
    notes = []
    for row in reports:
        if row["note"]:
            notes.append(f"broker restart #{row['number']}: {row['note']}")
        # A consumer the schedule killed before it committed again is no sign of anything.
        late = [
            c["client_id"]
            for c in row["first_commits"]
            if (c["first_commit_ms"], c["stopped_after_ms"]) == (None, None)
        ]
        if late:
            notes.append(f"broker restart #{row['number']}: no acknowledged commit after it from {', '.join(late)}")
    return notes


def data_dir(workdir: Path) -> Path:
    return workdir / DATA_DIR


def durability_report(incarnations: list[Incarnation]) -> JSON:
    """The report's ``records`` additions from the commit files: commits acknowledged, and what was delivered
    again after a commit past it was acknowledged (the first twenty such batches)."""
    commits = read_commits(incarnations)
    gone_back = commits_gone_back(commits)
    return {
        "commits_acked": len(commits),
        "duplicated_after_commit": sum(row["records"] for row in gone_back),
        "commits_gone_back": gone_back[:20],
    }
