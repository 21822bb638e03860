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

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker.analytics.schema import INPUT_KINDS

DURATION_BINS_PER_DECADE = 10
TIME_BUCKETS = 240
TIMELINE_ROWS_MAX = 60_000  # rebalances drawn in the timeline, over all its groups
# Time buckets a person reads at a glance: 1 s to 1 day.
NICE_BUCKETS_MS = tuple(
    s * 1000 for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)


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
