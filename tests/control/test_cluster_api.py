"""``/v1/cluster`` over real HTTP against a real ``--nodes 3`` broker, every answer checked against
``docs/control-api.yaml`` (the validating client of ``test_control_api.py``); Metadata read over the wire from the
nodes themselves, and a confluent-kafka consumer group that keeps consuming through a kill of its coordinator's node
and a coordinator move (cluster-and-durability.md 8.2, checklist 18-29).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kio.schema.errors import ErrorCode
from openapi_core import OpenAPI

from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.control.test_control_api import ControlClient
from tests.wire.client import WireClient, request

NODES = (1, 2, 3)  # broker_settings' node id 1, and the two above it
SINGLE = "single"  # one partition: its replicas are nodes 1, 2, 3, node 1 leads it


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerServer]:
    settings = broker_settings(
        admin_port=0, node_id=1, cluster=ClusterConfig(nodes=3), topics=(("topic", 3), (SINGLE, 1))
    )
    server = BrokerServer(settings)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def capi(cluster: BrokerServer, openapi: OpenAPI, spec: dict[str, Any]) -> AsyncIterator[ControlClient]:
    assert cluster.control is not None
    async with aiohttp.ClientSession() as session:
        yield ControlClient(session, cluster.control.port, openapi, spec)


async def describe(api: ControlClient) -> dict[str, Any]:
    answer = await api.get("/v1/cluster")
    assert answer.status == 200, answer.data
    described: dict[str, Any] = answer.json
    return described


async def ports(api: ControlClient) -> dict[int, int]:
    return {node["node_id"]: node["port"] for node in (await describe(api))["nodes"]}


async def metadata(port: int) -> Any:
    client = await WireClient.connect(port, "cluster-test")
    try:
        return await client.call(
            request(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        )  # fmt: skip
    finally:
        await client.close()


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


async def coordinator(api: ControlClient, key: str, key_type: str = "group") -> dict[str, Any]:
    answer = await api.get("/v1/cluster/coordinators", query={"type": key_type, "key": key})
    assert answer.status == 200, answer.data
    found: dict[str, Any] = answer.json
    return found


# -- reading -----------------------------------------------------------------------------------------------------


async def test_the_cluster_lists_three_nodes_the_controller_and_every_internal_leader(capi: ControlClient) -> None:
    cluster = await describe(capi)
    assert [node["node_id"] for node in cluster["nodes"]] == list(NODES)
    assert all(node["up"] for node in cluster["nodes"])
    assert len({node["port"] for node in cluster["nodes"]}) == 3
    assert cluster["controller"] == 1
    assert cluster["load_delay_ms"] == 0
    offsets = cluster["internal"]["__consumer_offsets"]
    assert [row["partition"] for row in offsets] == list(range(50))
    assert len(cluster["internal"]["__transaction_state"]) == 50
    # Round robin: partition p's preferred leader is node (p mod 3) + 1.
    assert all(row == {"partition": p, "leader": NODES[p % 3], "epoch": 0, "state": "active"}
               for p, row in enumerate(offsets))  # fmt: skip
    # The ordinary topics' leaders too (the console's nodes strip counts them), placed as the internal ones.
    assert cluster["topics"] == {
        SINGLE: [{"partition": 0, "leader": 1, "epoch": 0}],
        "topic": [{"partition": p, "leader": NODES[p % 3], "epoch": 0} for p in range(3)],
    }
    found = await coordinator(capi, "orders-app")
    assert found["topic"] == "__consumer_offsets"
    assert found["node"] == offsets[found["partition"]]["leader"]
    txn = await coordinator(capi, "txn-1", "transaction")
    assert txn["topic"] == "__transaction_state"
    assert txn["node"] == cluster["internal"]["__transaction_state"][txn["partition"]]["leader"]


async def test_find_coordinator_at_every_node_names_the_leader_the_api_shows(capi: ControlClient) -> None:
    found = await coordinator(capi, "orders-app")
    for port in (await ports(capi)).values():
        client = await WireClient.connect(port, "cluster-test")
        try:
            find = request(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("orders-app",))
            answer = await client.call(find)
        finally:
            await client.close()
        (named,) = answer.coordinators
        assert (named.error_code, named.node_id) == (ErrorCode.none, found["node"])


async def test_coordinator_lookup_needs_a_key_and_a_known_type(capi: ControlClient) -> None:
    missing = await capi.get("/v1/cluster/coordinators", well_formed=False)
    assert missing.status == 400 and "key" in missing.error
    bad = await capi.get("/v1/cluster/coordinators", query={"type": "topic", "key": "k"}, well_formed=False)
    assert bad.status == 400 and "type" in bad.error


# -- stopping and starting ---------------------------------------------------------------------------------------


async def test_a_killed_node_refuses_leaves_metadata_and_comes_back_on_start(capi: ControlClient) -> None:
    before = await ports(capi)
    stopped = await capi.post("/v1/cluster/nodes/2/stop", json={"mode": "kill"})
    assert stopped.status == 200, stopped.data
    answer = stopped.json
    assert answer["node_id"] == 2
    # Node 2 led topic-1 (preferred replica 2, then 3): node 3 now. And a third of the coordinator partitions.
    assert ["topic", 1, 3] in answer["moved_leaders"]
    assert all(moved[2] != 2 for moved in answer["moved_leaders"] + answer["moved_coordinators"])
    assert len([m for m in answer["moved_coordinators"] if m[0] == "__consumer_offsets"]) == 17
    assert refused(before[2])
    shown = await metadata(before[1])
    assert sorted(broker.node_id for broker in shown.brokers) == [1, 3]
    topic = next(t for t in shown.topics if t.name == "topic")
    moved = next(p for p in topic.partitions if p.partition_index == 1)
    assert (moved.leader_id, moved.leader_epoch) == (3, 1)
    assert 2 in moved.offline_replicas and 2 not in moved.isr_nodes
    cluster = await describe(capi)
    assert [node["up"] for node in cluster["nodes"]] == [True, False, True]
    assert all(row["leader"] != 2 for row in cluster["internal"]["__consumer_offsets"])
    assert cluster["topics"]["topic"][1] == {"partition": 1, "leader": 3, "epoch": 1}
    assert (await capi.post("/v1/cluster/nodes/2/stop")).json["moved_leaders"] == []  # stopped already: nothing

    started = await capi.post("/v1/cluster/nodes/2/start")
    assert started.status == 200, started.data
    assert started.json == {"node_id": 2, "moved_leaders": []}  # it leads nothing (no preferred election)
    shown = await metadata(before[2])  # its port listens again
    assert sorted(broker.node_id for broker in shown.brokers) == [1, 2, 3]
    moved = next(p for p in next(t for t in shown.topics if t.name == "topic").partitions if p.partition_index == 1)
    assert moved.leader_id == 3 and 2 in moved.isr_nodes
    assert (await capi.post("/v1/cluster/nodes/2/start")).status == 200  # running already: nothing


async def test_a_graceful_stop_moves_then_closes(capi: ControlClient) -> None:
    port = (await ports(capi))[3]
    stopped = await capi.post("/v1/cluster/nodes/3/stop", json={"mode": "graceful", "note": "ignored"})
    assert stopped.status == 200, stopped.data
    assert ["topic", 2, 1] in stopped.json["moved_leaders"]
    assert refused(port)


async def test_stopping_the_last_running_node_is_409_and_unknown_nodes_404(capi: ControlClient) -> None:
    assert (await capi.post("/v1/cluster/nodes/1/stop")).status == 200
    assert (await capi.post("/v1/cluster/nodes/2/stop", json={"mode": "graceful"})).status == 200
    last = await capi.post("/v1/cluster/nodes/3/stop")
    assert last.status == 409 and "last running node" in last.error
    cluster = await describe(capi)
    assert cluster["controller"] == 3
    assert {row["leader"] for row in cluster["internal"]["__consumer_offsets"]} == {3}
    assert (await capi.post("/v1/cluster/nodes/7/stop")).status == 404
    assert (await capi.post("/v1/cluster/nodes/7/start")).status == 404
    bad = await capi.post("/v1/cluster/nodes/x/stop", well_formed=False)
    assert bad.status == 400 and "integer" in bad.error
    mode = await capi.post("/v1/cluster/nodes/3/stop", json={"mode": "pause"}, well_formed=False)
    assert mode.status == 400 and "mode" in mode.error
    body = await capi.post("/v1/cluster/nodes/3/stop", body=b"[1]", well_formed=False)
    assert body.status == 400


async def test_a_single_node_broker_shows_its_node_and_will_not_stop_it(api: ControlClient) -> None:
    answer = await api.get("/v1/cluster")
    assert answer.status == 200
    (node,) = answer.json["nodes"]
    assert node["up"] and answer.json["controller"] == node["node_id"]
    assert (await api.post(f"/v1/cluster/nodes/{node['node_id']}/stop")).status == 409


# -- moves -------------------------------------------------------------------------------------------------------


async def test_moving_a_coordinator_moves_its_partition_with_every_key_on_it(capi: ControlClient) -> None:
    found = await coordinator(capi, "orders-app")
    there = await capi.post("/v1/cluster/coordinators", json={"key": "orders-app", "node": found["node"]})
    assert (there.status, there.json["node"], there.json["epoch"]) == (200, found["node"], 0)  # no election needed
    target = next(node for node in NODES if node != found["node"])
    moved = await capi.post("/v1/cluster/coordinators", json={"type": "group", "key": "orders-app", "node": target})
    assert moved.status == 200, moved.data
    assert moved.json["partition"] == found["partition"] and moved.json["node"] == target
    assert moved.json["epoch"] == found["epoch"] + 1
    after = await coordinator(capi, "orders-app")
    assert (after["node"], after["epoch"]) == (target, found["epoch"] + 1)
    same = await capi.post("/v1/cluster/coordinators", json={"key": "orders-app", "node": target})
    assert (same.json["node"], same.json["epoch"]) == (target, found["epoch"] + 1)  # there already: nothing moves
    txn = await capi.post("/v1/cluster/coordinators", json={"type": "transaction", "key": "t", "node": 1})
    assert txn.status == 200 and txn.json["topic"] == "__transaction_state"

    assert (await capi.post("/v1/cluster/nodes/3/stop")).status == 200
    stopped = await capi.post("/v1/cluster/coordinators", json={"key": "orders-app", "node": 3})
    assert stopped.status == 409 and "stopped" in stopped.error
    unknown = await capi.post("/v1/cluster/coordinators", json={"key": "orders-app", "node": 9})
    assert unknown.status == 404
    for body in ({"key": "orders-app"}, {"key": 5, "node": 1}, {"type": "topic", "key": "k", "node": 1},
                 {"key": "k", "node": True}):  # fmt: skip
        bad = await capi.post("/v1/cluster/coordinators", json=body, well_formed=False)
        assert bad.status == 400, body


async def test_a_load_delay_shows_the_moved_partition_loading(capi: ControlClient) -> None:
    delay = await capi.post("/v1/cluster/coordinators/load-delay", json={"ms": 60_000})
    assert delay.status == 200 and delay.json == {"load_delay_ms": 60_000}
    found = await coordinator(capi, "orders-app")
    target = next(node for node in NODES if node != found["node"])
    assert (await capi.post("/v1/cluster/coordinators", json={"key": "orders-app", "node": target})).status == 200
    cluster = await describe(capi)
    assert cluster["load_delay_ms"] == 60_000
    assert cluster["internal"]["__consumer_offsets"][found["partition"]]["state"] == "loading"
    assert (await capi.post("/v1/cluster/coordinators/load-delay", json={"ms": 0})).status == 200
    for body in ({}, {"ms": -1}, {"ms": "5"}, {"ms": 3_600_001}):
        bad = await capi.post("/v1/cluster/coordinators/load-delay", json=body, well_formed=False)
        assert bad.status == 400 and "ms" in bad.error


async def test_moving_a_partition_leader_and_back_to_the_preferred_one(capi: ControlClient) -> None:
    port = (await ports(capi))[1]
    moved = await capi.post("/v1/cluster/partitions/topic/0/leader", json={"node": 2})
    assert moved.status == 200 and moved.json == {"leader": 2, "epoch": 1}
    shown = await metadata(port)
    partition = next(p for p in next(t for t in shown.topics if t.name == "topic").partitions if p.partition_index == 0)
    assert (partition.leader_id, partition.leader_epoch) == (2, 1)
    back = await capi.post("/v1/cluster/partitions/topic/0/leader", json={"preferred": True})
    assert back.status == 200 and back.json == {"leader": 1, "epoch": 2}
    again = await capi.post("/v1/cluster/partitions/topic/0/leader", json={"preferred": True})
    assert again.json == {"leader": 1, "epoch": 2}  # the leader already: no election, the same epoch
    assert (await describe(capi))["topics"]["topic"][0] == {"partition": 0, "leader": 1, "epoch": 2}

    assert (await capi.post("/v1/cluster/partitions/nope/0/leader", json={"node": 1})).status == 404
    assert (await capi.post("/v1/cluster/partitions/topic/3/leader", json={"node": 1})).status == 404
    assert (await capi.post("/v1/cluster/partitions/topic/0/leader", json={"node": 9})).status == 404
    assert (await capi.post("/v1/cluster/nodes/2/stop")).status == 200
    assert (await capi.post("/v1/cluster/partitions/topic/0/leader", json={"node": 2})).status == 409
    bad = await capi.post("/v1/cluster/partitions/topic/0/leader", json={"preferred": False}, well_formed=False)
    assert bad.status == 400
    bad = await capi.post("/v1/cluster/partitions/topic/x/leader", json={"node": 1}, well_formed=False)
    assert bad.status == 400


async def test_every_verb_is_told_in_events(capi: ControlClient) -> None:
    async with capi.stream(query={"since_seq": 0}) as stream:
        assert (await capi.post("/v1/cluster/nodes/3/stop")).status == 200
        seen = await stream.until(lambda record: record["event"] == "node_stopped")
        # The stop first, then what it moved: the last coordinator partition node 3 led is 47 of __transaction_state.
        seen += await stream.until(
            lambda r: r["event"] == "coordinator_loaded" and (r["topic"], r["partition"]) == ("__transaction_state", 47)
        )
        assert (await capi.post("/v1/cluster/nodes/3/start")).status == 200
        seen += await stream.until(lambda record: record["event"] == "node_started")
    names = [record["event"] for record in seen]
    assert names.index("node_stopped") < names.index("leader_moved")
    assert {"leader_moved", "coordinator_unloaded", "coordinator_loaded"} <= set(names)
    stopped = next(record for record in seen if record["event"] == "node_stopped")
    assert (stopped["group_id"], stopped["node_id"], stopped["mode"]) == ("", 3, "kill")
    leader = next(record for record in seen if record["event"] == "leader_moved" and record["topic"] == "topic")
    assert (leader["partition"], leader["previous"], leader["leader"], leader["leader_epoch"]) == (2, 3, 1, 1)
    assert leader["cause"] == "node_stopped"
    loaded = next(record for record in seen if record["event"] == "coordinator_loaded")
    assert {"topic", "partition", "node_id", "epoch", "load_delay_ms", "duration_ms"} <= set(loaded)
    assert names[-1] == "node_started" and seen[-1]["node_id"] == 3


# -- a real client through a kill and a move ---------------------------------------------------------------------


async def test_a_confluent_kafka_group_keeps_consuming_through_a_coordinator_kill_and_a_move(
    capi: ControlClient,
) -> None:
    from confluent_kafka import Consumer, Producer

    node_ports = await ports(capi)
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in node_ports.values())
    # A group whose coordinator is not node 1, which leads SINGLE: the kill moves the coordinator, not the data.
    group, victim = "", 1
    for candidate in (f"survivor-{i}" for i in range(100)):
        group, victim = candidate, (await coordinator(capi, candidate))["node"]
        if victim != 1:
            break
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 200, "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 500, "reconnect.backoff.max.ms": 200,
    })  # fmt: skip
    seen: set[bytes] = set()

    def produce(first: int, count: int) -> None:
        for value in range(first, first + count):
            producer.produce(SINGLE, value=b"%d" % value, partition=0)
        assert producer.flush(10) == 0

    def consume_until(count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.add(bytes(message.value() or b""))
        assert len(seen) >= count, f"consumed {len(seen)} of {count}"

    async def committed(count: int, timeout: float = 30.0) -> None:
        """Poll until the group's commit reaches ``count``: its coordinator, wherever it is now, took it."""
        deadline = time.monotonic() + timeout
        offset = None
        while time.monotonic() < deadline:
            await asyncio.to_thread(consume_until, len(seen), 0.3)
            (row,) = (await capi.group(group))["offsets"]
            offset = row["committed_offset"]
            if offset == count:
                return
        raise AssertionError(f"the group committed {offset}, not {count}, within {timeout:g} s")

    try:
        consumer.subscribe([SINGLE])
        await asyncio.to_thread(produce, 0, 20)
        await asyncio.to_thread(consume_until, 20)
        await committed(20)
        generation = (await capi.group(group))["generation_id"]
        members = [member["member_id"] for member in (await capi.group(group))["members"]]

        killed = await capi.post(f"/v1/cluster/nodes/{victim}/stop", json={"mode": "kill"})
        assert killed.status == 200, killed.data
        shown = await metadata(node_ports[1])
        assert victim not in {broker.node_id for broker in shown.brokers}
        await asyncio.to_thread(produce, 20, 20)
        await asyncio.to_thread(consume_until, 40)
        await committed(40)
        new = (await coordinator(capi, group))["node"]
        assert new not in (victim, -1)

        target = next(node for node in NODES if node not in (victim, new))
        moved = await capi.post("/v1/cluster/coordinators", json={"type": "group", "key": group, "node": target})
        assert moved.status == 200, moved.data
        await asyncio.to_thread(produce, 40, 20)
        await asyncio.to_thread(consume_until, 60)
        await committed(60)

        started = await capi.post(f"/v1/cluster/nodes/{victim}/start")
        assert started.status == 200
        shown = await metadata(node_ports[1])
        assert victim in {broker.node_id for broker in shown.brokers}
        await asyncio.to_thread(produce, 60, 20)
        await asyncio.to_thread(consume_until, 80)
        await committed(80)
        assert seen == {b"%d" % value for value in range(80)}
        detail = await capi.group(group)
        # No rebalance: the same generation and member through a kill and a move of the coordinator.
        assert detail["generation_id"] == generation
        assert [member["member_id"] for member in detail["members"]] == members
    finally:
        await asyncio.to_thread(consumer.close)


