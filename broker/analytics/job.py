"""The analytics job: event logs in, Parquet tables and ``summary.json`` out (docs/analytics.md).

Run it as ``group-broker analyze EVENTS... --out DIR`` or, on a cluster, as
``spark-submit --py-files broker.zip broker/analytics/job.py EVENTS... --out DIR`` (the ``broker`` package must be
importable by the driver: installed, or shipped with ``--py-files``). Without ``--master`` and outside
``spark-submit`` it runs in local mode on every core. ``run`` is the job; ``execute`` is the command around it
(exit status, one-line errors, ``--report``); ``main`` is the script's entry.
"""

from __future__ import annotations

import argparse
import atexit
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import SparkContext, StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from broker.analytics import TABLES, read
from broker.analytics import archive as class_archive
from broker.analytics.arguments import (
    DESCRIPTION,
    PROGRAM,
    add_arguments,
    error,
    inputs_exist,
    no_events,
    surely_no_events,
)
from broker.analytics.progress import Progress, StatusReporter, quiet, stderr_progress
from broker.analytics.schema import INPUT, INPUT_KINDS
from broker.analytics.session import (
    DEFAULT_MASTER,
    SMALL_INPUT_BYTES,
    build_session,
    local_driver_memory,
    local_input_bytes,
    shuffle_partitions_for,
    small_input_settings,
    under_spark_submit,
)
from broker.analytics.tables import build, sequence_events
from broker.analytics.tables.cluster import broker_disturbances_table, described, progress_rows
from broker.analytics.tables.disturbances import caused, disturbances_table
from broker.analytics.tables.members import members_output
from broker.analytics.tables.ownership import ownership_output
from broker.analytics.tables.restarts import restart_disturbances, runs_table, stopped_members, stopped_ownership
from broker.analytics.tables.share import (
    deliveries,
    deliveries_table,
    in_flight_table,
    is_share_group,
    share_records,
)
from broker.analytics.tables.summary import summary_table
from broker.events.names import FORMAT_VERSION

#: Catalyst's constraint propagation (what each operator's output is known to satisfy, used to prune and infer
#: filters) grows with every alias of every condition above it: over ``read.classify``'s kind expression and the
#: windows' columns, PruneFilters alone took 10 s to optimise the events' plan, for any input size (issue 17). The
#: job's filters are all explicit; nothing it needs comes from inferred ones.
CONSTRAINTS = "spark.sql.constraintPropagation.enabled"
COALESCE = "spark.sql.adaptive.coalescePartitions.enabled"
#: The disturbances the progress lines name, with the rebalance each caused (the table has them all).
DISTURBANCES_SHOWN = 10


@dataclass
class Result:
    """What a run wrote: the output directory, row counts per table, the input report and the overall summary."""

    out: str
    rows: dict[str, int] = field(default_factory=dict)
    input: list[dict[str, Any]] = field(default_factory=list)
    overall: dict[str, Any] = field(default_factory=dict)
    shuffle_partitions: int = 0
    seconds: float = 0.0
    #: The class archive the JVM this run started maps or writes at exit (``archive.py``), if any.
    archive: class_archive.Archive | None = None


def run(
    inputs: Sequence[str],
    out: str,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    *,
    shuffle_partitions: int | None = None,
    spark: SparkSession | None = None,
) -> Result:
    """Analyse ``inputs`` (paths, globs, URIs) into ``out``; ``spark``: use this session (tests) as it is.

    A JVM this call starts (local mode, no ``spark.driver.extraJavaOptions`` in ``conf``) maps the class archive
    of ``archive.py``, or writes it when this process exits (the first run with this Java and pyspark)."""
    say = progress or quiet
    started = time.monotonic()
    conf = dict(conf or {})
    archive: class_archive.Archive | None = None
    if spark is None:
        memory = local_driver_memory(inputs)
        where = master or ("spark-submit" if under_spark_submit() else DEFAULT_MASTER)
        say(f"starting Spark ({where}, driver memory {conf.get('spark.driver.memory', memory)})")
        starts_jvm = SparkContext._gateway is None and not under_spark_submit()
        local = (master or conf.get("spark.master") or DEFAULT_MASTER).startswith("local")
        if starts_jvm and local and "spark.driver.extraJavaOptions" not in conf:
            archive = class_archive.plan()
        small = local_input_bytes(inputs) <= SMALL_INPUT_BYTES
        spark = build_session(master, conf, memory, small, archive.java_options() if archive else "")
        if archive is not None and archive.writing is not None:
            atexit.register(class_archive.keep, archive, say)
    with StatusReporter(spark, say) as status:
        result = _analyse(spark, inputs, out, conf, status.say, shuffle_partitions)
    result.archive = archive
    result.seconds = round(time.monotonic() - started, 3)
    say(f"done in {result.seconds:.1f}s: {out}")
    return result


