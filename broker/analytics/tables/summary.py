"""The summary table: percentiles and counts per group and overall, computed from the written tables."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from broker.analytics.schema import SUMMARY
from broker.analytics.tables.columns import as_int, typed
from broker.analytics.tables.formation import FORMATION, with_formation
from broker.analytics.tables.restarts import RESTART

PERCENTILES = (0.5, 0.95, 0.99)
#: The rebalance protocols counted in columns of their own, after formation.
PROTOCOL_COLUMNS = ("eager", "cooperative", "consumer")
#: The other counts: 0, not null, for a group with nothing to count.
COUNTED = ("rebalances", "formations", "expirations", "no_protocol", "broker_restarts")


def percentiles(prefix: str, column: Column, digits: int = 3) -> list[Column]:
    """Exact percentiles (interpolated between the two nearest values: Spark's ``percentile``) and the maximum,
    rounded to ``digits``: the one method of the summary table and of the report (``report/gather.py``)."""
    values = F.percentile(column, list(PERCENTILES))
    names = ("p50", "p95", "p99")
    return [F.round(values.getItem(i), digits).alias(f"{prefix}_{name}") for i, name in enumerate(names)] + [
        F.round(F.max(column).cast("double"), digits).alias(f"{prefix}_max")
    ]


def steady() -> Column:
    """The episodes the percentiles are taken of (of rows ``with_formation`` marked): those that ended Stable (one
    that ends with the group Empty or deleted stopped nobody) and did not form their group (``formation.py``)."""
    return (F.col("outcome") == "stable") & ~F.col(FORMATION)


def counts() -> list[Column]:
    """``rebalances`` and its split (of rows ``with_formation`` marked): ``formations``, then the episodes after
    formation by protocol and ``no_protocol``; the five add up to ``rebalances``."""
    after = ~F.col(FORMATION)
    protocol = F.col("rebalance_protocol")
    return [
        F.count("*").alias("rebalances"),
        F.coalesce(F.sum(as_int(F.col(FORMATION))), F.lit(0)).alias("formations"),
        *(F.coalesce(F.sum(as_int(after & (protocol == p))), F.lit(0)).alias(p) for p in PROTOCOL_COLUMNS),
        F.coalesce(F.sum(as_int(after & protocol.isNull())), F.lit(0)).alias("no_protocol"),
    ]


def summary_table(rebalances: DataFrame, members: DataFrame, disturbances: DataFrame | None = None) -> DataFrame:
    """Per group, then one row for everything (``scope`` "all", ``group_id`` null).

    ``broker_restarts`` (of ``disturbances``, the table as written; 0 without it): overall, the restarts' own rows
    (``group_id`` ""); per group, the rows of the restarts it lived through (``tables/restarts.py``).

    Durations and unowned partition-seconds are those of episodes that ended Stable after the group's formation
    (``steady``), as the report's; detection is ``since_last_heartbeat_ms`` of expired members.
    """
    rebalances = with_formation(rebalances)
    stable = steady()

    def rebalance_stats(keys: list[str]) -> DataFrame:
        return rebalances.groupBy(*keys).agg(
            *counts(),
            *percentiles("rebalance_ms", F.when(stable, F.col("duration_ms"))),
            *percentiles("unowned_ps", F.when(stable, F.col("unowned_partition_seconds"))),
            F.round(F.sum("unowned_partition_seconds"), 3).alias("unowned_partition_seconds"),
            F.round(
                F.coalesce(F.sum(F.when(F.col(FORMATION), F.col("unowned_partition_seconds"))), F.lit(0.0)), 3
            ).alias("formation_unowned_partition_seconds"),
        )

    def causes(keys: list[str]) -> DataFrame:
        counted = rebalances.groupBy(*keys, F.coalesce("cause", F.lit("unknown")).alias("cause")).count()
        return counted.groupBy(*keys).agg(
            F.map_from_entries(F.collect_list(F.struct("cause", "count"))).alias("causes")
        )

    def member_stats(keys: list[str]) -> DataFrame:
        expired = F.col("end") == "expired"
        return members.groupBy(*keys).agg(
            *percentiles("detection_ms", F.when(expired, F.col("since_last_heartbeat_ms"))),
            F.sum(as_int(expired)).alias("expirations"),
        )

    def restart_counts(keys: list[str]) -> DataFrame:
        if disturbances is None:
            restarts = rebalances.sparkSession.createDataFrame([], "group_id string")
        else:
            restarts = disturbances.where(F.col("action") == RESTART).select("group_id")
        # per group the rows of the groups it touched, overall the restart's own (group "")
        restarts = restarts.where((F.col("group_id") != "") if keys else (F.col("group_id") == ""))
        return restarts.groupBy(*keys).agg(F.count("*").alias("broker_restarts"))

    groups = (
        rebalance_stats(["group_id"])
        .join(causes(["group_id"]), ["group_id"], "left")
        .join(member_stats(["group_id"]), ["group_id"], "full")
        .join(restart_counts(["group_id"]), ["group_id"], "left")
        .withColumn("scope", F.lit("group"))
    )
    overall = (
        rebalance_stats([])
        .crossJoin(causes([]))
        .crossJoin(member_stats([]))
        .crossJoin(restart_counts([]))
        .withColumn("scope", F.lit("all"))
        .withColumn("group_id", F.lit(None).cast("string"))
    )
    # A group with members but no rebalance (or the reverse) has zeros, not nulls, for what it counts.
    both = (
        groups.unionByName(overall)
        .fillna(0, subset=[*COUNTED, *PROTOCOL_COLUMNS])
        .fillna(0.0, subset=["unowned_partition_seconds", "formation_unowned_partition_seconds"])
        .withColumn("causes", F.coalesce("causes", F.create_map().cast("map<string,bigint>")))
    )
    return typed(both, SUMMARY)
