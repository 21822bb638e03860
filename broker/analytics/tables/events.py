"""The ordered events: each (group, run)'s parsed events in ``seq`` order, repeats dropped, episodes marked.

A group's history is sequential (is the group rebalancing? who owns partition 3?), and that is computed with
window functions over one partitioning, (``group_id``, ``run_id``) ordered by ``seq``: one shuffle of the events,
after which the forward windows (running sums and "last seen" values) and one backward window ("next ... after
this event") are sorts within those partitions.

Both group protocols have episodes. Classic: from a ``rebalance_started`` to the ``sync_completed`` that makes the
group Stable. Consumer groups (KIP-848, records with ``group_type`` "consumer"; docs/spec/consumer-groups.md): from
a ``group_epoch_bumped`` (section 6.1: every change of membership, subscription or metadata) to the group Stable
again, every member reconciled to the new target (section 3.4): the ``state_changed`` to Stable, or, when the
group never left Stable (a single member that reconciles in the very heartbeat that bumped the epoch: the broker
reports no change of state), that member's ``member_reconciled`` at the new epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.read import KIND, OK
from broker.analytics.tables.cluster import cluster_column
from broker.analytics.tables.columns import GROUP_RUN, as_int, is_event, size_or_null
from broker.analytics.tables.disturbances import disturbance_column
from broker.analytics.tables.restarts import broker_column
from broker.analytics.tables.share import share_column
from broker.events.names import (
    COMMON,
    GROUP_DELETED,
    GROUP_EMPTIED,
    GROUP_EPOCH_BUMPED,
    JOIN_COMPLETED,
    MEMBER_JOINED,
    MEMBER_RECONCILED,
    REBALANCE_STARTED,
    STATE_CHANGED,
    SYNC_COMPLETED,
    TARGET_ASSIGNMENT_COMPUTED,
)

#: ``group_type`` of a consumer group's records (version 2); a classic group's records have none.
CONSUMER = "consumer"

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
    # version 2: consumer groups
    "group_type",
    "group_epoch",
    "assignment_epoch",
    "member_epoch",
    "assignor",
    "assigned",
    "pending_revocation",
    "timer",
    "timeout_ms",
)


def is_consumer() -> Column:
    """The record is a consumer group's (KIP-848); false for classic groups and version-1 records."""
    return F.coalesce(F.col("group_type") == CONSUMER, F.lit(False))


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
      structs of (seq, ts_ms, ep, kind); ``last_ep``: the last episode of the (group, run);
    - consumer groups: ``consumer``, ``revoking_n`` (partitions a ``member_reconciled`` leaves pending revocation)
      and ``target_moved`` (a ``target_assignment_computed``'s moves); a ``group_epoch_bumped`` in the heartbeat
      of its member's ``member_joined`` has the cause ``member_joined`` (the broker says ``subscription_changed``:
      from none to one).
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
        F.to_json(F.struct(*COMMON)).alias("text"),
    )
    events = marked.where(~F.col("dup")).select(
        *_EVENT_COLUMNS,
        F.when(is_event(REBALANCE_STARTED) | is_event(TARGET_ASSIGNMENT_COMPUTED), F.expr("try_cast(members AS INT)"))
        .when(is_event(JOIN_COMPLETED), F.size(F.from_json("members", "array<string>")))
        .alias("members_n"),
        size_or_null("moved").alias("moved_n"),
        F.when(is_event(TARGET_ASSIGNMENT_COMPUTED), F.col("moved")).alias("target_moved"),
        F.when(
            is_event(MEMBER_RECONCILED) & F.col("pending_revocation").isNotNull(),
            F.aggregate(
                F.map_values("pending_revocation"),
                F.lit(0),
                lambda total, parts: total + F.coalesce(F.size(parts), F.lit(0)),
            ),
        ).alias("revoking_n"),
        disturbance_column(),  # a kill's or a fault rule's own fields, null on every other record
        broker_column(),  # a broker_started's or broker_stopped's own fields (issue 27), null on every other record
        share_column(),  # a share group's record's own fields (issue 28), null on every other record
        cluster_column(),  # a cluster event's own fields (issue 29), null on every other record
    )

    # Four window passes over the one ordering (issue 17): each ``select`` computes every window of one dependency
    # level, so the windows of a level share one Window operator (same partitioning and order, frames may differ)
    # and the passes share one sort; a ``withColumn`` per column made a Window operator (and a re-analysed plan)
    # per column. Only the backward pass needs a second sort.
    w = Window.partitionBy(*GROUP_RUN).orderBy("seq")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # A new consumer-group member's first heartbeat bumps the epoch for its subscription (section 6.1): a join.
    joined_before = (F.lag("event").over(w) == MEMBER_JOINED) & (F.lag("member_id").over(w) == F.col("member_id"))
    cause = F.when(
        is_event(GROUP_EPOCH_BUMPED) & F.coalesce(joined_before, F.lit(False)), F.lit("member_joined")
    ).otherwise(F.col("cause"))
    events = events.select(
        *(cause.alias("cause") if c == "cause" else F.col(c) for c in events.columns),
        is_consumer().alias("consumer"),
        # Consumer groups: the last group epoch bumped and the last target computed (its epoch and members), for
        # the Stable that the broker does not report because the state never left it (the module's docstring).
        F.last(F.when(is_event(GROUP_EPOCH_BUMPED), F.col("group_epoch")), ignorenulls=True)
        .over(upto)
        .alias("last_bump"),
        F.last(
            F.when(is_event(TARGET_ASSIGNMENT_COMPUTED), F.struct("assignment_epoch", "members_n")), ignorenulls=True
        )
        .over(upto)
        .alias("last_target"),
        F.lead("event").over(w).alias("next_event"),
    )
    quietly_stable = (
        is_event(MEMBER_RECONCILED)
        & (F.col("state") == "stable")
        & (F.col("member_epoch") == F.col("last_bump"))
        & (F.col("last_target.assignment_epoch") == F.col("last_bump"))
        & (F.col("last_target.members_n") == 1)
    )
    consumer_stable = F.col("consumer") & (
        (is_event(STATE_CHANGED) & (F.col("to") == "Stable")) | F.coalesce(quietly_stable, F.lit(False))
    )
    # Deleting a group emits state_changed(to Dead) then group_deleted; a Dead without group_deleted after it is
    # the broker unloading the group (shutdown): every interval open then ends as "unloaded".
    gend_kind = F.when(is_event(GROUP_DELETED), "deleted").when(
        is_event(STATE_CHANGED)
        & (F.col("to") == "Dead")
        & (F.coalesce(F.col("next_event"), F.lit("")) != GROUP_DELETED),
        "unloaded",
    )
    end_kind = (
        F.when(is_event(SYNC_COMPLETED) | consumer_stable, "stable")
        .when((is_event(JOIN_COMPLETED) & (F.col("state") == "Empty")) | is_event(GROUP_EMPTIED), "empty")
        .otherwise(gend_kind)
    )
    kept = [c for c in events.columns if c not in ("last_bump", "last_target", "next_event")]
    events = events.select(
        *kept,
        gend_kind.alias("gend_kind"),
        end_kind.alias("end_kind"),
        (is_event(REBALANCE_STARTED) | is_event(GROUP_EPOCH_BUMPED)).alias("is_start"),
        is_event(SYNC_COMPLETED).alias("is_sync"),
    )
    marker = F.when(F.col("is_start"), 1).when(F.col("end_kind").isNotNull(), 0)
    kept += ["gend_kind", "end_kind", "is_start", "is_sync"]
    events = events.select(
        *kept,
        F.coalesce(F.last(marker, ignorenulls=True).over(before) == 1, F.lit(False)).alias("in_before"),
        F.coalesce(F.sum(as_int(F.col("gend_kind").isNotNull())).over(before), F.lit(0)).alias("inc"),
        F.sum(as_int(F.col("is_sync"))).over(upto).alias("sync_no"),
        F.last(F.when(F.col("is_sync"), F.col("seq")), ignorenulls=True).over(upto).alias("last_sync_seq"),
        F.last(F.when(F.col("gend_kind").isNotNull(), F.col("seq")), ignorenulls=True)
        .over(upto)
        .alias("last_gend_seq"),
    )
    ep_start = F.col("is_start") & ~F.col("in_before")
    kept += ["inc", "sync_no"]
    events = events.select(
        *kept,
        ep_start.alias("ep_start"),
        (F.col("is_start") | F.col("in_before")).alias("in_ep"),
        (F.col("in_before") & F.col("end_kind").isNotNull()).alias("ep_end"),
        (
            F.col("last_sync_seq").isNotNull()
            & (F.col("last_gend_seq").isNull() | (F.col("last_sync_seq") > F.col("last_gend_seq")))
        ).alias("prev_sync_valid"),
        F.sum(as_int(ep_start)).over(upto).alias("ep"),
    )

    # The backward pass: every "next ... after this event" and the run's last episode, one Window operator.
    after = Window.partitionBy(*GROUP_RUN).orderBy(F.desc("seq"))

    def next_where(condition: Column, kind: Column) -> Column:
        point = F.struct(F.col("seq"), F.col("ts_ms").alias("ts"), F.col("ep"), kind.alias("kind"))
        return F.last(F.when(condition, point), ignorenulls=True).over(after.rowsBetween(Window.unboundedPreceding, -1))

    events = events.select(
        "*",
        next_where(F.col("ep_start"), F.lit("rebalance")).alias("next_start"),
        next_where(F.col("is_sync"), F.lit("moved")).alias("next_sync"),
        next_where(F.col("gend_kind").isNotNull(), F.col("gend_kind")).alias("next_gend"),
        F.max("ep").over(after.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("last_ep"),
    )
    return Events(events, duplicates)
