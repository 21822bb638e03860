"""The disturbances table: every kill and fault rule in the logs, and the rebalance each one caused.

A disturbance is a ``chaos_action`` (what a chaos runner did to a member: the broker cannot see a SIGKILL, so the
runner tells it) or a ``fault_rule_added`` / ``fault_rule_removed`` (docs/events.md, "Disturbances"). Which
rebalance it caused is the analysis' call (docs/analytics.md, "disturbances"):

- the member it hit, when the record names one (``member_id``, else ``client_id``: a chaos run's client ids name
  one incarnation), and when that member's interval ended: when the broker noticed (``member_end_ms``);
- the rebalance it caused: the first episode of its (group, run) that starts at or after it, within the window
  (the member's session timeout, else the longest of the group's members, else Kafka's default of 45 s, plus
  ``MARGIN_MS``), and that was not over before the member was gone (a restarted consumer's join may start an
  episode first: the dead member is expelled within it, so that is the one it caused). A rule's removal causes
  none.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.schema import DISTURBANCES
from broker.analytics.tables.columns import GROUP_RUN, typed
from broker.events.names import CHAOS_ACTION, DISTURBANCE_EVENTS, FAULT_RULE_ADDED, FAULT_RULE_REMOVED

#: What the window adds to a session timeout: the heartbeat that was in flight, the broker's timer tick.
MARGIN_MS = 5000
#: A broker restart's ``action`` (``restarts.py``, which builds its rows).
BROKER_RESTART = "broker_restart"
#: Kafka's session.timeout.ms default (KIP-735), when nothing says the member's.
DEFAULT_SESSION_MS = 45_000
#: The disturbance's own fields, kept in one struct column through the ordered events (``events.py``): null on
#: every other record, so the events carry one mostly-null column instead of eight.
FIELDS = ("action", "signal", "pid", "note", "rule_id", "match", "error", "delay_ms")
#: The columns only a broker restart's rows have (``restarts.py``): null on a kill's or a rule's.
RESTART_COLUMNS = (
    "clean",
    "load_ms",
    "loaded_groups",
    "loaded_offsets",
    "loaded_records",
    "data_dir",
    "previous_run_id",
)


def disturbance_column() -> Column:
    """The ``disturbance`` column of the ordered events: ``FIELDS`` on a disturbance's record, else null."""
    return F.when(F.col("event").isin(sorted(DISTURBANCE_EVENTS)), F.struct(*FIELDS)).alias("disturbance")


def _label(event: Column) -> Column:
    """A few words for the timeline's mark: ``SIGKILL chaos-1-0``, ``rule f1: error``, ``rule f1 removed``."""
    d = F.col("d")
    return (
        F.when(event == CHAOS_ACTION, F.concat_ws(" ", F.coalesce(d.signal, d.action), F.col("client_id")))
        .when(event == FAULT_RULE_ADDED, F.concat(F.lit("rule "), d.rule_id, F.lit(": "), d.action))
        .otherwise(F.concat(F.lit("rule "), d.rule_id, F.lit(" removed")))
    )


def _detail(event: Column) -> Column:
    """One line for the table: what was done, to whom, and the runner's note."""
    d = F.col("d")
    who = F.concat_ws(
        " ",
        F.coalesce(F.col("client_id"), F.col("member_id")),
        F.when(d.pid.isNotNull(), F.concat(F.lit("(pid "), d.pid.cast("string"), F.lit(")"))),
    )
    chaos = F.concat_ws(
        "; ",
        F.concat_ws(
            " ", d.action, F.when(d.signal.isNotNull(), F.concat(F.lit("("), d.signal, F.lit(")"))), F.lit("of"), who
        ),
        d.note,
    )
    rule = F.concat_ws(
        " ",
        F.concat(F.lit("rule "), d.rule_id, F.lit(":")),
        d.action,
        d.error,
        F.when(d.delay_ms.isNotNull(), F.concat(d.delay_ms.cast("string"), F.lit(" ms"))),
        F.when(d["match"].isNotNull(), F.concat(F.lit("for "), d["match"])),
    )
    return (
        F.when(event == CHAOS_ACTION, chaos)
        .when(event == FAULT_RULE_REMOVED, F.concat(rule, F.lit(" removed")))
        .otherwise(rule)
    )