def _analyse(
    spark: SparkSession,
    inputs: Sequence[str],
    out: str,
    conf: Mapping[str, str],
    say: Progress,
    shuffle_partitions: int | None,
) -> Result:
    files = read.find_inputs(spark, inputs)
    total = sum(f.size for f in files)
    if shuffle_partitions is None and "spark.sql.shuffle.partitions" not in conf:
        shuffle_partitions = shuffle_partitions_for(total, spark.sparkContext.defaultParallelism)
    if shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if CONSTRAINTS not in conf:
        spark.conf.set(CONSTRAINTS, "false")
    for key, value in small_input_settings(total, conf).items():
        spark.conf.set(key, value)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    say(f"reading {len(files)} file(s), {total / 1024 / 1024:.1f} MiB ({partitions} shuffle partitions)")
    result = Result(out=out, shuffle_partitions=partitions)

    # One pass over the input (issue 17): the lines are parsed, counted by kind (observed) and the parsed ones
    # shuffled into their (group, run) order in the same stage; nothing of the parsed input is cached.
    classified = read.classify(read.read_lines(spark, [f.path for f in files]))
    kinds = Observation("kinds")
    say("ordering the events by group and run")
    sequenced = sequence_events(classified.observe(kinds, *read.kind_counts()))
    kept_rows = Observation("events")
    events = _materialise(sequenced.events.observe(kept_rows, F.count(F.lit(1)).alias("rows")), conf)
    observed, kept_observed = _observed(kinds), _observed(kept_rows)
    if observed is None:  # no parsed line: the shuffle was empty and AQE dropped the plan that observed it
        observed = {row[read.KIND]: row["count"] for row in classified.groupBy(read.KIND).count().collect()}
    counts = {kind: int(count) for kind, count in observed.items()}
    lines = sum(counts.values())
    kept = int(kept_observed["rows"]) if kept_observed is not None else events.count()
    say(f"{lines} lines, {counts.get(read.OK, 0)} parsed")
    duplicates = counts.get(read.OK, 0) - kept
    counts[read.OK] = kept
    if duplicates:
        counts["duplicate"] = duplicates

    found: dict[str, list[str]] = {}
    if kept != lines:  # rare: a second pass over the input, for the first examples of each kind
        bad = classified.where(F.col(read.KIND) != read.OK).select(read.KIND, "file", "block", "rid", "text")
        if duplicates:
            bad = bad.unionByName(sequenced.duplicates)
        offsets = read.block_offsets(classified)
        found = {row["kind"]: list(row["examples"]) for row in read.examples(bad, offsets).collect()}
    report = read.input_report(counts, found)
    result.input = [{"kind": kind, "count": count, "examples": examples} for kind, count, examples in report]
    for kind, count, examples in report:
        if kind not in ("lines", read.OK) and count:
            say(f"  {count} {kind} line(s), e.g. {examples[0] if examples else '-'}")

    # A share group's records are not rebalances, memberships or partition ownership (their members share
    # partitions; KIP-932 has no revocation): they make the share tables only (issue 28).
    built = build(events.where(~is_share_group()))
    # The runs' broker_started and broker_stopped (issue 27): a few rows, kept apart from the events' plans.
    runs = runs_table(events).localCheckpoint(eager=True)
    members = built.members.persist(StorageLevel.MEMORY_AND_DISK)
    ownership = built.ownership
    ownership.intervals = ownership.intervals.persist(StorageLevel.MEMORY_AND_DISK)
    ownership.consumer = ownership.consumer.persist(StorageLevel.MEMORY_AND_DISK)
    outputs: dict[str, DataFrame] = {
        "input": spark.createDataFrame(report, INPUT),
        "members": stopped_members(members_output(members), runs),
        "ownership": stopped_ownership(ownership_output(ownership), runs),
        "rebalances": built.rebalances,
    }
    for name in ("input", "members", "ownership", "rebalances"):
        say(f"writing {name}")
        result.rows[name] = _write(outputs[name], _join(out, name))
    members.unpersist()
    built.episodes.unpersist()
    ownership.intervals.unpersist()
    ownership.consumer.unpersist()
    # The summary and the disturbances read the tables back from Parquet: nothing left to keep in memory, and
    # short plans. The disturbances come first: the summary counts the broker restarts among them.
    say("writing disturbances")
    written_rebalances = spark.read.parquet(_join(out, "rebalances"))
    written_members = spark.read.parquet(_join(out, "members"))
    disturbances = disturbances_table(events, written_rebalances, written_members).unionByName(
        restart_disturbances(runs, written_rebalances, written_members, spark.read.parquet(_join(out, "ownership")))
    )
    result.rows["disturbances"] = _write(disturbances, _join(out, "disturbances"))
    if result.rows["disturbances"]:  # what a chaos run asks first: which kill caused which rebalance
        written = spark.read.parquet(_join(out, "disturbances"))
        for row in written.orderBy("ts_ms", "run_id", "seq", "group_id").limit(DISTURBANCES_SHOWN).collect():
            say(f"  {row['group_id'] or '(every group)'}: {caused(row.asDict())}")
        if result.rows["disturbances"] > DISTURBANCES_SHOWN:
            say(f"  ... {result.rows['disturbances'] - DISTURBANCES_SHOWN} more in the disturbances table")
    say("writing broker_disturbances")  # node stops, starts and coordinator moves (issue 29)
    cluster = broker_disturbances_table(spark, events, written_members)
    result.rows["broker_disturbances"] = _write(cluster, _join(out, "broker_disturbances"))
    if result.rows["broker_disturbances"]:
        for pair in progress_rows(spark.read.parquet(_join(out, "broker_disturbances")), DISTURBANCES_SHOWN):
            say(f"  {pair['group_id']}: {described(pair)}")
    say("writing summary")
    summary = summary_table(written_rebalances, written_members, spark.read.parquet(_join(out, "disturbances")))
    result.rows["summary"] = _write(summary, _join(out, "summary"))
    # Share groups (issue 28): one row per delivery, kept while both of its tables are written.
    records = share_records(events)
    delivered = deliveries(records).persist(StorageLevel.MEMORY_AND_DISK)
    shared = {"share_deliveries": deliveries_table(records, delivered), "share_in_flight": in_flight_table(delivered)}
    for name, table in shared.items():
        say(f"writing {name}")
        result.rows[name] = _write(table, _join(out, name))
    delivered.unpersist()

    overall = spark.read.parquet(_join(out, "summary")).where(F.col("scope") == "all").collect()
    result.overall = overall[0].asDict(recursive=True) if overall else {}
    assert set(result.rows) == set(TABLES)
    _write_summary_json(spark, out, inputs, result)
    for name in TABLES:
        say(f"  {name}: {result.rows[name]} rows")
    return result


