"""Broker restarts (issue 27): the runs a data directory links, the intervals a stop ends, the restarts' rows.

A broker with ``--data-dir`` keeps its groups across a restart (docs/events.md, "Broker restarts"): a SIGKILLed
broker started again on the same directory has the same groups, generations, member ids and assignments, loaded
without a word (no ``member_joined``). Every table is still computed per (group, run); this module only ties the
runs together where the broker's own records say how:

- **The runs** (``runs_table``): each run's ``broker_started`` (its data directory, what it loaded, whether the
  previous broker on the directory stopped cleanly), its clean ``broker_stopped``, and the kill it found at its
  start (the ``broker_stopped`` with ``detected_at_start``, written by the new run as its seq 1). A run's
  **previous run** is the one of the same data directory that started last before it. A memory-only broker
  (``data_dir`` null) continues nothing.
- **A restart** (``restarts``): a run on a data directory that continues something: it has a previous run in the
  logs, or found a kill, or loaded anything.
- **Where a stop ends intervals** (``stopped_members``, ``stopped_ownership``): membership and ownership intervals
  still open at a clean ``broker_stopped`` end there; a classic group's ``unloaded`` end (its ``state_changed`` to
  Dead right after the stop) keeps its time and says why (``end_cause`` ``broker_stopped``). Those still open when
  the broker was killed end as ``unloaded`` too, with ``end_cause`` ``broker_killed``, when the next start found
  the kill (the kill itself was earlier, after the run's last record: nothing says when).
- **The restart's disturbances** (``restart_disturbances``): one row per restart (``group_id`` ""), and one per
  group it touched (a group with members when the broker stopped: their intervals ended by the stop), with the
  rebalance it caused there, as for a kill (``disturbances.py``): the first episode of that group in the new run
  that starts within the window (the group's longest session timeout, else 45 s, plus ``MARGIN_MS``) and was not
  started by a member's leave (a client's own act, never the broker's restart).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.schema import DISTURBANCES, LOADED_KEYS
from broker.analytics.tables.columns import is_event, typed
from broker.analytics.tables.disturbances import BROKER_RESTART, DEFAULT_SESSION_MS, MARGIN_MS
from broker.events.names import BROKER_EVENTS, BROKER_STARTED, BROKER_STOPPED

#: The broker events' own fields, kept in one struct column through the ordered events (``events.py``).
FIELDS = ("data_dir", "clean_shutdown", "loaded", "load_ms", "clean", "detected_at_start")
#: The disturbance's ``action`` of a broker restart.
RESTART = BROKER_RESTART
#: ``members.end_cause`` of an interval a clean stop ended, and of one a kill ended.
STOPPED = "broker_stopped"
KILLED = "broker_killed"
#: The end of an interval a broker stop ended (``members.end``, ``ownership.end``), as a clean stop's unloading.
UNLOADED = "unloaded"
#: An episode a member's leave started is no restart's doing.
NOT_CAUSED_BY_A_RESTART = ("member_left",)


def broker_column() -> Column:
    """The ``broker`` column of the ordered events: ``FIELDS`` on a broker event's record, else null."""
    return F.when(F.col("event").isin(sorted(BROKER_EVENTS)), F.struct(*FIELDS)).alias("broker")


def runs_table(events: DataFrame) -> DataFrame:
    """One row per run with a broker event: ``run_id``, ``start`` (the ``broker_started``: seq, ts_ms, data_dir,
    clean_shutdown, loaded, load_ms), ``stopped_ms`` (its clean ``broker_stopped``), ``killed_ms`` (the kill of the
    previous broker it found at its start), and ``previous_run_id`` (the module's docstring)."""
    b = F.col("broker")
    detected = F.coalesce(b.detected_at_start, F.lit(False))
    found = events.where(F.col("broker").isNotNull())
    start = F.struct(
        F.col("seq"),
        F.col("ts_ms"),
        b.data_dir.alias("data_dir"),
        F.coalesce(b.clean_shutdown, F.lit(True)).alias("clean_shutdown"),
        b.loaded.alias("loaded"),
        b.load_ms.alias("load_ms"),
    )
    runs = found.groupBy("run_id").agg(
        F.min(F.when(is_event(BROKER_STARTED), start)).alias("start"),
        F.min(F.when(is_event(BROKER_STOPPED) & ~detected, F.col("ts_ms"))).alias("stopped_ms"),
        F.min(F.when(is_event(BROKER_STOPPED) & detected, F.col("ts_ms"))).alias("killed_ms"),
    )
    on_dir = Window.partitionBy(F.col("start.data_dir")).orderBy(F.col("start.ts_ms"), F.col("run_id"))
    previous = F.when(F.col("start.data_dir").isNotNull(), F.lag("run_id").over(on_dir))
    return runs.select("*", previous.alias("previous_run_id"))


