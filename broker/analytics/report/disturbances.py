"""The report's disturbances: the kills and fault rules of the ``disturbances`` table, marked on the generations
timeline and listed with the rebalance each one caused (docs/analytics.md, "disturbances").

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

from broker.analytics.tables.disturbances import caused

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Disturbances the report keeps (the first ones in time): a chaos run has tens, a soak test may have thousands.
ROWS_MAX = 500
#: Marks drawn on one lane of the timeline: beyond this the labels would only overlap (the lines are all drawn).
LABELS_MAX = 40
MARK_COLOR = "#cf222e"

Row = dict[str, Any]


def gather_disturbances(spark: SparkSession, out_dir: Path) -> list[Row]:
    """The ``disturbances`` table's rows, oldest first, at most ``ROWS_MAX``; none when the job wrote none."""
    path = out_dir / "disturbances"
    if not path.exists():
        return []
    table = spark.read.parquet(str(path))
    return [row.asDict() for row in table.orderBy("ts_ms", "run_id", "seq").limit(ROWS_MAX).collect()]


def on_lane(rows: list[Row], group: str) -> list[Row]:
    """The disturbances a group's lane shows: its own, and rules of every group (``group_id`` "")."""
    return [r for r in rows if r["group_id"] in (group, "")]


def mark_timeline(axes: Axes, rows: list[Row]) -> int:
    """A dashed vertical line at each disturbance's time on ``axes`` (x in matplotlib's date numbers), labelled
    with its ``label`` at the top of the lane; the number of lines drawn."""
    for n, row in enumerate(rows):
        x = row["ts_ms"] / 86_400_000
        axes.axvline(x, color=MARK_COLOR, linestyle="--", linewidth=0.9, alpha=0.8, zorder=2, gid="disturbance")
        if n < LABELS_MAX:
            axes.annotate(
                row["label"] or row["event"], xy=(x, 0.98), xycoords=("data", "axes fraction"), rotation=90,
                ha="right", va="top", fontsize=7, color=MARK_COLOR,
            )  # fmt: skip
    return len(rows)


def disturbances_section(rows: list[Row]) -> str:
    """The page's table: time, group, kind, detail, and the rebalance each disturbance caused."""
    if not rows:
        return ""
    e = html.escape
    body = []
    for row in rows:
        when = datetime.fromtimestamp(row["ts_ms"] / 1000, tz=UTC).strftime("%m-%d %H:%M:%S.%f")[:-3]
        kind = row["event"] if row["signal"] is None else f"{row['event']} ({row['signal']})"
        body.append(
            f'<tr id="disturbance-{e(str(row["run_id"]))}-{row["seq"]}"><td class="nowrap">{when}</td>'
            f"<td><code>{e(str(row['group_id']) or '(every group)')}</code></td><td>{e(kind)}</td>"
            f"<td>{e(row['detail'] or '')}</td><td>{e(caused(row))}</td></tr>"
        )
    head = "".join(f"<th>{title}</th>" for title in ("time (UTC)", "group", "kind", "detail", "caused"))
    note = (
        "The chaos runner's kills (chaos_action) and the fault rules added and removed, as the broker recorded "
        "them; each is a dashed red line on the generations timeline. Caused: the first rebalance of its group "
        "that started after it, within the member's session timeout and 5 s, and was not over before the "
        "member was gone; detected: until the broker noticed (the member's end), else until that rebalance began."
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<section id="disturbances"><h2>Disturbances</h2><p class="note">{e(note)}</p>{table}</section>'
