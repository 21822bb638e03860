"""The analytics job: event logs in, Parquet tables and ``summary.json`` out (docs/analytics.md).

Run it as ``group-broker analyze EVENTS... --out DIR`` or, on a cluster, as
``spark-submit --py-files broker.zip broker/analytics/job.py EVENTS... --out DIR`` (the ``broker`` package must be
importable by the driver: installed, or shipped with ``--py-files``). Without ``--master`` and outside
``spark-submit`` it runs in local mode on every core.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from broker.analytics import TABLES, read, tables
from broker.analytics.schema import INPUT, INPUT_KINDS, VERSION

PROGRAM = "group-broker analyze"
DEFAULT_MASTER = "local[*]"
#: Input bytes per shuffle partition: windows sort a partition's events in one task, so a few tens of MiB each.
BYTES_PER_PARTITION = 32 * 1024 * 1024
MAX_PARTITIONS = 2000
#: Local mode runs everything in the driver's JVM; pyspark's default (1g) spills early. Only applied when the
#: job starts that JVM itself (not under spark-submit) and nobody set it: at least this, more for larger input.
LOCAL_DRIVER_MEMORY = "2g"
GIB = 1024**3
STATUS_EVERY_S = 5.0

Progress = Callable[[str], None]


def stderr_progress() -> Progress:
    """Progress lines on stderr, each with the seconds since the job started."""
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"{PROGRAM} [{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def _quiet(_message: str) -> None:
    return None


@dataclass
class Result:
    """What a run wrote: the output directory, row counts per table, the input report and the overall summary."""

    out: str
    rows: dict[str, int] = field(default_factory=dict)
    input: list[dict[str, Any]] = field(default_factory=list)
    overall: dict[str, Any] = field(default_factory=dict)
    shuffle_partitions: int = 0
    seconds: float = 0.0


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_driver_memory(inputs: Sequence[str]) -> str:
    """Twice the local input, within [2g, half of this machine's memory]: the 10M-event benchmark (4.4 GB of
    JSON) ran out of heap parsing at 4g and finished at 8g. Inputs that are not local files count nothing."""
    total = 0
    for pattern in inputs:
        if "://" in pattern and not pattern.startswith("file:"):
            continue
        for path in glob.glob(pattern.removeprefix("file://").removeprefix("file:")):
            total += sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) if os.path.isdir(path) \
                else os.path.getsize(path)
    try:
        half_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        half_ram = 2 * GIB
    return f"{max(2, min(math.ceil(2 * total / GIB), half_ram // GIB))}g"


def build_session(
    master: str | None = None, conf: Mapping[str, str] | None = None, driver_memory: str = LOCAL_DRIVER_MEMORY
) -> SparkSession:
    """A session with local defaults, unless spark-submit or ``master``/``conf`` say otherwise."""
    conf = dict(conf or {})
    builder = SparkSession.builder.appName(PROGRAM)
    submitted = under_spark_submit()
    if master is not None:
        builder = builder.master(master)
    elif not submitted and "spark.master" not in conf:
        builder = builder.master(DEFAULT_MASTER)
    defaults = {
        "spark.ui.showConsoleProgress": "false",  # the job prints its own progress lines
        "spark.sql.session.timeZone": "UTC",
    }
    if not submitted:
        defaults["spark.driver.memory"] = driver_memory
    for key, value in {**defaults, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "WARN"))
    return spark


def shuffle_partitions_for(total_bytes: int, parallelism: int) -> int:
    """Enough partitions that each holds ~32 MiB of input, at least one per core (AQE merges the small ones)."""
    wanted = math.ceil(total_bytes / BYTES_PER_PARTITION)
    return max(1, min(MAX_PARTITIONS, max(wanted, parallelism)))


class StatusReporter:
    """Reports the running Spark stages every few seconds while a step takes long, from a daemon thread."""

    def __init__(self, spark: SparkSession, progress: Progress, every_s: float = STATUS_EVERY_S) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.progress = progress
        self.every_s = every_s
        self.step = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="analyze-status", daemon=True)

    def __enter__(self) -> StatusReporter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self.every_s)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                stages = [self.tracker.getStageInfo(s) for s in self.tracker.getActiveStageIds()]
            except Exception:  # the JVM is going away at the end of a run: nothing left to report
                return
            running = [s for s in stages if s is not None]
            if running:
                parts = ", ".join(f"stage {s.stageId} {s.numCompletedTasks}/{s.numTasks} tasks" for s in running)
                self.progress(f"  ... {self.step}: {parts}")

    def say(self, message: str) -> None:
        """Pass a progress line on, remembering it as the step the stage reports belong to."""
        if not message.startswith(" "):
            self.step = message.split(";")[0]
        self.progress(message)


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
    """Analyse ``inputs`` (paths, globs, URIs) into ``out``; ``spark``: use this session (tests) as it is."""
    say = progress or _quiet
    started = time.monotonic()
    conf = dict(conf or {})
    if spark is None:
        memory = local_driver_memory(inputs)
        where = master or ("spark-submit" if under_spark_submit() else DEFAULT_MASTER)
        say(f"starting Spark ({where}, driver memory {conf.get('spark.driver.memory', memory)})")
        spark = build_session(master, conf, memory)
    with StatusReporter(spark, say) as status:
        result = _analyse(spark, inputs, out, conf, status.say, shuffle_partitions)
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
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    say(f"reading {len(files)} file(s), {total / 1024 / 1024:.1f} MiB ({partitions} shuffle partitions)")
    result = Result(out=out, shuffle_partitions=partitions)

    classified = read.classify(read.read_lines(spark, [f.path for f in files]))
    classified.persist(StorageLevel.MEMORY_AND_DISK)
    counts = {row[read.KIND]: int(row["count"]) for row in classified.groupBy(read.KIND).count().collect()}
    say(f"{sum(counts.values())} lines, {counts.get(read.OK, 0)} parsed")
    say("ordering the events by group and run")
    built = tables.build(classified)
    events = built.events.events.persist(StorageLevel.MEMORY_AND_DISK)
    kept = events.count()
    duplicates = counts.get(read.OK, 0) - kept
    counts[read.OK] = kept
    if duplicates:
        counts["duplicate"] = duplicates

    bad = classified.where(F.col(read.KIND) != read.OK).select(read.KIND, "file", "block", "rid", "text")
    if duplicates:
        bad = bad.unionByName(built.events.duplicates)
    found: dict[str, list[str]] = {}
    if kept != sum(counts.values()):
        offsets = read.block_offsets(classified)
        found = {row["kind"]: list(row["examples"]) for row in read.examples(bad, offsets).collect()}
    report = read.input_report(counts, found)
    result.input = [{"kind": kind, "count": count, "examples": examples} for kind, count, examples in report]
    for kind, count, examples in report:
        if kind not in ("lines", read.OK) and count:
            say(f"  {count} {kind} line(s), e.g. {examples[0] if examples else '-'}")

    members = built.members.persist(StorageLevel.MEMORY_AND_DISK)
    ownership = built.ownership
    ownership.intervals = ownership.intervals.persist(StorageLevel.MEMORY_AND_DISK)
    outputs: dict[str, DataFrame] = {
        "input": spark.createDataFrame(report, INPUT),
        "members": tables.members_output(members),
        "ownership": tables.ownership_output(ownership),
        "rebalances": built.rebalances,
    }
    for name in ("input", "members", "ownership", "rebalances"):
        say(f"writing {name}")
        result.rows[name] = _write(outputs[name], _join(out, name))
    classified.unpersist()
    events.unpersist()
    members.unpersist()
    ownership.intervals.unpersist()
    # The summary reads the tables back from Parquet: nothing left to keep in memory, and a short plan.
    say("writing summary")
    summary = tables.summary_table(
        spark.read.parquet(_join(out, "rebalances")), spark.read.parquet(_join(out, "members"))
    )
    result.rows["summary"] = _write(summary, _join(out, "summary"))

    overall = spark.read.parquet(_join(out, "summary")).where(F.col("scope") == "all").collect()
    result.overall = overall[0].asDict(recursive=True) if overall else {}
    assert set(result.rows) == set(TABLES)
    _write_summary_json(spark, out, inputs, result)
    for name in TABLES:
        say(f"  {name}: {result.rows[name]} rows")
    return result


def _write(frame: DataFrame, path: str) -> int:
    """Write a table as Parquet (replacing an earlier one); its row count, observed while writing."""
    rows = Observation("rows")
    frame.observe(rows, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(path)
    return int(rows.get["rows"])


def _join(out: str, name: str) -> str:
    return out.rstrip("/") + "/" + name


def summary_document(inputs: Sequence[str], result: Result) -> dict[str, Any]:
    return {
        "format_version": VERSION,
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


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit broker/analytics/job.py EVENTS... --out DIR`` and ``python -m broker.analytics.job``."""
    from broker.analytics import cli

    parser = argparse.ArgumentParser(prog="job.py", description=cli.DESCRIPTION)
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
