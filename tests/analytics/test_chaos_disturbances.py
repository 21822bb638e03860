"""A chaos run's kills, from its event log to the report: ``chaos run --event-log`` (the runner as its own process,
with its own broker, one SIGKILL), then the job on that log and a handwritten one (one Spark run for both), then
the report.

The handwritten log pins what "the rebalance it caused" means (docs/analytics.md, "disturbances"): a SIGKILL is
linked to the rebalance its member's expiry started, detected when the broker expired it; a SIGTERM to the one its
LeaveGroup started; a fault rule to the first rebalance within the window, or to none; a rule's removal to none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job, report
from broker.analytics.report import plots
from broker.analytics.report.gather import gather
from broker.analytics.tables.disturbances import MARGIN_MS
from broker.events import names
from tests.analytics.conftest import Log, rows, write_lines
from tests.analytics.test_windows import expired, join_done, joined, started, synced
from tests.conftest import ROOT

SESSION_MS = 2000


def handwritten() -> Log:
    log = Log("hand", "h")
    log(0, "group_created")
    for member in ("a", "b", "c"):
        joined(log, 1000, member)
    started(log, 1000, 0, "Empty", 3, "member_joined", "a")
    join_done(log, 1000, 1, ["a", "b", "c"])
    synced(log, 1100, 1, {"a": [0], "b": [1], "c": [2]})
    # A SIGKILL of b, named by client id: the broker notices at the session timeout.
    log(5000, names.CHAOS_ACTION, v=2, action="kill", signal="SIGKILL", client_id="client-b", pid=11)
    expired(log, 8000, "b", 3000)
    started(log, 8000, 1, "Stable", 2, "member_expired", "b")
    join_done(log, 8200, 2, ["a", "c"])
    synced(log, 8300, 2, {"a": [0, 1], "c": [2]})
    # A SIGTERM of c, named by member id: its LeaveGroup at once.
    log(20000, names.CHAOS_ACTION, v=2, action="kill", signal="SIGTERM", member_id="c", session_timeout_ms=3000)
    log(20050, "member_left", member_id="c", group_instance_id=None, client_id="client-c", cause="leave_group",
        reason="the consumer is being closed")  # fmt: skip
    started(log, 20050, 2, "Stable", 1, "member_left", "c")
    join_done(log, 20100, 3, ["a"])
    synced(log, 20200, 3, {"a": [0, 1, 2]})
    # A rule nothing follows, and its removal.
    rule = {"v": 2, "action": "error", "error": "REBALANCE_IN_PROGRESS", "match": {"api": "Heartbeat"}}
    log(30000, names.FAULT_RULE_ADDED, rule_id="f1", **rule)
    log(31000, names.FAULT_RULE_REMOVED, rule_id="f1", reason="deleted", hits=0, **rule)
    # Swallowed heartbeats: a's session runs out, the group empties.
    log(40000, names.FAULT_RULE_ADDED, v=2, rule_id="f2", action="swallow_heartbeats", match={"group_id": "h"})
    expired(log, 43000, "a", 3000)
    started(log, 43000, 3, "Stable", 0, "member_expired", "a")
    join_done(log, 43000, 4, [])
    return log


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("chaos-disturbances")
    log_path, report_path = work / "chaos-events.jsonl", work / "chaos.json"
    done = subprocess.run(
        [sys.executable, "-m", "broker.chaos.runner", "--client", "confluent", "--consumers", "2", "--partitions", "4",
         "--duration", "5", "--interval", "3", "--kill-ratio", "1", "--restart-after", "1", "--seed", "1",
         "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", "500", "--rate", "50",
         "--event-log", str(log_path), "--json", str(report_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    hand = write_lines(work / "hand.jsonl", handwritten().lines())
    out = work / "tables"
    job.run([str(log_path), str(hand)], str(out), spark=spark)
    page = report.render(out, spark)
    return {
        "stdout": done.stdout,
        "chaos": json.loads(report_path.read_text()),
        "log": [json.loads(line) for line in log_path.read_text().splitlines()],
        "out": out,
        "disturbances": rows(spark, out, "disturbances"),
        "rebalances": rows(spark, out, "rebalances"),
        "input": {r["kind"]: r["count"] for r in rows(spark, out, "input")},
        "html": page.read_text(encoding="utf-8"),
    }


def test_the_chaos_runs_event_log_has_its_kill_and_the_rebalances(analysed: dict[str, Any]) -> None:
    chaos, log = analysed["chaos"], analysed["log"]
    (kill,) = chaos["kills"]
    assert kill["signal"] == "SIGKILL" and chaos["broker"]["event_log"], chaos
    assert f"event log: {chaos['broker']['event_log']}" in analysed["stdout"]
    actions = [e for e in log if e["event"] == names.CHAOS_ACTION]
    assert len(actions) == 1, actions
    action = actions[0]
    assert action == action | {
        "group_id": chaos["config"]["group"], "action": "kill", "signal": "SIGKILL", "client_id": kill["client_id"],
        "pid": kill["pid"], "member_id": kill["member_ids"][0], "session_timeout_ms": SESSION_MS,
    }, action  # fmt: skip
    assert action["ts_ms"] <= kill["at"] * 1000 + 50  # posted before the signal went
    later = [e["event"] for e in log if e["seq"] > action["seq"]]
    assert names.MEMBER_EXPIRED in later and names.REBALANCE_STARTED in later, later
    assert analysed["input"]["unknown_event"] == 0 and analysed["input"]["missing_field"] == 0, analysed["input"]


def test_the_kill_is_linked_to_the_rebalance_it_caused(analysed: dict[str, Any]) -> None:
    chaos = analysed["chaos"]
    (kill,) = chaos["kills"]
    (row,) = [d for d in analysed["disturbances"] if d["run_id"] != "hand"]
    assert row == row | {
        "group_id": chaos["config"]["group"], "event": "chaos_action", "action": "kill", "signal": "SIGKILL",
        "client_id": kill["client_id"], "label": f"SIGKILL {kill['client_id']}", "member_end": "expired",
        "window_ms": SESSION_MS + MARGIN_MS,
    }, row  # fmt: skip
    # The runner measured the same detection from its side of the clock.
    assert abs(row["detected_ms"] - kill["detect_s"] * 1000) < 300, (row, kill)
    key = (row["run_id"], row["group_id"], row["rebalance_generation"])
    caused = [r for r in analysed["rebalances"] if (r["run_id"], r["group_id"], r["generation"]) == key]
    assert len(caused) == 1 and caused[0]["start_ms"] >= row["ts_ms"], (row, caused)
    assert caused[0]["end_ms"] >= row["member_end_ms"], (row, caused)


def test_what_each_disturbance_of_the_handwritten_log_caused(analysed: dict[str, Any]) -> None:
    found = {d["seq"]: d for d in analysed["disturbances"] if d["run_id"] == "hand"}
    got = sorted(
        (d["ts_ms"], d["event"], d["member_end"], d["rebalance_generation"], d["rebalance_cause"], d["detected_ms"])
        for d in found.values()
    )
    assert got == [
        (5000, "chaos_action", "expired", 2, "member_expired", 3000),
        (20000, "chaos_action", "left", 3, "member_left", 50),
        (30000, "fault_rule_added", None, None, None, None),
        (31000, "fault_rule_removed", None, None, None, None),
        (40000, "fault_rule_added", None, 4, "member_expired", 3000),
    ], got
    by_ts = {d["ts_ms"]: d for d in found.values()}
    assert by_ts[5000]["window_ms"] == 3000 + MARGIN_MS  # the member's session timeout, from its join
    assert by_ts[30000]["detail"] == 'rule f1: error REBALANCE_IN_PROGRESS for {"api":"Heartbeat"}', by_ts[30000]
    assert by_ts[20000]["detail"] == "kill (SIGTERM) of c", by_ts[20000]


def test_the_report_marks_each_disturbance_and_names_its_rebalance(
    analysed: dict[str, Any], spark: SparkSession
) -> None:
    page = analysed["html"]
    (kill,) = analysed["chaos"]["kills"]
    (row,) = [d for d in analysed["disturbances"] if d["run_id"] != "hand"]
    assert '<section id="disturbances">' in page
    expected = f"kill (SIGKILL) of {kill['client_id']} -&gt; rebalance gen {row['rebalance_generation']}, detected in "
    assert expected + f"{row['detected_ms'] / 1000:.1f} s" in page, page[page.find('id="disturbances"') :][:3000]
    assert "rule f1 (error) -&gt; no rebalance within 8.0 s" in page
    # On the timeline, a dashed line at the kill's time in the chaos group's lane, and the handwritten group's five.
    data = gather(spark, analysed["out"])
    figure = plots._plot_timeline(data)
    marks = {
        group: sorted(line.get_xdata()[0] * 86_400_000 for line in axes.lines if line.get_gid() == "disturbance")
        for group, axes in zip(data.timeline_groups, figure.axes, strict=True)
    }
    assert marks[row["group_id"]] == [pytest.approx(row["ts_ms"], abs=1)], marks
    assert marks["h"] == [pytest.approx(t, abs=1) for t in (5000, 20000, 30000, 31000, 40000)], marks
    labels = [text.get_text() for axes in figure.axes for text in axes.texts]
    assert f"SIGKILL {kill['client_id']}" in labels and "rule f2: swallow_heartbeats" in labels, labels
