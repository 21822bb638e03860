"""The report's plots, drawn with matplotlib's object API on the Agg canvas: PNG bytes, no pyplot, no display."""

from __future__ import annotations

import io
from datetime import UTC

import matplotlib.lines
import matplotlib.ticker
from matplotlib import dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from broker.analytics.report.disturbances import mark_timeline, on_lane
from broker.analytics.report.gather import DURATION_BINS_PER_DECADE, FORMATION, ReportData
from broker.analytics.report.style import (
    CAUSE_COLORS,
    FORMATION_COLOR,
    OTHER,
    PROTOCOL_COLORS,
    PROTOCOLS,
    duration,
)

#: The plots, in page order: file stem -> title.
PLOTS = {
    "rebalance_durations": "Rebalance duration",
    "detection_times": "Time to detect a dead member",
    "unowned_over_time": "Unowned partitions over time",
    "generations_timeline": "Generations per group",
}
DURATION_TICKS_MS = (1, 10, 100, 1000, 10_000, 60_000, 600_000, 3_600_000)
#: The series of the duration and unowned plots, in order: the protocols, episodes without one, formations.
SERIES = (*PROTOCOLS, "none", FORMATION)
SERIES_LABELS = {"none": "no protocol", FORMATION: "group formation (from Empty)"}
SERIES_COLORS = {**PROTOCOL_COLORS, FORMATION: FORMATION_COLOR}


def _days(ms: float) -> float:
    """Milliseconds since the epoch as matplotlib's date numbers (days since 1970-01-01)."""
    return ms / 86_400_000


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


def _integer_ticks(axes: Axes) -> None:
    """A count axis: whole numbers only (issue 26: a count of 0.5 rebalances)."""
    axes.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


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
    order = [*SERIES, *sorted({p for p, _, _ in data.durations} - set(SERIES))]
    for name in order:
        counts = dict.fromkeys(range(low, high), 0)
        for protocol, b, n in data.durations:
            if protocol == name:
                counts[b] += n
        total = sum(counts.values())
        # The legend counts every rebalance of the series (the report's one count, ``data.counts``); those still
        # open have no duration to draw, and say so.
        count = data.counts.get(name, total)
        if not count and not total:
            continue
        still_open = data.open.get(name, 0)
        label = {"none": "ended Empty or deleted (no protocol)"}.get(name, SERIES_LABELS.get(name, name))
        label += f" ({count:,}" + (f", {still_open:,} open: not drawn)" if still_open else ")")
        color = SERIES_COLORS.get(name, OTHER)
        values = [counts[b] for b in range(low, high)]
        style = "--" if name == FORMATION else "-"
        axes.stairs(values, edges, fill=True, alpha=0.10 if name == FORMATION else 0.18, color=color)
        axes.stairs(values, edges, color=color, linewidth=1.6, linestyle=style, label=label)
    axes.set_xscale("log")
    ticks = [t for t in DURATION_TICKS_MS if edges[0] / 2 <= t <= edges[-1] * 2]
    axes.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axes.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: duration(v)))
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel("duration (log scale)", color="#444444")
    axes.set_ylabel("rebalances", color="#444444")
    _integer_ticks(axes)
    stats = data.steady if data.steady is not None else data.overall  # the percentiles after formation
    if stats:
        for key, style in (("rebalance_ms_p50", "--"), ("rebalance_ms_p99", ":")):
            value = stats.get(key)
            if value:
                axes.axvline(value, color="#333333", linestyle=style, linewidth=1)
                axes.annotate(
                    f"{key[-3:]} {duration(value)}",
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
        linewidth=0.5 if len(data.detections) > 1 else 0,
    )
    if data.detection_range is not None:
        # The axis spans the values (and a margin), with bins narrow beside it: all-equal values are a spike at
        # their value, not one bar as wide as the chart (issue 18).
        low, high = (ms / 1000 for ms in data.detection_range)
        pad = max((high - low) * 0.05, high * 0.05, 2 * width)
        axes.set_xlim(max(0.0, low - pad), high + width + pad)
        if low == high:
            total = sum(n for _, n in data.detections)
            axes.set_ylim(top=total * 1.2)
            axes.annotate(
                f"all {total:,} at {data.detection_range[0]:,} ms",
                (low + width / 2, total),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=9,
                color="#333333",
            )
    axes.set_xlabel("time from the last heartbeat to the eviction (s)", color="#444444")
    axes.set_ylabel("expired members", color="#444444")
    _integer_ticks(axes)
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
    for name in SERIES:
        per = dict.fromkeys(buckets, 0.0)
        for b, protocol, ups, _ in data.unowned:
            if protocol == name:
                per[b] += ups / seconds
        if any(per.values()):
            stacks.append([per[b] for b in buckets])
            labels.append(SERIES_LABELS.get(name, name))
            colors.append(SERIES_COLORS.get(name, OTHER))
    started = dict.fromkeys(buckets, 0)
    for b, _, _, n in data.unowned:
        started[b] += n
    if stacks:
        axes.stackplot(times, *stacks, labels=labels, colors=colors, alpha=0.75, step="post")
    else:
        axes.text(0.5, 0.5, "no partition was ever unowned", ha="center", transform=axes.transAxes, color="#777777")
    axes.set_ylabel(f"unowned partitions (mean per {duration(data.bucket_ms)})", color="#444444")
    twin = axes.twinx()
    twin.plot(times, [started[b] for b in buckets], color="#333333", linewidth=0.8, alpha=0.6, label="rebalances")
    twin.set_ylabel("rebalances started", color="#666666")
    twin.spines[["top"]].set_visible(False)
    twin.tick_params(colors="#666666", labelsize=9)
    twin.set_ylim(bottom=0)
    _integer_ticks(twin)
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
        mark_timeline(axes, on_lane(data.disturbances, group))
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


def draw(data: ReportData) -> dict[str, bytes]:
    """Every plot as PNG bytes, by file stem."""
    made = {
        "rebalance_durations": _plot_durations(data),
        "detection_times": _plot_detections(data),
        "unowned_over_time": _plot_unowned(data),
        "generations_timeline": _plot_timeline(data),
    }
    return {name: _png(figure) for name, figure in made.items()}
