"""The rebalances table: one row per rebalance episode, with the partition-seconds nobody owned during it."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from broker.analytics.schema import REBALANCES
from broker.analytics.tables.columns import GROUP_RUN, as_int, is_event, typed
from broker.analytics.tables.ownership import Ownership
from broker.events.names import JOIN_COMPLETED


def episodes(events: DataFrame) -> DataFrame:
    """One row per rebalance episode, before the unowned partition-seconds (``rebalances_table`` adds those)."""
    in_episode = events.where(F.col("in_ep"))
    start = F.min(
        F.when(
            F.col("ep_start"),
            F.struct(
                "seq",
                "ts_ms",
                "cause",
                "member_id",
                "generation_id",
                "members_n",
                "inc",
                "sync_no",
                "prev_sync_valid",
            ),
        )
    )
    end = F.max(F.when(F.col("ep_end"), F.struct("seq", "ts_ms", "end_kind")))
    join = F.max(F.when(is_event(JOIN_COMPLETED), F.struct("seq", "generation_id", "members_n", "protocol")))
    sync = F.max(
        F.when(
            F.col("ep_end") & F.col("is_sync"),
            F.struct("seq", "sync_no", "moved_n", "unowned", "protocol", "rebalance_protocol", "rebalance_ms"),
        )
    )
    grouped = in_episode.groupBy(*GROUP_RUN, "ep").agg(
        start.alias("s"),
        end.alias("e"),
        join.alias("j"),
        sync.alias("y"),
        (F.sum(as_int(F.col("is_start"))) - 1).alias("restarts"),
    )
    return grouped.select(
        *GROUP_RUN,
        "ep",
        F.col("j.generation_id").alias("generation"),
        F.col("s.generation_id").alias("previous_generation"),
        F.col("s.cause").alias("cause"),
        F.col("s.member_id").alias("trigger_member"),
        "restarts",
        F.col("s.ts_ms").alias("start_ms"),
        F.col("e.ts_ms").alias("end_ms"),
        (F.col("e.ts_ms") - F.col("s.ts_ms")).alias("duration_ms"),
        F.coalesce(F.col("e.end_kind"), F.lit("open")).alias("outcome"),
        F.col("s.members_n").alias("members_before"),
        F.col("j.members_n").alias("members_after"),
        F.col("y.moved_n").alias("partitions_moved"),
        F.col("y.unowned").alias("partitions_unowned"),
        F.coalesce(F.col("y.protocol"), F.col("j.protocol")).alias("protocol"),
        F.col("y.rebalance_protocol").alias("rebalance_protocol"),
        F.col("y.rebalance_ms").alias("broker_rebalance_ms"),
        # the syncs either side: the partitions assigned before (if this incarnation had one) and after
        F.when(F.col("s.prev_sync_valid"), F.col("s.sync_no")).alias("sync_before"),
        F.col("y.sync_no").alias("sync_after"),
    )


def rebalances_table(episode_rows: DataFrame, ownership: Ownership) -> DataFrame:
    """Episodes with ``partitions`` (assigned before or after) and ``unowned_partition_seconds``.

    Within an episode nothing is assigned until the sync that ends it, so the owned time is that of the intervals
    alive at its start: an interval overlaps the episodes from the one after its first sync up to ``ep_hi``. For
    eager groups that range is empty (every interval ends at the next start); for cooperative ones it spans the
    episodes a partition was kept through. Exploding those ranges joins intervals to episodes by equality.
    """
    spans = ownership.intervals.select(
        *GROUP_RUN,
        "start_ms",
        "end_ms",
        (F.col("first.ep") + 1).alias("ep_lo"),
        F.coalesce(F.col("end_point.ep_hi"), F.col("first.last_ep")).alias("ep_hi"),
    ).where(F.col("ep_lo") <= F.col("ep_hi"))
    spans = spans.select(*GROUP_RUN, "start_ms", "end_ms", F.explode(F.sequence("ep_lo", "ep_hi")).alias("ep"))
    bounds = episode_rows.where(F.col("end_ms").isNotNull()).select(
        *GROUP_RUN, "ep", F.col("start_ms").alias("ep_start_ms"), F.col("end_ms").alias("ep_end_ms")
    )
    overlap = F.least(F.coalesce("end_ms", "ep_end_ms"), F.col("ep_end_ms")) - F.greatest(
        F.col("start_ms"), F.col("ep_start_ms")
    )
    covered = (
        spans.join(bounds, [*GROUP_RUN, "ep"])
        .select(*GROUP_RUN, "ep", F.greatest(overlap, F.lit(0)).alias("overlap"))
        .groupBy(*GROUP_RUN, "ep")
        .agg(F.sum("overlap").alias("covered_ms"))
    )
    before = ownership.syncs.select(
        *GROUP_RUN, F.col("sync_no").alias("sync_before"), F.col("owned").alias("owned_before")
    )
    after = ownership.syncs.select(
        *GROUP_RUN, F.col("sync_no").alias("sync_after"), F.col("owned").alias("owned_after"), "kept"
    )
    rows = (
        episode_rows.join(covered, [*GROUP_RUN, "ep"], "left")
        .join(before, [*GROUP_RUN, "sync_before"], "left")
        .join(after, [*GROUP_RUN, "sync_after"], "left")
    )
    has_before = F.col("sync_before").isNotNull()
    has_after = F.col("sync_after").isNotNull()
    owned_before = F.coalesce("owned_before", F.lit(0))
    owned_after = F.coalesce("owned_after", F.lit(0))
    kept = F.coalesce("kept", F.lit(0))
    partitions = (
        F.when(has_before & has_after, owned_before + owned_after - kept)
        .when(has_after, owned_after)
        .when(has_before, owned_before)
        .otherwise(F.lit(0))
    )
    # A sync without decoded assignments (not the consumer protocol) says nothing about partitions.
    undecoded = has_after & F.col("rebalance_protocol").isNull()
    rows = rows.withColumn("partitions", F.when(~undecoded, partitions))
    unowned_ms = F.greatest(F.col("partitions") * F.col("duration_ms") - F.coalesce("covered_ms", F.lit(0)), F.lit(0))
    rows = rows.withColumn(
        "unowned_partition_seconds", F.when(F.col("end_ms").isNotNull(), F.round(unowned_ms / F.lit(1000.0), 3))
    )
    return typed(rows, REBALANCES)
