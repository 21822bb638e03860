"""`group-broker analyze` refuses, before Spark starts, local inputs in which no sampled line is an event record,
and says what they look like (issue 26, item 5): the CLI as a subprocess, each kind of file, under 2 s."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.analytics import generate, sniff
from broker.analytics.arguments import surely_no_events
from broker.chaos.runner import write_json
from tests.cli.test_control_cli import start_broker
from tests.conftest import ROOT

README = ROOT / "README.md"
MARKDOWN = "# Notes\n\nStart the broker with `group-broker serve`, then:\n\n```sh\nls\n```\n"
EVENT_HELP = "An event log has one JSON object per line"


def analyze(*paths: Path | str, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "broker", "analyze", *map(str, paths), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return ran, time.monotonic() - started


def refused(*paths: Path | str, out: Path) -> str:
    """The one error line of a refused run: exit 2, under 2 s, nothing written."""
    ran, seconds = analyze(*paths, out=out)
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert seconds < 2.0, f"{seconds:.2f} s: Spark started?"
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("group-broker analyze: error: no event in "), ran.stderr
    assert EVENT_HELP in lines[0] and "--event-log" in lines[0]
    assert not out.exists(), "nothing written"
    return lines[0]


@pytest.fixture(scope="module")
def broker_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real broker's own log: `serve --log-format json`, structlog's JSON lines on stderr."""
    log = tmp_path_factory.mktemp("broker") / "broker.log"
    broker = start_broker(log)
    broker.stop()
    return log


def test_the_brokers_own_log_is_named_as_such(broker_log: Path, tmp_path: Path) -> None:
    first = json.loads(broker_log.read_text().splitlines()[0])
    assert "event" in first and "level" in first and "v" not in first  # what makes it easy to take for events
    said = refused(broker_log, out=tmp_path / "out")
    assert (
        f"no event in {broker_log}: it looks like the broker's own log (structlog JSON: has `event` and `level`, "
        "no `v`); pass the event log (serve --event-log) instead" in said
    )
    packed = tmp_path / "broker.log.gz"  # sampled through gzip, as Spark reads a .gz name
    packed.write_bytes(gzip.compress(broker_log.read_bytes()))
    assert "the broker's own log" in refused(packed, out=tmp_path / "out")


def test_a_chaos_report_a_summary_and_an_analysis_directory(tmp_path: Path) -> None:
    chaos = tmp_path / "chaos.json"
    kills = [{"at": 1.5, "member": "consumer-1", "signal": "SIGKILL"}]
    report = {
        "version": 1, "ok": True, "config": {"seed": 3}, "broker": {"run_ids": ["3f9a0c1d2b4e"]},
        "chaos_started_at": 1767225600.0, "chaos_ended_at": 1767225630.0, "records": {"lost": 0}, "kills": kills,
    }  # fmt: skip
    write_json(str(chaos), report)  # as `group-broker chaos --json` writes it
    assert "looks like a chaos run's JSON report (--json)" in refused(chaos, out=tmp_path / "out")
    failed = tmp_path / "failed.json"
    write_json(str(failed), {"version": 1, "ok": False, "error": "no broker", "workdir": None})
    assert "chaos run's JSON report" in refused(failed, out=tmp_path / "out")

    from broker.analytics import job  # pyspark: the summary.json the job writes

    analysis = tmp_path / "analysis"
    analysis.mkdir()
    text = json.dumps(job.summary_document(["events.jsonl"], job.Result(str(analysis))), indent=2) + "\n"
    (analysis / "summary.json").write_text(text)
    assert "looks like a summary.json / analyze output" in refused(analysis / "summary.json", out=tmp_path / "out")
    (analysis / "report.html").write_text("<!DOCTYPE html>\n<html><body>report</body></html>\n")
    (analysis / "plots").mkdir()
    (analysis / "plots" / "durations.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    said = refused(analysis, out=tmp_path / "out")
    assert f"no event in the 3 files of {analysis}: " in said
    assert f"{analysis / 'plots' / 'durations.png'} looks binary" in said
    assert f"{analysis / 'report.html'} looks like an HTML page" in said
    assert f"{analysis / 'summary.json'} looks like a summary.json / analyze output" in said


def test_markdown_empty_and_binary(tmp_path: Path) -> None:
    markdown = tmp_path / "notes.md"
    markdown.write_text(MARKDOWN)
    said = refused(markdown, out=tmp_path / "out")
    assert f"no event in {markdown}: it looks like Markdown/text: no line is a JSON object (" in said
    quoting = tmp_path / "quoting.md"  # as README.md does: prose that quotes a JSON answer or two
    quoting.write_text(MARKDOWN + '{"group_id": "live", "state": "Empty"}\n' + MARKDOWN)
    said = refused(quoting, out=tmp_path / "out")
    assert "looks like Markdown/text: most lines are not JSON objects, and none that is is an event record" in said
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert f"no event in {empty}: it is empty (no lines at all). " in refused(empty, out=tmp_path / "out")
    events = tmp_path / "events.jsonl"
    generate.generate(events, 200, seed=3)
    hidden = tmp_path / "events.bin"  # a gzip under another name: Spark would read its bytes as lines
    hidden.write_bytes(gzip.compress(events.read_bytes()))
    said = refused(hidden, out=tmp_path / "out")
    assert "looks like gzip-compressed data, but its name does not end in .gz" in said
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": "world"}\n{"v": 2, "event": "nonsense"}\n')
    assert "has JSON lines, but none is an event record" in refused(other, out=tmp_path / "out")


def test_event_logs_pass_the_look(tmp_path: Path) -> None:
    """Plain, gzip and bzip2 event logs, a directory of them, an event log next to another file, a torn first
    sample, and what the look cannot be sure of: left to the job."""
    events = tmp_path / "logs" / "events.jsonl"
    events.parent.mkdir()
    generate.generate(events, 2000, seed=5, bad_lines=3)
    assert events.stat().st_size > sniff.SAMPLE_BYTES  # the sample is cut within a line
    (tmp_path / "logs" / "events.jsonl.1.gz").write_bytes(gzip.compress(events.read_bytes()))
    (tmp_path / "logs" / "README.md").write_text(MARKDOWN)
    kinds = sorted(found.kind for found in sniff.look([str(tmp_path / "logs")]) or [])
    assert kinds == ["events", "events", "text"]
    assert surely_no_events([str(tmp_path / "logs")]) is None
    assert surely_no_events([f"file://{events}"]) is None
    assert surely_no_events([str(README), "s3a://bucket/events/*"]) is None  # remote: the job decides
    assert surely_no_events([str(tmp_path / "logs" / "{events,README}*")]) is None  # Hadoop's glob syntax
    late = tmp_path / "late.jsonl"  # events after the sample only: refused, the sample is what is looked at
    late.write_text("# a header\n" * (sniff.SAMPLE_BYTES // 10) + events.read_text())
    assert surely_no_events([str(late)]) is not None
    seconds = time.monotonic()
    many = tmp_path / "many"
    many.mkdir()
    for i in range(sniff.MAX_FILES + 1):
        (many / f"part-{i}.md").write_text("# not events\n")
    assert surely_no_events([str(many)]) is None, "too many files to be sure"
    assert surely_no_events([str(p) for p in sorted(many.iterdir())[:40]]) is not None
    assert time.monotonic() - seconds < 2.0