def _observed(observation: Observation) -> dict[str, Any] | None:
    """An observation's metrics, or None when the action ran without the observed operator: adaptive execution
    replaces a plan under an empty shuffle with an empty relation, and that plan's metrics with none."""
    try:
        return dict(observation.get)
    except Exception:  # pyspark fails to convert the empty row it is left with
        return None


def _materialise(frame: DataFrame, conf: Mapping[str, str]) -> DataFrame:
    """``frame`` computed once and kept (memory, then disk), as a plan of its own.

    A local checkpoint cuts the lineage: every table built on the events starts from this leaf, so planning them
    no longer re-analyses the parsing and the windows behind it (seconds per table, issue 17).

    Its partitions are the shuffle's, not fewer (unless ``conf`` sets the merging): every table's stages have as
    many tasks as the leaf has partitions, and adaptive execution merged the 1M-event benchmark's 13 into 3,
    which two cores ran as two tasks, then one (issue 17). The checkpoint stays under adaptive execution: without
    it the leaf's (group, run) partitioning is known to the plans built on it (under it, ``UnknownPartitioning``:
    each table shuffles the events again), but the rebalances then took 22 s instead of 12 s at 500,000 events
    and 51 s instead of 18 s at 1M (most likely their joins, with no shuffle left whose size adaptive execution
    could turn into a broadcast join; not verified).
    """
    if COALESCE in conf:
        return frame.localCheckpoint(eager=True)
    spark = frame.sparkSession
    before = spark.conf.get(COALESCE, None)
    spark.conf.set(COALESCE, "false")
    try:
        return frame.localCheckpoint(eager=True)
    finally:
        if before is None:
            spark.conf.unset(COALESCE)
        else:
            spark.conf.set(COALESCE, before)


