"""The report's disturbances: the kills, fault rules and broker restarts of the ``disturbances`` table, marked on
the generations timeline and listed with the rebalance each one caused (docs/analytics.md, "disturbances").

Three parts, each called by the module it serves: ``gather_disturbances`` (``gather.py``: the table's rows, in
Spark, capped), ``mark_timeline`` (``plots.py``: a dashed vertical line and a label per disturbance on a group's
lane) and ``disturbances_section`` (``page.py``: the table, its last column ``tables.disturbances.caused``).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from broker.analytics.tables.disturbances import BROKER_RESTART, caused

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Disturbances the report keeps (the first ones in time): a chaos run has tens, a soak test may have thousands.
ROWS_MAX = 500
#: Marks drawn on one lane of the timeline: beyond this the labels would only overlap (the lines are all drawn).
LABELS_MAX = 40
MARK_COLOR = "#cf222e"
#: A broker restart's mark: every group's lane, another colour and a solid line (the broker itself, not one member).
RESTART_COLOR = "#8250df"

Row = dict[str, Any]


def gather_disturbances(spark: SparkSession, out_dir: Path) -> list[Row]:
    """The ``disturbances`` table's rows, oldest first, at most ``ROWS_MAX``; none when the job wrote none."""
    path = out_dir / "disturbances"
    if not path.exists():
        return []
    table = spark.read.parquet(str(path))
    return [row.asDict() for row in table.orderBy("ts_ms", "run_id", "seq").limit(ROWS_MAX).collect()]


def on_lane(rows: list[Row], group: str) -> list[Row]:
    """The disturbances a group's lane shows: its own, and those of every group (``group_id`` ""): rules, broker
    restarts. A broker restart is one mark: its row of every group, not also the row of the group it touched."""
    seen: set[tuple[Any, Any]] = set()
    shown = []
    for r in rows:
        if r["group_id"] not in (group, ""):
            continue
        key = (r["run_id"], r["seq"])
        if r.get("action") == BROKER_RESTART and key in seen:
            continue
        seen.add(key)
        shown.append(r)
    return shown


def mark_timeline(axes: Axes, rows: list[Row]) -> int:
    """A dashed vertical line at each disturbance's time on ``axes`` (x in matplotlib's date numbers), labelled
    with its ``label`` at the top of the lane; the number of lines drawn."""
    for n, row in enumerate(rows):
        x = row["ts_ms"] / 86_400_000
        restart = row.get("action") == BROKER_RESTART
        color, style = (RESTART_COLOR, "-") if restart else (MARK_COLOR, "--")
        axes.axvline(x, color=color, linestyle=style, linewidth=0.9, alpha=0.8, zorder=2, gid="disturbance")
        if n < LABELS_MAX:
            axes.annotate(
                row["label"] or row["event"], xy=(x, 0.98), xycoords=("data", "axes fraction"), rotation=90,
                ha="right", va="top", fontsize=7, color=color,
            )  # fmt: skip
    return len(rows)


def disturbances_section(rows: list[Row]) -> str:
    """The page's table: time, group, kind, detail, and the rebalance each disturbance caused."""
    if not rows:
        return ""
    e = html.escape
    body = []
    ids: set[str] = set()
    for row in rows:
        anchor = f"disturbance-{row['run_id']}-{row['seq']}"
        if anchor in ids:  # a broker restart's row of a group it touched: the same record as its own row
            anchor += f"-{row['group_id']}"
        ids.add(anchor)
        when = datetime.fromtimestamp(row["ts_ms"] / 1000, tz=UTC).strftime("%m-%d %H:%M:%S.%f")[:-3]
        if row.get("action") == BROKER_RESTART:
            kind = f"{BROKER_RESTART} ({'clean' if row.get('clean') else 'killed'})"
        else:
            kind = row["event"] if row["signal"] is None else f"{row['event']} ({row['signal']})"
        body.append(
            f'<tr id="{e(anchor)}"><td class="nowrap">{when}</td>'
            f"<td><code>{e(str(row['group_id']) or '(every group)')}</code></td><td>{e(kind)}</td>"
            f"<td>{e(row['detail'] or '')}</td><td>{e(caused(row))}</td></tr>"
        )
    head = "".join(f"<th>{title}</th>" for title in ("time (UTC)", "group", "kind", "detail", "caused"))
    note = (
        "The chaos runner's kills (chaos_action) and the fault rules added and removed, as the broker recorded "
        "them; each is a dashed red line on the generations timeline. Caused: the first rebalance of its group "
        "that started after it, within the member's session timeout and 5 s, and was not over before the "
        "member was gone; detected: until the broker noticed (the member's end), else until that rebalance began. "
        "Broker restarts (broker_started on a data directory: after a kill or a clean stop, with what it loaded) "
        "are a solid purple line on every lane, with a row of their own and one per group that had members when "
        "the broker stopped: the first rebalance of that group after the restart, within its longest session "
        "timeout and 5 s, that a member's leave did not start."
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<section id="disturbances"><h2>Disturbances</h2><p class="note">{e(note)}</p>{table}</section>'
