"""The README's quick start: each example produces, consumes and shows a rebalance against a real broker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, start_broker_process

EXAMPLES = ["quickstart_aiokafka.py", "quickstart_kafka_python.py", "quickstart_confluent.py"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", EXAMPLES)
def test_quick_start_example(tmp_path: Path, example: str) -> None:
    broker = start_broker_process(tmp_path, "--topic", "quickstart:4")
    try:
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / example), broker.bootstrap],
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        broker.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "produced 10 records" in out
    consumed = re.findall(r"^consumed quickstart-(\d)@(\d+): b'record (\d)'$", out, re.MULTILINE)
    assert sorted(int(value) for _, _, value in consumed) == list(range(10))
    assert "first member owns [0, 1, 2, 3]" in out
    split = re.search(r"after the rebalance: first owns \[([\d, ]+)\] second owns \[([\d, ]+)\]", out)
    assert split is not None, out
    first, second = ({int(p) for p in group.split(",")} for group in split.groups())
    assert first.isdisjoint(second) and first | second == {0, 1, 2, 3}

    events = [json.loads(line) for line in broker.log().splitlines() if line.startswith("{")]
    joins = [e for e in events if e["event"] == "join_completed" and e.get("group_id", "").startswith("quickstart")]
    assert any(len(e["members"]) == 2 for e in joins)
    assert any(e["event"] == "rebalance_started" and e["group_id"].startswith("quickstart") for e in events)