def _write(frame: DataFrame, path: str) -> int:
    """Write a table as Parquet (replacing an earlier one); its row count, observed while writing."""
    rows = Observation("rows")
    frame.observe(rows, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(path)
    return int(rows.get["rows"])


def _join(out: str, name: str) -> str:
    return out.rstrip("/") + "/" + name


def summary_document(inputs: Sequence[str], result: Result) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "inputs": list(inputs),
        "input": result.input,
        "input_kinds": list(INPUT_KINDS),
        "overall": result.overall,
        "rows": result.rows,
        "shuffle_partitions": result.shuffle_partitions,
    }


def _write_summary_json(spark: SparkSession, out: str, inputs: Sequence[str], result: Result) -> None:
    text = json.dumps(summary_document(inputs, result), indent=2, default=str) + "\n"
    if "://" not in out or out.startswith("file:"):
        local = Path(out.removeprefix("file://").removeprefix("file:"))
        (local / "summary.json").write_text(text, encoding="utf-8")
        return
    # Any other URI (hdfs://, s3a://, ...): through Hadoop's FileSystem, like the Parquet tables.
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(_join(out, "summary.json"))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def execute(args: argparse.Namespace) -> int:
    """Run the job for a parsed command line (``arguments.add_arguments``), then the report if asked.

    0: the tables (and the report) were written; 1: the job or the report failed; 2: an input matches nothing,
    or no line of it was an event.
    """
    progress = None if args.quiet else stderr_progress()
    try:
        result = run(
            args.events, args.out, master=args.master, conf=dict(args.conf), progress=progress,
            shuffle_partitions=args.shuffle_partitions,
        )  # fmt: skip
    except read.InputError as failure:
        error(str(failure))
        return 2
    except Exception as failure:  # Spark's own errors (no Java, a bad master URL, ...): one line, not a JVM trace
        text = str(failure).strip()
        error(f"{type(failure).__name__}: {text.splitlines()[0] if text else ''}")
        return 1
    empty = no_events(result.input, list(args.events))  # as `group-broker analyze` (cli.py): nothing to analyse
    if empty is not None:
        error(empty)
        return 2
    if args.report:
        return render_report(args.out)
    return 0


def render_report(out: str) -> int:
    """``--report``: ``broker.analytics.report.render(out)``; matplotlib is imported only for it."""
    try:
        from broker.analytics import report
    except ImportError as failure:  # no matplotlib on this driver: the tables are there all the same
        error(f"--report: the report module is not available ({failure})")
        return 1
    try:
        page = report.render(out)
    except Exception as failure:  # the tables are written; say why the page is not
        error(f"--report: {type(failure).__name__}: {failure}")
        return 1
    print(f"{PROGRAM}: report: {page}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit broker/analytics/job.py EVENTS... --out DIR`` and ``python -m broker.analytics.job``."""
    parser = argparse.ArgumentParser(prog="job.py", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not inputs_exist(args.events):
        return 2
    empty = surely_no_events(args.events)  # as `group-broker analyze` (cli.py), before any table
    if empty is not None:
        error(empty)
        return 2
    return execute(args)


if __name__ == "__main__":
    sys.exit(main())
