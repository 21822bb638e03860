"""What a chaos run shows: a live status line while it runs, the kill table and the verdict at the end.

On a terminal the status line is rich's ``Live``, redrawn in place; in a pipe or a file (CI) it is a plain line
every few seconds, and the messages lose their style tags.
"""

from __future__ import annotations

import math
import re
import sys
import time
from typing import Any

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from broker.events import names

PLAIN_PROGRESS_EVERY_S = 5.0
STYLE_TAG = re.compile(r"\[/?[a-z ]+\]")

JSON = dict[str, Any]


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
        group = "-" if summary is None else group_line(summary)
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


def group_line(summary: JSON) -> str:
    """The group in the status line: state, generation (classic) or group/assignment epochs (consumer), members.

    A consumer group's epochs (docs/spec/consumer-groups.md 3.1) say where it is: the group epoch moves at every
    membership change, the assignment epoch when the target is computed; Stable is every member reconciled to it."""
    members = summary.get("members")
    count = len(members) if isinstance(members, list) else members
    if summary.get("group_type") == "consumer" or summary.get("group_epoch") is not None:
        epochs = f"epoch {summary.get('group_epoch')} (target {summary.get('assignment_epoch')})"
    else:
        epochs = f"gen {summary.get('generation_id')}"
    return f"{summary.get('state')} {epochs}, {count} members"


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
    f"seconds; at: since the chaos started; detect: kill -> {names.MEMBER_EXPIRED}/{names.MEMBER_LEFT}; recover: "
    "kill -> Stable with every partition owned; rebal: rebalances in between; rejoin: kill -> the restarted consumer "
    "owns partitions"
)
CONSUMER_LEGEND = (
    f"seconds; at: since the chaos started; detect: kill -> {names.MEMBER_EXPIRED}/{names.MEMBER_LEFT}; recover: "
    "kill -> Stable (every member reconciled to the new target); rebal: group epoch bumps in between; rejoin: "
    "kill -> Stable with the restarted consumer owning partitions"
)


def records_line(report: JSON) -> str:
    records = report["records"]
    return (
        f"records: produced {records['produced']}, consumed {records['consumed']}, unique {records['unique']}, "
        f"lost {records['lost']}, duplicated {records['duplicated']}"
    )


def exactly_once_line(check: JSON) -> str:
    """The exactly-once check (``exactly_once.verify``) in one line."""
    end = "" if check["read_to_end"] else " (not read to its end)"
    return (
        f"exactly once: {check['output_topic']} read_committed{end}: inputs {check['inputs']}, outputs "
        f"{check['outputs']}, missing {check['missing']}, duplicated {check['duplicated']}, unexpected "
        f"{check['unexpected']}"
        + ("" if check.get("aborted") is None else f" (aborted writes hidden {check['aborted']})")
    )


RESTART_COLUMNS = ("#", "at", "down ms", "load ms", "loaded", "first commit ms")


def loaded_words(loaded: JSON | None) -> str:
    """What the restarted broker read from its directory, in a few words (``broker_started``'s ``loaded``)."""
    if loaded is None:
        return "-"
    shown = ("records", "offsets", "groups")
    return ", ".join(f"{loaded[name]} {name}" for name in shown if name in loaded) or "-"


def first_commit(row: JSON) -> str:
    """A consumer's first commit after a restart: ms, or why there is none (killed by the schedule before it)."""
    if row["first_commit_ms"] is not None:
        return f"{row['first_commit_ms']:.0f}"
    return "- (killed first)" if row["stopped_after_ms"] is not None else "-"


def restart_row(restart: JSON) -> tuple[str, ...]:
    """One line of the broker restart table: each consumer's first acknowledged commit after the kill."""
    commits = " ".join(f"{c['client_id']} {first_commit(c)}" for c in restart["first_commits"])
    load = "-" if restart["load_ms"] is None else f"{restart['load_ms']:.0f}"
    return (
        str(restart["number"]), f"{restart['t_s']:.1f}", f"{restart['down_ms']:.0f}", load,
        loaded_words(restart["loaded"]), commits or "-",
    )  # fmt: skip


def print_restarts(console: Console, report: JSON) -> None:
    """The broker restarts (``--broker-restart-every``), and what the commit files say about them."""
    restarts = report.get("broker_restarts") or []
    if not restarts and report["config"].get("broker_restart_every_s") is None:
        return
    table = Table(
        title=f"{len(restarts)} broker restarts (SIGKILL, same ports and data directory)", box=box.SIMPLE_HEAD,
        collapse_padding=True, pad_edge=False, caption_justify="left",
        caption="at: s since the chaos started; down: SIGKILL -> listening again; load: reading the data directory "
        "(broker_started); first commit: ms from the SIGKILL to each consumer's first acknowledged commit",
    )  # fmt: skip
    for column in RESTART_COLUMNS:
        table.add_column(column, justify="left" if column in ("loaded", "first commit ms") else "right")
    for restart in restarts:
        table.add_row(*restart_row(restart))
    console.print(table)
    records = report["records"]
    console.print(
        f"commits: {records['commits_acked']} acknowledged, records delivered again after their commit was "
        f"acknowledged {records['duplicated_after_commit']}",
        highlight=False,
    )


