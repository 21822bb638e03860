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


@pytest.mark.timeout(240)
def test_quick_start_examples_one_after_another_on_one_broker(tmp_path: Path) -> None:
    """Issue 18: a new user runs the README's examples in turn against the one broker. Each new group reads the
    topic from the start; each example consumes and prints its own ten records and says how many older ones it
    skipped (before, the second printed twenty and the confluent one stopped after ten records of earlier runs)."""
    broker = start_broker_process(tmp_path, "--topic", "quickstart:4")
    try:
        runs = [
            subprocess.run(
                [sys.executable, str(ROOT / "examples" / example), broker.bootstrap],
                capture_output=True,
                text=True,
                timeout=70,
            )
            for example in [*EXAMPLES, EXAMPLES[0]]
        ]
    finally:
        broker.stop()
    # The last re-runs the first group: its committed offsets pass its own first ten, not the other two examples'.
    for run, skipped in zip(runs, [0, 10, 20, 20], strict=True):
        assert run.returncode == 0, run.stderr[-3000:]
        consumed = re.findall(r"^consumed quickstart-\d@\d+: b'record (\d)'$", run.stdout, re.MULTILINE)
        assert sorted(int(value) for value in consumed) == list(range(10)), run.stdout
        if skipped:
            assert f"\nskipped {skipped} records of earlier runs\n" in run.stdout, run.stdout
        else:
            assert "skipped" not in run.stdout, run.stdout
        assert "first member owns [0, 1, 2, 3]" in run.stdout, run.stdout


@pytest.mark.timeout(120)
def test_exactly_once_example(tmp_path: Path) -> None:
    """The README's transactions example: a committed, an aborted and a retried transaction, read both ways."""
    broker = start_broker_process(tmp_path, "--topic", "orders:3", "--topic", "orders-out:3")
    try:
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "exactly_once_confluent.py"), broker.bootstrap],
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        broker.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    assert "committed 5 records\naborted 5 records\ncommitted 5 records\n" in run.stdout
    assert "read_committed sees 10 records, 10 distinct" in run.stdout
    assert "read_uncommitted sees 15 records" in run.stdout
    assert "the group committed 10 of 10 input offsets" in run.stdout
    events = [json.loads(line) for line in broker.log().splitlines() if line.startswith("{")]
    endings = [e["event"] for e in events if e["event"] in ("transaction_committed", "transaction_aborted")]
    assert endings == ["transaction_committed", "transaction_aborted", "transaction_committed"]


@pytest.mark.timeout(180)
def test_exactly_once_example_twice_on_the_run_it_broker(tmp_path: Path) -> None:
    """Issue 18: on the README's `serve --topic orders:6` (orders-out auto-created with 1 partition) the example
    once counted 3 of 6 partitions ("committed 5 of 10"); it reads the partitions from the broker and counts only
    its own run's records, so a second run prints the same."""
    broker = start_broker_process(tmp_path, "--topic", "orders:6")
    try:
        runs = [
            subprocess.run(
                [sys.executable, str(ROOT / "examples" / "exactly_once_confluent.py"), broker.bootstrap],
                capture_output=True,
                text=True,
                timeout=80,
            )
            for _ in range(2)
        ]
    finally:
        broker.stop()
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout == (
            "committed 5 records\naborted 5 records\ncommitted 5 records\n"
            "the group committed 10 of 10 input offsets\n"
            "read_committed sees 10 records, 10 distinct\nread_uncommitted sees 15 records\n"
        )


LIBRARIES = {
    "quickstart_aiokafka.py": ("aiokafka", "aiokafka"),
    "quickstart_kafka_python.py": ("kafka", "kafka-python"),
    "quickstart_confluent.py": ("confluent_kafka", "confluent-kafka"),
    "exactly_once_confluent.py": ("confluent_kafka", "confluent-kafka"),
}


@pytest.mark.parametrize("example", sorted(LIBRARIES))
def test_an_example_without_its_client_library_says_what_to_install(example: str) -> None:
    """A fresh machine that installed only the broker (issue 18): one line naming the `clients` extra."""
    module, package = LIBRARIES[example]
    path = ROOT / "examples" / example
    hide_and_run = (
        f"import runpy, sys; sys.modules[{module!r}] = None; "
        f"runpy.run_path({str(path)!r}, run_name='__main__')"
    )
    run = subprocess.run([sys.executable, "-c", hide_and_run], capture_output=True, text=True, timeout=30)
    assert run.returncode == 1, run
    assert run.stderr == (
        f"{path}: {package} is not installed: pip install '.[clients]' in the kafka-group-broker checkout "
        f"(the three client libraries), or pip install {package}\n"
    )


def test_the_quick_start_installs_the_clients_extra_and_skips_the_initial_delay() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {requirement.split("==")[0] for requirement in extras["clients"]} == {
        "aiokafka", "kafka-python", "confluent-kafka",
    }  # fmt: skip
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = section.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert commands[0] == "pip install '.[clients]'"
    assert commands[1].startswith("group-broker serve --group-initial-rebalance-delay-ms 0 --topic quickstart:4")
    assert commands[2].startswith("python examples/quickstart_aiokafka.py")
