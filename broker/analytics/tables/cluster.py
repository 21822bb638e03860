"""The broker_disturbances table (issue 29): node stops and starts and coordinator moves of ``serve --nodes N``,
and the time from each to every member's next acknowledged commit.

The broker says what its ``/v1/cluster`` verbs did in events with ``group_id`` ``""`` (docs/events.md, "Cluster
events"). One disturbance per:

- ``node_stopped`` (``node_id``, ``mode``) and ``node_started`` (``node_id``): every group of the run lives through
  it (its members fetch from, and commit to, whatever the node led);
- ``coordinator_loaded`` of a ``__consumer_offsets`` partition: a coordinator move, with the ``partition``, the
  node that gained it (``node_id``), the one that lost it (``previous_node``), the new leader ``epoch``, why
  (``cause``: ``moved``, the control API's move, or ``node_stopped`` / ``node_started``), its load delay and load
  time. It touches the groups hashed to that partition (Kafka's ``abs(hashCode(group id)) % partitions``, the
  event's ``partitions``: ``broker.cluster.hashing``); a move of a partition no group of the logs hashes to has
  no row.

One row per (disturbance, group, member): every member of the group alive at the disturbance (its members-table
interval), with ``next_commit_ms``, the time from the disturbance to that member's first ``offsets_committed``
after it (a commit the broker acknowledged), ``member_end_ms`` when its interval ended first, and per
(disturbance, group) ``all_committed_ms``: the longest of those, when every member that lived on committed again.
``offsets_committed`` is a debug event (``serve --log-level debug``): without it ``commits_logged`` is false and the
times are null. A node event that touched no group has one row with ``group_id`` ``""``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker.analytics.schema import BROKER_DISTURBANCES
from broker.analytics.tables.columns import typed
from broker.cluster.hashing import OFFSETS_TOPIC, partition_for
from broker.events.names import CLUSTER_EVENTS, COORDINATOR_LOADED, NODE_STARTED, NODE_STOPPED, OFFSETS_COMMITTED

#: The cluster events' own fields, kept in one struct column through the ordered events (``events.py``).
FIELDS = ("node_id", "mode", "topic", "partition", "epoch", "previous", "partitions", "load_delay_ms", "duration_ms")
#: ``offsets.topic.num.partitions`` when a run's events do not say (Kafka's default, and the broker's).
DEFAULT_PARTITIONS = 50
#: The ``event`` of a coordinator move's rows.
COORDINATOR_MOVED = "coordinator_moved"


def cluster_column() -> Column:
    """The ``cluster`` column of the ordered events: ``FIELDS`` on a cluster event's record, else null."""
    return F.when(F.col("event").isin(sorted(CLUSTER_EVENTS)), F.struct(*FIELDS)).alias("cluster")


def _actions(events: DataFrame) -> DataFrame:
    """The disturbances: node stops and starts, and ``__consumer_offsets`` coordinator loads."""
    c = F.col("cluster")
    node = F.col("event").isin(NODE_STOPPED, NODE_STARTED)
    moved = (F.col("event") == COORDINATOR_LOADED) & (c.topic == OFFSETS_TOPIC)
    return events.where(node | moved).select(
        "run_id",
        "seq",
        "ts_ms",
        F.when(moved, F.lit(COORDINATOR_MOVED)).otherwise(F.col("event")).alias("event"),
        F.when(moved, F.col("cause")).alias("cause"),
        c["mode"].alias("mode"),
        c.node_id.cast("int").alias("node_id"),
        F.when(moved, F.expr("try_cast(cluster.previous AS INT)")).alias("previous_node"),
        F.when(moved, c.partition).alias("partition"),
        F.when(moved, F.expr("try_cast(cluster.epoch AS INT)")).alias("epoch"),
        F.when(moved, F.expr("try_cast(cluster.partitions AS INT)")).alias("partitions"),
        F.when(moved, c.load_delay_ms).alias("load_delay_ms"),
        F.when(moved, c.duration_ms).alias("load_ms"),
    )


def _group_partitions(spark: SparkSession, groups: DataFrame, actions: DataFrame) -> DataFrame:
    """(group_id, partitions, group_partition) for every group of the logs and every partition count the
    coordinator moves name: a few rows, hashed on the driver with the broker's own function."""
    names = [row["group_id"] for row in groups.select("group_id").distinct().collect()]
    counts = {int(row["partitions"]) for row in actions.select("partitions").distinct().collect() if row["partitions"]}
    rows = [(g, n, partition_for(g, n)) for g in names for n in counts | {DEFAULT_PARTITIONS}]
    return spark.createDataFrame(rows, "group_id string, partitions int, group_partition int")


