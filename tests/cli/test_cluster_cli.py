"""``group-broker cluster`` and its verbs, as processes against a real ``serve --nodes 3`` broker in its own process
(the harness of ``test_control_cli.py``), checked by their output, their exit codes and what the control API says
afterwards; ``groups`` and ``describe`` naming a group's coordinator, with a real kafka-python consumer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cluster.hashing import partition_for
from tests.cli.test_control_cli import TOPIC, Broker, cli, consumers, failed, ok, stable, start_broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = start_broker(tmp_path / "broker.log", "--nodes", "3", "--node-id", "1")
    yield started
    started.stop()


def node_port(broker: Broker, node_id: int) -> int:
    return next(int(node["port"]) for node in broker.api().cluster()["nodes"] if node["node_id"] == node_id)


def test_cluster_shows_the_nodes_the_controller_and_the_internal_leaders(broker: Broker) -> None:
    out = ok(cli(broker, "cluster"))
    lines = out.splitlines()
    assert lines[0].startswith("Cluster ") and "3 nodes, controller 1 (*)" in lines[0]
    assert "coordinator load delay 0 ms" in lines[0]
    assert lines[2].split() == ["NODE", "ADDRESS", "STATE", "GROUP", "PARTITIONS", "TXN", "PARTITIONS"]
    rows = [line.split() for line in lines[3:6]]
    assert [row[0] for row in rows] == ["1", "2", "3"] and rows[0][1] == "*"
    assert [row[-3:] for row in rows] == [["up", "17", "17"], ["up", "17", "17"], ["up", "16", "16"]]
    assert f"127.0.0.1:{node_port(broker, 2)}" in lines[4]
    assert "__consumer_offsets (50 partitions), leaders:" in out
    assert "  node 1   0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48" in out
    assert "__transaction_state (50 partitions), leaders:" in out
    shown = json.loads(ok(cli(broker, "cluster", "--json")))
    assert shown == broker.api().cluster()


def test_stop_and_start_a_node(broker: Broker) -> None:
    out = ok(cli(broker, "cluster", "stop", "2"))
    assert out.splitlines()[0] == "stopped node 2 (kill): 1 partition leader and 34 coordinator partitions moved"
    assert f"  {TOPIC}-1 -> node 3" in out
    assert "  __consumer_offsets 1,4,7,10,13,16,19,22,25,28,31,34,37,40,43,46,49 -> node 3" in out
    shown = ok(cli(broker, "cluster"))
    assert "stopped  0" in shown and "up       33" in shown
    assert "  node 3   1-2,4-5,7-8," in shown
    assert [node["up"] for node in broker.api().cluster()["nodes"]] == [True, False, True]
    started = ok(cli(broker, "cluster", "start", "2"))
    assert started.startswith("started node 2: it leads nothing")
    assert all(node["up"] for node in broker.api().cluster()["nodes"])
    graceful = json.loads(ok(cli(broker, "cluster", "stop", "3", "--graceful", "--json")))
    assert graceful["node_id"] == 3 and [TOPIC, 2, 1] in graceful["moved_leaders"]
    assert "(graceful)" in ok(cli(broker, "cluster", "stop", "2", "--graceful"))


def test_refusals_are_one_line_and_exit_1(broker: Broker) -> None:
    assert "no node 9" in failed(cli(broker, "cluster", "stop", "9"))
    assert "no node 9" in failed(cli(broker, "cluster", "start", "9"))
    ok(cli(broker, "cluster", "stop", "1"))
    ok(cli(broker, "cluster", "stop", "2"))
    assert "last running node" in failed(cli(broker, "cluster", "stop", "3"))
    assert "stopped" in failed(cli(broker, "cluster", "move-coordinator", "--group", "g", "--to", "1"))
    assert "stopped" in failed(cli(broker, "cluster", "move-leader", TOPIC, "0", "--to", "2"))
    assert "no partition" in failed(cli(broker, "cluster", "move-leader", "nope", "0", "--to", "3"))
    assert "ms must be" in failed(cli(broker, "cluster", "load-delay", "-5"))


def test_usage_errors_exit_2(broker: Broker) -> None:
    for argv in (
        ["cluster", "stop"],
        ["cluster", "stop", "two"],
        ["cluster", "move-coordinator", "--to", "1"],
        ["cluster", "move-coordinator", "--group", "g", "--transactional-id", "t", "--to", "1"],
        ["cluster", "move-coordinator", "--group", "g"],
        ["cluster", "move-leader", TOPIC, "0"],
        ["cluster", "move-leader", TOPIC, "0", "--to", "1", "--preferred"],
        ["cluster", "load-delay"],
    ):
        result = cli(broker, *argv)
        assert result.returncode == 2, (argv, result.stdout, result.stderr)


def test_move_a_coordinator_a_leader_and_set_the_load_delay(broker: Broker) -> None:
    api = broker.api()
    before = api.coordinator("orders-app")
    target = 1 if before["node"] != 1 else 2
    out = ok(cli(broker, "cluster", "move-coordinator", "--group", "orders-app", "--to", str(target)))
    assert out.strip() == (
        f"group orders-app: coordinator is node {target} (__consumer_offsets partition {before['partition']}, "
        f"leader epoch {before['epoch'] + 1}); every key hashed to that partition is coordinated there"
    )
    assert api.coordinator("orders-app")["node"] == target
    txn = json.loads(ok(cli(broker, "cluster", "move-coordinator", "--transactional-id", "tx", "--to", "3", "--json")))
    assert txn["topic"] == "__transaction_state" and txn["node"] == 3
    assert api.coordinator("tx", "transaction")["node"] == 3

    assert ok(cli(broker, "cluster", "move-leader", TOPIC, "0", "--to", "2")).strip() == (
        f"{TOPIC}-0: leader node 2, leader epoch 1"
    )
    assert ok(cli(broker, "cluster", "move-leader", TOPIC, "0", "--preferred")).strip() == (
        f"{TOPIC}-0: leader node 1, leader epoch 2"
    )
    assert ok(cli(broker, "cluster", "load-delay", "3000")).strip() == "coordinator load delay: 3000 ms"
    assert api.cluster()["load_delay_ms"] == 3000
    assert "coordinator load delay 3000 ms" in ok(cli(broker, "cluster"))


def test_groups_and_describe_name_the_coordinator(broker: Broker, tmp_path: Path) -> None:
    group = "cluster-cli-app"
    node = [1, 2, 3][partition_for(group, 50) % 3]  # round robin: partition p is led by node p mod 3 + 1
    with consumers(broker, group, tmp_path):
        stable(broker.api(), group, 1)
        listed = ok(cli(broker, "groups")).splitlines()
        assert listed[0].split()[-1] == "COORDINATOR"
        row = next(line for line in listed if line.startswith(group))
        assert row.split()[-1] == str(node)
        described = ok(cli(broker, "describe", group))
        assert f"Coordinator: node {node}" in described.splitlines()
        assert "Group:       cluster-cli-app" in described.splitlines()
        target = next(n for n in (1, 2, 3) if n != node)
        ok(cli(broker, "cluster", "move-coordinator", "--group", group, "--to", str(target)))
        assert f"Coordinator: node {target}" in ok(cli(broker, "describe", group)).splitlines()


def test_a_single_node_broker_shows_one_node_and_no_coordinator_column(tmp_path: Path) -> None:
    single = start_broker(tmp_path / "single.log")
    try:
        out = ok(cli(single, "cluster"))
        assert "1 node, controller" in out.splitlines()[0]
        (node,) = single.api().cluster()["nodes"]
        assert "last running node" in failed(cli(single, "cluster", "stop", str(node["node_id"])))
        with consumers(single, "one-node-app", tmp_path):
            stable(single.api(), "one-node-app", 1)
            assert "COORDINATOR" not in ok(cli(single, "groups")).splitlines()[0]
            described = ok(cli(single, "describe", "one-node-app")).splitlines()
            assert not any(line.startswith("Coordinator") for line in described)
            assert "Group:      one-node-app" in described
    finally:
        single.stop()