async def test_an_aiokafka_group_keeps_its_generation_through_a_graceful_stop_of_its_coordinator(
    capi: ControlClient,
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    node_ports = await ports(capi)
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in node_ports.values())
    group, victim = "", 1
    for candidate in (f"aio-survivor-{i}" for i in range(100)):
        group, victim = candidate, (await coordinator(capi, candidate))["node"]
        if victim != 1:
            break
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(
        SINGLE, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        auto_commit_interval_ms=200, session_timeout_ms=10_000, heartbeat_interval_ms=500,
    )  # fmt: skip
    await producer.start()
    await consumer.start()
    seen: list[int] = []

    async def produce_and_consume(count: int) -> None:
        for _ in range(count):
            await producer.send_and_wait(SINGLE, b"x", partition=0)
        wanted = len(seen) + count
        async with asyncio.timeout(30):
            while len(seen) < wanted:
                batches = await consumer.getmany(timeout_ms=200)
                seen.extend(record.offset for records in batches.values() for record in records)

    try:
        await produce_and_consume(10)
        before = await capi.wait(group, state="Stable", members=1)
        stopped = await capi.post(f"/v1/cluster/nodes/{victim}/stop", json={"mode": "graceful"})
        assert stopped.status == 200, stopped.data
        await produce_and_consume(10)
        new = (await coordinator(capi, group))["node"]
        async with asyncio.timeout(30):  # the commit reaches the new coordinator
            while (await capi.group(group))["offsets"][0]["committed_offset"] != 20:
                await consumer.getmany(timeout_ms=200)
        after = await capi.group(group)
        assert new != victim
        assert after["generation_id"] == before["generation_id"]
        assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
        assert seen == list(range(20))
    finally:
        await consumer.stop()
        await producer.stop()
