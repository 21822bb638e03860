"""The report's figures as a reader checks them (issue 18, item 3): unowned partitions never above those
subscribed, a detection chart that is a spike when every value is the same, group formation reported apart.

Small tables with the job's schemas (``test_report.write_table``), reduced by ``report.gather`` on the analytics
tests' shared SparkSession; plots drawn and inspected as matplotlib figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (the `analytics` extra)")

from pyspark.sql import SparkSession

from broker.analytics import report
from broker.analytics.report import plots
from broker.analytics.report.gather import FORMATION, detection_width, gather, with_formation
from broker.analytics.schema import TABLE_SCHEMAS
from tests.analytics.test_report import T0, write_table

PARTITIONS = 12


def episode(group: str, start: int, duration: int, protocol: str, previous: int, **more: Any) -> dict[str, Any]:
    """A rebalance that ended Stable with every partition unowned all along (eager: nothing kept)."""
    return {
        "group_id": group, "run_id": "a1b2c3d4e5f6", "generation": previous + 1, "previous_generation": previous,
        "cause": "member_joined" if previous == 0 else "member_expired", "restarts": 0, "start_ms": start,
        "end_ms": start + duration, "duration_ms": duration, "outcome": "stable", "members_before": 3,
        "members_after": 3, "partitions_moved": PARTITIONS, "partitions_unowned": 0,
        "unowned_partition_seconds": PARTITIONS * duration / 1000, "protocol": "range",
        "rebalance_protocol": protocol, "partitions": PARTITIONS, **more,
    }  # fmt: skip


def tables(spark: SparkSession, out: Path) -> list[dict[str, Any]]:
    """Two groups of 12 partitions over four minutes: each formed (3 s initial delay), then rebalances of 30 s
    (eager) or 0.4 s (cooperative, with less unowned); the eager group empties and forms again."""
    eager = [episode("eager-g", T0, 3_000, "eager", 0)]
    eager += [episode("eager-g", T0 + 20_000 + i * 50_000, 30_000, "eager", i + 1) for i in range(3)]
    eager[-1]["outcome"] = "empty"
    eager.append(episode("eager-g", T0 + 200_000, 3_000, "eager", 4))  # formed again, from Empty
    eager.append(episode("eager-g", T0 + 210_000, 30_000, "eager", 5))
    coop = [episode("coop-g", T0 + 1_000, 3_000, "cooperative", 0)]
    coop += [
        episode("coop-g", T0 + 30_000 + i * 40_000, 400, "cooperative", i + 1, unowned_partition_seconds=0.8)
        for i in range(5)
    ]
    rows = eager + coop
    write_table(spark, out, "rebalances", rows)
    return rows


def test_unowned_partitions_are_spread_and_never_above_those_subscribed(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    rows = tables(spark, out)
    data = gather(spark, out)
    assert data.bucket_ms == 2_000  # four minutes in about 240 buckets
    seconds = data.bucket_ms / 1000
    per_bucket: dict[int, float] = {}
    for bucket, _series, ups, _started in data.unowned:
        per_bucket[bucket] = per_bucket.get(bucket, 0.0) + ups
    # The two groups' rebalances never overlap but for the formations (T0 and T0 + 1 s): at most both groups.
    assert max(per_bucket.values()) / seconds <= 2 * PARTITIONS + 1e-6
    eager_buckets = [ups / seconds for b, series, ups, _ in data.unowned if series == "eager"]
    assert max(eager_buckets) == pytest.approx(PARTITIONS), "a 30 s eager rebalance: 12 unowned all along"
    assert len(eager_buckets) == 4 * 15, "each spans 15 buckets of 2 s"
    total = sum(r["unowned_partition_seconds"] for r in rows)
    assert sum(ups for _, _, ups, _ in data.unowned) == pytest.approx(total), "spread, not lost"
    formation = sum(ups for _, series, ups, _ in data.unowned if series == FORMATION)
    assert formation == pytest.approx(3 * PARTITIONS * 3.0), "three formations of 3 s, apart"
    started = {series: 0 for _, series, _, _ in data.unowned}
    for _, series, _, n in data.unowned:
        started[series] += n
    assert started == {"eager": 4, "cooperative": 5, FORMATION: 3}
    assert plots.draw(data)["unowned_over_time"].startswith(b"\x89PNG")


def test_group_formation_is_reported_apart(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    tables(spark, out)
    data = gather(spark, out)
    assert data.formation is not None and data.steady is not None
    assert data.formation["rebalances"] == 3 and data.formation["rebalance_ms_p50"] == 3000.0
    assert data.formation["unowned_partition_seconds"] == pytest.approx(3 * 36.0)
    assert data.steady["rebalances"] == 9
    assert data.steady["rebalance_ms_max"] == 30_000.0 and data.steady["rebalance_ms_p50"] == 400.0
    protocols = {row["protocol"]: row for row in data.by_protocol}
    assert protocols["eager"]["rebalances"] == 4 and protocols["eager"]["rebalance_ms_p50"] == 30_000.0
    assert protocols["cooperative"]["rebalances"] == 5 and protocols["cooperative"]["rebalance_ms_p99"] == 400.0
    assert protocols["cooperative"]["unowned_partition_seconds"] == pytest.approx(4.0)  # not 40 + 36
    durations = {(series, n) for series, _, n in data.durations if series == FORMATION}
    assert durations == {(FORMATION, 3)}
    assert all(r["duration_ms"] != 3_000 for r in data.slowest), "formations are not the slowest rebalances"

    page = report.render(out, spark).read_text(encoding="utf-8")
    assert "Group formations" in page and "Group formation: duration" in page
    assert "group formation (from Empty)" in page and "Rebalance duration, after formation" in page
    summary = page.split('id="summary"')[1].split('id="detection_times"')[0]
    assert '<span class="tag eager">eager</span></td><td class="num">4</td><td class="num">30 s</td>' in summary


def test_formation_is_the_first_episode_or_one_after_empty(spark: SparkSession) -> None:
    rows = [
        episode("g", T0, 3_000, "eager", 0),
        episode("g", T0 + 10_000, 500, "eager", 1, outcome="empty"),
        episode("g", T0 + 20_000, 3_000, "eager", 2),
        episode("g", T0 + 30_000, 500, "eager", 3),
        episode("h", T0, 500, "consumer", 6),  # its formation is before the log: not one here
        episode("h", T0 + 1_000, 500, "consumer", 0, run_id="0f9e8d7c6b5a"),  # a restarted broker: a new group
    ]
    schema = TABLE_SCHEMAS["rebalances"]
    frame = spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)
    marked = with_formation(frame).orderBy("group_id", "run_id", "start_ms").collect()
    assert [row[FORMATION] for row in marked] == [True, False, True, False, True, False]  # h: run 0f9e.. first


def test_detections_all_the_same_are_a_spike_not_a_block(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    member = {
        "group_id": "g", "run_id": "a1b2c3d4e5f6", "joined_ms": T0, "ended_ms": T0 + 9_000, "duration_ms": 9_000,
        "end": "expired", "end_cause": "session_timeout", "since_last_heartbeat_ms": 3_001, "session_timeout_ms": 3_000,
    }  # fmt: skip
    members = [{**member, "member_id": f"m{i}"} for i in range(7)]
    write_table(spark, out, "members", members)
    data = gather(spark, out)
    assert data.detection_range == (3_001, 3_001) and data.detection_width_ms <= 20
    assert data.detections == [(3_001 // data.detection_width_ms, 7)]
    figure = plots._plot_detections(data)
    axes = figure.axes[0]
    low, high = axes.get_xlim()
    (bar,) = axes.patches
    assert low <= 3.001 <= high
    assert bar.get_width() / (high - low) < 0.1, "a spike at 3 s, not one bar as wide as the chart"
    assert any("all 7 at 3,001 ms" in text.get_text() for text in axes.texts)


def test_detection_bins_follow_the_spread() -> None:
    assert detection_width(1_200, 45_002) == 1_000  # about 60 bins over the spread
    assert detection_width(3_001, 3_001) == 20  # a two-hundredth of the value, a nice width
    assert detection_width(9_000, 10_500) == 100
    assert detection_width(5, 5) == 1
    assert detection_width(0, 7_200_000) == 120_000
