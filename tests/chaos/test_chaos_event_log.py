"""``chaos run --event-log``: refused with a running broker (``--bootstrap``), whose own event log is the one that
counts; the run with its own broker, its kills in the log and ``analyze`` on it, is
``tests/analytics/test_chaos_disturbances.py`` (it needs Spark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_event_log_with_a_running_broker_is_refused_with_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "broker", "chaos", "run", "--bootstrap", "127.0.0.1:1", "--admin", "http://127.0.0.1:1",
         "--event-log", str(log)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "--event-log is for the broker the run starts" in done.stderr, done.stderr
    assert "start it with --event-log PATH" in done.stderr, done.stderr
    assert done.stdout == "" and not log.exists()
