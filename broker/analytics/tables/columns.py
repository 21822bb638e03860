"""What every table module uses: the (group, run) partitioning key and a few column expressions."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

#: The partitioning of every window: a broker keeps groups in memory, so no state crosses runs.
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