def restarts(runs: DataFrame) -> DataFrame:
    """The runs that are restarts (the module's docstring), with ``stop_ms``: when the previous broker was known
    to be gone (the kill found at the start, else the previous run's clean stop, else this start)."""
    loaded = F.aggregate(
        F.array(*(F.coalesce(F.col(f"start.loaded.{key}"), F.lit(0)) for key in LOADED_KEYS)),
        F.lit(0).cast("long"),
        lambda total, n: total + n,
    )
    continues = (
        F.col("previous_run_id").isNotNull()
        | ~F.col("start.clean_shutdown")
        | F.col("killed_ms").isNotNull()
        | (loaded > 0)
    )
    before = runs.select(F.col("run_id").alias("previous_run_id"), F.col("stopped_ms").alias("previous_stopped_ms"))
    return (
        runs.where(F.col("start").isNotNull() & F.col("start.data_dir").isNotNull() & continues)
        .join(before, "previous_run_id", "left")
        .select(
            "run_id",
            "previous_run_id",
            F.col("start.seq").alias("seq"),
            F.col("start.ts_ms").alias("ts_ms"),
            F.col("start.data_dir").alias("data_dir"),
            (F.col("start.clean_shutdown") & F.col("killed_ms").isNull()).alias("clean"),
            F.col("start.loaded").alias("loaded"),
            F.col("start.load_ms").alias("load_ms"),
            F.coalesce("killed_ms", "previous_stopped_ms", F.col("start.ts_ms")).alias("stop_ms"),
        )
    )


def _stops(runs: DataFrame) -> DataFrame:
    """Per run that a broker stop ended: ``stop_at`` (when) and ``stop_cause`` (``STOPPED`` or ``KILLED``). A clean
    stop is the run's own record; a kill is found by the next run on the same data directory."""
    clean = runs.where(F.col("stopped_ms").isNotNull()).select(
        "run_id", F.col("stopped_ms").alias("stop_at"), F.lit(STOPPED).alias("stop_cause")
    )
    killed = runs.where(F.col("killed_ms").isNotNull() & F.col("previous_run_id").isNotNull()).select(
        F.col("previous_run_id").alias("run_id"), F.col("killed_ms").alias("stop_at"), F.lit(KILLED).alias("stop_cause")
    )
    # A run both stopped cleanly and "killed" cannot be (a clean stop leaves the marker): the clean stop wins.
    both = clean.unionByName(killed)
    first = Window.partitionBy("run_id").orderBy(F.col("stop_cause").desc())  # broker_stopped before broker_killed
    return both.withColumn("n", F.row_number().over(first)).where(F.col("n") == 1).drop("n")


def stopped_members(members: DataFrame, runs: DataFrame) -> DataFrame:
    """The members table (as ``members_output`` gives it) with the intervals a broker stop ended (the module's
    docstring): an open one ends ``unloaded`` at the stop, an ``unloaded`` one after a clean stop says so."""
    rows = members.join(F.broadcast(_stops(runs)), "run_id", "left")
    opened = (F.col("end") == "open") & F.col("stop_at").isNotNull()
    unloaded = (F.col("end") == UNLOADED) & (F.col("stop_cause") == STOPPED) & (F.col("ended_ms") >= F.col("stop_at"))
    ended = F.when(opened, F.col("stop_at")).otherwise(F.col("ended_ms"))
    out = rows.select(
        *(c for c in members.columns if c not in ("ended_ms", "end", "end_cause", "duration_ms")),
        ended.alias("ended_ms"),
        F.when(opened, F.lit(UNLOADED)).otherwise(F.col("end")).alias("end"),
        F.when(opened | unloaded, F.col("stop_cause")).otherwise(F.col("end_cause")).alias("end_cause"),
        (ended - F.col("joined_ms")).alias("duration_ms"),
    )
    return out.select(*members.columns)


def stopped_ownership(ownership: DataFrame, runs: DataFrame) -> DataFrame:
    """The ownership table (as ``ownership_output`` gives it) with the intervals open at a broker stop ended there,
    ``unloaded`` (the ownership has no cause column: the member's interval has it)."""
    rows = ownership.join(F.broadcast(_stops(runs)), "run_id", "left")
    opened = (F.col("end") == "open") & F.col("stop_at").isNotNull()
    ended = F.when(opened, F.col("stop_at")).otherwise(F.col("end_ms"))
    out = rows.select(
        *(c for c in ownership.columns if c not in ("end_ms", "end", "duration_ms")),
        ended.alias("end_ms"),
        F.when(opened, F.lit(UNLOADED)).otherwise(F.col("end")).alias("end"),
        (ended - F.col("start_ms")).alias("duration_ms"),
    )
    return out.select(*ownership.columns)


def _label() -> Column:
    return F.concat(F.lit("broker restart ("), F.when(F.col("clean"), "clean").otherwise("killed"), F.lit(")"))