def broker_disturbances_table(spark: SparkSession, events: DataFrame, members: DataFrame) -> DataFrame:
    """The module's table. ``events``: the ordered events (``sequence_events``); ``members``: that table as
    written. A few disturbances, a few groups: the joins are small."""
    actions = _actions(events).localCheckpoint(eager=True)
    if actions.isEmpty():  # a one-node broker's logs (most): no joins, no collects, an empty table
        return spark.createDataFrame([], BROKER_DISTURBANCES)
    live = members.where(F.col("group_id") != "").select(
        "group_id", "run_id", "member_id", "client_id", "joined_ms", "ended_ms"
    )
    groups = live.select("run_id", "group_id").distinct()
    hashed = _group_partitions(spark, groups, actions)
    # Which groups each disturbance touched: every group of its run, or those hashed to the moved partition.
    node_rows = actions.where(F.col("event") != COORDINATOR_MOVED).join(groups, "run_id", "left")
    moves = actions.where(F.col("event") == COORDINATOR_MOVED)
    count = F.coalesce(F.col("partitions"), F.lit(DEFAULT_PARTITIONS))
    move_rows = (
        moves.withColumn("count", count)
        .join(groups, "run_id")
        .join(
            F.broadcast(hashed.withColumnRenamed("partitions", "count")), ["group_id", "count"]
        )
        .where(F.col("group_partition") == F.col("partition"))
        .drop("count", "group_partition")
    )
    touched = node_rows.unionByName(move_rows).withColumn("group_id", F.coalesce("group_id", F.lit("")))
    # Every member alive at it, and its first acknowledged commit after it.
    alive = (F.col("joined_ms") <= F.col("ts_ms")) & (F.col("ended_ms").isNull() | (F.col("ended_ms") > F.col("ts_ms")))
    with_members = touched.join(live, ["run_id", "group_id"], "left").where(F.col("member_id").isNull() | alive)
    commits = events.where(
        (F.col("event") == OFFSETS_COMMITTED) & F.col("member_id").isNotNull() & (F.col("member_id") != "")
    ).select("run_id", "group_id", "member_id", F.col("seq").alias("c_seq"), F.col("ts_ms").alias("c_ms"))
    logged = commits.select("run_id").distinct().withColumn("commits_logged", F.lit(True))
    after = (
        with_members.select("run_id", "seq", "group_id", "member_id")
        .join(commits, ["run_id", "group_id", "member_id"])
        .where(F.col("c_seq") > F.col("seq"))
        .groupBy("run_id", "seq", "group_id", "member_id")
        .agg(F.min("c_ms").alias("next_commit_at"))
    )
    rows = with_members.join(after, ["run_id", "seq", "group_id", "member_id"], "left").join(logged, "run_id", "left")
    next_ms = F.col("next_commit_at") - F.col("ts_ms")
    ended_first = F.col("ended_ms").isNotNull() & (
        F.col("next_commit_at").isNull() | (F.col("ended_ms") < F.col("next_commit_at"))
    )
    rows = rows.select(
        "*", next_ms.alias("next_commit_ms"), F.when(ended_first, F.col("ended_ms")).alias("member_end_ms")
    )
    per_group = Window.partitionBy("run_id", "seq", "group_id")
    waited = F.col("member_id").isNotNull() & F.col("member_end_ms").isNull()
    missing = F.sum((waited & F.col("next_commit_ms").isNull()).cast("int")).over(per_group)
    all_committed = F.when(
        (missing == 0) & F.col("commits_logged").isNotNull(),
        F.max(F.when(waited, F.col("next_commit_ms"))).over(per_group),
    )
    out = rows.select(
        "group_id",
        "run_id",
        "seq",
        "ts_ms",
        "event",
        "cause",
        "mode",
        "node_id",
        "previous_node",
        "partition",
        "epoch",
        "load_delay_ms",
        "load_ms",
        "member_id",
        "client_id",
        "next_commit_ms",
        "member_end_ms",
        all_committed.alias("all_committed_ms"),
        F.coalesce(F.col("commits_logged"), F.lit(False)).alias("commits_logged"),
    )
    return typed(out, BROKER_DISTURBANCES)


def described(row: dict[str, object]) -> str:
    """One (disturbance, group) in words, for the job's progress lines: "node_stopped of node 3 (kill) ->
    2 members committed again within 95 ms", "coordinator_moved of partition 32 from node 1 to 3 (moved) -> ..."."""
    if row["event"] == COORDINATOR_MOVED:
        what = f"coordinator of partition {row['partition']} moved from node {row['previous_node']} to {row['node_id']}"
        what += f" ({row['cause']}, epoch {row['epoch']})"
    else:
        what = f"{row['event']} of node {row['node_id']}" + (f" ({row['mode']})" if row["mode"] else "")
    if not row["commits_logged"]:
        return f"{what} (no offsets_committed in the log: serve --log-level debug)"
    if row["all_committed_ms"] is None:
        return f"{what} -> not every member committed again"
    return f"{what} -> {row['members']} members committed again within {row['all_committed_ms']} ms"


def progress_rows(table: DataFrame, limit: int) -> list[dict[str, object]]:
    """The first ``limit`` (disturbance, group) pairs of the written table, with their member counts."""
    pairs = table.where(F.col("group_id") != "").groupBy(
        "run_id", "seq", "ts_ms", "group_id", "event", "cause", "mode", "node_id", "previous_node", "partition",
        "epoch", "all_committed_ms", "commits_logged",
    ).agg(F.count("member_id").alias("members"))  # fmt: skip
    return [row.asDict() for row in pairs.orderBy("ts_ms", "run_id", "seq", "group_id").limit(limit).collect()]
