"""The job's input: event-log lines, each parsed with the explicit schema and classified, and the input report.

Lines are read as text, so that a line Spark cannot parse is still a row: it is counted under its kind, and the
first few become examples (``file:line: text``), instead of vanishing as they would with ``spark.read.json``.
The line number is not something Spark reads: it is the row's place in its file, computed from the file block it
came from (``_metadata``) and ``monotonically_increasing_id`` (rows of one block are consecutive ids), with a
small aggregate over the blocks instead of a sort of every line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker.analytics.schema import CORRUPT, INPUT_KINDS, PARSED_SCHEMA
from broker.events.names import (
    BROKER_EVENTS,
    COMMON,
    DISTURBANCE_EVENTS,
    EVENTS,
    FORMAT_VERSION,
    GROUP_EPOCH_BUMPED,
    MEMBER_RECONCILED,
    RECORDS_ACKNOWLEDGED,
    RECORDS_ACQUIRED,
    RECORDS_ARCHIVED,
    RECORDS_RELEASED,
    REQUIRED,
    SHARE_EVENTS,
    TARGET_ASSIGNMENT_COMPUTED,
)

#: The kind of a line the analysis uses; every other kind is one of the input report's.
OK = "parsed"
#: The column with a line's kind (``kind`` is a field of referee_violation).
KIND = "line_kind"
EXAMPLES = 5
EXAMPLE_CHARS = 200
#: The oldest format version read. Version 2 only added events and fields (KIP-848 consumer groups,
#: docs/events.md), so a version-1 log reads as it always did, next to version-2 ones.
OLDEST_VERSION = 1
#: The events version 2 added: in a version-1 record they are not that format's, so ``unknown_event``. (The
#: transaction events were added within version 2 as well, but version-1 logs were read with them all along.)
V2_EVENTS = frozenset(
    {
        GROUP_EPOCH_BUMPED,
        TARGET_ASSIGNMENT_COMPUTED,
        MEMBER_RECONCILED,
        *DISTURBANCE_EVENTS,
        *BROKER_EVENTS,
        *SHARE_EVENTS,
    }
)
#: What the share tables (``tables/share.py``, issue 28) need of a share group's records, beyond the format's
#: ``REQUIRED`` (which asks nothing of them: they place no rebalance window): without it a record is
#: ``missing_field``, not a silent hole in the tables. A release's ``member_id`` may be null (no holder).
SHARE_REQUIRED: dict[str, tuple[str, ...]] = {
    RECORDS_ACQUIRED: ("member_id", "topic", "partition", "ranges"),
    RECORDS_ACKNOWLEDGED: ("member_id", "topic", "partition"),
    RECORDS_RELEASED: ("topic", "partition", "cause", "offsets"),
    RECORDS_ARCHIVED: ("topic", "partition", "offsets"),
}


class InputError(Exception):
    """The job's inputs cannot be read at all (nothing matches a path)."""


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int


def find_inputs(spark: SparkSession, patterns: Sequence[str]) -> list[InputFile]:
    """Expand paths, globs and URIs as Spark will read them (Hadoop's FileSystem), with their sizes.

    Every pattern must match something: a typo would otherwise give a quietly smaller analysis.
    """
    if not patterns:
        raise InputError("no event logs given")
    jvm: Any = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    found: list[InputFile] = []
    missing = []
    for pattern in patterns:
        path = jvm.org.apache.hadoop.fs.Path(pattern)
        fs = path.getFileSystem(hadoop_conf)
        statuses = fs.globStatus(path)
        if not statuses:
            missing.append(pattern)
            continue
        for status in statuses:
            size = status.getLen() if status.isFile() else fs.getContentSummary(status.getPath()).getLength()
            found.append(InputFile(str(status.getPath().toString()), int(size)))
    if missing:
        raise InputError(f"nothing matches {', '.join(missing)}")
    return found


def read_lines(spark: SparkSession, paths: Iterable[str]) -> DataFrame:
    """Every line: ``file``, ``block`` (the split it was read from), ``rid`` (its row id) and ``text``."""
    return spark.read.text(list(paths)).select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("rid"),
        F.col("value").alias("text"),
    )


def _missing(fields: Iterable[str], record: str = "r") -> Column:
    """True when any of ``fields`` is null."""
    checks = [F.col(f"{record}.`{name}`").isNull() for name in fields]
    result = checks[0]
    for check in checks[1:]:
        result = result | check
    return result


