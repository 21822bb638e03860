"""``group-broker chaos run`` (broker/chaos/): the real thing, end to end, plus its small parts.

The end-to-end test runs the runner as a user would, as its own process with its own broker (``--admin-port 0``):
three confluent-kafka consumer processes, a kill every 4 s for 13 s (seed 4 gives SIGKILL, SIGTERM, SIGKILL), a
2 s session timeout. It checks the exit code, that nothing acknowledged was lost, that the broker noticed every
kill (an expiry after a SIGKILL, a LeaveGroup after a SIGTERM) and that the group recovered each time, and the
shape of the JSON report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.chaos import measure, runner, schedule
from tests.conftest import ROOT

SESSION_MS = 2000
HEARTBEAT_MS = 500


def chaos(*options: str, timeout: float = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker.chaos.runner", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(90)
def test_chaos_run_loses_nothing_and_measures_every_kill(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = chaos(
        "--client", "confluent", "--consumers", "3", "--partitions", "6",
        "--duration", "13", "--interval", "4", "--kill-ratio", "0.5", "--restart-after", "1", "--seed", "4",
        "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
        "--rate", "100", "--json", str(report_path), "--workdir", str(tmp_path / "work"),
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    context = f"{json.dumps(report, indent=1)[:6000]}\nstdout:\n{done.stdout}"

    assert set(report) >= {
        "version", "ok", "config", "broker", "records", "kills", "summary", "group", "consumers", "notes", "workdir",
    }, context  # fmt: skip
    assert report["ok"] is True and report["broker"]["managed"] is True, context
    assert report["workdir"] == str((tmp_path / "work").resolve()) and Path(report["workdir"]).is_dir(), context
    assert report["config"]["seed"] == 4 and report["config"]["client"] == "confluent", context

    records = report["records"]
    assert records["produced"] > 500, context  # ~100/s for 13 s and more
    assert records["lost"] == 0 and records["lost_keys"] == [], context
    assert records["unique"] == records["produced"] and records["unexpected"] == 0, context
    assert records["consumed"] == records["unique"] + records["duplicated"], context

    kills = report["kills"]
    assert [k["signal"] for k in kills] == ["SIGKILL", "SIGTERM", "SIGKILL"], context  # seed 4, kill ratio 0.5
    assert [round(k["t_s"]) for k in kills] == [4, 8, 12], context
    for kill in kills:
        assert set(kill) >= {
            "number", "t_s", "at", "slot", "incarnation", "client_id", "pid", "signal", "member_ids", "detected",
            "detect_event", "detect_cause", "detect_s", "recovered", "recover_s", "recover_generation", "rebalances",
            "restarted_as", "rejoin_s", "overlapped",
        }, context  # fmt: skip
        assert kill["client_id"] == f"chaos-{kill['slot']}-{kill['incarnation']}", context
        assert kill["restarted_as"] == f"chaos-{kill['slot']}-{kill['incarnation'] + 1}", context
        assert kill["member_ids"] and kill["detected"] and kill["recovered"], context
        if kill["signal"] == "SIGKILL":
            # No LeaveGroup: the broker notices when the session times out (counted from the last heartbeat).
            assert (kill["detect_event"], kill["detect_cause"]) == ("member_expired", "session_timeout"), context
            assert (SESSION_MS - HEARTBEAT_MS - 200) / 1000 <= kill["detect_s"] <= (SESSION_MS + 1500) / 1000, context
        else:
            assert (kill["detect_event"], kill["detect_cause"]) == ("member_left", "leave_group"), context
            assert kill["detect_s"] < SESSION_MS / 1000, context
        assert kill["detect_s"] <= kill["recover_s"] < kill["detect_s"] + 5, context
        assert kill["rebalances"] >= 1 and kill["recover_generation"] >= 2, context
        assert kill["rejoin_s"] is not None and kill["rejoin_s"] >= kill["recover_s"], context

    summary = report["summary"]
    assert (summary["kills"], summary["detected"], summary["recovered"]) == (3, 3, 3), context
    assert summary["detect_s"]["max"] == max(k["detect_s"] for k in kills), context
    assert summary["recover_s"]["mean"] == pytest.approx(sum(k["recover_s"] for k in kills) / 3, abs=0.002)
    assert summary["by_signal"]["SIGKILL"]["kills"] == 2 and summary["by_signal"]["SIGTERM"]["kills"] == 1

    consumers = report["consumers"]
    assert len(consumers) == 6, context  # three first incarnations, three restarts
    stopped = {c["client_id"]: (c["stopped_by"], c["exit_code"]) for c in consumers}
    for kill in kills:
        expected_code = -9 if kill["signal"] == "SIGKILL" else 0
        assert stopped[kill["client_id"]] == (kill["signal"], expected_code), context
    assert sum(1 for how, code in stopped.values() if how == "stop" and code == 0) == 3, context
    assert sum(c["records"] for c in consumers) == records["consumed"], context
    assert report["notes"] == [], context

    # What a person reads: the kill table and the verdict.
    assert "3 kills (confluent, seed 4)" in done.stdout, done.stdout
    assert "session_timeout" in done.stdout and "leave_group" in done.stdout, done.stdout
    assert f"lost 0, duplicated {records['duplicated']}  OK" in done.stdout, done.stdout
    assert "[red]" not in done.stdout, "style tags leaked into plain output"


@pytest.mark.timeout(90)
def test_a_clean_run_deletes_its_files_and_its_report_names_no_directory(tmp_path: Path) -> None:
    """Without --workdir a clean run's files go with their temporary directory: the report must not point there."""
    done = subprocess.run(
        [sys.executable, "-m", "broker.chaos.runner", "--consumers", "1", "--partitions", "2", "--duration", "2",
         "--interval", "30", "--rate", "50", "--session-timeout-ms", str(SESSION_MS),
         "--heartbeat-interval-ms", str(HEARTBEAT_MS), "--json", "report.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=80,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is True and report["notes"] == [], report
    assert report["workdir"] is None, report
    assert "logs and record files: deleted, a clean run (--workdir DIR keeps them)" in done.stdout, done.stdout
    assert f"report: {tmp_path.resolve() / 'report.json'}" in done.stdout, done.stdout


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    done = chaos("--consumers", "0", "--kill-ratio", "1.5")
    assert done.returncode == 2, done
    assert "--consumers must be at least 1" in done.stderr and "--kill-ratio" in done.stderr, done.stderr
    assert chaos("--duration", "soon").returncode == 2
    assert chaos("--client", "kafka").returncode == 2

    # The way ``group-broker chaos run`` calls it: add_arguments on its parser, then run(args).
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    args = parser.parse_args(["--admin", "http://127.0.0.1:1", "--heartbeat-interval-ms", "9000"])
    assert runner.run(args) == 2
    args = parser.parse_args(["--client", "aiokafka", "--assignor", "cooperative-sticky"])
    assert runner.run(args) == 2


def test_missing_client_library_is_one_line_naming_the_pip_package(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['kafka'] = None\n"
        "from broker.chaos import consumer\n"
        f"sys.exit(consumer.main(['--client', 'kafka-python', '--bootstrap', '127.0.0.1:1', '--group', 'g',"
        f" '--topic', 't', '--client-id', 'c', '--out', {str(tmp_path / 'out')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert errors == [
        "python -m broker.chaos.consumer: error: the kafka-python client library (module 'kafka') is not installed:"
        " pip install kafka-python"
    ], done.stderr


# -- measuring from events, without processes ---------------------------------------------------------------


def event(seq: int, ts_ms: int, name: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "seq": seq, "ts_ms": ts_ms, "run_id": "r", "event": name, "group_id": "g", **fields}


def test_measure_reads_detection_recovery_and_rebalances_from_events() -> None:
    """SIGKILL at t=10 s; the restarted incarnation joins first (a rebalance that waits for the dead member),
    the dead member expires at 12 s, a first (cooperative) sync leaves partitions unowned, the second does not."""
    events = [
        event(1, 1000, "member_joined", member_id="m0", client_id="chaos-0-0"),
        event(2, 1000, "member_joined", member_id="m1", client_id="chaos-1-0"),
        event(3, 5000, "member_expired", member_id="m0", cause="session_timeout"),  # an older expiry: not this kill
        event(4, 11000, "member_joined", member_id="m0b", client_id="chaos-0-1"),
        event(5, 11000, "rebalance_started", generation_id=3, cause="member_joined"),
        event(6, 11900, "sync_completed", generation_id=3, unowned=0, assignments={"m1": {"t": [0]}}),
        event(7, 12000, "member_expired", member_id="m0", cause="session_timeout"),
        event(8, 12001, "rebalance_started", generation_id=4),
        event(9, 12100, "sync_completed", generation_id=4, unowned=2, assignments={"m1": {"t": [0]}}),
        event(10, 12300, "sync_completed", generation_id=5, unowned=0, assignments={"m1": {"t": [0]}, "m0b": {}}),
        event(11, 12600, "sync_completed", generation_id=6, unowned=0, assignments={"m0b": {"t": [1]}}),
    ]
    kill = schedule.Kill(1, slot=0, incarnation=0, pid=1, signal="SIGKILL", at=10.0, t=10.0, restarted_as="chaos-0-1")
    later = schedule.Kill(2, slot=1, incarnation=0, pid=2, signal="SIGTERM", at=12.2, t=12.2)
    measured = measure.measure(kill, events, measure.member_clients(events), later)
    assert measured == {
        "member_ids": ["m0"],
        "detected": True,
        "detect_event": "member_expired",
        "detect_cause": "session_timeout",
        "detect_s": 2.0,
        "recovered": True,
        "recover_s": 2.3,
        "recover_generation": 5,
        "rebalances": 2,
        "rejoin_s": 2.6,
        "overlapped": True,
    }
    never = schedule.Kill(3, slot=1, incarnation=0, pid=2, signal="SIGKILL", at=20.0, t=20.0)
    assert measure.measure(never, events, measure.member_clients(events), None)["detected"] is False
