"""Share groups (KIP-932, issue 28): the deliveries of each share-partition and the time records spent in flight.

The broker reports the records' life per share-partition (docs/events.md, "Share groups"): ``records_acquired``
(offset ranges, each with its delivery count, under one acquisition lock), ``records_released`` (offsets, with the
cause: ``release``, ``lock_expired``, ``session_closed``), ``records_archived`` (offsets that reached the delivery
limit) and ``records_acknowledged`` (counts only: ``accepted``, ``rejected``). One row per delivery (a record
acquired once) is made of them, its end found by this rule (docs/analytics.md, "Share groups"):

- by its offset: the first release or archive of that offset after the acquisition, before the offset is
  acquired again (a delivery ends before the record can be acquired again);
- otherwise by the member's acknowledgements, which name no offset: the deliveries of a (share-partition,
  member) that no release or archive ended are taken in acquisition order (then offset order) and the member's
  acknowledged counts (``accepted + rejected``, in ``seq`` order) end them in that order. Clients acknowledge a
  poll's records before the next poll, so the order is theirs;
- otherwise ``open``: still in flight when the log ends (or its end was never reported).

A redelivery (delivery count above 1) gets the cause of the end of the delivery before it (``release``,
``lock_expired``, ``session_closed``; ``unknown`` when that delivery is not in the log).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from broker.analytics.schema import SHARE_DELIVERIES, SHARE_IN_FLIGHT
from broker.analytics.tables.columns import GROUP_RUN, as_int, is_event, typed
from broker.analytics.tables.summary import percentiles
from broker.events.names import (
    RECORDS_ACKNOWLEDGED,
    RECORDS_ACQUIRED,
    RECORDS_ARCHIVED,
    RECORDS_RELEASED,
    RELEASE_CAUSES,
)

#: ``group_type`` of every record of a share group.
SHARE = "share"
#: The share records the tables read; every other record has a null ``share`` column.
RECORD_EVENTS = (RECORDS_ACQUIRED, RECORDS_ACKNOWLEDGED, RECORDS_RELEASED, RECORDS_ARCHIVED)
#: A share-partition of a (group, run): the tables' key.
PARTITION = (*GROUP_RUN, "topic", "partition")
#: How a delivery ended (``share_in_flight.end``): a release's cause, ``archived``, ``acknowledged``; ``open``
#: when it had not ended when the log did. ``ALL`` is every delivery that ended.
ACKNOWLEDGED = "acknowledged"
ARCHIVED = "archived"
OPEN = "open"
ALL = "all"
#: A redelivery whose previous delivery is not in the log.
UNKNOWN = "unknown"
#: ``offsets`` of a release or an archive: ``[first, last]`` runs (raw JSON in the schema: offsets_committed's
#: field of that name is another shape).
OFFSET_RUNS = "array<array<bigint>>"
#: The longest run of offsets one record may name: a share-partition holds at most its in-flight window
#: (``group.share.partition.max.record.locks``, 2000 by default) in flight, so anything longer is not a record of
#: the broker's, and exploding it could exhaust an executor. Such a run counts no offset.
MAX_RUN = 1_000_000

_FIELDS = ("topic", "partition", "ranges", "records", "redelivered", "lock_duration_ms", "accepted", "rejected")


def is_share_group() -> Column:
    """The record is a share group's (``group_type`` "share"): the rebalance tables leave those out (the job)."""
    return F.coalesce(F.col("group_type") == SHARE, F.lit(False))


def share_column() -> Column:
    """The ``share`` column of the ordered events: a share record's own fields (``offsets`` parsed), else null."""
    runs = F.when(is_event(RECORDS_RELEASED) | is_event(RECORDS_ARCHIVED), F.from_json(F.col("offsets"), OFFSET_RUNS))
    fields = [*(F.col(name) for name in _FIELDS), runs.alias("offsets"), F.col("delivery_count")]
    return F.when(F.col("event").isin(list(RECORD_EVENTS)), F.struct(*fields)).alias("share")


def _offsets(run: Column) -> Column:
    """The offsets of a ``[first, last]`` run (empty for a run that is not one, or longer than ``MAX_RUN``)."""
    first, last = run.getItem(0), run.getItem(1)
    valid = first.isNotNull() & last.isNotNull() & (first <= last) & (last - first < MAX_RUN)
    return F.when(valid, F.sequence(first, last)).otherwise(F.array().cast("array<bigint>"))


