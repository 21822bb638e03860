"""``chaos run --bootstrap`` started before the broker it names (issue 26, item 1: the README's analytics block
starts two runs right after ``serve ... &``; a run that lost the race left its group out of the analysis)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_broker_grace import late_broker
from tests.conftest import ROOT, free_port


def chaos_run(tmp_path: Path, name: str, *where: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "broker", "chaos", "run", *where, "--group", name, "--topic", name,
         "--consumers", "1", "--partitions", "2", "--duration", "2", "--interval", "30", "--rate", "50",
         "--session-timeout-ms", "2000", "--heartbeat-interval-ms", "500", "--json", str(tmp_path / f"{name}.json")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.timeout(150)
def test_chaos_runs_started_before_the_broker_wait_for_it(tmp_path: Path) -> None:
    kafka_port, admin_port = free_port(), free_port()
    # One finds the control API from --bootstrap (discovery waits), one is given it (the runner's first call waits).
    found = chaos_run(tmp_path, "found", "--bootstrap", f"127.0.0.1:{kafka_port}")
    given = chaos_run(tmp_path, "given", "--bootstrap", f"127.0.0.1:{kafka_port}",
                      "--admin", f"http://127.0.0.1:{admin_port}")
    with late_broker(tmp_path / "broker.log", "--port", str(kafka_port), "--admin-port", str(admin_port)):
        outputs = {name: run.communicate(timeout=120) for name, run in (("found", found), ("given", given))}
    for name, run in (("found", found), ("given", given)):
        out, err = outputs[name]
        assert run.returncode == 0, f"{name}:\nstdout:\n{out}\nstderr:\n{err}"
        report = json.loads((tmp_path / f"{name}.json").read_text())
        assert report["ok"] is True and report["broker"]["managed"] is False, report
        assert report["broker"]["admin"] == f"http://127.0.0.1:{admin_port}", report
