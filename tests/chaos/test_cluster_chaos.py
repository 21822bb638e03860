"""``group-broker chaos run --nodes N --stop-node-every S --move-coordinator-every S`` (broker/chaos/cluster_chaos.py):
chaos aimed at the broker's nodes (issue 29).

The end-to-end test runs the runner as a user would with a three-node broker of its own, two confluent consumers,
5 s of chaos: the group's coordinator node killed at 3 s and started again a second later, the coordinator moved
at 4 s. Nothing acknowledged may be lost, no record delivered again past an acknowledged commit, and each action
has every consumer's next acknowledged commit after it. The broker's own events (node_stopped, node_started,
leader_moved, coordinator_unloaded/loaded) and the runner's chaos_action marks are in its event log.

The group is picked so that the stop is known: ``chaos-nodes-c`` hashes to ``__consumer_offsets`` partition 32, led
by node 3 (index 32 % 3), which also leads two of the topic's six partitions (2 and 5): the kill moves the
coordinator and those leaders, and the consumers' fetchers follow them (OffsetForLeaderEpoch).

The others check the refusals: the options that make no sense together, and ``--bootstrap`` to a running broker
of one node (its ``GET /v1/cluster``), which is refused before anything starts, with exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from broker.chaos import cluster_chaos, options
from broker.chaos.launch import Broker
from broker.cluster.hashing import partition_for
from tests.chaos.test_chaos_runner import chaos

GROUP = "chaos-nodes-c"


@pytest.mark.timeout(100)
def test_node_stop_and_coordinator_move_lose_nothing_and_are_measured(tmp_path: Path) -> None:
    assert partition_for(GROUP, 50) % 3 == 2  # its coordinator is node 3, the leader of partitions 2 and 5 too
    report_path, event_log = tmp_path / "report.json", tmp_path / "events.jsonl"
    done = chaos(
        "--nodes", "3", "--group", GROUP, "--consumers", "2", "--partitions", "6",
        "--stop-node-every", "3", "--move-coordinator-every", "4", "--node-restart-after", "1",
        "--duration", "5", "--interval", "60", "--seed", "1", "--session-timeout-ms", "2000",
        "--heartbeat-interval-ms", "500", "--rate", "100", "--event-log", str(event_log),
        "--json", str(report_path), "--workdir", str(tmp_path / "work"),
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    report = json.loads(report_path.read_text())
    context = f"{json.dumps(report, indent=1)[:8000]}\nstdout:\n{done.stdout}"
    assert report["ok"] is True and report["config"]["nodes"] == 3, context
    assert report["config"]["stop_node_mode"] == "alternate", context
    assert len(report["broker"]["bootstrap"].split(",")) == 3, context  # every node: a restarted client finds one

    records = report["records"]
    assert records["produced"] > 300 and records["lost"] == 0 and records["unique"] == records["produced"], context
    assert records["commits_acked"] > 0 and records["duplicated_after_commit"] == 0, context

    assert report["cluster"]["stops"] == 1 and report["cluster"]["moves"] == 1, context
    assert report["cluster"]["starts"] == 1, context
    by_action = {a["action"]: a for a in report["cluster_actions"]}
    stop, start, move = (by_action[name] for name in ("stop_node", "start_node", "move_coordinator"))
    assert (stop["action"], stop["mode"], stop["node_id"], stop["partition"]) == ("stop_node", "kill", 3, 32), context
    assert start["action"] == "start_node" and start["node_id"] == 3, context
    assert move["action"] == "move_coordinator" and move["partition"] == 32 and move["node_id"] != move["from_node"]
    assert move["epoch"] is not None and move["epoch"] >= 2, context  # one bump for the stop, one for the move
    for action in (stop, move):
        rows = action["next_commits"]
        assert {row["client_id"] for row in rows} == {"chaos-0-0", "chaos-1-0"}, context
        assert all(row["next_commit_ms"] is not None for row in rows), context
        assert action["all_committed_ms"] == max(row["next_commit_ms"] for row in rows) < 10_000, context
    assert report["notes"] == [], context

    events = [json.loads(line) for line in event_log.read_text().splitlines() if line.strip()]
    seen = {e["event"] for e in events}
    assert {"node_stopped", "node_started", "leader_moved", "coordinator_unloaded", "coordinator_loaded"} <= seen
    moved = {e["partition"] for e in events if e["event"] == "leader_moved" and e["topic"] == report["config"]["topic"]
             and e["cause"] == "node_stopped"}  # fmt: skip
    assert moved == {2, 5}, moved  # node 3's partitions of the topic: their consumers read on past the move
    marks = [e["action"] for e in events if e["event"] == "chaos_action" and e["group_id"] == GROUP]
    assert sorted(marks) == ["move_coordinator", "start_node", "stop_node"], marks

    assert "1 node stops, 1 starts, 1 coordinator moves (3 nodes)" in done.stdout, done.stdout
    assert "records delivered again after their commit was acknowledged 0" in done.stdout, done.stdout
    assert "lost 0" in done.stdout and "OK" in done.stdout, done.stdout


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_node_chaos_needs_a_second_node() -> None:
    assert options.argument_problems(parse("--nodes", "3", "--stop-node-every", "5")) == []
    assert options.argument_problems(parse("--nodes", "2", "--move-coordinator-every", "5")) == []
    assert options.argument_problems(parse("--bootstrap", "h:1", "--stop-node-every", "5")) == []  # asked later
    assert options.argument_problems(parse("--stop-node-every", "5")) == [
        "--stop-node-every needs --nodes 2 or more: it stops a node, never the last running one, and a one-node "
        "broker has no other"
    ]
    assert options.argument_problems(parse("--nodes", "1", "--move-coordinator-every", "5")) == [
        "--move-coordinator-every needs --nodes 2 or more: it moves the coordinator to another running node, and a "
        "one-node broker has no other"
    ]
    assert options.argument_problems(parse("--nodes", "3", "--bootstrap", "h:1")) == [
        "--nodes is for the broker the run starts: a running broker (--bootstrap) has the nodes it was started with "
        "(serve --nodes N); leave out --nodes"
    ]
    assert options.argument_problems(parse("--nodes", "0")) == ["--nodes must be at least 1"]
    assert options.argument_problems(parse("--nodes", "3", "--stop-node-every", "0")) == [
        "--stop-node-every must be positive"
    ]
    assert options.argument_problems(parse("--nodes", "3", "--stop-node-mode", "kill")) == [
        "--stop-node-mode is for --stop-node-every"
    ]
    share = options.argument_problems(parse("--nodes", "3", "--stop-node-every", "5", "--group-protocol", "share"))
    assert share == [
        "--stop-node-every and --move-coordinator-every measure the time to each consumer's next acknowledged "
        "commit: a share group commits no offsets (not with --group-protocol share)"
    ]
    restarts = options.argument_problems(parse("--nodes", "3", "--broker-restart-every", "5"))
    assert len(restarts) == 1 and "not with --nodes above 1" in restarts[0], restarts


def test_bootstrap_to_a_one_node_broker_is_refused_before_the_run(tmp_path: Path) -> None:
    one = Broker.start("t", 1, tmp_path / "one.log")
    three = Broker.start("t", 1, tmp_path / "three.log", nodes=3)
    try:
        done = chaos("--bootstrap", one.bootstrap, "--admin", one.admin, "--stop-node-every", "3", timeout=30)
        assert done.returncode == 2, done
        refused = f"the broker at {one.bootstrap} has 1 node: --stop-node-every and --move-coordinator-every"
        assert refused in done.stderr, done.stderr
        assert "serve --nodes 3" in done.stderr, done.stderr
        # A running broker of three nodes is good for it.
        args = parse("--bootstrap", three.bootstrap.split(",")[0], "--admin", three.admin, "--stop-node-every", "3")
        assert cluster_chaos.running_cluster_problem(args) is None
    finally:
        one.stop()
        three.stop()
