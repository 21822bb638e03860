"""End to end: a chaos run against a real broker writing its event log, then the job on that log.

The broker runs as its own process with ``--event-log``; the chaos runner (``python -m broker.chaos.runner``)
SIGKILLs one of three confluent-kafka consumers every 4 s, with a 2 s session timeout. The runner measures each
kill from the broker's events over the control API; the job measures from the log file. They must agree: one
expired membership per kill, ended when the runner saw the expiry, its silence covering the time from the kill;
the same number of rebalances from each kill to the recovery; nothing lost. The second test does the same for a
KIP-848 consumer group.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job
from broker.chaos.launch import consumer_group_timers
from tests.analytics.conftest import rows
from tests.conftest import ROOT, start_broker_process

SESSION_MS = 2000
HEARTBEAT_MS = 500
GROUP = "analytics-e2e"
CLOCK_MS = 2  # the runner rounds to the millisecond, the broker stamps whole milliseconds


def control_url(log_path: Path, timeout_s: float = 15.0) -> str:
    """The control API's address, from the broker's JSON log line ``control api listening``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == "control api listening":
                return str(record["url"])
        time.sleep(0.1)
    raise TimeoutError(f"no 'control api listening' line in {log_path}")


@pytest.mark.timeout(240)
def test_the_job_agrees_with_what_the_chaos_runner_measured(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    broker = start_broker_process(tmp_path, "--event-log", str(events), "--admin-port", "0")
    try:
        admin = control_url(broker.log_path)
        report_path = tmp_path / "report.json"
        done = subprocess.run(
            [
                sys.executable, "-m", "broker.chaos.runner", "--bootstrap", broker.bootstrap, "--admin", admin,
                "--client", "confluent", "--consumers", "3", "--partitions", "6", "--topic", GROUP, "--group", GROUP,
                "--duration", "12.5", "--interval", "4", "--kill-ratio", "1", "--restart-after", "1", "--seed", "3",
                "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
                "--rate", "100", "--json", str(report_path), "--workdir", str(tmp_path / "work"),
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    finally:
        broker.stop()  # a clean stop: the broker unloads the group, the log ends with it
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["records"]["lost"] == 0, report["records"]
    kills = report["kills"]
    assert [k["signal"] for k in kills] == ["SIGKILL"] * 3 and all(k["detected"] for k in kills), kills

    out = tmp_path / "analysis"
    result = job.run([str(tmp_path / "events.jsonl*")], str(out), spark=spark)  # a glob, as for rotated logs
    context = json.dumps(kills, indent=1)

    counts = {entry["kind"]: entry["count"] for entry in result.input}
    assert counts["lines"] == counts["parsed"] > 0, result.input
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    assert counts["lines"] == len(logged)

    members = [m for m in rows(spark, out, "members") if m["group_id"] == GROUP]
    expired = [m for m in members if m["end"] == "expired"]
    assert len(expired) == len(kills), context
    for kill in kills:
        (member,) = [m for m in expired if m["client_id"] == kill["client_id"]]
        assert member["member_id"] in kill["member_ids"] and member["end_cause"] == "session_timeout"
        kill_ms = kill["at"] * 1000
        detect_ms = kill["detect_s"] * 1000
        # The runner's detection: from the kill to the broker's member_expired, which ends the membership.
        assert abs((member["ended_ms"] - kill_ms) - detect_ms) <= CLOCK_MS, (member, kill)
        # The broker's: from the last heartbeat, which came before the kill, at most a heartbeat interval before.
        silence = member["since_last_heartbeat_ms"]
        assert silence >= SESSION_MS and detect_ms - CLOCK_MS <= silence <= detect_ms + HEARTBEAT_MS + 1000, member
        assert member["session_timeout_ms"] == SESSION_MS

    rebalances = [r for r in rows(spark, out, "rebalances") if r["group_id"] == GROUP]
    assert all(r["outcome"] != "open" for r in rebalances), rebalances
    started = [e for e in logged if e["event"] == "rebalance_started" and e["group_id"] == GROUP]
    assert sum(1 + r["restarts"] for r in rebalances) == len(started) >= report["group"]["rebalances"]
    for kill in kills:
        kill_ms = kill["at"] * 1000
        recovered_ms = kill_ms + kill["recover_s"] * 1000
        between = [r for r in rebalances if r["start_ms"] >= kill_ms - CLOCK_MS and r["end_ms"] <= recovered_ms + 1]
        if not kill["overlapped"]:
            assert sum(1 + r["restarts"] for r in between) == kill["rebalances"], (kill, between)
        # The runner's recovery: the first sync after the detection with every partition owned.
        (recovery,) = [r for r in rebalances if r["generation"] == kill["recover_generation"]]
        assert abs(recovery["end_ms"] - recovered_ms) <= CLOCK_MS, (recovery, kill)
        assert recovery["outcome"] == "stable" and recovery["partitions_unowned"] == 0, recovery
        assert recovery["unowned_partition_seconds"] is not None

    causes: dict[str, Any] = {}
    for r in rebalances:
        causes[r["cause"]] = causes.get(r["cause"], 0) + 1
    summary = {s["group_id"]: s for s in rows(spark, out, "summary")}
    group = summary[GROUP]
    assert group["expirations"] == len(kills) and group["rebalances"] == len(rebalances)
    # The restarted consumer joins (after 1 s) before the dead one expires (after 2 s): the expiry happens inside
    # the rebalance the join started, so the episodes' causes are joins and the final leaves.
    assert group["causes"] == causes
    assert group["detection_ms_max"] == max(m["since_last_heartbeat_ms"] for m in expired)
    # Every episode counted once: its formation apart, the others by protocol (issue 26).
    split = (group["formations"], group["eager"], group["cooperative"], group["consumer"], group["no_protocol"])
    assert sum(split) == len(rebalances) and group["formations"] >= 1 and group["consumer"] == 0
    assert group["no_protocol"] <= sum(1 for r in rebalances if not r["rebalance_protocol"])
    assert summary[None]["expirations"] >= len(kills)

    # Everything ended: the consumers left at the end and the broker unloaded the group when it stopped.
    ownership = [o for o in rows(spark, out, "ownership") if o["group_id"] == GROUP]
    assert ownership and all(o["end"] != "open" for o in ownership)
    assert {o["partition"] for o in ownership} == set(range(6))
    assert all(m["end"] != "open" for m in members)


@pytest.mark.timeout(240)
def test_the_job_agrees_with_the_chaos_runner_on_a_consumer_group(spark: SparkSession, tmp_path: Path) -> None:
    """The same, for a KIP-848 consumer group (``--group-protocol consumer``; the broker's consumer-group session
    is 2 s, its heartbeat interval 500 ms): seed 4 kills with SIGKILL, SIGTERM, SIGKILL. The runner's recovery is
    the group Stable again; the job's episode from the epoch bumps to that Stable must end there, with the same
    epoch bumps in between."""
    events = tmp_path / "events.jsonl"
    group = "analytics-e2e-consumer"
    timers = consumer_group_timers(SESSION_MS, HEARTBEAT_MS)
    broker = start_broker_process(tmp_path, "--event-log", str(events), "--admin-port", "0", *timers)
    try:
        admin = control_url(broker.log_path)
        report_path = tmp_path / "report.json"
        done = subprocess.run(
            [
                sys.executable, "-m", "broker.chaos.runner", "--bootstrap", broker.bootstrap, "--admin", admin,
                "--client", "confluent", "--group-protocol", "consumer", "--consumers", "3", "--partitions", "6",
                "--topic", group, "--group", group, "--duration", "12.5", "--interval", "4", "--kill-ratio", "0.5",
                "--restart-after", "1", "--seed", "4", "--rate", "100", "--json", str(report_path),
                "--workdir", str(tmp_path / "work"),
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    finally:
        broker.stop()
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    kills = report["kills"]
    assert report["ok"] is True and [k["signal"] for k in kills] == ["SIGKILL", "SIGTERM", "SIGKILL"], kills
    context = json.dumps(kills, indent=1)

    out = tmp_path / "analysis"
    result = job.run([str(events)], str(out), spark=spark)
    counts = {entry["kind"]: entry["count"] for entry in result.input}
    assert counts["lines"] == counts["parsed"] > 0, result.input
    logged = [json.loads(line) for line in events.read_text().splitlines()]

    members = [m for m in rows(spark, out, "members") if m["group_id"] == group]
    for kill in kills:
        (member,) = [m for m in members if m["client_id"] == kill["client_id"]]
        assert member["member_id"] in kill["member_ids"], (member, kill)
        # The runner's detection: from the kill to the broker's member_expired or member_left, which ends it.
        assert abs((member["ended_ms"] - kill["at"] * 1000) - kill["detect_s"] * 1000) <= CLOCK_MS, (member, kill)
        if kill["signal"] == "SIGKILL":
            assert (member["end"], member["end_cause"]) == ("expired", "session_timeout"), member
            assert member["since_last_heartbeat_ms"] == member["session_timeout_ms"] == SESSION_MS, member
        else:
            assert (member["end"], member["end_cause"]) == ("left", "left"), member

    rebalances = [r for r in rows(spark, out, "rebalances") if r["group_id"] == group]
    assert rebalances and all(r["rebalance_protocol"] == "consumer" for r in rebalances), rebalances
    assert all(r["outcome"] != "open" for r in rebalances), rebalances
    bumped = [e for e in logged if e["event"] == "group_epoch_bumped" and e["group_id"] == group]
    assert sum(1 + r["restarts"] for r in rebalances) == len(bumped) == report["group"]["rebalances"]
    for kill in kills:
        kill_ms = kill["at"] * 1000
        recovered_ms = kill_ms + kill["recover_s"] * 1000
        # The runner's recovery: the first Stable after the detection, at the group epoch it names.
        (recovery,) = [r for r in rebalances if r["generation"] == kill["recover_generation"]]
        assert abs(recovery["end_ms"] - recovered_ms) <= CLOCK_MS, (recovery, context)
        assert recovery["outcome"] == "stable" and recovery["unowned_partition_seconds"] is not None, recovery
        assert recovery["partitions"] == 6 and recovery["members_after"] in (2, 3), recovery
        between = [r for r in rebalances if r["start_ms"] >= kill_ms - CLOCK_MS and r["end_ms"] <= recovered_ms + 1]
        if not kill["overlapped"]:
            assert sum(1 + r["restarts"] for r in between) == kill["rebalances"], (kill, between)

    summary = {s["group_id"]: s for s in rows(spark, out, "summary")}[group]
    formed = summary["formations"]  # the group's first episode, and any after it went Empty (issue 26)
    assert formed >= 1 and (summary["consumer"] + formed, summary["eager"], summary["cooperative"]) == (
        len(rebalances), 0, 0,
    )  # fmt: skip
    assert summary["expirations"] == 2 and summary["detection_ms_max"] == SESSION_MS
    # Everything ended: the consumers left at the end (a stopping broker says nothing of consumer groups).
    ownership = [o for o in rows(spark, out, "ownership") if o["group_id"] == group]
    assert {o["partition"] for o in ownership} == set(range(6))
    assert all(o["end"] != "open" for o in ownership) and all(m["end"] != "open" for m in members)
