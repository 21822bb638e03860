"""The rebalances table: one row per rebalance episode, with the partition-seconds nobody owned during it.

Both protocols' episodes are rows of one table (``events.py`` says where each starts and ends). A consumer
group's (KIP-848) has ``rebalance_protocol`` "consumer"; its generations are assignment epochs, its members and
assignor are its target computations', its moves and unowned time come from ``consumer.py``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from broker.analytics.schema import REBALANCES
from broker.analytics.tables.columns import GROUP_RUN, as_int, is_event, typed
from broker.analytics.tables.consumer import UNREVOKED, consumer_coverage, consumer_moves
from broker.analytics.tables.events import CONSUMER
from broker.analytics.tables.ownership import Ownership
from broker.events.names import JOIN_COMPLETED, MEMBER_RECONCILED, TARGET_ASSIGNMENT_COMPUTED


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
                "consumer",
                "group_epoch",
            ),
        )
    )
    # Consumer groups: the episode's first and last target computations (section 4.11), its revocations.
    target = is_event(TARGET_ASSIGNMENT_COMPUTED)
    first_target = F.min(F.when(target, F.struct("seq", "members_n")))
    last_target = F.max(F.when(target, F.struct("seq", "members_n", "assignment_epoch", "assignor")))
    revoking = is_event(MEMBER_RECONCILED) & (F.col("state") == UNREVOKED)
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
        first_target.alias("tf"),
        last_target.alias("tl"),
        F.sum(F.when(revoking, F.col("revoking_n"))).alias("revoking"),
    )
    grouped = grouped.join(consumer_moves(events), [*GROUP_RUN, "ep"], "left")
    consumer = F.coalesce(F.col("s.consumer"), F.lit(False))

    def by_protocol(classic: Column, consumer_group: Column) -> Column:
        return F.when(consumer, consumer_group).otherwise(classic)

    empty = F.col("e.end_kind") == "empty"
    return grouped.select(
        *GROUP_RUN,
        "ep",
        by_protocol(F.col("j.generation_id"), F.col("tl.assignment_epoch")).alias("generation"),
        # the consumer group's epoch being left: the bump's, less one (it moves by one at a time, section 6.1)
        by_protocol(F.col("s.generation_id"), F.col("s.group_epoch") - 1).alias("previous_generation"),
        F.col("s.cause").alias("cause"),
        F.col("s.member_id").alias("trigger_member"),
        "restarts",
        F.col("s.ts_ms").alias("start_ms"),
        F.col("e.ts_ms").alias("end_ms"),
        F.col("e.seq").alias("end_seq"),
        (F.col("e.ts_ms") - F.col("s.ts_ms")).alias("duration_ms"),
        F.coalesce(F.col("e.end_kind"), F.lit("open")).alias("outcome"),
        by_protocol(F.col("s.members_n"), F.col("tf.members_n")).alias("members_before"),
        by_protocol(F.col("j.members_n"), F.when(empty, F.lit(0)).otherwise(F.col("tl.members_n"))).alias(
            "members_after"
        ),
        by_protocol(F.col("y.moved_n"), F.coalesce(F.col("moved"), F.lit(0))).alias("partitions_moved"),
        by_protocol(F.col("y.unowned"), F.lit(None).cast("int")).alias("partitions_unowned"),
        F.coalesce(F.col("y.protocol"), F.col("j.protocol"), F.col("tl.assignor")).alias("protocol"),
        by_protocol(F.col("y.rebalance_protocol"), F.lit(CONSUMER)).alias("rebalance_protocol"),
        F.col("y.rebalance_ms").alias("broker_rebalance_ms"),
        by_protocol(F.lit(None).cast("long"), F.coalesce(F.col("revoking"), F.lit(0))).alias("revocations"),
        consumer.alias("consumer"),
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
    # Consumer groups: their own intervals, by time (consumer.py).
    rows = rows.join(consumer_coverage(episode_rows, ownership.consumer), [*GROUP_RUN, "ep"], "left")
    closed = F.col("end_ms").isNotNull()
    rows = rows.withColumn(
        "partitions",
        F.when(F.col("consumer"), F.when(closed, F.coalesce("c_partitions", F.lit(0)))).otherwise(F.col("partitions")),
    ).withColumn("covered_ms", F.when(F.col("consumer"), F.col("c_covered_ms")).otherwise(F.col("covered_ms")))
    unowned_ms = F.greatest(F.col("partitions") * F.col("duration_ms") - F.coalesce("covered_ms", F.lit(0)), F.lit(0))
    rows = rows.withColumn(
        "unowned_partition_seconds", F.when(F.col("end_ms").isNotNull(), F.round(unowned_ms / F.lit(1000.0), 3))
    )
    return typed(rows, REBALANCES)
