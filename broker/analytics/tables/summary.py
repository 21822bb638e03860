"""The summary table: percentiles and counts per group and overall, computed from the written tables."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from broker.analytics.schema import SUMMARY
from broker.analytics.tables.columns import as_int, typed

PERCENTILES = (0.5, 0.95, 0.99)


def _percentiles(prefix: str, column: Column, digits: int) -> list[Column]:
    """Exact percentiles (interpolated between the two nearest values) and the maximum, rounded to ``digits``."""
    values = F.percentile(column, list(PERCENTILES))
    names = ("p50", "p95", "p99")
    return [F.round(values.getItem(i), digits).alias(f"{prefix}_{name}") for i, name in enumerate(names)] + [
        F.round(F.max(column).cast("double"), digits).alias(f"{prefix}_max")
    ]


def summary_table(rebalances: DataFrame, members: DataFrame) -> DataFrame:
    """Per group, then one row for everything (``scope`` "all", ``group_id`` null).

    Durations and unowned partition-seconds are those of episodes that ended Stable (an episode that ends with
    the group Empty or deleted stopped nobody); detection is ``since_last_heartbeat_ms`` of expired members.
    """
    stable = F.col("outcome") == "stable"

    def rebalance_stats(keys: list[str]) -> DataFrame:
        return rebalances.groupBy(*keys).agg(
            F.count("*").alias("rebalances"),
            *_percentiles("rebalance_ms", F.when(stable, F.col("duration_ms")), 3),
            *_percentiles("unowned_ps", F.when(stable, F.col("unowned_partition_seconds")), 3),
            F.round(F.sum("unowned_partition_seconds"), 3).alias("unowned_partition_seconds"),
            F.sum(as_int(F.col("rebalance_protocol") == "eager")).alias("eager"),
            F.sum(as_int(F.col("rebalance_protocol") == "cooperative")).alias("cooperative"),
            F.sum(as_int(F.col("rebalance_protocol") == "consumer")).alias("consumer"),
        )

    def causes(keys: list[str]) -> DataFrame:
        counted = rebalances.groupBy(*keys, F.coalesce("cause", F.lit("unknown")).alias("cause")).count()
        return counted.groupBy(*keys).agg(
            F.map_from_entries(F.collect_list(F.struct("cause", "count"))).alias("causes")
        )

    def member_stats(keys: list[str]) -> DataFrame:
        expired = F.col("end") == "expired"
        return members.groupBy(*keys).agg(
            *_percentiles("detection_ms", F.when(expired, F.col("since_last_heartbeat_ms")), 3),
            F.sum(as_int(expired)).alias("expirations"),
        )

    groups = (
        rebalance_stats(["group_id"])
        .join(causes(["group_id"]), ["group_id"], "left")
        .join(member_stats(["group_id"]), ["group_id"], "full")
        .withColumn("scope", F.lit("group"))
    )
    overall = (
        rebalance_stats([])
        .crossJoin(causes([]))
        .crossJoin(member_stats([]))
        .withColumn("scope", F.lit("all"))
        .withColumn("group_id", F.lit(None).cast("string"))
    )
    # A group with members but no rebalance (or the reverse) has zeros, not nulls, for what it counts.
    both = (
        groups.unionByName(overall)
        .fillna(0, subset=["rebalances", "expirations", "eager", "cooperative", "consumer"])
        .fillna(0.0, subset=["unowned_partition_seconds"])
        .withColumn("causes", F.coalesce("causes", F.create_map().cast("map<string,bigint>")))
    )
    return typed(both, SUMMARY)
