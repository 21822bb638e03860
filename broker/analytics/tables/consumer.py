"""Consumer groups (KIP-848): who owned each partition, and what an episode moved, revoked and left unowned.

A consumer group has no SyncGroup handing out a whole generation at once: each member reconciles toward its
target on its own heartbeats (docs/spec/consumer-groups.md section 5), and every ``member_reconciled`` record says
what that member now owns: its ``assigned`` partitions and those ``pending_revocation``, which it keeps until it
acknowledges their revocation (section 3.5). So a partition's ownership interval starts at the first
``member_reconciled`` of a member that lists it and ends at the first one of that member that no longer does
(``moved``), or when the member leaves, expires or is fenced (``member_gone``), or when the group ends.

Episodes (``events.py``) span a group-epoch bump to Stable. Within one, partitions are handed over piecemeal, so
the unowned time is measured against the ownership intervals by time: every interval that touches the episode,
exploded into the episodes its events span (one more at its end: a member fenced at the very moment that bumps the
epoch), then equi-joined with them, as the classic intervals are.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.tables.columns import GROUP_RUN, is_event, island_firsts, partition_pairs
from broker.events.names import MEMBER_JOINED, MEMBER_RECONCILED, TARGET_ASSIGNMENT_COMPUTED

#: member_reconciled's ``state`` for a member asked to revoke partitions (section 3.3, UNREVOKED_PARTITIONS).
UNREVOKED = "unrevoked_partitions"


def consumer_ownership(events: DataFrame, members: DataFrame) -> DataFrame:
    """Ownership intervals of consumer groups: the ownership table's columns, plus ``start_seq``, ``start_ep``,
    ``end_ep`` and ``last_ep`` (internal, for ``consumer_coverage``)."""
    rows = events.where(F.col("consumer") & (is_event(MEMBER_JOINED) | is_event(MEMBER_RECONCILED)))
    by_member = Window.partitionBy(*GROUP_RUN, "member_id").orderBy("seq")
    # librdkafka keeps its member id when it joins again after being fenced (section 12.2): each join starts a
    # new membership, and an island of ownership never spans two.
    rows = rows.withColumn(
        "join_seq",
        F.last(F.when(is_event(MEMBER_JOINED), F.col("seq")), ignorenulls=True).over(
            by_member.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    ).where(is_event(MEMBER_RECONCILED))
    membership = Window.partitionBy(*GROUP_RUN, "member_id", "join_seq").orderBy("seq")
    rows = rows.select(  # one Window operator for both
        "*",
        F.row_number().over(membership).alias("rec_no"),
        F.lead(F.struct(F.col("seq"), F.col("ts_ms").alias("ts"), F.col("ep"))).over(membership).alias("next_rec"),
    )
    keep = [*GROUP_RUN, "member_id", "join_seq", "rec_no", "seq", "ts_ms", "ep", "last_ep", "member_epoch"]
    keep += ["next_rec", "next_gend"]
    # A partition pending revocation is still owned; one listed in both counts once. (run_id, seq) is one event,
    # so the duplicates are within a row: no shuffle to drop them.
    listed = F.array_distinct(
        F.concat(partition_pairs(F.col("assigned")), partition_pairs(F.col("pending_revocation")))
    )
    owned = rows.select(*keep, F.explode(listed).alias("tp")).select(
        *keep, F.col("tp.topic").alias("topic"), F.col("tp.partition").alias("partition")
    )
    # Gaps and islands: consecutive reconciliations of one membership that list the partition are one interval.
    # An island's first row is one whose predecessor in this order is not the reconciliation before it, its last
    # one whose successor is not the one after: windows over one sort, not a group-by on a struct minimum, which
    # sorted the rows again (issue 17; ownership.py does the same).
    per_partition = Window.partitionBy(*GROUP_RUN, "member_id", "join_seq", "topic", "partition").orderBy("rec_no")
    islands = (
        island_firsts(
            owned,
            per_partition,
            F.coalesce(F.lag("rec_no").over(per_partition) != F.col("rec_no") - 1, F.lit(True)),
            F.coalesce(F.lead("rec_no").over(per_partition) != F.col("rec_no") + 1, F.lit(True)),
            "next_rec",
            "island_next_rec",
        )
        .select(
            *GROUP_RUN,
            "member_id",
            "join_seq",
            "topic",
            "partition",
            F.struct("seq", "ts_ms", "ep", "last_ep", "member_epoch", "next_gend").alias("first"),
            F.col("island_next_rec").alias("next_rec"),
        )
    )
    # Renamed before the join: both sides descend from the same events (see ownership.py).
    ends = members.where(F.col("consumer")).select(
        F.col("group_id").alias("m_group_id"),
        F.col("run_id").alias("m_run_id"),
        F.col("member_id").alias("m_member_id"),
        F.col("joined_seq").alias("m_joined_seq"),
        F.col("own_end").alias("gone"),
    )
    islands = islands.join(
        ends,
        (islands["group_id"] == ends["m_group_id"])
        & (islands["run_id"] == ends["m_run_id"])
        & (islands["member_id"] == ends["m_member_id"])
        & islands["join_seq"].eqNullSafe(ends["m_joined_seq"]),
        "left",
    ).select(islands["*"], ends["gone"])

    def point(value: Column, kind: Column) -> Column:
        return F.when(
            value.isNotNull(),
            F.struct(
                value.getField("seq").alias("seq"),
                value.getField("ts").alias("ts"),
                kind.alias("kind"),
                value.getField("ep").alias("ep"),
            ),
        )

    gone_kind = F.when(F.col("gone.kind").isin("deleted", "unloaded"), F.col("gone.kind")).otherwise("member_gone")
    end = F.least(
        point(F.col("next_rec"), F.lit("moved")),
        point(F.col("gone"), gone_kind),
        point(F.col("first.next_gend"), F.col("first.next_gend.kind")),
    )
    return islands.withColumn("end_point", end).select(
        *GROUP_RUN,
        "topic",
        "partition",
        "member_id",
        F.col("first.member_epoch").alias("generation"),
        F.col("first.ts_ms").alias("start_ms"),
        F.col("end_point.ts").alias("end_ms"),
        (F.col("end_point.ts") - F.col("first.ts_ms")).alias("duration_ms"),
        F.coalesce(F.col("end_point.kind"), F.lit("open")).alias("end"),
        F.col("first.seq").alias("start_seq"),
        F.col("first.ep").alias("start_ep"),
        F.col("end_point.ep").alias("end_ep"),
        F.col("first.last_ep").alias("last_ep"),
    )


def consumer_moves(events: DataFrame) -> DataFrame:
    """Per consumer episode, ``moved``: partitions whose target owner differs between the episode's first target
    computation and its last (``target_assignment_computed.moved``: the first move's ``from``, the last one's
    ``to``), so a partition moved there and back again is not counted."""
    moves = events.where(F.col("in_ep") & is_event(TARGET_ASSIGNMENT_COMPUTED)).select(
        *GROUP_RUN, "ep", "seq", F.explode("target_moved").alias("m")
    )
    per_partition = moves.groupBy(*GROUP_RUN, "ep", F.col("m.topic").alias("topic"), F.col("m.partition")).agg(
        F.min(F.struct("seq", F.col("m.from").alias("owner"))).getField("owner").alias("before"),
        F.max(F.struct("seq", F.col("m.to").alias("owner"))).getField("owner").alias("after"),
    )
    return (
        per_partition.where(~F.col("before").eqNullSafe(F.col("after")))
        .groupBy(*GROUP_RUN, "ep")
        .agg(F.count("*").cast("int").alias("moved"))
    )


def consumer_coverage(episode_rows: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per closed consumer episode: ``partitions`` (those with an ownership interval touching it: owned before,
    after, or handed over during it) and ``covered_ms`` (the time their intervals cover within it)."""
    hi = F.when(F.col("end_ep").isNull(), F.col("last_ep")).otherwise(F.least(F.col("end_ep") + 1, F.col("last_ep")))
    spans = (
        intervals.select(
            *GROUP_RUN,
            "topic",
            "partition",
            "start_ms",
            "end_ms",
            "start_seq",
            F.greatest(F.col("start_ep"), F.lit(1)).alias("lo"),
            hi.alias("hi"),
        )
        .where(F.col("lo") <= F.col("hi"))
        .select(
            *GROUP_RUN,
            "topic",
            "partition",
            "start_ms",
            "end_ms",
            "start_seq",
            F.explode(F.sequence("lo", "hi")).alias("ep"),
        )
    )
    bounds = episode_rows.where(F.col("consumer") & F.col("end_ms").isNotNull()).select(
        *GROUP_RUN,
        "ep",
        F.col("start_ms").alias("ep_start_ms"),
        F.col("end_ms").alias("ep_end_ms"),
        F.col("end_seq").alias("ep_end_seq"),
    )
    touching = spans.join(bounds, [*GROUP_RUN, "ep"]).where(
        (F.col("start_seq") <= F.col("ep_end_seq")) & (F.coalesce("end_ms", "ep_end_ms") >= F.col("ep_start_ms"))
    )
    overlap = F.least(F.coalesce("end_ms", "ep_end_ms"), F.col("ep_end_ms")) - F.greatest(
        F.col("start_ms"), F.col("ep_start_ms")
    )
    return touching.groupBy(*GROUP_RUN, "ep").agg(
        F.countDistinct("topic", "partition").cast("int").alias("c_partitions"),
        F.sum(F.greatest(overlap, F.lit(0))).alias("c_covered_ms"),
    )
