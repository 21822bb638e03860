"""The tables: rebalance episodes, membership intervals, partition ownership and the summary.

Everything is DataFrame operations, so the job runs the same on a laptop and a cluster. A group's history is
sequential (is the group rebalancing? who owns partition 3?), and that is computed with window functions over
one partitioning, (``group_id``, ``run_id``) ordered by ``seq``: one shuffle of the events, after which the
forward windows (running sums and "last seen" values) and one backward window ("next ... after this event") are
sorts within those partitions. A broker keeps groups in memory, so a run (``run_id``) starts every group afresh
and no state crosses runs. docs/analytics.md says what each column means and where the broker's words end and
the analysis begins.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.read import KIND, OK
from broker.analytics.schema import MEMBERS, OWNERSHIP, REBALANCES, SUMMARY

GROUP_RUN = ("group_id", "run_id")
PERCENTILES = (0.5, 0.95, 0.99)

#: The columns of the events the windows need (the rest of the schema is dropped before caching).
_EVENT_COLUMNS = (
    "group_id",
    "run_id",
    "seq",
    "ts_ms",
    "event",
    "member_id",
    "new_member_id",
    "group_instance_id",
    "client_id",
    "client_host",
    "session_timeout_ms",
    "since_last_heartbeat_ms",
    "cause",
    "state",
    "generation_id",
    "protocol",
    "assignments",
    "unowned",
    "rebalance_ms",
    "rebalance_protocol",
    "to",
)


def _is(event: str) -> Column:
    return F.col("event") == event


def _int(condition: Column) -> Column:
    return condition.cast("int")


def _typed(frame: DataFrame, schema_columns: list[tuple[str, str]]) -> DataFrame:
    return frame.select(*(F.col(name).cast(kind).alias(name) for name, kind in schema_columns))


def _columns(schema: object) -> list[tuple[str, str]]:
    from pyspark.sql.types import StructType

    assert isinstance(schema, StructType)
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]


def _size(column: str) -> Column:
    """The number of elements, null for null (what ``size`` returns for null depends on ANSI settings)."""
    return F.when(F.col(column).isNotNull(), F.size(column))


# -- the ordered events ---------------------------------------------------------------------------------------


@dataclass
class Events:
    """The parsed events in their windows, and the repeated lines taken out of them."""

    events: DataFrame
    duplicates: DataFrame


def sequence_events(classified: DataFrame) -> Events:
    """Order each group's events within a run, drop repeats of a (run_id, seq), and mark the episodes.

    Columns added to the events (docs/analytics.md, "Rebalance episodes"):

    - ``ep``: the number of rebalance episodes started so far in the (group, run); ``ep_start``, ``in_ep``
      (the event belongs to episode ``ep``), ``ep_end`` (it ends it) and ``end_kind``;
    - ``inc``: the group's incarnation (group ends before this event: a deleted group can be created again);
    - ``sync_no``: the number of ``sync_completed`` so far; ``prev_sync_valid``: the last one belongs to this
      incarnation;
    - ``next_start``, ``next_sync``, ``next_gend``: the nearest later episode start, sync and group end, as
      structs of (seq, ts_ms, ep, kind); ``last_ep``: the last episode of the (group, run).
    """
    rows = classified.where(F.col(KIND) == OK)
    ordered = Window.partitionBy(*GROUP_RUN).orderBy("seq", "file", "block", "rid")
    # (run_id, seq) is unique per broker, so a repeat is the same line read twice (a file given twice, rotated
    # copies that overlap). They sort next to each other; the first in file order stays.
    marked = rows.withColumn("dup", F.coalesce(F.lag("seq").over(ordered) == F.col("seq"), F.lit(False)))
    duplicates = marked.where("dup").select(
        F.lit("duplicate").alias(KIND),
        "file",
        "block",
        "rid",
        F.to_json(F.struct("v", "seq", "ts_ms", "run_id", "event", "group_id")).alias("text"),
    )
    events = marked.where(~F.col("dup")).select(
        *_EVENT_COLUMNS,
        F.when(_is("rebalance_started"), F.expr("try_cast(members AS INT)"))
        .when(_is("join_completed"), F.size(F.from_json("members", "array<string>")))
        .alias("members_n"),
        _size("moved").alias("moved_n"),
    )

    w = Window.partitionBy(*GROUP_RUN).orderBy("seq")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # Deleting a group emits state_changed(to Dead) then group_deleted; a Dead without group_deleted after it is
    # the broker unloading the group (shutdown): every interval open then ends as "unloaded".
    events = events.withColumn("next_event", F.lead("event").over(w))
    gend_kind = F.when(_is("group_deleted"), "deleted").when(
        _is("state_changed")
        & (F.col("to") == "Dead")
        & (F.coalesce(F.col("next_event"), F.lit("")) != "group_deleted"),
        "unloaded",
    )
    end_kind = (
        F.when(_is("sync_completed"), "stable")
        .when((_is("join_completed") & (F.col("state") == "Empty")) | _is("group_emptied"), "empty")
        .otherwise(gend_kind)
    )
    events = (
        events.withColumn("gend_kind", gend_kind)
        .withColumn("end_kind", end_kind)
        .withColumn("is_start", _is("rebalance_started"))
        .withColumn("is_sync", _is("sync_completed"))
        .withColumn("marker", F.when(F.col("is_start"), 1).when(F.col("end_kind").isNotNull(), 0))
    )
    events = (
        events.withColumn("in_before", F.coalesce(F.last("marker", ignorenulls=True).over(before) == 1, F.lit(False)))
        .withColumn("inc", F.coalesce(F.sum(_int(F.col("gend_kind").isNotNull())).over(before), F.lit(0)))
        .withColumn("sync_no", F.sum(_int(F.col("is_sync"))).over(upto))
        .withColumn("last_sync_seq", F.last(F.when(F.col("is_sync"), F.col("seq")), ignorenulls=True).over(upto))
        .withColumn(
            "last_gend_seq", F.last(F.when(F.col("gend_kind").isNotNull(), F.col("seq")), ignorenulls=True).over(upto)
        )
    )
    events = (
        events.withColumn("ep_start", F.col("is_start") & ~F.col("in_before"))
        .withColumn("in_ep", F.col("is_start") | F.col("in_before"))
        .withColumn("ep_end", F.col("in_before") & F.col("end_kind").isNotNull())
        .withColumn(
            "prev_sync_valid",
            F.col("last_sync_seq").isNotNull()
            & (F.col("last_gend_seq").isNull() | (F.col("last_sync_seq") > F.col("last_gend_seq"))),
        )
    )
    events = events.withColumn("ep", F.sum(_int(F.col("ep_start"))).over(upto))

    after = Window.partitionBy(*GROUP_RUN).orderBy(F.desc("seq")).rowsBetween(Window.unboundedPreceding, -1)

    def next_where(condition: Column, kind: Column) -> Column:
        point = F.struct(F.col("seq"), F.col("ts_ms").alias("ts"), F.col("ep"), kind.alias("kind"))
        return F.last(F.when(condition, point), ignorenulls=True).over(after)

    events = (
        events.withColumn("next_start", next_where(F.col("ep_start"), F.lit("rebalance")))
        .withColumn("next_sync", next_where(F.col("is_sync"), F.lit("moved")))
        .withColumn("next_gend", next_where(F.col("gend_kind").isNotNull(), F.col("gend_kind")))
        .withColumn("last_ep", F.max("ep").over(Window.partitionBy(*GROUP_RUN)))
        .drop("marker", "in_before", "next_event", "last_sync_seq", "last_gend_seq")
    )
    return Events(events, duplicates)


# -- members ----------------------------------------------------------------------------------------------------


def members_table(events: DataFrame) -> DataFrame:
    """Membership intervals, with the internal columns the ownership needs (``joined_seq``, ``end_seq``, ``gone``).

    A member starts at ``member_joined`` (or, for a static member's new id, at ``member_fenced``) and ends at its
    own ``member_left`` / ``member_expired`` / ``member_fenced``, or when its group ends. An end without a start
    (the log began later) is still an interval, with ``joined_ms`` null.
    """
    point = ("seq", "ts_ms", "ep")
    starts = events.where(_is("member_joined") | _is("member_fenced")).select(
        *GROUP_RUN,
        F.when(_is("member_fenced"), F.col("new_member_id")).otherwise(F.col("member_id")).alias("member_id"),
        F.lit("start").alias("role"),
        *point,
        "client_id",
        "group_instance_id",
        F.when(_is("member_joined"), F.col("client_host")).alias("client_host"),
        F.when(_is("member_joined"), F.col("session_timeout_ms")).alias("session_timeout_ms"),
        F.lit(None).cast("string").alias("end"),
        F.lit(None).cast("string").alias("end_cause"),
        F.lit(None).cast("long").alias("since_last_heartbeat_ms"),
        "next_gend",
    )
    ends = events.where(_is("member_left") | _is("member_expired") | _is("member_fenced")).select(
        *GROUP_RUN,
        "member_id",
        F.lit("end").alias("role"),
        *point,
        "client_id",
        "group_instance_id",
        F.lit(None).cast("string").alias("client_host"),
        "session_timeout_ms",
        F.when(_is("member_left"), "left")
        .when(_is("member_fenced"), "fenced")
        .when(F.col("cause") == "kicked", "kicked")
        .otherwise("expired")
        .alias("end"),
        F.coalesce(F.col("cause"), F.col("event")).alias("end_cause"),
        F.when(_is("member_expired"), F.col("since_last_heartbeat_ms")).alias("since_last_heartbeat_ms"),
        "next_gend",
    )
    rows = starts.unionByName(ends)
    by_member = Window.partitionBy(*GROUP_RUN, "member_id").orderBy("seq")
    own_end = F.struct(
        F.col("seq"),
        F.col("ts_ms").alias("ts"),
        F.col("ep"),
        F.col("end").alias("kind"),
        "end_cause",
        "since_last_heartbeat_ms",
        "session_timeout_ms",
        "client_id",
        "group_instance_id",
    )
    rows = rows.withColumn("following", F.lead(F.struct(F.col("role"), own_end.alias("e"))).over(by_member))
    rows = rows.withColumn("preceding_role", F.lag("role").over(by_member))
    # A start's own end is the member's next row when that is an end; the group's end comes first if earlier.
    start_end = F.when(F.col("following.role") == "end", F.col("following.e"))
    group_end = F.struct(
        F.col("next_gend.seq").alias("seq"),
        F.col("next_gend.ts").alias("ts"),
        F.col("next_gend.ep").alias("ep"),
        F.col("next_gend.kind").alias("kind"),
        F.when(F.col("next_gend.kind") == "deleted", "group_deleted").otherwise("unloaded").alias("end_cause"),
        F.lit(None).cast("long").alias("since_last_heartbeat_ms"),
        F.lit(None).cast("int").alias("session_timeout_ms"),
        F.lit(None).cast("string").alias("client_id"),
        F.lit(None).cast("string").alias("group_instance_id"),
    )
    group_end = F.when(F.col("next_gend").isNotNull(), group_end)
    intervals = rows.where(
        (F.col("role") == "start") | F.coalesce(F.col("preceding_role") != "start", F.lit(True))
    ).select(
        *GROUP_RUN,
        "member_id",
        F.when(F.col("role") == "start", F.col("seq")).alias("joined_seq"),
        F.when(F.col("role") == "start", F.col("ts_ms")).alias("joined_ms"),
        F.when(F.col("role") == "start", F.least(start_end, group_end)).otherwise(own_end).alias("e"),
        "client_id",
        "group_instance_id",
        "client_host",
        "session_timeout_ms",
    )
    intervals = intervals.select(
        *GROUP_RUN,
        "member_id",
        F.coalesce("client_id", "e.client_id").alias("client_id"),
        F.coalesce("group_instance_id", "e.group_instance_id").alias("group_instance_id"),
        "client_host",
        "joined_seq",
        "joined_ms",
        F.col("e.seq").alias("end_seq"),
        F.col("e.ts").alias("ended_ms"),
        F.coalesce(F.col("e.kind"), F.lit("open")).alias("end"),
        F.col("e.end_cause").alias("end_cause"),
        F.col("e.since_last_heartbeat_ms").alias("since_last_heartbeat_ms"),
        F.coalesce("session_timeout_ms", "e.session_timeout_ms").alias("session_timeout_ms"),
        F.when(F.col("e").isNotNull(), F.struct("e.seq", "e.ts", "e.ep", "e.kind")).alias("own_end"),
    )
    # A static member keeps its partitions when its id is replaced (KIP-345): for the ownership, it is gone only
    # at the first end of its lineage (same group.instance.id) that is not a fence. Its later ids also inherit
    # what the fence event does not repeat (host, session timeout).
    static = intervals.where(F.col("group_instance_id").isNotNull())
    lineage = Window.partitionBy(*GROUP_RUN, "group_instance_id").orderBy(F.coalesce("joined_seq", "end_seq"))
    later = (
        Window.partitionBy(*GROUP_RUN, "group_instance_id")
        .orderBy(F.desc(F.coalesce("joined_seq", "end_seq")))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    earlier = lineage.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    static = (
        static.withColumn(
            "gone", F.last(F.when(F.col("end") != "fenced", F.col("own_end")), ignorenulls=True).over(later)
        )
        .withColumn("client_host", F.last("client_host", ignorenulls=True).over(earlier))
        .withColumn("session_timeout_ms", F.last("session_timeout_ms", ignorenulls=True).over(earlier))
    )
    dynamic = intervals.where(F.col("group_instance_id").isNull()).withColumn("gone", F.col("own_end"))
    return static.unionByName(dynamic).withColumn("duration_ms", F.col("ended_ms") - F.col("joined_ms"))


def members_output(members: DataFrame) -> DataFrame:
    return _typed(members, _columns(MEMBERS))


# -- ownership ---------------------------------------------------------------------------------------------------


@dataclass
class Ownership:
    intervals: DataFrame  # the ownership table's columns, plus ``first`` and ``end_point`` (internal)
    syncs: DataFrame  # per (group, run, sync_no): ``owned`` partitions and how many of them ``kept`` owned


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
    previous = F.lag(F.struct("sync_no", "member_id", "rebalance_protocol", "inc")).over(by_partition)
    owned = owned.withColumn("prev", previous)
    first_in_sync = F.col("prev").isNull() | (F.col("prev.sync_no") != F.col("sync_no"))
    in_previous_sync = (
        first_in_sync & (F.col("prev.sync_no") == F.col("sync_no") - 1) & (F.col("prev.inc") == F.col("inc"))
    )
    continues = (
        (F.col("rebalance_protocol") == "cooperative")
        & (F.col("prev.rebalance_protocol") == "cooperative")
        & (F.col("prev.member_id") == F.col("member_id"))
        & (F.col("prev.sync_no") == F.col("sync_no") - 1)
        & (F.col("prev.inc") == F.col("inc"))
    )
    owned = owned.withColumn("first_in_sync", F.coalesce(first_in_sync, F.lit(True))).withColumn(
        "in_previous_sync", F.coalesce(in_previous_sync, F.lit(False))
    )
    owned = owned.withColumn(
        "island",
        F.sum(_int(~F.coalesce(continues, F.lit(False)))).over(
            by_partition.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    )
    per_sync = owned.groupBy(*GROUP_RUN, "sync_no").agg(
        F.sum(_int(F.col("first_in_sync"))).alias("owned"),
        F.sum(_int(F.col("in_previous_sync"))).alias("kept"),
    )
    first = F.struct(
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
    )
    islands = owned.groupBy(*GROUP_RUN, "topic", "partition", "member_id", "island").agg(
        F.min(first).alias("first"),
        F.max(F.struct("sync_no", "next_sync")).getField("next_sync").alias("last_next_sync"),
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
    return Ownership(intervals, per_sync)


def ownership_output(ownership: Ownership) -> DataFrame:
    return _typed(ownership.intervals, _columns(OWNERSHIP))


# -- rebalances ----------------------------------------------------------------------------------------------------


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
    join = F.max(F.when(_is("join_completed"), F.struct("seq", "generation_id", "members_n", "protocol")))
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
        (F.sum(_int(F.col("is_start"))) - 1).alias("restarts"),
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
    return _typed(rows, _columns(REBALANCES))


# -- summary -------------------------------------------------------------------------------------------------------


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
            F.sum(_int(F.col("rebalance_protocol") == "eager")).alias("eager"),
            F.sum(_int(F.col("rebalance_protocol") == "cooperative")).alias("cooperative"),
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
            F.sum(_int(expired)).alias("expirations"),
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
        .fillna(0, subset=["rebalances", "expirations", "eager", "cooperative"])
        .fillna(0.0, subset=["unowned_partition_seconds"])
        .withColumn("causes", F.coalesce("causes", F.create_map().cast("map<string,bigint>")))
    )
    return _typed(both, _columns(SUMMARY))


@dataclass
class Tables:
    events: Events
    members: DataFrame
    ownership: Ownership
    rebalances: DataFrame


def build(classified: DataFrame) -> Tables:
    """The tables from the classified lines (``read.classify``); nothing is computed until written or collected.

    The summary is left out: ``summary_table`` is best built on the rebalances as written (a short plan to
    analyse) than on the whole lineage.
    """
    sequenced = sequence_events(classified)
    events = sequenced.events
    members = members_table(events)
    ownership = ownership_table(events, members)
    rebalances = rebalances_table(episodes(events), ownership)
    return Tables(sequenced, members, ownership, rebalances)