def disturbances_table(events: DataFrame, rebalances: DataFrame, members: DataFrame) -> DataFrame:
    """One row per disturbance, with the member it hit and the rebalance it caused (the module's docstring).

    ``events``: the ordered events (``sequence_events``); ``rebalances`` and ``members``: those tables as written.
    """
    found = events.where(F.col("disturbance").isNotNull()).select(
        *GROUP_RUN,
        "seq",
        "ts_ms",
        "event",
        "member_id",
        "client_id",
        "session_timeout_ms",
        F.col("disturbance").alias("d"),
    )
    # The member it hit: its interval alive at the disturbance, by member id, else by client id.
    m = members.select(
        *GROUP_RUN,
        F.col("member_id").alias("m_member"),
        F.col("client_id").alias("m_client"),
        "joined_ms",
        "ended_ms",
        "end",
        F.col("session_timeout_ms").alias("m_session"),
    )
    names = F.coalesce(F.col("member_id") == F.col("m_member"), F.lit(False)) | (
        F.col("member_id").isNull() & F.coalesce(F.col("client_id") == F.col("m_client"), F.lit(False))
    )
    alive = (F.col("joined_ms") <= F.col("ts_ms")) & (
        F.col("ended_ms").isNull() | (F.col("ended_ms") >= F.col("ts_ms"))
    )
    hit = (
        found.where(F.col("event") == CHAOS_ACTION)
        .select(*GROUP_RUN, "seq", "member_id", "client_id", "ts_ms")
        .join(m, list(GROUP_RUN))
        .where(names & alive)
        .groupBy(*GROUP_RUN, "seq")
        .agg(
            F.min(F.when(F.col("ended_ms").isNotNull(), F.struct("ended_ms", "end"))).alias("ended"),
            F.max("m_session").alias("hit_session"),
        )
    )
    longest = members.groupBy(*GROUP_RUN).agg(F.max("session_timeout_ms").alias("group_session"))
    rows = found.join(hit, [*GROUP_RUN, "seq"], "left").join(longest, list(GROUP_RUN), "left")
    window = F.coalesce("session_timeout_ms", "hit_session", "group_session", F.lit(DEFAULT_SESSION_MS)) + F.lit(
        MARGIN_MS
    )
    rows = rows.select(
        "*",
        window.cast("long").alias("window_ms"),
        F.col("ended.ended_ms").alias("member_end_ms"),
        F.col("ended.end").alias("member_end"),
    )

    r = rebalances.select(
        *GROUP_RUN,
        F.col("generation").alias("r_generation"),
        F.col("start_ms").alias("r_start"),
        F.col("end_ms").alias("r_end"),
        F.col("cause").alias("r_cause"),
        F.col("outcome").alias("r_outcome"),
        F.col("duration_ms").alias("r_duration"),
    )
    caused = (
        rows.where(F.col("event") != FAULT_RULE_REMOVED)
        .select(*GROUP_RUN, "seq", "ts_ms", "window_ms", "member_end_ms")
        .join(r, list(GROUP_RUN))
        .where(
            (F.col("r_start") >= F.col("ts_ms"))
            & (F.col("r_start") <= F.col("ts_ms") + F.col("window_ms"))
            & (F.col("member_end_ms").isNull() | F.col("r_end").isNull() | (F.col("r_end") >= F.col("member_end_ms")))
        )
    )
    first = Window.partitionBy(*GROUP_RUN, "seq").orderBy("r_start", "r_generation")
    caused = (
        caused.withColumn("n", F.row_number().over(first))
        .where(F.col("n") == 1)
        .select(*GROUP_RUN, "seq", "r_generation", "r_start", "r_cause", "r_outcome", "r_duration")
    )
    rows = rows.join(caused, [*GROUP_RUN, "seq"], "left")
    event = F.col("event")
    detected = F.when(
        F.col("r_start").isNotNull(),
        F.coalesce(F.col("member_end_ms"), F.col("r_start")) - F.col("ts_ms"),
    )
    out = rows.select(
        *GROUP_RUN,
        "seq",
        "ts_ms",
        "event",
        F.col("d.action").alias("action"),
        F.col("d.signal").alias("signal"),
        "client_id",
        "member_id",
        F.col("d.pid").alias("pid"),
        F.col("d.rule_id").alias("rule_id"),
        _label(event).alias("label"),
        _detail(event).alias("detail"),
        "window_ms",
        "member_end",
        "member_end_ms",
        F.col("r_generation").alias("rebalance_generation"),
        F.col("r_start").alias("rebalance_start_ms"),
        F.col("r_cause").alias("rebalance_cause"),
        F.col("r_outcome").alias("rebalance_outcome"),
        F.col("r_duration").alias("rebalance_duration_ms"),
        detected.alias("detected_ms"),
        # a broker restart's columns (``restarts.py``)
        *(F.lit(None).alias(c) for c in RESTART_COLUMNS),
    )
    return typed(out, DISTURBANCES)


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s"


def caused(row: dict[str, Any]) -> str:
    """A row's disturbance and what it did, in words (the report's last column, the job's progress lines):
    "kill (SIGKILL) of chaos-1-0 -> rebalance gen 4, detected in 6.0 s",
    "rule f1 (error) -> no rebalance within 8.0 s",
    "broker restart after a kill -> rebalance gen 3, detected in 6.1 s" (a group's row of a broker restart)."""
    if row["action"] == BROKER_RESTART:
        what = "broker restart after " + ("a clean stop" if row.get("clean") else "a kill")
        if not row["group_id"]:  # the restart's own row: what it loaded; its groups' rows say what it caused
            counts = ((row.get(f"loaded_{key}") or 0, key) for key in ("groups", "offsets", "records"))
            loaded = ", ".join(f"{n} {key if n != 1 else key[:-1]}" for n, key in counts)
            load = f" in {row['load_ms']:.1f} ms" if row.get("load_ms") is not None else ""
            return f"{what}: loaded {loaded}{load}"
    elif row["event"] == CHAOS_ACTION:
        how = f" ({row['signal']})" if row["signal"] else ""
        what = f"{row['action']}{how} of {row['client_id'] or row['member_id'] or 'a member'}"
    else:
        what = f"rule {row['rule_id']} ({row['action']})" + (" removed" if row["event"] == FAULT_RULE_REMOVED else "")
    if row["rebalance_generation"] is None and row["rebalance_start_ms"] is None:
        if row["event"] == FAULT_RULE_REMOVED:
            return what
        return f"{what} -> no rebalance within {_seconds(row['window_ms'])}"
    generation = "-" if row["rebalance_generation"] is None else row["rebalance_generation"]
    return f"{what} -> rebalance gen {generation}, detected in {_seconds(row['detected_ms'])}"
