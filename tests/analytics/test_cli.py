"""`group-broker generate-events` and `group-broker analyze --report` as a user runs them: subprocesses, their
own Spark, files on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.analytics.archive import ENV
from broker.analytics.session import local_driver_memory
from tests.conftest import ROOT


def group_broker(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.timeout(900)
def test_generate_then_analyze_with_report(tmp_path: Path) -> None:
    log, out = tmp_path / "events.jsonl", tmp_path / "analysis"
    generated = group_broker("generate-events", str(log), "--events", "3000", "--seed", "5", "--bad-lines", "2")
    assert generated.returncode == 0, generated.stderr
    assert "wrote" in generated.stderr and log.stat().st_size > 0

    # The first run with this Java and pyspark writes the JVM's class archive as it exits (issue 17, archive.py).
    cache = tmp_path / "cache"
    analysed = group_broker(
        "analyze", str(log), "--out", str(out), "--report", "--master", "local[2]", env={ENV: str(cache)}
    )
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    assert [p.suffix for p in cache.iterdir()] == [".jsa"], analysed.stderr[-3000:]  # in place, no partial left
    assert "keeping the JVM's classes for later runs (once)" in analysed.stderr
    assert "starting Spark (local[2], driver memory 2g)" in analysed.stderr  # progress lines, with the choices
    for table in ("rebalances", "members", "ownership", "summary", "input"):
        assert any((out / table).glob("*.parquet")), table
    summary = json.loads((out / "summary.json").read_text())
    kinds = {row["kind"]: row for row in summary["input"]}
    assert kinds["malformed"]["count"] + kinds["missing_field"]["count"] >= 2  # the bad lines, counted
    assert summary["overall"]["rebalances"] > 0
    assert (out / "report.html").stat().st_size > 10_000
    assert any((out / "plots").glob("*.png"))


def test_analyze_of_nothing_is_exit_2(tmp_path: Path) -> None:
    result = group_broker("analyze", str(tmp_path / "none-*.jsonl"), "--out", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 2
    assert "nothing matches" in result.stderr


def test_driver_memory_follows_the_local_input(tmp_path: Path) -> None:
    assert local_driver_memory([str(tmp_path / "missing")]) == "2g"
    assert local_driver_memory(["s3a://bucket/events/*"]) == "2g"  # not local: Spark's own business
    big = tmp_path / "big.jsonl"
    with big.open("wb") as file:  # sparse: 3 GiB of size, no disk
        file.truncate(3 * 1024**3)
    half_ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 // 1024**3
    assert local_driver_memory([str(tmp_path / "*.jsonl")]) == f"{max(2, min(6, half_ram_gib))}g"
    assert local_driver_memory([f"file://{tmp_path}"]) == f"{max(2, min(6, half_ram_gib))}g"  # a directory


def test_the_command_line_needs_no_spark_until_the_job_runs() -> None:
    """`group-broker --help`, `analyze --help` and `generate-events` import neither pyspark nor matplotlib."""
    code = (
        "import sys, broker.analytics.cli, broker.analytics.generate, broker.analytics.arguments; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'matplotlib')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
    helped = group_broker("analyze", "--help", timeout=60)
    assert helped.returncode == 0 and "--shuffle-partitions" in helped.stdout
