"""``chaos run --stop-node-every S`` and ``--move-coordinator-every S``: chaos aimed at the broker's nodes (issue 29).

The run's broker has several nodes (``--nodes N``, or a ``--bootstrap`` broker whose ``GET /v1/cluster`` lists
several). Two timers of their own, at S, 2S, ... seconds after the chaos starts, besides the consumer kills:

- **a node stop**: the node that coordinates the group (``GET /v1/cluster/coordinators``) is stopped
  (``POST /v1/cluster/nodes/{id}/stop``), by ``kill`` (its connections drop at once) and ``graceful`` (its
  coordinators move first) in turn, or as ``--stop-node-mode`` says; it is started again
  ``--node-restart-after`` seconds later (``.../start``), and every node still stopped when the chaos ends is
  started before the drain. The last running node is never stopped (the broker refuses it: 409); a stop due when
  only one node runs is skipped, with a note.
- **a coordinator move**: the group's ``__consumer_offsets`` partition moves to another running node, picked with
  the run's seeded RNG (``POST /v1/cluster/coordinators``).

Each action is posted first as a ``chaos_action`` event of the group (``action`` ``stop_node``, ``start_node`` or
``move_coordinator``, with ``node_id``, ``mode``, ``partition``), and the broker says what it did in its own
events (``node_stopped``, ``leader_moved``, ``coordinator_unloaded``, ``coordinator_loaded``, ``node_started``).

What an action cost the clients is read from the consumers' commit files (``broker_restarts.read_commits``), as
for a broker restart: per consumer running at the action, the milliseconds from it to the consumer's first commit
acknowledged after the broker answered the action, and ``all_committed_ms``, the time until every one of them had
(None when one never did).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.chaos.broker_restarts import Commit, ended_at, read_commits
from broker.chaos.cluster_options import STOP_MODES, node_chaos, node_restart_after
from broker.chaos.launch import Incarnation
from broker.control.client import ControlClient, ControlError, configured_url
from broker.control.grace import GraceError, grace_seconds

JSON = dict[str, Any]
#: The actions of the report's ``cluster_actions``, as the chaos_action events name them.
STOP, START, MOVE = "stop_node", "start_node", "move_coordinator"


def running_cluster_problem(args: argparse.Namespace) -> str | None:
    """With ``--bootstrap`` and node chaos: why the running broker cannot take it (fewer than two nodes, or no
    ``/v1/cluster``); None when it can, or when there is nothing to ask."""
    if args.bootstrap is None or not node_chaos(args):
        return None
    try:
        control = ControlClient(args.admin or configured_url(), grace_s=grace_seconds(args))
        nodes = control.cluster().get("nodes") or []
    except (ControlError, GraceError) as error:
        return f"--stop-node-every and --move-coordinator-every need the broker's GET /v1/cluster: {error}"
    if len(nodes) < 2:
        return (
            f"the broker at {args.bootstrap} has {len(nodes)} node: --stop-node-every and --move-coordinator-every "
            "need several (start it with serve --nodes 3, or leave out --bootstrap and give --nodes 3)"
        )
    return None


@dataclass
class Action:
    """One action on the nodes: what, on which node, when it was asked (``at``) and answered (``done_at``)."""

    number: int
    action: str  # STOP, START or MOVE
    node_id: int
    at: float
    t: float  # seconds since the chaos started
    done_at: float
    mode: str | None = None  # a stop's
    from_node: int | None = None  # a move's (and a stop's: the coordinator it stopped)
    partition: int | None = None  # the group's __consumer_offsets partition
    epoch: int | None = None  # its leader epoch after a move
    answer: JSON = field(default_factory=dict)


class ClusterChaos:
    """The two timers, the stopped nodes waiting for their start, and the actions made so far."""

    def __init__(self, args: argparse.Namespace, seed: int) -> None:
        self.stop_every: float | None = args.stop_node_every
        self.move_every: float | None = args.move_coordinator_every
        self.mode = args.stop_node_mode or STOP_MODES[0]
        self.restart_after = node_restart_after(args)
        self.rng = random.Random(seed ^ 0x29)  # its own stream: the consumer kills keep theirs
        self.next_stop: float | None = None
        self.next_move: float | None = None
        self.starts: dict[int, float] = {}  # stopped node -> time.time() to start it again
        self.actions: list[Action] = []
        self.notes: list[str] = []
        self.started: float | None = None
        self.stops = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace, seed: int) -> ClusterChaos | None:
        return cls(args, seed) if node_chaos(args) else None

    def start(self, chaos_started: float) -> None:
        self.started = chaos_started
        self.next_stop = None if self.stop_every is None else chaos_started + self.stop_every
        self.next_move = None if self.move_every is None else chaos_started + self.move_every

    def tick(self, control: ControlClient, group: str, say: Callable[[str], None], chaos: bool = True) -> None:
        """The actions due now: starts always, stops and moves while ``chaos``; ControlError goes to a note."""
        now = time.time()
        try:
            for node_id in [n for n, at in sorted(self.starts.items()) if now >= at]:
                del self.starts[node_id]
                self._start(control, group, node_id, say)
            if chaos and self.next_stop is not None and now >= self.next_stop:
                assert self.stop_every is not None
                self.next_stop += self.stop_every
                self._stop(control, group, say)
            if chaos and self.next_move is not None and now >= self.next_move:
                assert self.move_every is not None
                self.next_move += self.move_every
                self._move(control, group, say)
        except ControlError as error:
            self.notes.append(f"an action on the nodes failed: {error}")
            say(f"[red]an action on the nodes failed[/red]: {error}")

    def start_all(self, control: ControlClient, group: str, say: Callable[[str], None]) -> None:
        """The nodes still stopped when the chaos ends come back now (the drain runs on every node)."""
        for node_id in sorted(self.starts):
            self.starts[node_id] = 0.0
        self.tick(control, group, say, chaos=False)

    # -- the actions

    def _announce(self, control: ControlClient, group: str, action: str, note: str, **fields: Any) -> None:
        try:
            control.chaos_action(group, action, note=note, **fields)
        except ControlError as error:  # the action goes ahead: only its mark in the event log is missing
            self.notes.append(f"{note} was not recorded as an event: {error}")

    def _record(self, action: str, node_id: int, at: float, **fields: Any) -> Action:
        assert self.started is not None
        done = Action(len(self.actions) + 1, action, node_id, at, round(at - self.started, 3), time.time(), **fields)
        self.actions.append(done)
        return done

    def _stop(self, control: ControlClient, group: str, say: Callable[[str], None]) -> None:
        running = [n["node_id"] for n in control.cluster().get("nodes", []) if n.get("up")]
        coordinator = control.coordinator(group)
        node_id, partition = int(coordinator["node"]), coordinator.get("partition")
        if len(running) < 2 or node_id not in running:
            self.notes.append(f"node stop #{self.stops + 1} skipped: only node {', '.join(map(str, running))} runs")
            say(self.notes[-1])
            return
        mode = self.mode if self.mode != "alternate" else ("kill", "graceful")[self.stops % 2]
        self.stops += 1
        note = f"node stop #{self.stops} ({mode}) of the group's coordinator node {node_id}"
        self._announce(control, group, STOP, note, node_id=node_id, mode=mode, partition=partition)
        at = time.time()
        answer = control.stop_node(node_id, mode)
        self._record(STOP, node_id, at, mode=mode, from_node=node_id, partition=partition, answer=answer)
        self.starts[node_id] = time.time() + self.restart_after
        moved = len(answer.get("moved_leaders", [])) + len(answer.get("moved_coordinators", []))
        style = "red" if mode == "kill" else "yellow"
        say(f"node stop #{self.stops}: [{style}]{mode}[/{style}] node {node_id} (the coordinator; {moved} partitions "
            "changed leader)")

    def _start(self, control: ControlClient, group: str, node_id: int, say: Callable[[str], None]) -> None:
        self._announce(control, group, START, f"node {node_id} starts again", node_id=node_id)
        at = time.time()
        self._record(START, node_id, at, answer=control.start_node(node_id))
        say(f"node {node_id} started again")

    def _move(self, control: ControlClient, group: str, say: Callable[[str], None]) -> None:
        running = sorted(n["node_id"] for n in control.cluster().get("nodes", []) if n.get("up"))
        coordinator = control.coordinator(group)
        current, partition = int(coordinator["node"]), coordinator.get("partition")
        others = [n for n in running if n != current]
        moves = sum(1 for a in self.actions if a.action == MOVE)
        if not others:
            self.notes.append(f"coordinator move #{moves + 1} skipped: no running node but {current}")
            say(self.notes[-1])
            return
        target = self.rng.choice(others)
        note = f"coordinator move #{moves + 1}: {group} from node {current} to {target}"
        self._announce(control, group, MOVE, note, node_id=target, from_node=current, partition=partition)
        at = time.time()
        answer = control.move_coordinator(group, target)
        epoch = answer.get("epoch")
        self._record(MOVE, target, at, from_node=current, partition=partition, epoch=epoch, answer=answer)
        say(f"coordinator move #{moves + 1}: partition {partition} from node {current} to {target} (epoch {epoch})")


# -- the report ------------------------------------------------------------------------------------------------


def next_commits(action: Action, incarnations: list[Incarnation], commits: list[Commit]) -> list[JSON]:
    """Per consumer running at the action: ms from it to its first commit acknowledged after the broker answered
    the action (None: none), and ms to the consumer's own end when the schedule ended it first."""
    rows = []
    for consumer in incarnations:
        ended = ended_at(consumer)
        if consumer.commits is None or consumer.started_at > action.at or (ended is not None and ended <= action.at):
            continue
        acked = [c.acked for c in commits if c.client_id == consumer.client_id and c.acked > action.done_at]
        stopped = None if ended is None or consumer.signalled == "stop" else round((ended - action.at) * 1000, 1)
        rows.append({
            "client_id": consumer.client_id,
            "next_commit_ms": round((min(acked) - action.at) * 1000, 1) if acked else None,
            "stopped_after_ms": stopped,
        })  # fmt: skip
    return rows


