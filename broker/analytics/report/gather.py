"""The report's data: the job's tables reduced in Spark to what the page shows (bins, time buckets, top-N).

Tables can be tens of millions of rows, so only these small results reach Python.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker.analytics.report.disturbances import gather_disturbances
from broker.analytics.report.share import ShareReport, gather_share
from broker.analytics.schema import INPUT_KINDS
from broker.analytics.tables.formation import FORMATION, NO_PROTOCOL, series, with_formation
from broker.analytics.tables.summary import counts, percentiles, steady

DURATION_BINS_PER_DECADE = 10
TIME_BUCKETS = 240
TIMELINE_ROWS_MAX = 60_000  # rebalances drawn in the timeline, over all its groups
# Time buckets a person reads at a glance: 1 s to 1 day.
NICE_BUCKETS_MS = tuple(
    s * 1000 for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)
#: Detection bins: about this many over the spread of the values, widths a person reads (1 ms to 10 min).
DETECTION_BINS = 60
NICE_BINS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, *NICE_BUCKETS_MS[:10])
__all__ = ["FORMATION", "NO_PROTOCOL", "ReportData", "detection_width", "gather", "local_dir", "with_formation"]


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
    detection_range: tuple[int, int] | None = None  # the shortest and longest detection, ms
    bucket_ms: int = 60_000
    # (bucket, series, ups, rebalances started): series a protocol, "none" or FORMATION; ups the unowned
    # partition-seconds within the bucket, each episode's spread over the buckets it spans
    unowned: list[tuple[int, str, float, int]] = field(default_factory=list)
    # Rebalance statistics with group formation apart (``with_formation``): the summary table's columns
    # (rebalances, rebalance_ms_*, unowned_ps_*, unowned_partition_seconds) over the rebalances after formation,
    # over the formations, and per protocol after formation (with ``protocol``).
    steady: dict[str, Any] | None = None
    formation: dict[str, Any] | None = None
    by_protocol: list[dict[str, Any]] = field(default_factory=list)
    # Rebalances by series (a protocol, "none", or FORMATION): every count the report shows comes from here, and
    # of those the episodes still open (no duration: not in the duration plot).
    counts: dict[str, int] = field(default_factory=dict)
    open: dict[str, int] = field(default_factory=dict)
    group_stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # the top groups', by group id
    timeline: list[dict[str, Any]] = field(default_factory=list)
    timeline_groups: list[str] = field(default_factory=list)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    disturbances: list[dict[str, Any]] = field(default_factory=list)  # report/disturbances.py
    share: ShareReport | None = None  # report/share.py: none without share groups


def local_dir(out_dir: str | os.PathLike[str]) -> Path:
    """The report is files on this machine: a ``file:`` URI is its path (other URIs are not supported)."""
    text = os.fspath(out_dir)
    if "://" in text and not text.startswith("file:"):
        raise ValueError(f"the report is written to a local directory, not {text!r}")
    return Path(text.removeprefix("file://").removeprefix("file:"))


def _table(spark: SparkSession, out_dir: Path, name: str) -> DataFrame | None:
    path = out_dir / name
    if not path.exists():
        return None
    return spark.read.parquet(str(path))


def gather(spark: SparkSession, out_dir: str | os.PathLike[str], *, top: int = 10, slowest: int = 20) -> ReportData:
    """Everything the report shows, reduced in Spark: bins, buckets and top-N only."""
    out = local_dir(out_dir)
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
        marked = with_formation(rebalances)
        _gather_rebalances(marked, data, top, slowest)
        _gather_stats(marked, data)

    members = _table(spark, out, "members")
    if members is not None:
        data.member_ends = {
            row["end"] or "unknown": int(row["count"]) for row in members.groupBy("end").count().collect()
        }
        _gather_detections(members, data)
    data.disturbances = gather_disturbances(spark, out)
    data.share = gather_share(spark, out)
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
    kind = series()

    # Durations on a log scale: 10 bins a decade, from 1 ms; formations a series of their own.
    finished = rebalances.where(F.col("duration_ms").isNotNull())
    log_bin = F.floor(F.log10(F.greatest(F.col("duration_ms"), F.lit(1)).cast("double")) * DURATION_BINS_PER_DECADE)
    data.durations = [
        (row["protocol"], int(row["bin"]), int(row["count"]))
        for row in finished.groupBy(kind.alias("protocol"), log_bin.cast("int").alias("bin")).count().collect()
    ]

    if data.first_ms is not None and data.last_ms is not None:
        wanted = (data.last_ms - data.first_ms + 1) / TIME_BUCKETS
        width = next((w for w in NICE_BUCKETS_MS if w >= wanted), math.ceil(wanted / 86_400_000) * 86_400_000)
        data.bucket_ms = width
        data.unowned = _unowned_buckets(rebalances, kind, data.first_ms, width)

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
    # The slowest after formation: a formation waits out the initial delay by design (KIP-134).
    slow = (
        finished.where(~F.col(FORMATION))
        .orderBy(F.desc("duration_ms"), "group_id", "start_ms")
        .limit(slowest)
        .select(*columns)
    )
    data.slowest = [row.asDict() for row in slow.collect()]


def _unowned_buckets(
    rebalances: DataFrame, series: Column, first_ms: int, width: int
) -> list[tuple[int, str, float, int]]:
    """Unowned partition-seconds per time bucket and series, and the rebalances started in each.

    An episode's partition-seconds are spread evenly over the time it lasted, each bucket getting the share of
    its overlap: a bucket's sum over its length is then the mean number of partitions unowned in it, never more
    than those subscribed (issue 18: all of an episode in the bucket it started in showed 75 unowned for 12).
    """
    start, end = F.col("start_ms"), F.col("end_ms")
    ups = F.col("unowned_partition_seconds")
    spread = rebalances.where(end.isNotNull() & (ups > 0)).select(
        series.alias("series"),
        start.alias("s"),
        end.alias("e"),
        ups.alias("ups"),
        F.explode(
            F.sequence(
                F.floor((start - F.lit(first_ms)) / F.lit(width)),
                F.floor((F.greatest(end - F.lit(1), start) - F.lit(first_ms)) / F.lit(width)),
            )
        ).alias("bucket"),
    )
    lower = F.lit(first_ms) + F.col("bucket") * F.lit(width)
    overlap = F.least(F.col("e"), lower + F.lit(width)) - F.greatest(F.col("s"), lower)
    share = F.when(F.col("e") > F.col("s"), overlap / (F.col("e") - F.col("s"))).otherwise(F.lit(1.0))
    spread_rows = (
        spread.groupBy(F.col("bucket").cast("int").alias("bucket"), "series")
        .agg(F.sum(F.col("ups") * share).alias("ups"))
        .collect()
    )
    bucket = F.floor((start - F.lit(first_ms)) / F.lit(width)).cast("int")
    started = rebalances.groupBy(bucket.alias("bucket"), series.alias("series")).count().collect()
    found: dict[tuple[int, str], list[float]] = {}
    for row in spread_rows:
        found.setdefault((int(row["bucket"]), row["series"]), [0.0, 0])[0] = float(row["ups"])
    for row in started:
        found.setdefault((int(row["bucket"]), row["series"]), [0.0, 0])[1] = int(row["count"])
    return sorted((b, name, ups_, int(n)) for (b, name), (ups_, n) in found.items())


def _stats() -> list[Column]:
    """The summary table's rebalance columns (``tables/summary.py``: the same counts, and the percentiles by the
    same method over the same episodes, those that ended Stable after formation), for a subset of the
    rebalances; ``formation_stable`` adds the percentiles of the formations that ended Stable (their own row)."""
    stable = F.col("outcome") == "stable"
    columns = counts()
    for prefix, column in (("rebalance_ms", "duration_ms"), ("unowned_ps", "unowned_partition_seconds")):
        columns += percentiles(prefix, F.when(steady(), F.col(column)))
        columns += percentiles(f"formation_{prefix}", F.when(stable & F.col(FORMATION), F.col(column)))
    columns.append(
        F.round(F.coalesce(F.sum("unowned_partition_seconds"), F.lit(0.0)), 3).alias("unowned_partition_seconds")
    )
    return columns


def _gather_stats(rebalances: DataFrame, data: ReportData) -> None:
    """Every count and percentile of the report, in one aggregation by series (``tables/formation.py``: each
    episode a formation, or after it by protocol or ``none``) and one over all: the cards, the legends and the
    tables read their counts from ``data.counts`` only (issue 26, item 9). Then the top groups'."""
    still_open = F.sum(F.col("duration_ms").isNull().cast("int")).alias("open")
    rows = rebalances.groupBy(series().alias("series")).agg(*_stats(), still_open).collect()
    by_series = {str(row["series"]): row.asDict() for row in rows}
    data.counts = {name: int(row["rebalances"]) for name, row in by_series.items()}
    data.open = {name: int(row["open"]) for name, row in by_series.items() if row["open"]}
    empty: dict[str, Any] = {"rebalances": 0, "unowned_partition_seconds": 0.0}
    after = rebalances.where(~F.col(FORMATION)).agg(*_stats()).collect()[0].asDict()
    data.steady = after
    formed = by_series.get(FORMATION)
    # The formations' row: their own percentiles (ended Stable), under the names the other rows use.
    own = {
        key.removeprefix("formation_"): value for key, value in (formed or {}).items() if key.startswith("formation_")
    }
    data.formation = {**formed, **own} if formed is not None else empty
    data.by_protocol = [{**row, "protocol": name} for name, row in by_series.items() if name != FORMATION]
    if data.groups:
        wanted = [str(g["group_id"]) for g in data.groups]
        mine = rebalances.where(F.col("group_id").isin(wanted))
        ups = F.col("unowned_partition_seconds")
        found = (
            mine.groupBy("group_id")
            .agg(
                *_stats(),  # the counts of every episode, the percentiles after formation
                F.round(F.coalesce(F.sum(F.when(~F.col(FORMATION), ups)), F.lit(0.0)), 3).alias("steady_ups"),
                F.round(F.coalesce(F.sum(F.when(F.col(FORMATION), ups)), F.lit(0.0)), 3).alias("formation_ups"),
            )
            .collect()
        )
        data.group_stats = {row["group_id"]: row.asDict() for row in found}


