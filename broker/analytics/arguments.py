"""The analytics job's command line: its flags and the checks made before Spark starts.

Shared by its two entries, ``group-broker analyze`` (``cli.py``) and ``spark-submit broker/analytics/job.py``
(``job.main``). No pyspark here: ``group-broker --help`` and the input checks must work without it.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from broker.analytics import sniff

PROGRAM = "group-broker analyze"
DESCRIPTION = (
    "Analyse the broker's JSON-lines event logs (--event-log; format: docs/events.md) on Spark: rebalances, "
    "membership intervals, partition ownership, a summary and the disturbances (kills, fault rules) with the "
    "rebalance each caused, as Parquet tables and summary.json under --out "
    "(docs/analytics.md)."
)
#: Spark 4 runs on Java 17 or newer (pyspark's own requirement; docs/analytics.md).
JAVA_MIN = 17
JAVA_HINT = "install a JDK 17 or newer (e.g. apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one"
#: What an event line looks like (docs/events.md) and where one comes from: the end of the message about an
#: input without any (issue 18: a README given by mistake made an empty report and exit 0).
EVENT_HELP = (
    "An event log has one JSON object per line, as `group-broker serve --event-log events.jsonl` writes it "
    '(docs/events.md), e.g. {"v":2,"seq":1,"ts_ms":1767225600000,"run_id":"3f9a0c1d2b4e","event":"group_created",'
    '"group_id":"orders",...}; `group-broker generate-events events.jsonl --events 10000` writes a synthetic one'
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


def java_version(text: str) -> int | None:
    """The major version in ``java -version``'s output: ``openjdk version "17.0.15"`` is 17, ``"1.8.0_292"`` 8."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def java_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why Spark cannot start its JVM here, or None: no Java found, or one older than ``JAVA_MIN``.

    Looked for as Spark's launcher (``bin/spark-class``) looks: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set,
    else ``java`` on PATH. Under spark-submit (``PYSPARK_GATEWAY_PORT`` set) the JVM is already running.
    """
    env = os.environ if environ is None else environ
    if env.get("PYSPARK_GATEWAY_PORT"):
        return None
    home = env.get("JAVA_HOME")
    if home:
        java = str(Path(home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            return f"JAVA_HOME is {home}, but {java} is not there: Spark needs Java {JAVA_MIN}+; {JAVA_HINT}"
    else:
        found = shutil.which("java", path=env.get("PATH", os.defpath))
        if found is None:
            return (
                f"Spark needs Java {JAVA_MIN} or newer, and there is no java here (JAVA_HOME is not set and no "
                f"java is on PATH): {JAVA_HINT}"
            )
        java = found
    try:
        ran = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, env=dict(env), check=False)
    except (OSError, subprocess.TimeoutExpired) as failure:
        return f"{java} -version failed ({failure}): Spark needs Java {JAVA_MIN}+; {JAVA_HINT}"
    said = ran.stderr + ran.stdout
    version = java_version(said)
    if version is None:
        first = said.strip().splitlines()[0] if said.strip() else "nothing"
        return f"{java} -version said {first!r}, not a version: Spark needs Java {JAVA_MIN}+; {JAVA_HINT}"
    if version < JAVA_MIN:
        return f"{java} is Java {version}, and Spark needs Java {JAVA_MIN} or newer: {JAVA_HINT}"
    return None


def no_event_message(lines: int, where: str, kinds: str = "") -> str:
    """Why there is nothing to analyse: ``lines`` lines of ``where``, none an event (``kinds``: what they were)."""
    said = f"none of the {lines:,} lines of {where} was an event" + (f" ({kinds})" if kinds else "")
    if not lines:
        said = f"{where}: no lines at all, so no events"
    return f"{said}. {EVENT_HELP}"


def no_events(inputs: Sequence[Mapping[str, Any]], patterns: Sequence[str]) -> str | None:
    """The message for an analysed input in which no line was an event (the job's input report: rows of
    ``kind`` and ``count``), or None."""
    counts = {str(row["kind"]): int(row["count"] or 0) for row in inputs}
    if counts.get("parsed", 0) > 0:
        return None
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in counts.items() if kind not in ("lines", "parsed") and n)
    return no_event_message(counts.get("lines", 0), ", ".join(patterns), kinds)


def surely_no_events(patterns: Sequence[str]) -> str | None:
    """The message for local inputs in which no sampled line is an event record, found in well under a second
    without Spark, naming what each file looks like (``sniff.py``); else None (the job decides)."""
    return sniff.no_event_message(patterns, EVENT_HELP)
