"""The ownership table: who owned each topic-partition, from which sync to which end, from the assignments.

Classic groups here, from ``sync_completed.assignments``; consumer groups (KIP-848) from their members'
reconciliations, in ``consumer.py``; the table is both.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.schema import OWNERSHIP
from broker.analytics.tables.columns import GROUP_RUN, island_firsts, partition_pairs, typed
from broker.analytics.tables.consumer import consumer_ownership


@dataclass
class Ownership:
    intervals: DataFrame  # classic groups: the table's columns, plus ``first`` and ``end_point`` (internal)
    syncs: DataFrame  # per (group, run, sync_no): ``owned`` partitions and how many of them ``kept`` owned
    consumer: DataFrame  # consumer groups: the table's columns, plus their internals (``consumer_ownership``)


def ownership_table(events: DataFrame, members: DataFrame) -> Ownership:
    """Ownership intervals of (topic-partition, member) from ``sync_completed.assignments``.

    Eager: an interval ends at the next episode start (members revoke everything when they rejoin).
    Cooperative: a partition the same member keeps in the next generation stays one interval; one it loses ends at
    the sync that takes it away. Either way a member that leaves or expires loses its partitions at that event,
    and a group end ends everything.
    """
    syncs = events.where(F.col("is_sync") & F.col("assignments").isNotNull())
    owned = (
        syncs.select(
            *GROUP_RUN,
            "seq",
            "ts_ms",
            "sync_no",
            "generation_id",
            "rebalance_protocol",
            "inc",
            "ep",
            "last_ep",
            "next_start",
            "next_sync",
            "next_gend",
            F.explode("assignments").alias("member_id", "topics"),
        )
        .select("*", F.explode("topics").alias("topic", "partitions"))
        .select("*", F.explode("partitions").alias("partition"))
        .drop("topics", "partitions")
    )
    by_partition = Window.partitionBy(*GROUP_RUN, "topic", "partition").orderBy("sync_no", "member_id")
    step = F.struct("sync_no", "member_id", "rebalance_protocol", "inc")

    def continues(earlier: Column, later: Column) -> Column:
        """``later`` (a row's step) carries on the island of ``earlier`` (the row before it, in ``by_partition``)."""
        kept = (
            (later.getField("rebalance_protocol") == "cooperative")
            & (earlier.getField("rebalance_protocol") == "cooperative")
            & (earlier.getField("member_id") == later.getField("member_id"))
            & (earlier.getField("sync_no") == later.getField("sync_no") - 1)
            & (earlier.getField("inc") == later.getField("inc"))
        )
        return F.coalesce(kept, F.lit(False))

    # Gaps and islands without grouping them (issue 17): an island is a run of consecutive rows in
    # ``by_partition``'s order, so its first row (the one the row before does not lead to) has the interval's
    # start, and its last row (the one the row after does not carry on) the sync that ends it. Both come from
    # windows over the partitioning and sort already in place; a group-by on a struct minimum sorted them again.
    per_sync = _per_sync(syncs)
    islands = (
        island_firsts(
            owned,
            by_partition,
            ~continues(F.lag(step).over(by_partition), step),
            ~continues(step, F.lead(step).over(by_partition)),
            "next_sync",
            "last_next_sync",
        )
        .select(
            *GROUP_RUN,
            "topic",
            "partition",
            "member_id",
            F.struct(
                "sync_no",
                "seq",
                "ts_ms",
                "generation_id",
                "rebalance_protocol",
                "ep",
                "last_ep",
                "next_start",
                "next_sync",
                "next_gend",
            ).alias("first"),
            "last_next_sync",
        )
    )
    # Renamed, not compared by DataFrame attribute: both sides descend from the same events, and Spark would
    # resolve gone["run_id"] to the very attribute islands["run_id"] is (a trivially true condition).
    gone = members.select(
        F.col("group_id").alias("m_group_id"),
        F.col("run_id").alias("m_run_id"),
        F.col("member_id").alias("m_member_id"),
        "joined_seq",
        F.col("gone"),
    )
    # Member ids are unique within a run; the seq condition keeps the member's interval that had the partition.
    islands = islands.join(
        gone,
        (islands["group_id"] == gone["m_group_id"])
        & (islands["run_id"] == gone["m_run_id"])
        & (islands["member_id"] == gone["m_member_id"])
        & (gone["joined_seq"].isNull() | (gone["joined_seq"] <= islands["first"].getField("seq"))),
        "left",
    ).select(islands["*"], gone["gone"])

    def point(value: Column, kind: Column, ep_hi: Column) -> Column:
        """An end candidate: (seq, ts, kind, ep_hi), ep_hi being the last episode the interval may overlap."""
        return F.when(
            value.isNotNull(),
            F.struct(
                value.getField("seq").alias("seq"),
                value.getField("ts").alias("ts"),
                kind.alias("kind"),
                ep_hi.alias("ep_hi"),
            ),
        )

    eager = F.coalesce(F.col("first.rebalance_protocol"), F.lit("eager")) != "cooperative"
    next_start = F.col("first.next_start")
    candidates = [
        # eager: revoked at the next episode start, which is also the first episode it cannot overlap
        F.when(eager, point(next_start, F.lit("rebalance"), next_start.getField("ep") - 1)),
        # eager, without a start before the next sync (a log with holes): that sync ends it
        F.when(eager, point(F.col("first.next_sync"), F.lit("rebalance"), F.col("first.next_sync.ep"))),
        # cooperative: the sync after the last generation that kept it with this member
        F.when(~eager, point(F.col("last_next_sync"), F.lit("moved"), F.col("last_next_sync.ep"))),
        point(
            F.col("gone"),
            F.when(F.col("gone.kind").isin("deleted", "unloaded"), F.col("gone.kind")).otherwise("member_gone"),
            F.col("gone.ep"),
        ),
        point(F.col("first.next_gend"), F.col("first.next_gend.kind"), F.col("first.next_gend.ep")),
    ]
    intervals = islands.withColumn("end_point", F.least(*candidates)).select(
        *GROUP_RUN,
        "topic",
        "partition",
        "member_id",
        F.col("first.generation_id").alias("generation"),
        F.col("first.ts_ms").alias("start_ms"),
        F.col("end_point.ts").alias("end_ms"),
        (F.col("end_point.ts") - F.col("first.ts_ms")).alias("duration_ms"),
        F.coalesce(F.col("end_point.kind"), F.lit("open")).alias("end"),
        "first",
        "end_point",
    )
    return Ownership(intervals, per_sync, consumer_ownership(events, members))


def _partitions(assignments: Column) -> Column:
    """Every (topic, partition) a sync assigns, each once (a partition given to two members counts once)."""
    return F.array_distinct(F.flatten(F.transform(F.map_values(assignments), partition_pairs)))


def _per_sync(syncs: DataFrame) -> DataFrame:
    """Per (group, run, sync_no): the partitions it assigns (``owned``) and how many of them the sync before it,
    in the same incarnation, assigned too (``kept``).

    From the sync events themselves, with array functions and one window over the syncs: not from the exploded
    (sync, member, partition) rows, which the rebalances would otherwise explode and sort a second time (issue 17).
    """
    by_sync = Window.partitionBy(*GROUP_RUN).orderBy("sync_no")
    rows = syncs.select(*GROUP_RUN, "sync_no", "inc", _partitions(F.col("assignments")).alias("parts"))
    previous = F.lag(F.struct("sync_no", "inc", "parts")).over(by_sync)
    rows = rows.select("*", previous.alias("prev"))
    follows = (F.col("prev.sync_no") == F.col("sync_no") - 1) & (F.col("prev.inc") == F.col("inc"))
    return rows.select(
        *GROUP_RUN,
        "sync_no",
        F.size("parts").cast("long").alias("owned"),
        F.when(follows, F.size(F.array_intersect("parts", "prev.parts")))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("kept"),
    )


def ownership_output(ownership: Ownership) -> DataFrame:
    return typed(ownership.intervals, OWNERSHIP).unionByName(typed(ownership.consumer, OWNERSHIP))
