"""What every table module uses: the (group, run) partitioning key and a few column expressions."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

#: The partitioning of every window: each run's history is its own (``restarts.py`` ties a run on a data directory
#: to the one before it only where the broker's own records say how).
GROUP_RUN = ("group_id", "run_id")


def is_event(name: str) -> Column:
    return F.col("event") == name


def as_int(condition: Column) -> Column:
    return condition.cast("int")


def size_or_null(column: str) -> Column:
    """The number of elements, null for null (what ``size`` returns for null depends on ANSI settings)."""
    return F.when(F.col(column).isNotNull(), F.size(column))


def typed(frame: DataFrame, schema: StructType) -> DataFrame:
    """``frame`` as a table is written: ``schema``'s columns, in its order, cast to its types."""
    return frame.select(*(F.col(f.name).cast(f.dataType.simpleString()).alias(f.name) for f in schema.fields))


def partition_pairs(topics: Column) -> Column:
    """A ``topic -> partitions`` map as an array of (``topic``, ``partition``) structs; empty for null (a null
    map or partition list has no partition, as ``explode`` would give none)."""
    no_topics = F.create_map().cast("map<string,array<int>>")
    no_partitions = F.array().cast("array<int>")
    return F.flatten(
        F.transform(
            F.map_entries(F.coalesce(topics, no_topics)),
            lambda entry: F.transform(
                F.coalesce(entry["value"], no_partitions),
                lambda partition: F.struct(entry["key"].alias("topic"), partition.alias("partition")),
            ),
        )
    )


def island_firsts(
    rows: DataFrame, window: WindowSpec, opens: Column, closes: Column, end: str, alias: str
) -> DataFrame:
    """Gaps and islands without a group-by (issue 17): ``rows`` in ``window``'s order form islands, ``opens`` true on
    each island's first row and ``closes`` on its last. One row per island is kept, its first, with ``alias`` the
    ``end`` column of its last row (the rows between are dropped first, so the last follows the first)."""
    ends = rows.select("*", opens.alias("opens"), closes.alias("closes")).where(F.col("opens") | F.col("closes"))
    last_end = F.when(F.col("closes"), F.col(end)).otherwise(F.lead(end).over(window))
    return ends.select("*", last_end.alias(alias)).where(F.col("opens"))
