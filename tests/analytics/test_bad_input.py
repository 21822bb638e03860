"""Bad input: every line is counted under a kind, the first few of each kind are quoted with file and line, the
good lines are still analysed, and nothing crashes (docs/analytics.md, "The input report")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import cli, job, read, session
from broker.analytics.schema import EVENT_SCHEMA
from broker.events.names import COMMON, FORMAT_VERSION, REQUIRED
from tests.analytics.conftest import rows, write_lines
from tests.analytics.test_windows import eager_log, pick

# (kind, line) in file order; "good" lines are the events of a whole eager history, spread among the bad ones.
BAD: list[tuple[str, str]] = [
    ("malformed", '{"v":1,"seq":99,"ts_ms":1000,"run_id":"run-a","event":"member_jo'),  # a torn write
    ("unknown_event", '{"v":1,"seq":100,"ts_ms":1000,"run_id":"run-a","event":"member_teleported","group_id":"eager"}'),
    ("newer_version", '{"v":3,"seq":101,"ts_ms":1000,"run_id":"run-a","event":"member_joined","group_id":"eager"}'),
    # version 3 changed a field's type: still recognised as a newer version, not as garbage
    ("newer_version", '{"v":3,"seq":"a-string","ts_ms":1000,"run_id":"run-a","event":"x","group_id":"eager"}'),
    # a version-2 event (KIP-848 consumer groups) in a version-1 record: not that version's
    ("unknown_event", '{"v":1,"seq":109,"ts_ms":1,"run_id":"r","event":"group_epoch_bumped","group_id":"g"}'),
    ("missing_field", '{"v":2,"seq":110,"ts_ms":1,"run_id":"r","event":"group_epoch_bumped","group_id":"g"}'),
    ("malformed", "this is not JSON"),
    ("malformed", ""),
    ("malformed", "[1, 2, 3]"),
    ("malformed", "null"),
    ("missing_field", '{"v":1,"seq":102,"ts_ms":1000,"run_id":"run-a","event":"member_expired","group_id":"eager"}'),
    ("missing_field", '{"v":1,"seq":103,"ts_ms":1000,"run_id":"run-a","event":"group_created"}'),
    ("unknown_version", '{"seq":104,"ts_ms":1000,"run_id":"run-a","event":"group_created","group_id":"eager"}'),
    ("unknown_version", '{"v":0,"seq":105,"ts_ms":1000,"run_id":"run-a","event":"group_created","group_id":"g"}'),
    # a v1 broker's new event may reuse a field name with another type: unknown, not malformed
    ("unknown_event", '{"v":1,"seq":106,"ts_ms":1,"run_id":"run-a","event":"new_thing","generation_id":"x"}'),
    ("malformed", '{"v":1,"seq":107,"ts_ms":"yesterday","run_id":"run-a","event":"group_created","group_id":"g"}'),
    ("malformed", "{"),
]
TORN_LAST = '{"v":1,"seq":108,"ts_ms":1000,"run_id":"run-a","ev'  # the broker killed mid-line: no newline


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("bad")
    good = eager_log("run-a", "eager").lines()
    lines: list[str] = []
    for index, (_, line) in enumerate(BAD):
        lines.append(line)
        lines += good[index * 2 : index * 2 + 2]
    lines += good[len(BAD) * 2 :]
    mixed = write_lines(tmp / "mixed.jsonl", lines)
    with mixed.open("a", encoding="utf-8") as file:
        file.write(TORN_LAST)
    empty = tmp / "empty.jsonl"
    empty.write_text("")
    out = tmp / "out"
    job.run([str(mixed), str(empty)], str(out), spark=spark)
    return out, [*lines, TORN_LAST]


def report(out: Path, spark: SparkSession) -> dict[str, tuple[int, list[str]]]:
    return {row["kind"]: (row["count"], row["examples"]) for row in rows(spark, out, "input")}


def test_every_line_is_counted_under_its_kind(analysed: tuple[Path, list[str]], spark: SparkSession) -> None:
    out, lines = analysed
    counts = {kind: count for kind, (count, _) in report(out, spark).items()}
    expected: dict[str, int] = {}
    for kind, _ in [*BAD, ("malformed", TORN_LAST)]:
        expected[kind] = expected.get(kind, 0) + 1
    good = len(eager_log("run-a", "eager").records)
    assert counts == {
        "lines": len(lines), "parsed": good, "duplicate": 0, **{k: expected.get(k, 0) for k in (
            "malformed", "unknown_event", "newer_version", "unknown_version", "missing_field")},
    }  # fmt: skip
    assert counts["lines"] == sum(count for kind, count in counts.items() if kind != "lines")


def test_examples_name_file_and_line(analysed: tuple[Path, list[str]], spark: SparkSession) -> None:
    out, lines = analysed
    found = report(out, spark)
    path = str(out.parent / "mixed.jsonl")

    def where(text: str) -> str:
        return f"{path}:{lines.index(text) + 1}: {text[:200]}"

    malformed = [line for kind, line in BAD if kind == "malformed"]
    assert found["malformed"][1] == [where(line) for line in malformed[:5]]  # the first five, in line order
    assert found["newer_version"][1] == [where(line) for kind, line in BAD if kind == "newer_version"]
    assert found["unknown_event"][1] == [where(line) for kind, line in BAD if kind == "unknown_event"]
    assert found["missing_field"][1] == [where(line) for kind, line in BAD if kind == "missing_field"]
    assert found["unknown_version"][1] == [where(line) for kind, line in BAD if kind == "unknown_version"]
    assert found["parsed"][1] == [] and found["lines"][1] == []


def test_the_good_lines_are_still_analysed(analysed: tuple[Path, list[str]], spark: SparkSession) -> None:
    out, _ = analysed
    rebalances = sorted(rows(spark, out, "rebalances"), key=lambda r: r["start_ms"])
    found = [pick(r, "group_id", "start_ms", "end_ms", "outcome", "unowned_partition_seconds") for r in rebalances]
    assert found == [("eager", 1000, 2100, "stable", 4.4), ("eager", 10000, 10600, "stable", 2.4)]
    assert len(rows(spark, out, "ownership")) == 8
    members = rows(spark, out, "members")
    assert sorted((m["member_id"], m["end"]) for m in members) == [("a", "open"), ("b", "expired")]


def test_summary_json_reports_the_input(analysed: tuple[Path, list[str]], spark: SparkSession) -> None:
    out, lines = analysed
    document = json.loads((out / "summary.json").read_text())
    assert document["format_version"] == FORMAT_VERSION == 2
    kinds = {entry["kind"]: entry for entry in document["input"]}
    assert kinds["lines"]["count"] == len(lines)
    assert kinds["malformed"]["count"] == 8 and len(kinds["malformed"]["examples"]) == 5
    assert kinds["newer_version"]["examples"][0].endswith(BAD[2][1])
    overall = document["overall"]
    assert (overall["scope"], overall["group_id"], overall["rebalances"], overall["expirations"]) == ("all", None, 2, 1)
    assert overall["causes"] == {"member_joined": 1, "member_expired": 1}
    assert document["rows"] == {
        "input": 8, "rebalances": 2, "members": 2, "ownership": 8, "summary": 2, "disturbances": 0,
        "broker_disturbances": 0, "share_deliveries": 0, "share_in_flight": 0,
    }  # fmt: skip


def test_nothing_but_garbage_and_empty_files(spark: SparkSession, tmp_path: Path) -> None:
    """No event at all: every table is written (empty, with its columns), the summary has its overall row."""
    garbage = write_lines(tmp_path / "garbage.jsonl", ["not json", '{"v":3,"seq":1}'])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "out"
    result = job.run([str(garbage), str(empty)], str(out), spark=spark)
    assert result.rows == {
        "input": 8, "rebalances": 0, "members": 0, "ownership": 0, "summary": 1, "disturbances": 0,
        "broker_disturbances": 0, "share_deliveries": 0, "share_in_flight": 0,
    }  # fmt: skip
    counts = {entry["kind"]: entry["count"] for entry in result.input}
    assert (counts["lines"], counts["malformed"], counts["newer_version"], counts["parsed"]) == (2, 1, 1, 0)
    (overall,) = rows(spark, out, "summary")
    assert (overall["scope"], overall["rebalances"], overall["expirations"], overall["causes"]) == ("all", 0, 0, {})
    assert overall["rebalance_ms_p50"] is None and overall["unowned_partition_seconds"] == 0.0
    assert "unowned_partition_seconds" in spark.read.parquet(str(out / "rebalances")).columns


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_paths_that_match_nothing_are_an_error(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    there = write_lines(tmp_path / "there.jsonl", [])
    # The command checks local paths before it starts Spark; the job checks any URI through Hadoop's FileSystem.
    assert cli.run(parse(str(there), str(tmp_path / "nope-*.jsonl"), "--out", str(tmp_path / "out"), "--quiet")) == 2
    assert f"nothing matches {tmp_path / 'nope-*.jsonl'}" in capsys.readouterr().err
    with pytest.raises(read.InputError, match="nothing matches file:///nowhere/x-"):
        read.find_inputs(spark, [str(there), "file:///nowhere/x-*.jsonl"])
    (found,) = read.find_inputs(spark, [str(tmp_path / "the*.jsonl")])
    assert found.path.endswith("/there.jsonl") and found.size == 0
    with pytest.raises(SystemExit):
        parse("x.jsonl")  # --out is required
    with pytest.raises(SystemExit):
        parse("x.jsonl", "--out", "o", "--conf", "no-equals-sign")
    args: Any = parse("a", "b*", "--out", "o", "--conf", "spark.x=1", "--conf", "spark.y=a=b", "--shuffle-partitions=4")
    assert (args.events, args.conf, args.shuffle_partitions) == (["a", "b*"], [("spark.x", "1"), ("spark.y", "a=b")], 4)


def test_shuffle_partitions_follow_the_input_size() -> None:
    mib = 1024 * 1024
    assert session.shuffle_partitions_for(0, 2) == 2  # at least one per core
    assert session.shuffle_partitions_for(100 * mib, 2) == 4  # one per 32 MiB
    assert session.shuffle_partitions_for(4400 * mib, 2) == 138  # ~10M events
    assert session.shuffle_partitions_for(10**15, 2) == session.MAX_PARTITIONS


def test_the_schema_has_every_field_the_reader_requires() -> None:
    """The event names and required fields are broker/events/names.py's; the schema must type each of them, or
    ``classify`` would fail on the first line instead of counting it."""
    declared = set(EVENT_SCHEMA.fieldNames())
    assert set(COMMON) <= declared
    assert {name for names in REQUIRED.values() for name in names} <= declared