def all_committed(rows: list[JSON]) -> float | None:
    """The time until every consumer had committed again, leaving out those the schedule ended first (None: one
    the schedule left running never did, or none did)."""
    times = []
    for row in rows:
        if row["next_commit_ms"] is not None:
            times.append(row["next_commit_ms"])
        elif row["stopped_after_ms"] is None:
            return None
    return float(max(times)) if times else None


def cluster_reports(actions: list[Action], incarnations: list[Incarnation]) -> list[JSON]:
    """The report's ``cluster_actions``."""
    commits = read_commits(incarnations)
    reports = []
    for action in actions:
        rows = next_commits(action, incarnations, commits)
        reports.append({
            "number": action.number, "action": action.action, "node_id": action.node_id, "mode": action.mode,
            "from_node": action.from_node, "partition": action.partition, "epoch": action.epoch, "at": action.at,
            "t_s": action.t, "answer_ms": round((action.done_at - action.at) * 1000, 1),
            "next_commits": rows, "all_committed_ms": all_committed(rows),
        })  # fmt: skip
    return reports


def cluster_summary(reports: list[JSON]) -> JSON:
    """How many stops, starts and moves, and the longest time to every consumer's next commit after each kind."""
    summary: JSON = {}
    for kind, name in ((STOP, "stops"), (START, "starts"), (MOVE, "moves")):
        rows = [r for r in reports if r["action"] == kind]
        times = [r["all_committed_ms"] for r in rows if r["all_committed_ms"] is not None]
        summary[name] = len(rows)
        summary[f"{name}_all_committed_ms_max"] = max(times) if times else None
    return summary


def cluster_notes(reports: list[JSON]) -> list[str]:
    """A stop or move after which a consumer the schedule left running never committed again."""
    notes = []
    for row in reports:
        if row["action"] == START:
            continue
        rows = row["next_commits"]
        late = [c["client_id"] for c in rows if (c["next_commit_ms"], c["stopped_after_ms"]) == (None, None)]
        if late:
            notes.append(f"{row['action']} #{row['number']}: no acknowledged commit after it from {', '.join(late)}")
    return notes


def report(chaos: ClusterChaos | None, incarnations: list[Incarnation], notes: list[str]) -> JSON:
    """The report's ``cluster_actions`` and ``cluster`` (the summary), and their notes; {} without node chaos."""
    if chaos is None:
        return {}
    actions = cluster_reports(chaos.actions, incarnations)
    notes.extend(chaos.notes + cluster_notes(actions))
    return {"cluster_actions": actions, "cluster": cluster_summary(actions)}