def classify(lines: DataFrame) -> DataFrame:
    """Parse each line with the schema and name its kind: ``parsed`` or one of the input report's kinds.

    Versions ``OLDEST_VERSION`` to ``FORMAT_VERSION`` are read; a record of an event its version did not have is
    an ``unknown_event``.

    Columns: ``file``, ``block``, ``rid``, ``line_kind``, ``text`` (the line's first 200 characters, kept for lines
    that are not ``parsed``: the examples), and every field of ``PARSED_SCHEMA`` (the event schema less the strings
    nothing reads), flattened.
    """
    record = F.from_json("text", PARSED_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    parsed = lines.withColumn("r", record)
    version = F.col("r.v")
    known = F.col("r.event").isin(sorted(EVENTS)) & ~((version < 2) & F.col("r.event").isin(sorted(V2_EVENTS)))
    # A field's required-ness depends on the event: one condition per event that has required fields.
    required_missing = F.lit(False)
    for event, names in {**REQUIRED, **SHARE_REQUIRED}.items():
        required_missing = required_missing | ((F.col("r.event") == event) & _missing(names))
    kind = (
        F.when(F.col("r").isNull(), "malformed")
        .when(
            F.col(f"r.{CORRUPT}").isNotNull(),
            # Spark still reads what it can of a line that does not fit the schema: a newer version may change
            # a field's type, and a broker may add an event within a version whose fields collide with ours.
            # Neither is garbage.
            F.when(version > FORMAT_VERSION, "newer_version")
            .when(
                version.between(OLDEST_VERSION, FORMAT_VERSION) & F.col("r.event").isNotNull() & ~known,
                "unknown_event",
            )
            .otherwise("malformed"),
        )
        .when(version.isNull() | (version < OLDEST_VERSION), "unknown_version")
        .when(version > FORMAT_VERSION, "newer_version")
        .when(_missing(COMMON), "missing_field")
        .when(~known, "unknown_event")
        .when(required_missing, "missing_field")
        .otherwise(OK)
    )
    fields = [F.col(f"r.`{field.name}`").alias(field.name) for field in PARSED_SCHEMA.fields if field.name != CORRUPT]
    return parsed.withColumn(KIND, kind).select(
        "file",
        "block",
        "rid",
        KIND,
        # Only the lines the report may quote keep their text: the parsed ones are most of the cached data.
        F.when(F.col(KIND) != OK, F.substring("text", 1, EXAMPLE_CHARS)).alias("text"),
        *fields,
    )


def kind_counts() -> list[Column]:
    """Aggregates for ``DataFrame.observe``: the lines of each kind ``classify`` gives, named by the kind.

    Observed on the way into the events' shuffle (issue 17): the counts come with the first pass over the input
    instead of a pass of their own over a cached copy of every parsed field.
    """
    kinds = [kind for kind in INPUT_KINDS if kind not in ("lines", "duplicate")]
    return [F.coalesce(F.sum((F.col(KIND) == kind).cast("long")), F.lit(0)).alias(kind) for kind in kinds]


def block_offsets(classified: DataFrame) -> DataFrame:
    """Per (file, block): the row id of its first line and how many lines of the file come before it."""
    blocks = classified.groupBy("file", "block").agg(F.min("rid").alias("first_rid"), F.count("*").alias("lines"))
    earlier = Window.partitionBy("file").orderBy("block").rowsBetween(Window.unboundedPreceding, -1)
    return blocks.select(
        "file", "block", "first_rid", F.coalesce(F.sum("lines").over(earlier), F.lit(0)).alias("lines_before")
    )


def _display_path(file: Column) -> Column:
    """``file:///tmp/x`` as ``/tmp/x``: local paths are what people type; other URIs stay whole."""
    return F.regexp_replace(file, r"^file:(//)?", "")


def examples(bad: DataFrame, offsets: DataFrame) -> DataFrame:
    """Up to five examples per kind, the first ones in file and line order: ``kind``, ``examples``.

    ``bad`` has ``line_kind``, ``file``, ``block``, ``rid`` and ``text``.
    """
    first = Window.partitionBy(KIND).orderBy("file", "block", "rid")
    chosen = bad.withColumn("n", F.row_number().over(first)).where(F.col("n") <= EXAMPLES)
    located = chosen.join(F.broadcast(offsets), ["file", "block"]).select(
        F.col(KIND).alias("kind"),
        "n",
        F.concat(
            _display_path(F.col("file")),
            F.lit(":"),
            (F.col("lines_before") + F.col("rid") - F.col("first_rid") + 1).cast("string"),
            F.lit(": "),
            F.coalesce(F.col("text"), F.lit("")),
        ).alias("example"),
    )
    return located.groupBy("kind").agg(
        F.transform(F.sort_array(F.collect_list(F.struct("n", "example"))), lambda s: s["example"]).alias("examples")
    )


def input_report(counts: dict[str, int], found: dict[str, list[str]]) -> list[tuple[str, int, list[str]]]:
    """The input table's rows, every kind listed (zero counts too), ``lines`` first."""
    total = sum(counts.values())
    rows: list[tuple[str, int, list[str]]] = [("lines", total, [])]
    rows += [(kind, counts.get(kind, 0), found.get(kind, [])) for kind in INPUT_KINDS if kind != "lines"]
    return rows