def _detail() -> Column:
    """``broker restart after a kill: loaded 1 group, 3 offsets, 30 records in 27.8 ms from /data``."""

    def count(key: str, one: str, many: str) -> Column:
        n = F.coalesce(F.col(f"loaded.{key}"), F.lit(0))
        return F.concat(n.cast("string"), F.lit(" "), F.when(n == 1, F.lit(one)).otherwise(F.lit(many)))

    how = F.when(F.col("clean"), "after a clean stop").otherwise("after a kill")
    return F.concat_ws(
        " ",
        F.lit("broker restart"),
        F.concat(how, F.lit(":")),
        F.lit("loaded"),
        F.concat_ws(
            ", ",
            count("groups", "group", "groups"),
            count("offsets", "offset", "offsets"),
            count("records", "record", "records"),
        ),
        F.when(F.col("load_ms").isNotNull(), F.concat(F.lit("in "), F.format_number("load_ms", 1), F.lit(" ms"))),
        F.when(F.col("data_dir").isNotNull(), F.concat(F.lit("from "), F.col("data_dir"))),
    )


def restart_disturbances(runs: DataFrame, rebalances: DataFrame, members: DataFrame, ownership: DataFrame) -> DataFrame:
    """The broker restarts' rows of the disturbances table (the module's docstring); ``rebalances``, ``members``
    and ``ownership``: those tables as written (with ``stopped_members``' and ``stopped_ownership``'s ends)."""
    found = restarts(runs)
    base = found.select(
        "run_id",
        "previous_run_id",
        "seq",
        "ts_ms",
        "data_dir",
        "clean",
        "load_ms",
        "loaded",
        _label().alias("label"),
        _detail().alias("detail"),
    )
    # The groups it touched: those with intervals of the previous run that the stop ended (a loaded member is
    # silent until it leaves or expires: its group may have only ownership intervals in a run).
    stops = F.broadcast(_stops(runs))
    by_members = members.where(F.col("end_cause").isin(STOPPED, KILLED)).select("run_id", "group_id")
    by_ownership = (
        ownership.join(stops, "run_id")
        .where((F.col("end") == UNLOADED) & (F.col("end_ms") >= F.col("stop_at")))
        .select("run_id", "group_id")
    )
    touched = by_members.unionByName(by_ownership).distinct().withColumnRenamed("run_id", "previous_run_id")
    # The window: the group's longest session timeout in the previous run, else in any run, else Kafka's default.
    in_run = members.groupBy(F.col("run_id").alias("previous_run_id"), "group_id").agg(
        F.max("session_timeout_ms").alias("run_session")
    )
    anywhere = members.groupBy("group_id").agg(F.max("session_timeout_ms").alias("any_session"))
    session = F.coalesce("run_session", "any_session", F.lit(DEFAULT_SESSION_MS))
    per_group = (
        base.join(touched, "previous_run_id")
        .join(in_run, ["previous_run_id", "group_id"], "left")
        .join(anywhere, "group_id", "left")
        .withColumn("window_ms", (session + F.lit(MARGIN_MS)).cast("long"))
        .drop("run_session", "any_session")
    )
    r = rebalances.where(~F.coalesce(F.col("cause").isin(*NOT_CAUSED_BY_A_RESTART), F.lit(False))).select(
        "group_id",
        "run_id",
        F.col("generation").alias("r_generation"),
        F.col("start_ms").alias("r_start"),
        F.col("cause").alias("r_cause"),
        F.col("outcome").alias("r_outcome"),
        F.col("duration_ms").alias("r_duration"),
    )
    caused = (
        per_group.select("group_id", "run_id", "ts_ms", "window_ms")
        .join(r, ["group_id", "run_id"])
        .where((F.col("r_start") >= F.col("ts_ms")) & (F.col("r_start") <= F.col("ts_ms") + F.col("window_ms")))
    )
    first = Window.partitionBy("group_id", "run_id").orderBy("r_start", "r_generation")
    caused = caused.withColumn("n", F.row_number().over(first)).where(F.col("n") == 1).drop("n", "ts_ms", "window_ms")
    per_group = per_group.join(caused, ["group_id", "run_id"], "left")
    everyone = base.select(
        F.lit("").alias("group_id"),
        "*",
        F.lit(None).cast("long").alias("window_ms"),
        *(F.lit(None).alias(c) for c in ("r_generation", "r_start", "r_cause", "r_outcome", "r_duration")),
    )
    rows = everyone.unionByName(per_group)
    none = F.lit(None)
    out = rows.select(
        "group_id",
        "run_id",
        "seq",
        "ts_ms",
        F.lit(BROKER_STARTED).alias("event"),
        F.lit(RESTART).alias("action"),
        *(none.alias(c) for c in ("signal", "client_id", "member_id", "pid", "rule_id")),
        "label",
        "detail",
        "window_ms",
        none.alias("member_end"),
        none.alias("member_end_ms"),
        F.col("r_generation").alias("rebalance_generation"),
        F.col("r_start").alias("rebalance_start_ms"),
        F.col("r_cause").alias("rebalance_cause"),
        F.col("r_outcome").alias("rebalance_outcome"),
        F.col("r_duration").alias("rebalance_duration_ms"),
        (F.col("r_start") - F.col("ts_ms")).alias("detected_ms"),
        "clean",
        "load_ms",
        F.col("loaded.groups").alias("loaded_groups"),
        F.col("loaded.offsets").alias("loaded_offsets"),
        F.col("loaded.records").alias("loaded_records"),
        "data_dir",
        "previous_run_id",
    )
    return typed(out, DISTURBANCES)
