"""The pytest plugin's cluster helpers as a user meets them (issue 29): ``group_broker_settings`` returning
``{"nodes": 3}``, then ``cluster()``, ``stop_node``, ``start_node``, ``coordinator_of``, ``move_coordinator``,
``move_leader`` and ``load_delay`` (and their ``.aio`` twins) in generated test files run by a fresh pytest, with a
real confluent-kafka consumer and aiokafka consumer that keep their group through a coordinator kill and a move."""

from __future__ import annotations

import pytest

from broker.testing.embedded import embedded_settings

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def group_broker_settings():
    return {"nodes": 3, "topics": {"orders": 1}}
"""

CLUSTER_TESTS = """
import time
import uuid

import pytest
from broker.control.client import ControlError


def group_on_another_node(group_broker, leader):
    # A group whose coordinator is not the node leading "orders": the kill moves the coordinator, not the data.
    return next(g for g in (f"app-{uuid.uuid4()}" for _ in range(100)) if group_broker.coordinator_of(g) != leader)


def test_three_nodes_and_a_bootstrap_of_all_of_them(group_broker):
    cluster = group_broker.cluster()
    assert [node["up"] for node in cluster["nodes"]] == [True, True, True]
    assert len(group_broker.bootstrap.split(",")) == 3
    assert group_broker.running_nodes() == [node["node_id"] for node in cluster["nodes"]]


def test_a_consumer_keeps_its_group_through_a_kill_and_a_move(group_broker):
    from confluent_kafka import Consumer, Producer

    nodes = group_broker.running_nodes()
    leader = nodes[0]  # the preferred replica of orders-0
    group = group_on_another_node(group_broker, leader)
    victim = group_broker.coordinator_of(group)
    producer = Producer({"bootstrap.servers": group_broker.bootstrap})
    consumer = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 500, "reconnect.backoff.max.ms": 200})
    seen = []

    def produce_and_consume(count):
        for i in range(count):
            producer.produce("orders", value=b"x", partition=0)
        producer.flush(10)
        wanted, deadline = len(seen) + count, time.monotonic() + 30
        while len(seen) < wanted and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.append(message.offset())
        assert len(seen) == wanted

    try:
        consumer.subscribe(["orders"])
        produce_and_consume(5)
        group_broker.wait_for(group, state="Stable", members=1, poll=lambda: consumer.poll(0.05))
        with group_broker.no_rebalance(group):
            stopped = group_broker.stop_node(victim)
            assert stopped["node_id"] == victim and stopped["moved_coordinators"]
            assert group_broker.coordinator_of(group) not in (victim, -1)
            produce_and_consume(5)
            target = next(n for n in nodes if n not in (victim, group_broker.coordinator_of(group)))
            moved = group_broker.move_coordinator(group, to=target)
            assert moved["node"] == target and group_broker.coordinator_of(group) == target
            produce_and_consume(5)
            group_broker.start_node(victim)
            assert group_broker.running_nodes() == nodes
        assert sorted(seen) == list(range(len(seen)))
    finally:
        consumer.close()


def test_leaders_load_delay_and_refusals(group_broker):
    moved = group_broker.move_leader("orders", 0, to=group_broker.running_nodes()[1])
    back = group_broker.move_leader("orders", 0)
    assert back["leader"] == group_broker.running_nodes()[0] and back["epoch"] == moved["epoch"] + 1
    group_broker.load_delay(250)
    assert group_broker.cluster()["load_delay_ms"] == 250
    group_broker.load_delay(0)
    assert group_broker.coordinator_of(transactional_id="tx") in group_broker.running_nodes()
    with pytest.raises(TypeError):
        group_broker.coordinator_of()
    with pytest.raises(ControlError) as unknown:
        group_broker.stop_node(99)
    assert unknown.value.status == 404


async def test_the_aio_twins(group_broker):
    nodes = await group_broker.aio.running_nodes()
    victim = nodes[-1]
    await group_broker.aio.stop_node(victim, graceful=True)
    assert (await group_broker.aio.running_nodes()) == nodes[:-1]
    group = "aio-group"
    await group_broker.aio.move_coordinator(group, to=nodes[0])
    assert (await group_broker.aio.coordinator_of(group)) == nodes[0]
    await group_broker.aio.move_leader("orders", 0, to=nodes[1])
    await group_broker.aio.load_delay(0)
    await group_broker.aio.start_node(victim)
    assert (await group_broker.aio.cluster())["nodes"][-1]["up"] is True
"""

SINGLE_NODE_TESTS = """
import pytest
from broker.control.client import ControlError


def test_one_node_cannot_stop(group_broker):
    (node,) = group_broker.running_nodes()
    with pytest.raises(ControlError) as last:
        group_broker.stop_node(node)
    assert last.value.status == 409
    assert "," not in group_broker.bootstrap
"""


def test_cluster_helpers(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cluster=CLUSTER_TESTS)
    result = pytester.runpytest_subprocess(timeout=180)
    result.assert_outcomes(passed=4)


def test_a_single_node_broker(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_single=SINGLE_NODE_TESTS)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=1)


def test_nodes_and_cluster_settings_by_name() -> None:
    assert embedded_settings(nodes=3).cluster.nodes == 3
    settings = embedded_settings(cluster={"nodes": 2}, coordinator_load_delay_ms=500)
    assert (settings.cluster.nodes, settings.cluster.coordinator_load_delay_ms) == (2, 500)
    with pytest.raises(ValueError, match="unknown cluster setting"):
        embedded_settings(cluster={"node": 2})


def test_the_nodes_listen_on_a_run_of_ports_that_a_restart_and_a_start_keep() -> None:
    from broker.testing.embedded import run_broker

    with run_broker(nodes=3) as broker:
        ports = [int(address.rsplit(":", 1)[1]) for address in broker.bootstrap.split(",")]
        assert ports == [ports[0], ports[0] + 1, ports[0] + 2]  # node i on the port + i, as serve --nodes
        assert [node["port"] for node in broker.cluster()["nodes"]] == ports
        broker.stop_node(2)
        broker.start_node(2)
        bootstrap = broker.bootstrap
        broker.restart()
        assert broker.bootstrap == bootstrap
        assert [node["port"] for node in broker.cluster()["nodes"]] == ports
