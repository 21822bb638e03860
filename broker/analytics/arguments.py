"""The analytics job's command line: its flags and the checks made before Spark starts.

Shared by its two entries, ``group-broker analyze`` (``cli.py``) and ``spark-submit broker/analytics/job.py``
(``job.main``). No pyspark here: ``group-broker --help`` and the input checks must work without it.
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Sequence

PROGRAM = "group-broker analyze"
DESCRIPTION = (
    "Analyse the broker's JSON-lines event logs (--event-log; format: docs/events.md) on Spark: rebalances, "
    "membership intervals, partition ownership and a summary, as Parquet tables and summary.json under --out "
    "(docs/analytics.md)."
)


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


def error(message: str) -> None:
    """One line on stderr, in argparse's style."""
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)


def missing_local_inputs(patterns: Sequence[str]) -> list[str]:
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


def inputs_exist(patterns: Sequence[str]) -> bool:
    """False, after saying which on stderr, when a local path or glob matches nothing: exit status 2."""
    missing = missing_local_inputs(patterns)
    if missing:
        error(f"nothing matches {', '.join(missing)}")
    return not missing