CLUSTER_COLUMNS = ("#", "at", "action", "node", "partition", "answer ms", "all committed ms", "next commit ms")


def cluster_row(action: JSON) -> tuple[str, ...]:
    """One line of the node table: a stop (its mode), a start or a coordinator move (from -> to, its epoch)."""
    what = {"stop_node": f"stop ({action['mode']})", "start_node": "start", "move_coordinator": "move"}
    node = str(action["node_id"])
    if action["action"] == "move_coordinator":
        node = f"{action['from_node']} -> {action['node_id']} (epoch {action['epoch']})"
    commits = " ".join(
        f"{c['client_id']} {first_commit({'first_commit_ms': c['next_commit_ms'], **c})}"
        for c in action["next_commits"]
    )
    return (
        str(action["number"]), f"{action['t_s']:.1f}", str(what.get(action["action"], action["action"])), node,
        "-" if action["partition"] is None else str(action["partition"]), f"{action['answer_ms']:.0f}",
        "-" if action["all_committed_ms"] is None else f"{action['all_committed_ms']:.0f}", commits or "-",
    )  # fmt: skip


def print_cluster(console: Console, report: JSON) -> None:
    """The node stops, starts and coordinator moves (``--stop-node-every``, ``--move-coordinator-every``)."""
    if "cluster" not in report:
        return
    summary, nodes = report["cluster"], report["config"].get("nodes")
    table = Table(
        title=f"{summary['stops']} node stops, {summary['starts']} starts, {summary['moves']} coordinator moves"
        + (f" ({nodes} nodes)" if nodes else ""), box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False,
        caption_justify="left",
        caption="at: s since the chaos started; partition: the group's __consumer_offsets partition; answer: the "
        "control API's; all committed: ms from the action until every consumer had an acknowledged commit after it",
    )  # fmt: skip
    for column in CLUSTER_COLUMNS:
        table.add_column(column, justify="left" if column in ("action", "node", "next commit ms") else "right")
    for action in report["cluster_actions"]:
        table.add_row(*cluster_row(action))
    console.print(table)
    if not report.get("broker_restarts"):  # print_restarts says it otherwise
        records = report["records"]
        console.print(
            f"commits: {records['commits_acked']} acknowledged, records delivered again after their commit was "
            f"acknowledged {records['duplicated_after_commit']}",
            highlight=False,
        )


def print_report(report: JSON) -> None:
    console = Console(width=None if sys.stdout.isatty() else 100)
    config = report["config"]
    consumer = config.get("group_protocol") == "consumer"
    protocol = ", consumer protocol" if consumer else ""
    title = f"{len(report['kills'])} kills ({config['client']}{protocol}, seed {config['seed']})"
    legend = CONSUMER_LEGEND if consumer else LEGEND
    table = Table(
        title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False, caption=legend, caption_justify="left"
    )
    for column in KILL_COLUMNS:
        left = column in ("consumer", "signal", "detected by")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    table.columns[KILL_COLUMNS.index("detected by")].min_width = len("session_timeout")
    for kill in report["kills"]:
        table.add_row(*kill_row(kill))
    if report["kills"] or "cluster" not in report:  # a run of node stops only has no kills to show
        console.print(table)
        totals = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in SUMMARY_COLUMNS:
            totals.add_column(column, justify="right" if column else "left")
        for row in summary_rows(report["summary"]):
            totals.add_row(*row)
        console.print(totals)
    print_restarts(console, report)
    print_cluster(console, report)
    verdict = "[bold green]OK[/]" if report["ok"] else "[bold red]FAILED[/]"
    if consumer:
        group = report["group"]
        console.print(
            f"group epoch {group['generation']}: {group['rebalances']} epoch bumps, "
            f"{group['rebalances_during_run']} during the run",
            highlight=False,
        )
    check = report.get("exactly_once")
    if check is not None:  # --exactly-once: the output topic against the inputs (broker/chaos/exactly_once.py)
        console.print(exactly_once_line(check), highlight=False)
    console.print(f"{records_line(report)}  {verdict}", highlight=False)
    if any(kill["overlapped"] for kill in report["kills"]):
        console.print("* the next kill came before this recovery", highlight=False)
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
