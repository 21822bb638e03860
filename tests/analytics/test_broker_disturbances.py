"""The broker_disturbances table (broker/analytics/tables/cluster.py, issue 29) on a real event log: a three-node
broker (``serve --nodes 3 --log-level debug``: its event log has the debug ``offsets_committed``), a chaos run of
two confluent consumers against it (``chaos run --bootstrap``) that stops the group's coordinator node at 3 s
(graceful: its coordinators move first; tests/chaos/test_cluster_chaos.py kills it),
starts it a second later and moves the coordinator at 4 s, then the job on the broker's log.

The group ``chaos-nodes-c`` hashes to ``__consumer_offsets`` partition 32 (node 3's): the stop is known; the topic's
two partitions are led by nodes 1 and 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job
from broker.analytics.tables.cluster import described
from broker.chaos.launch import Broker
from tests.chaos.test_chaos_runner import chaos

GROUP = "chaos-nodes-c"
TOPIC = "chaos-nodes-topic"


@pytest.mark.timeout(420)  # the chaos run is 10 s; Spark (its start, the job) the rest
def test_node_stop_and_coordinator_moves_with_every_members_next_commit(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    settings = ["--log-level", "debug", "--event-log", str(log)]
    broker = Broker.start(TOPIC, 2, tmp_path / "broker.log", settings, nodes=3)
    try:
        done = chaos(
            "--bootstrap", broker.bootstrap, "--admin", broker.admin, "--group", GROUP, "--topic", TOPIC,
            "--consumers", "2", "--partitions", "2", "--stop-node-every", "3", "--stop-node-mode", "graceful",
            "--move-coordinator-every", "4",
            "--node-restart-after", "1", "--duration", "5", "--interval", "60", "--seed", "1",
            "--session-timeout-ms", "2000", "--heartbeat-interval-ms", "500", "--workdir", str(tmp_path / "work"),
            "--json", str(tmp_path / "report.json"),
        )  # fmt: skip
    finally:
        broker.stop()
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["cluster"]["stops"] == 1 and report["cluster"]["moves"] == 1, report["cluster"]

    out = tmp_path / "tables"
    result = job.run([str(log)], str(out), spark=spark)
    rows = [r.asDict() for r in spark.read.parquet(str(out / "broker_disturbances")).collect()]
    assert result.rows["broker_disturbances"] == len(rows)
    mine = [r for r in rows if r["group_id"] == GROUP]
    context = json.dumps(sorted(rows, key=lambda r: (r["seq"], r["member_id"] or "")), indent=1, default=str)
    # The group's disturbances: the stop, the coordinator move it caused (off node 3), the start, the move.
    by_event: dict[tuple[str, str | None], list[dict[str, object]]] = {}
    for row in mine:
        by_event.setdefault((str(row["event"]), row["cause"]), []).append(row)
    assert set(by_event) == {
        ("node_stopped", None), ("coordinator_moved", "node_stopped"), ("node_started", None),
        ("coordinator_moved", "moved"),
    }, context  # fmt: skip
    stop = by_event["node_stopped", None]
    assert {r["node_id"] for r in stop} == {3} and {r["mode"] for r in stop} == {"graceful"}, context
    failover = by_event["coordinator_moved", "node_stopped"]
    assert {(r["partition"], r["previous_node"]) for r in failover} == {(32, 3)}, context
    assert all(r["node_id"] in (1, 2) and r["epoch"] >= 1 for r in failover), context
    move = by_event["coordinator_moved", "moved"]
    assert {r["partition"] for r in move} == {32} and all(r["node_id"] != r["previous_node"] for r in move), context
    for rows_of_one in by_event.values():
        # Both members, each with its next acknowledged commit, and the longest of them for the group.
        assert len({r["member_id"] for r in rows_of_one}) == 2, context
        assert all(r["commits_logged"] and r["client_id"].startswith("chaos-") for r in rows_of_one), context
        assert all(r["next_commit_ms"] is not None and 0 <= r["next_commit_ms"] < 10_000 for r in rows_of_one)
        longest = max(int(r["next_commit_ms"]) for r in rows_of_one)
        assert {r["all_committed_ms"] for r in rows_of_one} == {longest}, context
    # The runner's own marks of the same actions are disturbances of the group too.
    marks = [r.asDict() for r in spark.read.parquet(str(out / "disturbances")).collect()]
    actions = sorted(str(r["action"]) for r in marks if r["group_id"] == GROUP)
    assert actions == ["move_coordinator", "start_node", "stop_node"], marks


def test_the_progress_line_of_a_disturbance() -> None:
    base: dict[str, object] = {
        "event": "node_stopped", "node_id": 3, "mode": "kill", "cause": None, "partition": None,
        "previous_node": None, "epoch": None, "commits_logged": True, "all_committed_ms": 95, "members": 2,
    }  # fmt: skip
    assert described(base) == "node_stopped of node 3 (kill) -> 2 members committed again within 95 ms"
    moved = {**base, "event": "coordinator_moved", "node_id": 1, "mode": None, "cause": "node_stopped",
             "partition": 32, "previous_node": 3, "epoch": 1, "all_committed_ms": None}  # fmt: skip
    assert described(moved) == (
        "coordinator of partition 32 moved from node 3 to 1 (node_stopped, epoch 1) -> not every member committed "
        "again"
    )
    unlogged = described({**base, "commits_logged": False})
    assert unlogged.endswith("(no offsets_committed in the log: serve --log-level debug)"), unlogged