def share_records(events: DataFrame) -> DataFrame:
    """The share records of the ordered events, their fields flattened: ``PARTITION``, ``seq``, ``ts_ms``,
    ``event``, ``member_id``, ``cause`` and the ``share`` struct's fields but ``topic`` and ``partition``."""
    own = [f"share.{name}" for name in ("ranges", "offsets", "records", "redelivered", "lock_duration_ms")]
    own += ["share.accepted", "share.rejected", "share.delivery_count"]
    return events.where(F.col("share").isNotNull()).select(
        *GROUP_RUN, "share.topic", "share.partition", "seq", "ts_ms", "event", "member_id", "cause", *own
    )


def deliveries(records: DataFrame) -> DataFrame:
    """One row per delivery (``share_records``' rows in): ``PARTITION``, ``offset``, ``delivery_count``,
    ``member_id``, ``acquired_seq``, ``acquired_ms``, ``end``, ``end_seq``, ``ended_ms``, ``in_flight_ms`` (null
    while open) and ``redelivery_cause`` (null for a first delivery)."""
    acquired = (
        records.where(is_event(RECORDS_ACQUIRED))
        .select(*PARTITION, "seq", "ts_ms", "member_id", F.explode("ranges").alias("range"))
        .select(
            *PARTITION, "seq", "ts_ms", "member_id",
            F.explode(_offsets(F.col("range"))).alias("offset"),
            F.col("range").getItem(2).cast("int").alias("delivery_count"),
            F.lit(None).cast("string").alias("end"),
            F.lit(True).alias("acquisition"),
        )
    )
    ended = (
        records.where(is_event(RECORDS_RELEASED) | is_event(RECORDS_ARCHIVED))
        .select(
            *PARTITION, "seq", "ts_ms", "member_id",
            F.when(is_event(RECORDS_ARCHIVED), F.lit(ARCHIVED)).otherwise(F.col("cause")).alias("end"),
            F.explode("offsets").alias("run"),
        )
        .select(
            *PARTITION, "seq", "ts_ms", "member_id",
            F.explode(_offsets(F.col("run"))).alias("offset"),
            F.lit(None).cast("int").alias("delivery_count"),
            F.coalesce(F.col("end"), F.lit(UNKNOWN)).alias("end"),
            F.lit(False).alias("acquisition"),
        )
    )
    # Each offset's history: acquisitions, each followed by the release or archive that ended it, if any.
    history = Window.partitionBy(*PARTITION, "offset").orderBy("seq")
    following = F.lead(F.struct(F.col("end"), F.col("seq"), F.col("ts_ms"))).over(history)
    previous_end = F.lag("end").over(history)
    by_offset = (
        acquired.unionByName(ended)
        .select("*", following.alias("next"), previous_end.alias("previous_end"))
        .where(F.col("acquisition"))
        .select(
            *PARTITION, "offset", "delivery_count", "member_id",
            F.col("seq").alias("acquired_seq"), F.col("ts_ms").alias("acquired_ms"),
            F.col("next.end").alias("end"), F.col("next.seq").alias("end_seq"), F.col("next.ts_ms").alias("ended_ms"),
            F.when(F.col("delivery_count") > 1, F.coalesce(F.col("previous_end"), F.lit(UNKNOWN)))
            .alias("redelivery_cause"),
        )
    )
    return _acknowledged(records, by_offset)


def _acknowledged(records: DataFrame, by_offset: DataFrame) -> DataFrame:
    """The deliveries no release or archive ended, ended by their member's acknowledgements in order (the
    module's docstring); the others as they are."""
    holder = [*PARTITION, "member_id"]
    waiting = by_offset.where(F.col("end").isNull()).select(
        *(c for c in by_offset.columns if c not in ("end", "end_seq", "ended_ms")),
        F.row_number().over(Window.partitionBy(*holder).orderBy("acquired_seq", "offset")).alias("k"),
    )
    counted = F.coalesce(F.col("accepted"), F.lit(0)) + F.coalesce(F.col("rejected"), F.lit(0))
    upto = Window.partitionBy(*holder).orderBy("seq").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    acks = (
        records.where(is_event(RECORDS_ACKNOWLEDGED))
        .select(*holder, "seq", "ts_ms", counted.alias("n"))
        .select("*", F.sum("n").over(upto).alias("hi"))
        .where(F.col("n") > 0)
        .select(
            *(F.col(c).alias(f"ack_{c}") for c in holder),
            F.col("seq").alias("ack_seq"), F.col("ts_ms").alias("ack_ms"),
            (F.col("hi") - F.col("n")).alias("lo"), "hi",
        )
    )
    matches = [waiting[c] == acks[f"ack_{c}"] for c in holder]
    condition = matches[0]
    for match in matches[1:]:
        condition = condition & match
    condition = condition & (waiting["k"] > acks["lo"]) & (waiting["k"] <= acks["hi"])
    acknowledged = waiting.join(acks, condition, "left").select(
        *(c for c in waiting.columns if c != "k"),
        F.when(F.col("ack_seq").isNotNull(), F.lit(ACKNOWLEDGED)).otherwise(F.lit(OPEN)).alias("end"),
        F.col("ack_seq").alias("end_seq"),
        F.col("ack_ms").alias("ended_ms"),
    )
    ended = by_offset.where(F.col("end").isNotNull())
    both = ended.unionByName(acknowledged)
    return both.select("*", (F.col("ended_ms") - F.col("acquired_ms")).alias("in_flight_ms"))


