"""The members table: one membership interval per member id, from its join to its leave, expiry or fence."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.schema import MEMBERS
from broker.analytics.tables.columns import GROUP_RUN, is_event, typed
from broker.events.names import GROUP_DELETED, MEMBER_EXPIRED, MEMBER_FENCED, MEMBER_JOINED, MEMBER_LEFT

#: A consumer group's ``member_left`` causes that end no membership: the fencing after a ``member_expired``, and a
#: static member's temporary leave (docs/spec/consumer-groups.md 4.13, 7.5).
CONSUMER_LEFT_NOT_AN_END = ("expired", "static_leave")


def members_table(events: DataFrame) -> DataFrame:
    """Membership intervals, with the internal columns the ownership needs (``joined_seq``, ``end_seq``, ``gone``).

    A member starts at ``member_joined`` (or, for a static member's new id, at ``member_fenced``) and ends at its
    own ``member_left`` / ``member_expired`` / ``member_fenced``, or when its group ends. An end without a start
    (the log began later) is still an interval, with ``joined_ms`` null.

    Consumer groups (KIP-848) say it differently (docs/spec/consumer-groups.md): a static member's new id has its
    own ``member_joined`` after the ``member_fenced``; an expiry is ``member_expired`` (with its ``timer`` and
    ``timeout_ms``, no cause) followed by the fencing's ``member_left`` (cause ``expired``), which is not a second
    end; and a static member's temporary leave (``member_left`` cause ``static_leave``, epoch -2, section 7.5)
    keeps it a member until it is replaced or expires. Their session timer restarts at every heartbeat (7.1), so
    a session expiry is ``timeout_ms`` of silence: that is its ``since_last_heartbeat_ms``.
    """
    point = ("seq", "ts_ms", "ep")
    consumer = F.col("consumer")
    starts = events.where(is_event(MEMBER_JOINED) | (is_event(MEMBER_FENCED) & ~consumer)).select(
        *GROUP_RUN,
        F.when(is_event(MEMBER_FENCED), F.col("new_member_id")).otherwise(F.col("member_id")).alias("member_id"),
        F.lit("start").alias("role"),
        *point,
        "client_id",
        "group_instance_id",
        F.when(is_event(MEMBER_JOINED), F.col("client_host")).alias("client_host"),
        F.when(is_event(MEMBER_JOINED), F.col("session_timeout_ms")).alias("session_timeout_ms"),
        F.lit(None).cast("string").alias("end"),
        F.lit(None).cast("string").alias("end_cause"),
        F.lit(None).cast("long").alias("since_last_heartbeat_ms"),
        "next_gend",
        "consumer",
    )
    not_an_end = consumer & is_event(MEMBER_LEFT) & F.col("cause").isin(*CONSUMER_LEFT_NOT_AN_END)
    session_timer = F.col("timer") == "session"
    ends = events.where(
        (is_event(MEMBER_LEFT) | is_event(MEMBER_EXPIRED) | is_event(MEMBER_FENCED)) & ~not_an_end
    ).select(
        *GROUP_RUN,
        "member_id",
        F.lit("end").alias("role"),
        *point,
        "client_id",
        "group_instance_id",
        F.lit(None).cast("string").alias("client_host"),
        F.coalesce(F.col("session_timeout_ms"), F.when(session_timer, F.col("timeout_ms"))).alias("session_timeout_ms"),
        F.when(F.col("cause") == "kicked", "kicked")
        .when(is_event(MEMBER_LEFT), "left")
        .when(is_event(MEMBER_FENCED), "fenced")
        .otherwise("expired")
        .alias("end"),
        F.coalesce(
            F.col("cause"),
            F.concat(F.col("timer"), F.lit("_timeout")),
            F.when(is_event(MEMBER_FENCED), F.lit("static_member_replaced")),  # a consumer group's has no cause
            F.col("event"),
        ).alias("end_cause"),
        F.when(
            is_event(MEMBER_EXPIRED),
            F.coalesce(F.col("since_last_heartbeat_ms"), F.when(session_timer, F.col("timeout_ms"))),
        ).alias("since_last_heartbeat_ms"),
        "next_gend",
        "consumer",
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
    rows = rows.select(  # one Window operator for both
        "*",
        F.lead(F.struct(F.col("role"), own_end.alias("e"))).over(by_member).alias("following"),
        F.lag("role").over(by_member).alias("preceding_role"),
    )
    # A start's own end is the member's next row when that is an end; the group's end comes first if earlier.
    start_end = F.when(F.col("following.role") == "end", F.col("following.e"))
    group_end = F.struct(
        F.col("next_gend.seq").alias("seq"),
        F.col("next_gend.ts").alias("ts"),
        F.col("next_gend.ep").alias("ep"),
        F.col("next_gend.kind").alias("kind"),
        F.when(F.col("next_gend.kind") == "deleted", GROUP_DELETED).otherwise("unloaded").alias("end_cause"),
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
        "consumer",
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
        "consumer",
    )
    # A static member keeps its partitions when its id is replaced (KIP-345): for the ownership, it is gone only
    # at the first end of its lineage (same group.instance.id) that is not a fence. Its later ids also inherit
    # what the fence event does not repeat (host, session timeout).
    # (A consumer group's static member hands its partitions to its new id by reconciliation: no lineage there.)
    static = intervals.where(F.col("group_instance_id").isNotNull() & ~F.col("consumer"))
    lineage = Window.partitionBy(*GROUP_RUN, "group_instance_id").orderBy(F.coalesce("joined_seq", "end_seq"))
    later = (
        Window.partitionBy(*GROUP_RUN, "group_instance_id")
        .orderBy(F.desc(F.coalesce("joined_seq", "end_seq")))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    earlier = lineage.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    inherited = ("client_host", "session_timeout_ms")
    static = static.select(
        *(c for c in static.columns if c not in inherited),
        *(F.last(c, ignorenulls=True).over(earlier).alias(c) for c in inherited),  # one Window operator for both
    )
    gone = F.last(F.when(F.col("end") != "fenced", F.col("own_end")), ignorenulls=True).over(later)
    static = static.select("*", gone.alias("gone"))
    dynamic = intervals.where(F.col("group_instance_id").isNull() | F.col("consumer")).withColumn(
        "gone", F.col("own_end")
    )
    return static.unionByName(dynamic).withColumn("duration_ms", F.col("ended_ms") - F.col("joined_ms"))


def members_output(members: DataFrame) -> DataFrame:
    return typed(members, MEMBERS)
