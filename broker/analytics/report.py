"""The analytics report: one self-contained HTML page, and a PNG of each plot, from the job's Parquet tables.

``render(out_dir)`` reads the tables the job wrote under ``out_dir`` (``rebalances``, ``members``, ``summary``,
``input``, and ``summary.json`` when present) and writes ``out_dir/report.html`` and ``out_dir/plots/*.png``.
Tables can be tens of millions of rows, so everything is reduced in Spark first (histogram bins, time buckets,
top-N) and only those small results reach Python. The page embeds its plots as base64 PNGs and its style inline:
it opens from a mail attachment or a CI artifact with no network and no scripts.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib.lines
import matplotlib.ticker
from matplotlib import dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker.analytics.schema import INPUT_KINDS

__all__ = ["PLOTS", "ReportData", "gather", "render"]

#: The plots, in page order: file stem -> title.
PLOTS = {
    "rebalance_durations": "Rebalance duration",
    "detection_times": "Time to detect a dead member",
    "unowned_over_time": "Unowned partitions over time",
    "generations_timeline": "Generations per group",
}
BAD_KINDS_HINT = "lines the job could not use; the examples give file:line"
DURATION_BINS_PER_DECADE = 10
TIME_BUCKETS = 240
TIMELINE_ROWS_MAX = 60_000
# Time buckets a person reads at a glance: 1 s to 1 day.
NICE_BUCKETS_MS = tuple(
    s * 1000 for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)
DURATION_TICKS_MS = (
    1,
    10,
    100,
    1000,
    10_000,
    60_000,
    600_000,
    3_600_000,
)  # rebalances drawn in the timeline, over all its groups

EAGER = "#3b6fb6"
COOPERATIVE = "#e07b39"
OTHER = "#8c8c8c"
PROTOCOL_COLORS = {"eager": EAGER, "cooperative": COOPERATIVE}
CAUSE_COLORS = {
    "member_joined": "#3b6fb6",
    "member_rejoined": "#7fa7dc",
    "member_left": "#59a14f",
    "member_expired": "#d62728",
    "member_kicked": "#b07aa1",
    "member_fenced": "#9c755f",
    "static_member_replaced": "#edc948",
    "sync_timeout": "#ff9da7",
    "forced": "#76b7b2",
}


@dataclass
class ReportData:
    """The small results the page is made of: nothing here grows with the size of the logs (but ``top``)."""

    out_dir: Path
    overall: dict[str, Any] | None = None
    groups: list[dict[str, Any]] = field(default_factory=list)
    group_count: int = 0
    input_rows: list[dict[str, Any]] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    member_ends: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    durations: list[tuple[str, int, int]] = field(default_factory=list)  # (protocol, log bin, count)
    detection_width_ms: int = 1000
    detections: list[tuple[int, int]] = field(default_factory=list)  # (bin, count)
    bucket_ms: int = 60_000
    unowned: list[tuple[int, str, float, int]] = field(default_factory=list)  # (bucket, protocol, ups, rebalances)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    timeline_groups: list[str] = field(default_factory=list)
    slowest: list[dict[str, Any]] = field(default_factory=list)


# -- Spark: reduce the tables to what the page shows -------------------------------------------------------------------


def _table(spark: SparkSession, out_dir: Path, name: str) -> DataFrame | None:
    path = out_dir / name
    if not path.exists():
        return None
    return spark.read.parquet(str(path))


def gather(spark: SparkSession, out_dir: str | os.PathLike[str], *, top: int = 10, slowest: int = 20) -> ReportData:
    """Everything the report shows, reduced in Spark: bins, buckets and top-N only."""
    out = _local(out_dir)
    data = ReportData(out)
    summary_json = out / "summary.json"
    if summary_json.exists():
        document = json.loads(summary_json.read_text(encoding="utf-8"))
        data.inputs = [str(i) for i in document.get("inputs", [])]

    summary = _table(spark, out, "summary")
    if summary is not None:
        overall = summary.where(F.col("scope") == "all").limit(1).collect()
        data.overall = overall[0].asDict(recursive=True) if overall else None
        groups = summary.where(F.col("scope") == "group")
        data.group_count = groups.count()
        ranked = groups.orderBy(F.desc("rebalances"), F.desc("unowned_partition_seconds"), "group_id").limit(top)
        data.groups = [row.asDict(recursive=True) for row in ranked.collect()]

    inputs = _table(spark, out, "input")
    if inputs is not None:
        rows = [row.asDict(recursive=True) for row in inputs.collect()]  # one row per kind
        order = {kind: i for i, kind in enumerate(INPUT_KINDS)}
        data.input_rows = sorted(rows, key=lambda r: (order.get(r["kind"], len(order)), str(r["kind"])))

    rebalances = _table(spark, out, "rebalances")
    if rebalances is not None:
        _gather_rebalances(rebalances, data, top, slowest)

    members = _table(spark, out, "members")
    if members is not None:
        data.member_ends = {
            row["end"] or "unknown": int(row["count"]) for row in members.groupBy("end").count().collect()
        }
        _gather_detections(members, data)
    return data


def _gather_rebalances(rebalances: DataFrame, data: ReportData, top: int, slowest: int) -> None:
    span = rebalances.agg(
        F.min("start_ms").alias("first"),
        F.max(F.coalesce("end_ms", "start_ms")).alias("last"),
        F.countDistinct("run_id").alias("runs"),
    ).collect()[0]
    data.runs = int(span["runs"] or 0)
    data.first_ms = span["first"]
    data.last_ms = span["last"]
    data.outcomes = {
        row["outcome"] or "unknown": int(row["count"]) for row in rebalances.groupBy("outcome").count().collect()
    }
    protocol = F.coalesce(F.col("rebalance_protocol"), F.lit("none"))

    # Durations on a log scale: 10 bins a decade, from 1 ms.
    finished = rebalances.where(F.col("duration_ms").isNotNull())
    log_bin = F.floor(F.log10(F.greatest(F.col("duration_ms"), F.lit(1)).cast("double")) * DURATION_BINS_PER_DECADE)
    data.durations = [
        (row["protocol"], int(row["bin"]), int(row["count"]))
        for row in finished.groupBy(protocol.alias("protocol"), log_bin.cast("int").alias("bin")).count().collect()
    ]

    # Unowned partitions over time: each rebalance's partition-seconds land in the bucket it started in (rebalances
    # last seconds, buckets minutes or more); their sum over the bucket's length is the average number unowned.
    if data.first_ms is not None and data.last_ms is not None:
        wanted = (data.last_ms - data.first_ms + 1) / TIME_BUCKETS
        width = next((w for w in NICE_BUCKETS_MS if w >= wanted), math.ceil(wanted / 86_400_000) * 86_400_000)
        data.bucket_ms = width
        bucket = F.floor((F.col("start_ms") - F.lit(data.first_ms)) / F.lit(width)).cast("int")
        rows = (
            rebalances.groupBy(bucket.alias("bucket"), protocol.alias("protocol"))
            .agg(
                F.sum(F.coalesce("unowned_partition_seconds", F.lit(0.0))).alias("ups"),
                F.count("*").alias("rebalances"),
            )
            .collect()
        )
        data.unowned = [(int(r["bucket"]), r["protocol"], float(r["ups"]), int(r["rebalances"])) for r in rows]

    # The timeline: the busiest groups' generations (top by rebalances), capped in rows.
    lanes = min(top, 8)
    busiest = rebalances.groupBy("group_id").count().orderBy(F.desc("count"), "group_id").limit(lanes).collect()
    data.timeline_groups = [row["group_id"] for row in busiest]
    if data.timeline_groups:
        # Each lane keeps at most its share of the cap, the latest rebalances first.
        latest = Window.partitionBy("group_id").orderBy(F.desc("start_ms"))
        picked = (
            rebalances.where(F.col("group_id").isin(data.timeline_groups))
            .select("group_id", "run_id", "generation", "start_ms", "end_ms", "cause", "outcome")
            .withColumn("n", F.row_number().over(latest))
            .where(F.col("n") <= TIMELINE_ROWS_MAX // len(data.timeline_groups))
            .drop("n")
        )
        data.timeline = [row.asDict() for row in picked.orderBy("group_id", "start_ms").collect()]

    columns = [
        "group_id", "run_id", "generation", "cause", "trigger_member", "restarts", "start_ms", "duration_ms",
        "outcome", "members_before", "members_after", "partitions_moved", "partitions_unowned",
        "unowned_partition_seconds", "rebalance_protocol",
    ]  # fmt: skip
    slow = finished.orderBy(F.desc("duration_ms"), "group_id", "start_ms").limit(slowest).select(*columns)
    data.slowest = [row.asDict() for row in slow.collect()]


def _gather_detections(members: DataFrame, data: ReportData) -> None:
    expired = members.where((F.col("end") == "expired") & F.col("since_last_heartbeat_ms").isNotNull())
    top = expired.agg(F.max("since_last_heartbeat_ms").alias("max")).collect()[0]["max"]
    if top is None:
        return
    # Whole seconds wide, about 60 bins up to the longest; session timeouts show as spikes.
    width = max(1000, math.ceil(int(top) / 60 / 1000) * 1000)
    data.detection_width_ms = width
    binned = expired.groupBy(F.floor(F.col("since_last_heartbeat_ms") / F.lit(width)).cast("int").alias("bin")).count()
    data.detections = sorted((int(row["bin"]), int(row["count"])) for row in binned.collect())


# -- plots -----------------------------------------------------------------------------------------------------------


def _figure(width: float = 10.0, height: float = 4.0) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    _style(axes)
    return figure, axes


def _style(axes: Axes) -> None:
    axes.spines[["top", "right"]].set_visible(False)
    axes.grid(axis="y", color="#e6e6e6", linewidth=0.8)
    axes.set_axisbelow(True)
    axes.tick_params(colors="#444444", labelsize=9)


def _no_data(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, color="#777777", fontsize=12)
    axes.set_xticks([])
    axes.set_yticks([])


def _plot_durations(data: ReportData) -> Figure:
    figure, axes = _figure()
    if not data.durations:
        _no_data(axes, "no finished rebalances")
        return figure
    low = min(b for _, b, _ in data.durations)
    high = max(b for _, b, _ in data.durations) + 1
    edges = [10 ** (b / DURATION_BINS_PER_DECADE) for b in range(low, high + 1)]
    order = ["eager", "cooperative", *sorted({p for p, _, _ in data.durations} - {"eager", "cooperative"})]
    for name in order:
        counts = dict.fromkeys(range(low, high), 0)
        for protocol, b, n in data.durations:
            if protocol == name:
                counts[b] += n
        total = sum(counts.values())
        if not total:
            continue
        label = {"none": "ended Empty or deleted (no protocol)"}.get(name, name)
        color = PROTOCOL_COLORS.get(name, OTHER)
        values = [counts[b] for b in range(low, high)]
        axes.stairs(values, edges, fill=True, alpha=0.18, color=color)
        axes.stairs(values, edges, color=color, linewidth=1.6, label=f"{label} ({total:,})")
    axes.set_xscale("log")
    ticks = [t for t in DURATION_TICKS_MS if edges[0] / 2 <= t <= edges[-1] * 2]
    axes.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axes.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _duration(v)))
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel("duration (log scale)", color="#444444")
    axes.set_ylabel("rebalances", color="#444444")
    if data.overall:
        for key, style in (("rebalance_ms_p50", "--"), ("rebalance_ms_p99", ":")):
            value = data.overall.get(key)
            if value:
                axes.axvline(value, color="#333333", linestyle=style, linewidth=1)
                axes.annotate(
                    f"{key[-3:]} {_duration(value)}",
                    (value, 1),
                    xycoords=("data", "axes fraction"),
                    xytext=(4, -4),
                    textcoords="offset points",
                    va="top",
                    fontsize=8,
                    color="#333333",
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.9},
                )
    axes.legend(frameon=False, fontsize=9)
    return figure


def _plot_detections(data: ReportData) -> Figure:
    figure, axes = _figure(10.0, 3.4)
    if not data.detections:
        _no_data(axes, "no member expired")
        return figure
    width = data.detection_width_ms / 1000
    axes.bar(
        [b * width for b, _ in data.detections],
        [n for _, n in data.detections],
        width=width,
        align="edge",
        color="#d62728",
        alpha=0.75,
        edgecolor="white",
        linewidth=0.5,
    )
    axes.set_xlabel("time from the last heartbeat to the eviction (s)", color="#444444")
    axes.set_ylabel("expired members", color="#444444")
    return figure


def _plot_unowned(data: ReportData) -> Figure:
    figure, axes = _figure()
    if not data.unowned or data.first_ms is None:
        _no_data(axes, "no rebalances")
        return figure
    buckets = range(max(b for b, *_ in data.unowned) + 1)
    seconds = data.bucket_ms / 1000
    times = [_days(data.first_ms + b * data.bucket_ms) for b in buckets]
    stacks: list[list[float]] = []
    labels: list[str] = []
    colors: list[str] = []
    for name in ("eager", "cooperative", "none"):
        per = dict.fromkeys(buckets, 0.0)
        for b, protocol, ups, _ in data.unowned:
            if protocol == name:
                per[b] += ups / seconds
        if any(per.values()):
            stacks.append([per[b] for b in buckets])
            labels.append({"none": "no protocol"}.get(name, name))
            colors.append(PROTOCOL_COLORS.get(name, OTHER))
    started = dict.fromkeys(buckets, 0)
    for b, _, _, n in data.unowned:
        started[b] += n
    if stacks:
        axes.stackplot(times, *stacks, labels=labels, colors=colors, alpha=0.75, step="post")
    else:
        axes.text(0.5, 0.5, "no partition was ever unowned", ha="center", transform=axes.transAxes, color="#777777")
    axes.set_ylabel(f"unowned partitions (mean per {_duration(data.bucket_ms)})", color="#444444")
    twin = axes.twinx()
    twin.plot(times, [started[b] for b in buckets], color="#333333", linewidth=0.8, alpha=0.6, label="rebalances")
    twin.set_ylabel("rebalances started", color="#666666")
    twin.spines[["top"]].set_visible(False)
    twin.tick_params(colors="#666666", labelsize=9)
    twin.set_ylim(bottom=0)
    axes.set_ylim(bottom=0)
    _time_axis(axes)
    handles, names = axes.get_legend_handles_labels()
    more, more_names = twin.get_legend_handles_labels()
    axes.legend(
        handles + more,
        names + more_names,
        frameon=False,
        fontsize=9,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncols=len(names) + len(more_names),
    )
    return figure


def _plot_timeline(data: ReportData) -> Figure:
    lanes = data.timeline_groups
    height = max(2.6, 1.05 * len(lanes) + 0.9)
    figure = Figure(figsize=(10.0, height), dpi=110, layout="constrained")
    if not lanes:
        axes = figure.add_subplot()
        _style(axes)
        _no_data(axes, "no rebalances")
        return figure
    grid = figure.subplots(len(lanes), 1, sharex=True, squeeze=False)
    used: set[str] = set()
    for axes, group in zip((row[0] for row in grid), lanes, strict=True):
        _style(axes)
        rows = [r for r in data.timeline if r["group_id"] == group]
        # One step line per broker run: a restart starts the generations again.
        for run in dict.fromkeys(r["run_id"] for r in rows):
            mine = [r for r in rows if r["run_id"] == run and r["generation"] is not None]
            if not mine:
                continue
            axes.step(
                [_days(r["end_ms"] or r["start_ms"]) for r in mine],
                [r["generation"] for r in mine],
                where="post",
                color="#555555",
                linewidth=1.0,
            )
        for cause in dict.fromkeys(r["cause"] or "unknown" for r in rows):
            mine = [r for r in rows if (r["cause"] or "unknown") == cause and r["generation"] is not None]
            used.add(cause)
            axes.scatter(
                [_days(r["start_ms"]) for r in mine],
                [r["generation"] for r in mine],
                s=9,
                color=CAUSE_COLORS.get(cause, OTHER),
                zorder=3,
                linewidths=0,
            )
        axes.text(
            0.005, 0.96, group, transform=axes.transAxes, ha="left", va="top", fontsize=8.5, color="#222222",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )  # fmt: skip
        axes.set_ylim(bottom=0, top=max((r["generation"] or 0 for r in rows), default=1) * 1.25 + 1)
        axes.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(3, integer=True))
    last = grid[-1][0]
    _time_axis(last)
    handles = [
        matplotlib.lines.Line2D([], [], marker="o", linestyle="", color=CAUSE_COLORS.get(c, OTHER), label=c)
        for c in sorted(used)
    ]
    figure.legend(handles=handles, loc="outside upper center", ncols=min(8, len(handles)), frameon=False, fontsize=8.5)
    return figure


def _time_axis(axes: Axes) -> None:
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]  # (matplotlib's stubs lack these two)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.xaxis_date(tz=UTC)


def _png(figure: Figure) -> bytes:
    # The Agg canvas, set on each figure: no pyplot, so no global backend and no display are involved.
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", facecolor="white")
    return buffer.getvalue()


def plots(data: ReportData) -> dict[str, bytes]:
    """Every plot as PNG bytes, by file stem."""
    made = {
        "rebalance_durations": _plot_durations(data),
        "detection_times": _plot_detections(data),
        "unowned_over_time": _plot_unowned(data),
        "generations_timeline": _plot_timeline(data),
    }
    return {name: _png(figure) for name, figure in made.items()}


# -- the page ----------------------------------------------------------------------------------------------------------

CSS = """
:root { --ink: #1f2328; --muted: #656d76; --line: #d8dee4; --bg: #f6f8fa; --card: #ffffff;
        --accent: #3b6fb6; --warn-bg: #fff8c5; --warn: #9a6700; --bad: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 650; }
header p { margin: 0; color: var(--muted); }
h2 { font-size: 18px; margin: 0 0 12px; font-weight: 620; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 20px 22px;
          margin-top: 20px; overflow-x: auto; }
section > p.note { color: var(--muted); margin: -6px 0 12px; font-size: 13px; }
.kpis { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin-top: 20px; }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.kpi .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.kpi .value { font-size: 22px; font-weight: 650; margin-top: 2px; font-variant-numeric: tabular-nums; }
.kpi .sub { color: var(--muted); font-size: 12px; }
.banner { margin-top: 18px; padding: 12px 16px; border-radius: 10px; background: var(--warn-bg);
          border: 1px solid #d4a72c; color: var(--warn); }
.banner.ok { background: #dafbe1; border-color: #4ac26b; color: #116329; }
img.plot { display: block; width: 100%; height: auto; border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .03em;
     background: #fafbfc; }
td.num, th.num { text-align: right; white-space: nowrap; }
td code, .nowrap { white-space: nowrap; }
tr.bad td { background: #fff1f0; }
tr.bad td.kind { color: var(--bad); font-weight: 600; }
code, pre { font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
pre.example { margin: 0 0 4px; padding: 4px 8px; background: var(--bg); border-radius: 6px; white-space: pre-wrap;
              word-break: break-all; }
.bar { display: inline-block; height: 10px; background: var(--accent); border-radius: 3px; vertical-align: middle;
       margin-right: 8px; opacity: .8; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; }
.muted { color: var(--muted); }
.tag { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; background: #eef2f7; }
.tag.eager { background: #e3ecf8; color: #2b5797; }
.tag.cooperative { background: #fbeadf; color: #a4501b; }
footer { margin-top: 28px; color: var(--muted); font-size: 12px; text-align: center; }
@media (max-width: 800px) { .grid2, .kpis { grid-template-columns: 1fr 1fr; } main { padding: 16px; } }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _days(ms: float) -> float:
    """Milliseconds since the epoch as matplotlib's date numbers (days since 1970-01-01)."""
    return ms / 86_400_000


def _datetime(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _when(ms: int | None, *, short: bool = False) -> str:
    """A UTC time; ``short``: without the year and zone, for a table whose header says UTC."""
    if ms is None:
        return "-"
    return _datetime(ms).strftime("%m-%d %H:%M:%S" if short else "%Y-%m-%d %H:%M:%S UTC")


def _duration(ms: float | None) -> str:
    """3 ms, 2.54 s, 4.2 min, 1.5 h: the unit a person reads."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.3g} min"
    return f"{ms / 3_600_000:.3g} h"


def _times(restarts: int) -> str:
    return "restarted once" if restarts == 1 else f"restarted {restarts} times"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _kpi(label: str, value: str, sub: str = "") -> str:
    extra = f'<div class="sub">{_e(sub)}</div>' if sub else ""
    return f'<div class="kpi"><div class="label">{_e(label)}</div><div class="value">{_e(value)}</div>{extra}</div>'


def _table_html(
    headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[str]], row_class: Sequence[str] = ()
) -> str:
    """``headers``: (title, numeric); cells are already HTML."""
    head = "".join(f'<th class="num">{_e(h)}</th>' if num else f"<th>{_e(h)}</th>" for h, num in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>"
            for cell, (_, num) in zip(row, headers, strict=True)
        )
        css = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        body.append(f"<tr{css}>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">nothing</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _protocol_tag(value: str | None) -> str:
    if not value:
        return '<span class="muted">-</span>'
    return f'<span class="tag {_e(value)}">{_e(value)}</span>'


def _bad_lines(data: ReportData) -> int:
    return sum(int(r["count"] or 0) for r in data.input_rows if r["kind"] not in ("lines", "parsed"))


def page(data: ReportData, images: dict[str, bytes]) -> str:
    """The whole HTML document."""
    o = data.overall or {}
    lines = next((int(r["count"]) for r in data.input_rows if r["kind"] == "lines"), 0)
    parsed = next((int(r["count"]) for r in data.input_rows if r["kind"] == "parsed"), 0)
    bad = _bad_lines(data)
    span = (
        f"{_when(data.first_ms)} to {_when(data.last_ms)} ({_duration((data.last_ms or 0) - (data.first_ms or 0))})"
        if data.first_ms is not None
        else "no rebalances"
    )
    sources = ", ".join(data.inputs) if data.inputs else str(data.out_dir)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Rebalance report</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<header><h1>Consumer-group rebalances</h1>",
        f"<p>{_e(span)} &middot; {data.runs} broker run(s) &middot; {data.group_count:,} groups</p>",
        f'<p class="muted">From {_e(_short(sources, 300))}</p></header>',
    ]
    if bad:
        kinds = ", ".join(
            f"{int(r['count']):,} {r['kind']}"
            for r in data.input_rows
            if r["kind"] not in ("lines", "parsed") and r["count"]
        )
        parts.append(
            f'<div class="banner"><strong>{bad:,} of {lines:,} lines were not used</strong> ({_e(kinds)}): '
            f'see <a href="#input">Input</a> for examples with file and line.</div>'
        )
    elif data.input_rows:
        parts.append(f'<div class="banner ok">All {lines:,} lines were read and used.</div>')

    eager, cooperative = int(o.get("eager") or 0), int(o.get("cooperative") or 0)
    parts.append('<div class="kpis">')
    parts += [
        _kpi("Rebalances", _count(o.get("rebalances")), f"{eager:,} eager, {cooperative:,} cooperative"),
        _kpi("Duration p50", _duration(o.get("rebalance_ms_p50")), "rebalances that ended Stable"),
        _kpi(
            "Duration p95 / p99",
            f"{_duration(o.get('rebalance_ms_p95'))} / {_duration(o.get('rebalance_ms_p99'))}",
            f"max {_duration(o.get('rebalance_ms_max'))}",
        ),
        _kpi("Detection p50", _duration(o.get("detection_ms_p50")), f"p99 {_duration(o.get('detection_ms_p99'))}"),
        _kpi("Expired members", _count(o.get("expirations")), "session timeouts"),
        _kpi(
            "Unowned partition-seconds",
            _count(o.get("unowned_partition_seconds")),
            f"p95 {o.get('unowned_ps_p95') or 0:,.1f} per rebalance",
        ),
        _kpi("Groups", _count(data.group_count), f"{data.runs} broker run(s)"),
        _kpi("Input lines", _count(lines), f"{parsed:,} used, {bad:,} not"),
    ]
    parts.append("</div>")

    notes = {
        "rebalance_durations": "From the rebalance's start to the group's next stable generation, eager against "
        "cooperative; a log scale, since restarts and dead members stretch a few to minutes.",
        "detection_times": "For members evicted by their session timeout: the silence the coordinator waited "
        "through. Spikes sit at the groups' session timeouts.",
        "unowned_over_time": "Partitions that nobody consumed, averaged over each time bucket (stacked by "
        "protocol), and how many rebalances started in it.",
        "generations_timeline": "The groups with the most rebalances: their generation over time, one dot per "
        "rebalance coloured by cause; the line starts again at a broker restart.",
    }
    for name, title in PLOTS.items():
        encoded = base64.b64encode(images[name]).decode("ascii")
        parts.append(
            f'<section id="{name}"><h2>{_e(title)}</h2><p class="note">{_e(notes[name])}</p>'
            f'<img class="plot" alt="{_e(title)}" src="data:image/png;base64,{encoded}"></section>'
        )
        if name == "rebalance_durations":
            parts.append(_summary_section(data))

    parts.append(_causes_section(data))
    parts.append(_groups_section(data))
    parts.append(_slowest_section(data))
    parts.append(_input_section(data))
    generated = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<footer>group-broker analyze &middot; rendered {generated} &middot; {_e(data.out_dir)}</footer>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _summary_section(data: ReportData) -> str:
    o = data.overall or {}
    rows = [
        (
            _e(label),
            _duration(o.get(f"{prefix}_p50")) if unit == "ms" else f"{o.get(f'{prefix}_p50') or 0:,.1f}",
            _duration(o.get(f"{prefix}_p95")) if unit == "ms" else f"{o.get(f'{prefix}_p95') or 0:,.1f}",
            _duration(o.get(f"{prefix}_p99")) if unit == "ms" else f"{o.get(f'{prefix}_p99') or 0:,.1f}",
            _duration(o.get(f"{prefix}_max")) if unit == "ms" else f"{o.get(f'{prefix}_max') or 0:,.1f}",
        )
        for label, prefix, unit in (
            ("Rebalance duration", "rebalance_ms", "ms"),
            ("Detection time", "detection_ms", "ms"),
            ("Unowned partition-seconds per rebalance", "unowned_ps", "ps"),
        )
    ]
    percentiles = _table_html([("", False), ("p50", True), ("p95", True), ("p99", True), ("max", True)], rows)
    outcome_rows = [(_e(k), _count(v)) for k, v in sorted(data.outcomes.items(), key=lambda kv: -kv[1])]
    end_rows = [(_e(k), _count(v)) for k, v in sorted(data.member_ends.items(), key=lambda kv: -kv[1])]
    return (
        '<section id="summary"><h2>Summary</h2>'
        f"{percentiles}"
        '<div class="grid2" style="margin-top:18px">'
        f"<div><h2>Outcomes</h2>{_table_html([('outcome', False), ('rebalances', True)], outcome_rows)}</div>"
        f"<div><h2>How members ended</h2>{_table_html([('end', False), ('members', True)], end_rows)}</div>"
        "</div></section>"
    )


def _causes_section(data: ReportData) -> str:
    causes: dict[str, int] = {k: int(v) for k, v in ((data.overall or {}).get("causes") or {}).items()}
    total = sum(causes.values()) or 1
    rows = [
        (
            f'<span class="bar" style="width:{max(2, round(140 * n / total))}px;'
            f'background:{CAUSE_COLORS.get(cause, OTHER)}"></span>{_e(cause)}',
            _count(n),
            f"{100 * n / total:.1f}%",
        )
        for cause, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    table = _table_html([("cause", False), ("rebalances", True), ("share", True)], rows)
    return f'<section id="causes"><h2>What started the rebalances</h2>{table}</section>'


def _groups_section(data: ReportData) -> str:
    rows = [
        (
            f"<code>{_e(g['group_id'])}</code>",
            _count(g.get("rebalances")),
            _duration(g.get("rebalance_ms_p50")),
            _duration(g.get("rebalance_ms_p99")),
            _duration(g.get("rebalance_ms_max")),
            _count(g.get("expirations")),
            f"{g.get('unowned_partition_seconds') or 0:,.0f}",
            f"{int(g.get('eager') or 0):,} / {int(g.get('cooperative') or 0):,}",
            _e(", ".join(f"{k} {v}" for k, v in sorted((g.get("causes") or {}).items(), key=lambda kv: -kv[1])[:3])),
        )
        for g in data.groups
    ]
    headers = [
        ("group", False), ("rebalances", True), ("p50", True), ("p99", True), ("max", True), ("expired", True),
        ("unowned p-s", True), ("eager / coop", True), ("top causes", False),
    ]  # fmt: skip
    note = f"The {len(data.groups)} of {data.group_count:,} groups with the most rebalances."
    return f'<section id="groups"><h2>Groups</h2><p class="note">{_e(note)}</p>{_table_html(headers, rows)}</section>'


def _slowest_section(data: ReportData) -> str:
    rows = [
        (
            f"<code>{_e(r['group_id'])}</code>",
            _count(r.get("generation")),
            _e(r.get("cause"))
            + (f' <span class="muted">({_times(r["restarts"])})</span>' if r.get("restarts") else ""),
            f'<span class="nowrap">{_when(r.get("start_ms"), short=True)}</span>',
            _duration(r.get("duration_ms")),
            f"{_count(r.get('members_before'))} → {_count(r.get('members_after'))}",
            _count(r.get("partitions_moved")),
            f"{r.get('unowned_partition_seconds') or 0:,.1f}",
            _e(r.get("outcome")),
            _protocol_tag(r.get("rebalance_protocol")),
        )
        for r in data.slowest
    ]
    headers = [
        ("group", False), ("gen", True), ("cause", False), ("started (UTC)", False), ("duration", True),
        ("members", True), ("moved", True), ("unowned p-s", True), ("outcome", False),
        ("protocol", False),
    ]  # fmt: skip
    return f'<section id="slowest"><h2>Slowest rebalances</h2>{_table_html(headers, rows)}</section>'


def _input_section(data: ReportData) -> str:
    rows = []
    classes = []
    for r in data.input_rows:
        kind, count = str(r["kind"]), int(r["count"] or 0)
        examples = "".join(f'<pre class="example">{_e(x)}</pre>' for x in (r.get("examples") or []))
        rows.append((f"<span>{_e(kind)}</span>", _count(count), examples or '<span class="muted">-</span>'))
        classes.append("bad" if kind not in ("lines", "parsed") and count else "")
    table = _table_html([("kind", False), ("lines", True), ("examples (file:line: text)", False)], rows, classes)
    note = f"Every line of the input, by what the job made of it; {BAD_KINDS_HINT}."
    table = table.replace("<td><span>", '<td class="kind"><span>')
    return f'<section id="input"><h2>Input</h2><p class="note">{_e(note)}</p>{table}</section>'


# -- entry point -------------------------------------------------------------------------------------------------------


def _local(out_dir: str | os.PathLike[str]) -> Path:
    """The report is files on this machine: a ``file:`` URI is its path (other URIs are not supported)."""
    text = os.fspath(out_dir)
    if "://" in text and not text.startswith("file:"):
        raise ValueError(f"the report is written to a local directory, not {text!r}")
    return Path(text.removeprefix("file://").removeprefix("file:"))


def _session() -> SparkSession:
    """The job's own session and local defaults (it is still running when the job's --report renders)."""
    from broker.analytics.job import build_session

    return build_session()


def render(
    out_dir: str | os.PathLike[str], spark: SparkSession | None = None, *, top: int = 10, slowest: int = 20
) -> Path:
    """Write ``out_dir/report.html`` and ``out_dir/plots/*.png`` from the job's tables; returns the page's path.

    ``spark``: the session to read with; without one, the active session, else a local[2] one made (and
    stopped) here.
    """
    out = _local(out_dir)
    session = spark or SparkSession.getActiveSession()
    own = session is None
    if session is None:
        session = _session()
    try:
        data = gather(session, out, top=top, slowest=slowest)
    finally:
        if own:
            session.stop()
    images = plots(data)
    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for name, png in images.items():
        (plot_dir / f"{name}.png").write_bytes(png)
    report = out / "report.html"
    report.write_text(page(data, images), encoding="utf-8")
    return report
