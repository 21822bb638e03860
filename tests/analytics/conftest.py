"""One SparkSession for every analytics test (local[2], no UI, two shuffle partitions), and a log writer.

Starting Spark takes seconds and a JVM, so the session is shared by the whole test session; each test module
runs the job once and checks the tables it wrote.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the analytics tests need pyspark (the `analytics` extra)")

from pyspark.sql import SparkSession  # noqa: E402

from broker.analytics.archive import ENV as CLASS_ARCHIVE  # noqa: E402

# The job's subprocesses write no class archive (200 MB) under the home directory; test_cli's own does, in its
# temporary directory.
os.environ.setdefault(CLASS_ARCHIVE, "off")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-group-broker analytics tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class Log:
    """Events of one broker run, numbered as the broker numbers them: ``seq`` from 1, one ``run_id``."""

    def __init__(self, run_id: str, group_id: str) -> None:
        self.run_id = run_id
        self.group_id = group_id
        self.seq = 0
        self.records: list[dict[str, Any]] = []

    def __call__(self, ts_ms: int, event: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        record = {
            "v": 1, "seq": self.seq, "ts_ms": ts_ms, "run_id": self.run_id, "event": event,
            "group_id": fields.pop("group_id", self.group_id), **fields,
        }  # fmt: skip
        self.records.append(record)
        return record

    def lines(self) -> list[str]:
        return [json.dumps(record, separators=(",", ":")) for record in self.records]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def rows(spark: SparkSession, out: Path, table: str) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in spark.read.parquet(str(out / table)).collect()]