def deliveries_table(records: DataFrame, delivered: DataFrame) -> DataFrame:
    """``share_deliveries``: per share-partition of a (group, run), what was delivered and how deliveries ended
    (docs/analytics.md); ``records`` as ``share_records`` gives them, ``delivered`` as ``deliveries``."""
    dc = F.col("delivery_count")
    cause = F.col("redelivery_cause")
    of_deliveries = delivered.groupBy(*PARTITION).agg(
        F.countDistinct("member_id").alias("members"),
        F.count("*").alias("deliveries"),
        F.countDistinct("offset").alias("records"),
        F.sum(as_int(dc > 1)).alias("redeliveries"),
        *(F.sum(as_int(cause == c)).alias(f"redeliveries_{c}") for c in (*RELEASE_CAUSES, UNKNOWN)),
        F.max(dc).alias("max_acquired_count"),
        F.sum(as_int(F.col("end") == ACKNOWLEDGED)).alias("acknowledged"),
        F.sum(as_int(F.col("end") == OPEN)).alias("in_flight_at_end"),
    )
    released = is_event(RECORDS_RELEASED)
    archived = is_event(RECORDS_ARCHIVED)
    of_records = records.groupBy(*PARTITION).agg(
        F.sum(as_int(is_event(RECORDS_ACQUIRED))).alias("acquisitions"),
        *(
            F.sum(F.when(released & (F.col("cause") == c), F.col("records"))).alias(f"released_{c}")
            for c in RELEASE_CAUSES
        ),
        F.sum(as_int(released & (F.col("cause") == "lock_expired"))).alias("lock_expiries"),
        F.sum(F.when(archived, F.col("records"))).alias("archived"),
        F.max(F.when(archived, F.col("delivery_count"))).alias("max_archived_count"),
        F.sum("accepted").alias("accepted"),
        F.sum("rejected").alias("rejected"),
        F.min("ts_ms").alias("first_ms"),
        F.max("ts_ms").alias("last_ms"),
    )
    counts = [
        "members", "deliveries", "records", "redeliveries", *(f"redeliveries_{c}" for c in (*RELEASE_CAUSES, UNKNOWN)),
        "acknowledged", "in_flight_at_end", "acquisitions", *(f"released_{c}" for c in RELEASE_CAUSES),
        "lock_expiries", "archived", "accepted", "rejected",
    ]  # fmt: skip
    both = of_records.join(of_deliveries, list(PARTITION), "full").select(
        "*", F.greatest("max_acquired_count", "max_archived_count").alias("max_delivery_count")
    )
    return typed(both.fillna(0, subset=counts), SHARE_DELIVERIES)


def in_flight_table(delivered: DataFrame) -> DataFrame:
    """``share_in_flight``: how long deliveries were in flight, by how they ended (``ALL``: every one that ended),
    per share-partition of a (group, run) and for the whole (group, run) (``topic`` and ``partition`` null)."""
    ends = F.when(F.col("end") == OPEN, F.array(F.col("end"))).otherwise(F.array(F.col("end"), F.lit(ALL)))
    rows = delivered.select(*PARTITION, "in_flight_ms", F.explode(ends).alias("end"))
    stats = rows.groupingSets([[*PARTITION, "end"], [*GROUP_RUN, "end"]], *PARTITION, "end").agg(
        F.count("*").alias("deliveries"), *percentiles("in_flight_ms", F.col("in_flight_ms"))
    )
    return typed(stats, SHARE_IN_FLIGHT)
