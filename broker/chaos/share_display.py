"""The final report of ``chaos run --group-protocol share`` (``share_run``): the kills and what came of the records
each victim held, then the verdict of ``share_judge`` and the broker's own counts beside it."""

from __future__ import annotations

import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from broker.chaos.display import fmt_s

JSON = dict[str, Any]

KILL_COLUMNS = ("#", "at", "consumer", "signal", "held", "back", "back s", "resumed", "detected by", "detect")
LEGEND = (
    "seconds; at: since the chaos started; held: records delivered to the victim and not accepted by it at the "
    "signal; back: how many were delivered again, back s: signal -> the last of them delivered again; resumed: "
    "signal -> SIGCONT or the restart; detect: signal -> member_expired/member_left"
)


def kill_row(kill: JSON) -> tuple[str, ...]:
    return (
        str(kill["number"]), f"{kill['t_s']:.1f}", kill["client_id"], kill["signal"], str(kill["held"]),
        str(kill["came_back"]), fmt_s(kill["back_s"]), fmt_s(kill["restart_s"]),
        "-" if kill["detect_event"] is None else str(kill["detect_cause"] or kill["detect_event"]),
        fmt_s(kill["detect_s"]),
    )  # fmt: skip


def verdict_lines(share: JSON) -> list[str]:
    causes = ", ".join(f"{name} {n}" for name, n in share["redeliveries_by_cause"].items() if n) or "none"
    violations = share["violations"]
    broker = share.get("broker") or {}
    lines = [
        f"records: produced {share['produced']}, delivered {share['records_delivered']} ({share['deliveries']} "
        f"deliveries), accepted {share['accepted']}"
        + (f" (+{share['accepted_unrecorded']} by a worker killed before it wrote the answer)"
           if share["accepted_unrecorded"] else "")
        + f", lost {share['lost']}, unaccepted {share['unaccepted']}, archived {share['archived']}",
        f"redeliveries {share['redelivered']} by cause: {causes}",
        f"acknowledgements refused {share['failed_acks']}, moot {share['moot_acks']}",
        "two members under one lock " + str(violations["same_lock"]) + ", delivered under a live lock "
        + str(violations["overlap"]) + ", delivered after acceptance " + str(violations["after_accept"]),
    ]
    if broker:
        released = ", ".join(f"{c} {n}" for c, n in sorted(broker["released_events_by_cause"].items())) or "none"
        lines.append(
            f"broker: delivered {broker['delivered_total']}, redelivered {broker['redelivered_total']}, archived "
            f"{broker['archived_total']}; released (events) {released}"
        )
    return lines


def print_share_report(report: JSON) -> None:
    console = Console(width=None if sys.stdout.isatty() else 110)
    config = report["config"]
    share = report["share"]
    title = (
        f"{len(report['kills'])} kills (share group, {config['share_ack']} acknowledgement, lock "
        f"{config['share_lock_ms']} ms, seed {config['seed']})"
    )
    table = Table(
        title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False, caption=LEGEND, caption_justify="left"
    )
    for column in KILL_COLUMNS:
        table.add_column(column, justify="left" if column in ("consumer", "signal", "detected by") else "right")
    for kill in report["kills"]:
        table.add_row(*kill_row(kill))
    console.print(table)
    for line in verdict_lines(share):
        console.print(line, highlight=False)
    for record in share["unaccepted_records"][:5]:
        console.print(f"unaccepted: partition:offset {record}", highlight=False)
    for violation in share["violation_list"][:5]:
        console.print(f"violation: {violation}", highlight=False, markup=False)
    verdict = "[bold green]OK[/]" if report["ok"] else "[bold red]FAILED[/]"
    console.print(f"share group: every record delivered and accepted, never under one lock twice  {verdict}")
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
