"""``group-broker analyze``: the command line of the analytics job (``broker/analytics/job.py``).

``add_arguments`` and ``run`` are what ``group-broker`` wires; ``job.main`` uses them too, for ``spark-submit``.
pyspark is imported only when the job runs, so ``group-broker --help`` works without it.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import sys
from typing import Any

PROGRAM = "group-broker analyze"
DESCRIPTION = (
    "Analyse the broker's JSON-lines event logs (--event-log; format: docs/events.md) on Spark: rebalances, "
    "membership intervals, partition ownership and a summary, as Parquet tables and summary.json under --out "
    "(docs/analytics.md)."
)
MISSING_PYSPARK = "pyspark is not installed: pip install 'kafka-group-broker[analytics]'"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = parser.description or DESCRIPTION
    parser.add_argument(
        "events", nargs="+", metavar="EVENTS",
        help="event logs: files, directories, globs ('events.jsonl*') or any URI Spark reads (hdfs://, s3a://)",
    )  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (a path or a URI)")
    parser.add_argument(
        "--master", default=None,
        help="Spark master URL (default local[*]; under spark-submit, spark-submit's --master)",
    )  # fmt: skip
    parser.add_argument(
        "--conf", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
        help="a Spark setting, e.g. --conf spark.driver.memory=8g (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--shuffle-partitions", type=_positive, default=None, metavar="N",
        help="spark.sql.shuffle.partitions (default: one per 32 MiB of input, at least one per core)",
    )  # fmt: skip
    parser.add_argument(
        "--report", action="store_true", help="also render the HTML/PNG report into --out (broker.analytics.report)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _error(message: str) -> None:
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)


def missing_local_inputs(patterns: list[str]) -> list[str]:
    """Local paths and globs that match nothing, found without starting Spark (URIs are left to Spark).

    Patterns with Hadoop-only glob syntax (``{a,b}``) are left to Spark too.
    """
    missing = []
    for pattern in patterns:
        if "://" in pattern or pattern.startswith("file:") or "{" in pattern:
            continue
        if not glob.glob(pattern):
            missing.append(pattern)
    return missing


def run(args: argparse.Namespace) -> int:
    """0: the tables were written; 1: the job or the report failed; 2: bad input paths or no pyspark."""
    missing = missing_local_inputs(args.events)
    if missing:
        _error(f"nothing matches {', '.join(missing)}")
        return 2
    try:
        from broker.analytics import job, read
    except ImportError as error:
        if (error.name or "").split(".")[0] in ("pyspark", "py4j"):
            _error(MISSING_PYSPARK)
            return 2
        raise
    progress = None if args.quiet else job.stderr_progress()
    conf = dict(args.conf)
    try:
        job.run(
            args.events, args.out, master=args.master, conf=conf, progress=progress,
            shuffle_partitions=args.shuffle_partitions,
        )  # fmt: skip
    except read.InputError as error:
        _error(str(error))
        return 2
    except Exception as error:  # Spark's own errors (no Java, a bad master URL, ...): one line, not a JVM trace
        _error(f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}")
        return 1
    if args.report:
        return render_report(args.out)
    return 0


def render_report(out: str) -> int:
    """The hook for the report: ``broker.analytics.report.render(out_dir)``, when that module exists."""
    try:
        report: Any = importlib.import_module("broker.analytics.report")
    except ImportError as error:
        _error(f"--report: the report module is not available ({error})")
        return 1
    render = getattr(report, "render", None)
    if not callable(render):
        _error("--report: broker.analytics.report has no render(out_dir)")
        return 1
    try:
        page = render(out)
    except Exception as error:  # the tables are written; say why the page is not
        _error(f"--report: {type(error).__name__}: {error}")
        return 1
    print(f"{PROGRAM}: report: {page if page is not None else out}", file=sys.stderr)
    return 0