def detection_width(low: int, high: int) -> int:
    """A bin width for detections from ``low`` to ``high`` ms: about ``DETECTION_BINS`` over their spread, and
    narrow beside the values when they are (nearly) all the same (issue 18: every expiry at 3,001 ms made one
    bar as wide as the chart), at least a two-hundredth of the longest."""
    wanted = max((high - low) / DETECTION_BINS, high / 200, 1)
    return next((w for w in NICE_BINS_MS if w >= wanted), math.ceil(wanted / 600_000) * 600_000)


def _gather_detections(members: DataFrame, data: ReportData) -> None:
    expired = members.where((F.col("end") == "expired") & F.col("since_last_heartbeat_ms").isNotNull())
    span = expired.agg(F.min("since_last_heartbeat_ms").alias("min"), F.max("since_last_heartbeat_ms").alias("max"))
    low, top = span.collect()[0]
    if top is None:
        return
    # Session timeouts show as spikes; the plot's axis spans the values, not zero to the longest.
    width = detection_width(int(low), int(top))
    data.detection_width_ms = width
    data.detection_range = (int(low), int(top))
    binned = expired.groupBy(F.floor(F.col("since_last_heartbeat_ms") / F.lit(width)).cast("int").alias("bin")).count()
    data.detections = sorted((int(row["bin"]), int(row["count"])) for row in binned.collect())
