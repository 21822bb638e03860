"""What a new user tripped over in `analyze` and `generate-events` (issue 18, items 6 and 7).

`analyze` of a file without events fails and says what an event line is; it checks Java before Spark starts
(subprocesses with PATH stripped of java and JAVA_HOME unset, or pointing at an old one); `generate-events
--bad-lines` writes lines that plainly are injected noise, of every kind of badness the job must survive, and
shows progress on long runs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from broker.analytics import cli, generate, job, read, sniff
from broker.analytics.arguments import JAVA_MIN, java_problem, java_version, no_events
from broker.analytics.synthetic.lines import INJECTED_GROUP, INJECTED_TEXT
from tests.analytics.conftest import write_lines
from tests.conftest import ROOT

README = ROOT / "README.md"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def analyze(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``group-broker analyze`` in a subprocess with exactly ``env`` (the interpreter named by its path)."""
    return subprocess.run(
        [sys.executable, "-m", "broker", "analyze", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def bare_env(**extra: str) -> dict[str, str]:
    """The environment less JAVA_HOME and PATH (so no java), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PATH", "PYSPARK_GATEWAY_PORT")}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's bin: python, no java
    env.update(extra)
    return env


def fake_java(directory: Path, version: str) -> Path:
    """An executable ``java`` whose ``-version`` says ``version`` on stderr, as a JDK does."""
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n", encoding="ascii")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return java


# -- item 6: no events, no Java --------------------------------------------------------------------------------------


def test_analyze_of_a_readme_fails_and_says_what_an_event_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found before Spark starts: the README is prose (the JSON line or two it quotes are no event records;
    tests/analytics/test_input_look.py has the other kinds of file)."""
    # The look reads the first SAMPLE_BYTES (the README is longer), less the line the sample cuts.
    sample = README.read_bytes()
    lines = len(sample[: sniff.SAMPLE_BYTES].splitlines()) - (len(sample) > sniff.SAMPLE_BYTES)
    assert cli.run(parse(str(README), "--out", str(tmp_path / "out"))) == 2
    said = capsys.readouterr().err
    assert f"no event in {README}: it looks like Markdown/text: " in said and f"({lines:,} lines looked at)" in said
    assert '"event":"group_created"' in said and "--event-log" in said and "generate-events" in said
    assert not (tmp_path / "out").exists(), "nothing written, no Spark started"
    empty = write_lines(tmp_path / "empty.jsonl", [])
    assert cli.run(parse(str(empty), "--out", str(tmp_path / "out"))) == 2
    assert "is empty (no lines at all)" in capsys.readouterr().err


def test_json_that_is_no_event_fails_after_the_job(spark: SparkSession, tmp_path: Path) -> None:
    """Lines that are JSON objects pass the quick look; the job's input report then says none was an event."""
    log = write_lines(tmp_path / "other.jsonl", ['{"hello": "world"}', '{"v":2,"event":"nonsense"}', "plain"])
    result = job.run([str(log)], str(tmp_path / "out"), spark=spark)
    message = no_events(result.input, [str(log)])
    assert message is not None and f"none of the 3 lines of {log} was an event" in message
    assert "malformed" in message and "generate-events" in message
    events = tmp_path / "events.jsonl"
    generate.generate(events, 200, seed=3)
    assert no_events(job.run([str(events)], str(tmp_path / "out2"), spark=spark).input, [str(events)]) is None


def test_spark_submit_of_the_job_fails_too_when_no_line_is_an_event(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``spark-submit job.py`` (``job.execute``) says what ``group-broker analyze`` says, and exits 2; the real job
    runs, on the tests' session rather than a new JVM."""
    real_run = job.run
    monkeypatch.setattr(job, "run", lambda *args, **kwargs: real_run(*args, **{**kwargs, "spark": spark}))
    log = write_lines(tmp_path / "other.jsonl", ['{"hello": "world"}', "plain"])
    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    assert job.execute(parser.parse_args([str(log), "--out", str(tmp_path / "out"), "--quiet"])) == 2
    assert f"none of the 2 lines of {log} was an event" in capsys.readouterr().err
    events = tmp_path / "events.jsonl"
    generate.generate(events, 200, seed=3)
    assert job.execute(parser.parse_args([str(events), "--out", str(tmp_path / "o2"), "--quiet"])) == 0


def test_analyze_without_java_says_so_before_spark(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    generate.generate(log, 200, seed=3)
    out = str(tmp_path / "out")
    missing = analyze(str(log), "--out", out, env=bare_env())
    assert missing.returncode == 2, missing.stderr
    assert f"Spark needs Java {JAVA_MIN} or newer, and there is no java here" in missing.stderr
    assert "JAVA_HOME" in missing.stderr and "starting Spark" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr

    old = fake_java(tmp_path / "old-bin", "11.0.22")
    too_old = analyze(str(log), "--out", out, env=bare_env(PATH=f"{old.parent}:{Path(sys.executable).parent}"))
    assert too_old.returncode == 2 and f"{old} is Java 11, and Spark needs Java {JAVA_MIN} or newer" in too_old.stderr

    home = tmp_path / "jdk8"
    fake_java(home / "bin", "1.8.0_292")
    by_home = analyze(str(log), "--out", out, env=bare_env(JAVA_HOME=str(home)))
    assert by_home.returncode == 2 and "is Java 8, and Spark needs" in by_home.stderr
    nowhere = analyze(str(log), "--out", out, env=bare_env(JAVA_HOME=str(tmp_path / "nojdk")))
    assert nowhere.returncode == 2 and f"JAVA_HOME is {tmp_path / 'nojdk'}, but" in nowhere.stderr
    assert not (tmp_path / "out").exists()


def test_java_versions_as_java_says_them(tmp_path: Path) -> None:
    assert java_version('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_version('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "21" 2023-09-19') == 21
    assert java_version('java version "1.8.0_292"') == 8
    assert java_version("no version here") is None
    new = fake_java(tmp_path / "new-bin", "21.0.2")
    assert java_problem({"PATH": str(new.parent)}) is None
    assert java_problem({"PATH": str(tmp_path), "PYSPARK_GATEWAY_PORT": "4242"}) is None  # spark-submit's JVM


# -- item 7: injected bad lines, progress ------------------------------------------------------------------------------


def test_bad_lines_plainly_are_injected_noise_of_every_kind(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    result = generate.generate(log, 3000, seed=6, bad_lines=40)
    kinds: dict[str, list[str]] = {"torn": [], "text": [], "missing": [], "typed": []}
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            kinds["text" if line == INJECTED_TEXT else "torn"].append(line)
            continue
        if "seq" not in record:
            kinds["missing"].append(line)
        elif not isinstance(record["seq"], int):
            kinds["typed"].append(line)
    bad = [line for lines in kinds.values() for line in lines]
    assert len(bad) == result.bad_lines == 40
    assert all(kinds.values()), {kind: len(lines) for kind, lines in kinds.items()}
    assert all("injected by generate-events --bad-lines" in x or INJECTED_GROUP in x for x in bad), bad
    assert not any("Error" in x or "Exception" in x for x in bad)
    assert all(x.startswith('{"v":') for x in kinds["torn"])  # a real record's start, cut short
    # The job counts every one of them as bad, none as an event.
    classified = read.classify(read.read_lines(spark, [str(log)]))
    counts = {row[read.KIND]: row["count"] for row in classified.groupBy(read.KIND).count().collect()}
    assert counts.pop(read.OK) == result.events and sum(counts.values()) == 40, counts
    assert counts["missing_field"] == len(kinds["missing"])


def test_long_generation_shows_progress_and_a_quick_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generate, "PROGRESS_EVERY_S", 0.02)
    stream = io.StringIO()
    result = generate.generate(tmp_path / "one.jsonl", 30_000, seed=2, progress=stream)
    lines = stream.getvalue().splitlines()
    assert lines and all(x.startswith("generate-events: ") and "events/s" in x for x in lines), lines
    assert f"of ~{30_000:,} events" in lines[0]
    stream = io.StringIO()
    generate.generate(tmp_path / "many", 30_000, seed=2, files=2, jobs=2, progress=stream)
    assert stream.getvalue().count("events/s") >= 1, "the workers' counts reach the parent"
    assert result.events >= 30_000

    monkeypatch.setattr(generate, "PROGRESS_EVERY_S", 60.0)  # a run shorter than a line's interval: no line
    stream = io.StringIO()
    generate.generate(tmp_path / "quick.jsonl", 500, seed=2, progress=stream)
    assert stream.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_by_default_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generate, "PROGRESS_EVERY_S", 0.02)
    parser = argparse.ArgumentParser()
    generate.add_arguments(parser)
    for stderr, flags, shown in (
        (Terminal(), [], True),
        (io.StringIO(), [], False),
        (io.StringIO(), ["--progress"], True),
        (Terminal(), ["--no-progress"], False),
    ):
        monkeypatch.setattr(sys, "stderr", stderr)
        generate.run(parser.parse_args([str(tmp_path / "log.jsonl"), "--events", "30000", *flags]))
        said = stderr.getvalue()
        assert ("events/s\n" in said.split("wrote")[0]) is shown, (flags, said)
        assert said.count("wrote 30,0") == 1


def test_the_command_prints_one_line_when_stderr_is_no_terminal(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "broker", "generate-events", str(tmp_path / "x.jsonl"), "--events", "2000"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("wrote 2,"), done.stderr
