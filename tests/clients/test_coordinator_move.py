"""A real client through a coordinator move on a three-node broker (issue 29; cluster-and-durability.md 2.3, 5.1;
checklist 24): aiokafka's consumer hears NOT_COORDINATOR, finds the new coordinator and carries on with the same
member id and generation: no rebalance (its listener sees one assignment, no revocation), every record consumed
once, its commits acknowledged by the new coordinator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from broker.coordinator.messages import CommitRequest, PartitionCommit
from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from tests.conftest import broker_settings

GROUP = "moving-group"
TOPIC = "topic"  # three partitions (broker_settings)


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.assigned: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            self.revoked.append(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned.append(set(assigned))


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(cluster=ClusterConfig(nodes=3)))
    await broker.start()
    yield broker
    await broker.stop()


def commit_request(group_id: str) -> CommitRequest:
    """A simple consumer's commit (generation -1): the group exists, Empty, with one offset."""
    return CommitRequest(group_id=group_id, topics=((TOPIC, (PartitionCommit(0, 1),)),), generation_id=-1, member_id="")


async def produce(port: int, start: int, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    await producer.start()
    try:
        for n in range(start, start + count):
            await producer.send_and_wait(TOPIC, f"r{n}".encode(), partition=n % 3)
    finally:
        await producer.stop()


async def consume(consumer: AIOKafkaConsumer, seen: list[bytes], until: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < until:
        assert time.monotonic() < deadline, f"consumed {len(seen)} of {until}"
        batches = await consumer.getmany(timeout_ms=200)
        for records in batches.values():
            seen.extend(record.value for record in records)
        if batches:
            await consumer.commit()


async def test_aiokafka_keeps_consuming_through_a_coordinator_move_without_a_rebalance(
    cluster: BrokerServer,
) -> None:
    layout = cluster.nodes.layout
    await produce(cluster.port, 0, 30)
    listener = Listener()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{cluster.port}",
        group_id=GROUP,
        client_id="mover",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    consumer.subscribe([TOPIC], listener=listener)
    await consumer.start()
    try:
        seen: list[bytes] = []
        await consume(consumer, seen, 30)
        group = cluster.coordinator.groups[GROUP]
        generation, (member_id,) = group.generation_id, list(group.members)
        old = layout.group_coordinator(GROUP)
        new = next(node for node in layout.order if node != old)
        moved = cluster.nodes.move_coordinator("group", GROUP, new)
        assert moved.leader == new and layout.group_coordinator(GROUP) == new
        await asyncio.sleep(1.0)  # a few heartbeats: NOT_COORDINATOR at the old node, then the new one
        await produce(cluster.port, 30, 30)
        await consume(consumer, seen, 60)
        assert sorted(seen) == sorted(f"r{n}".encode() for n in range(60))  # each once, nothing lost
        assert listener.revoked == [] and len(listener.assigned) == 1  # no rebalance
        group = cluster.coordinator.groups[GROUP]
        assert (group.generation_id, list(group.members), group.state.value) == (generation, [member_id], "Stable")
        committed = cluster.coordinator.fetch_offsets(GROUP, [(TOPIC, (0, 1, 2))])
        assert [o.offset for _, offsets in committed.topics for o in offsets] == [20, 20, 20]
        # The member's session is kept by heartbeats that reach the new coordinator.
        await asyncio.sleep(1.0)
        assert cluster.coordinator.groups[GROUP].members[member_id].last_heartbeat_ms > cluster.clock.now_ms() - 1000
    finally:
        await consumer.stop()


async def test_aiokafka_admin_lists_every_group_once_across_the_nodes(cluster: BrokerServer) -> None:
    """ListGroups asked of every node (aiokafka's list_consumer_groups does), merged: each group once, and
    per node the groups it coordinates (spec 1.2)."""
    from aiokafka.admin import AIOKafkaAdminClient

    layout = cluster.nodes.layout
    groups = [f"listed-{n}" for n in range(12)]
    for group_id in groups:
        cluster.coordinator.commit_offsets(commit_request(group_id))
    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{cluster.port}")
    await admin.start()
    try:
        listed = [group_id for group_id, _ in await admin.list_consumer_groups()]
        assert sorted(listed) == sorted(groups)
        for node_id in layout.order:
            mine = [group_id for group_id, _ in await admin.list_consumer_groups(broker_ids=[node_id])]
            assert sorted(mine) == sorted(g for g in groups if layout.group_coordinator(g) == node_id)
    finally:
        await admin.close()


def test_librdkafka_consumer_protocol_keeps_its_epoch_through_a_coordinator_move() -> None:
    """Spec 5.2 and checklist 24 with ``group.protocol=consumer`` (confluent-kafka, librdkafka): NOT_COORDINATOR at
    the old node, a full heartbeat at the new one, and the member keeps its id, epoch and partitions (no fatal
    error, no revocation); every record is consumed once."""
    from confluent_kafka import Consumer, KafkaError, Producer

    from broker.testing.embedded import run_broker

    group_config = {"consumer_session_timeout_ms": 6000, "consumer_min_session_timeout_ms": 1000,
                    "consumer_heartbeat_interval_ms": 250, "consumer_min_heartbeat_interval_ms": 100}  # fmt: skip
    with run_broker(topics={TOPIC: 3}, group=group_config, cluster=ClusterConfig(nodes=3)) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})

        def produce_some(start: int) -> None:
            for n in range(start, start + 30):
                producer.produce(TOPIC, f"r{n}".encode(), partition=n % 3)
            assert producer.flush(10) == 0

        revoked: list[object] = []
        errors: list[KafkaError] = []
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "error_cb": errors.append,
            }
        )  # fmt: skip
        consumer.subscribe([TOPIC], on_revoke=lambda _consumer, partitions: revoked.append(partitions))
        seen: list[bytes] = []

        def consume(until: int) -> None:
            deadline = time.monotonic() + 20
            while len(seen) < until:
                assert time.monotonic() < deadline, f"consumed {len(seen)} of {until}"
                for message in consumer.consume(num_messages=100, timeout=0.2):
                    assert message.error() is None, message.error()
                    seen.append(message.value())
            consumer.commit(asynchronous=False)

        try:
            produce_some(0)
            consume(30)

            server = broker.server
            assert server is not None
            layout = server.nodes.layout

            def member() -> tuple[str, int, int]:
                ((member_id, state),) = server.coordinator.consumer_groups[GROUP].members.items()
                return member_id, state.member_epoch, layout.group_coordinator(GROUP)

            member_id, epoch, old = broker.call(member)
            new = next(n for n in layout.order if n != old)
            broker.call(lambda: server.nodes.move_coordinator("group", GROUP, new))
            time.sleep(1.5)  # heartbeats: NOT_COORDINATOR, FindCoordinator, a full heartbeat at the new node
            produce_some(30)
            consume(60)
            assert broker.call(member) == (member_id, epoch, new)
            assert sorted(seen) == sorted(f"r{n}".encode() for n in range(60))
            assert revoked == [] and not [e for e in errors if e.fatal()]
        finally:
            consumer.close()
