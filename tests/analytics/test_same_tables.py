"""The job's tables on a generated log, pinned: a change made for speed (issue 17) must not change a single row.

``broker.analytics.generate`` writes the same log for the same seed; the job's tables (and ``summary.json``)
on it are reduced to one digest each: every row as sorted-key JSON, the rows sorted, the file's directory taken out
of the input report's examples. The digests below are those of the job before issue 17's changes. When a change
is meant to alter a table, ``python -m tests.analytics.test_same_tables`` prints the new digests to paste here.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import TABLES, generate, job

#: The log: classic (eager and cooperative) and consumer groups, two brokers with restarts, a few bad lines.
EVENTS = 4000
SEED = 17
FILES = 2

#: table -> (rows, sha256 of the canonical rows): the job as of 2026-11-27, before issue 17.
EXPECTED: dict[str, tuple[int, str]] = {
    # input and summary.json quote the bad lines, which say since issue 18 that generate-events injected them:
    # the events around them and the four tables made of the events are the same.
    "input": (8, "fbabc3bbfc49d6ee2f5b44714fc45c9809e58f3a47a6d06a7c179390f2485f41"),
    "rebalances": (337, "3d2671ff103827807df4b4a09b971db23742460b816975b9e746cbb4e80d741b"),
    "members": (299, "b95d73cf2b5e1f7743659fd758e6095be0851991f946a2f0ce9f8e2e5c0b39bb"),
    "ownership": (2951, "cb37a3b423ef8c053a196cc1b54970c9957a1e5e62556c4c75a28a8dff0a3ba0"),
    # issue 26: the summary counts formations apart (new columns; protocols and percentiles after formation).
    # issue 27: the summary's broker_restarts (0 here: the generated log has no broker_started); without that
    # column the rows are those of issue 26, digest 4f883f4e74f5..., as summary.json's was b099df873c09....
    "summary": (9, "ba9e5766970ef99dd37b75dde0a0f2c5bd8d8b5faa076fc3afb148e621eaf574"),
    # Issue 26: the disturbances table (the generated log has none) and its row count in summary.json's "rows":
    # the tables above are unchanged by it.
    "disturbances": (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    # Issue 28: the share tables (the generated log has no share group: share_groups 0 writes the log as before)
    # and their row counts in summary.json's "rows" (it was d640698ac206... without them): the tables above are
    # unchanged by them.
    # Issue 29: the broker_disturbances table (the generated log has no cluster event) and its row count in
    # summary.json's "rows" (it was dac78c1dbb8b... without it): the tables above are unchanged by it.
    "broker_disturbances": (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    "share_deliveries": (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    "share_in_flight": (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    "summary.json": (1, "f253216e883ecf3c81fd33cd10cd115d13e98b5d233368a3ed1b6503bf432e6e"),
}


def write_log(directory: Path) -> list[str]:
    generated = generate.generate(directory, EVENTS, seed=SEED, files=FILES, restarts=2, bad_lines=3)
    return [str(p) for p in generated.paths]


def digests(spark: SparkSession, out: Path, log_dir: Path) -> dict[str, tuple[int, str]]:
    """Rows and digest per table, and of ``summary.json`` (less its ``inputs``, which name the directory)."""
    prefix = str(log_dir).rstrip("/") + "/"
    found: dict[str, tuple[int, str]] = {}
    for table in TABLES:
        lines = sorted(
            json.dumps(row.asDict(recursive=True), sort_keys=True, default=str).replace(prefix, "")
            for row in spark.read.parquet(str(out / table)).collect()
        )
        found[table] = (len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest())
    document: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    document.pop("inputs")
    document.pop("shuffle_partitions")  # a setting of the run, not a result
    text = json.dumps(document, sort_keys=True, default=str).replace(prefix, "")
    found["summary.json"] = (1, hashlib.sha256(text.encode()).hexdigest())
    return found


def run_and_digest(spark: SparkSession, work: Path) -> dict[str, tuple[int, str]]:
    logs = work / "logs"
    inputs = write_log(logs)
    out = work / "tables"
    job.run(inputs, str(out), spark=spark)
    return digests(spark, out, logs)


@pytest.mark.timeout(300)  # the whole job on 4000 events: 110 s on a loaded two-core machine, the default is 120
def test_the_tables_of_a_generated_log_are_unchanged(spark: SparkSession, tmp_path: Path) -> None:
    assert run_and_digest(spark, tmp_path) == EXPECTED


if __name__ == "__main__":  # print the digests of the job as it is now
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as work:
        for name, value in run_and_digest(session, Path(work)).items():
            print(f"    {name!r}: {value!r},", file=sys.stdout)
