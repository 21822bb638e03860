"""Real clients through partition leader moves and a node kill on a three-node broker (issue 29, checklist items 20
and 26): producers with acks=all and consumers carry on with nothing lost, nothing read twice and no offset reset.

The broker runs in the test's event loop (the node verbs are not on the control API yet); aiokafka shares the loop,
kafka-python and confluent-kafka run in a worker thread, and the test moves leaders from the loop between phases.
kafka-python and librdkafka validate their positions with OffsetForLeaderEpoch (KIP-320) once Metadata shows a
higher leader epoch: an UNDEFINED answer would make them reset by auto.offset.reset (kafka-python logs "Truncation
detected"), re-reading from 0 with "earliest", which the duplicate check catches.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from protocol.apis import ApiKey
from tests.conftest import broker_settings

TOPIC = "moves"
PARTITIONS = 3
PER_PHASE = 30
DEADLINE_S = 30.0


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(cluster=ClusterConfig(nodes=3), topics=((TOPIC, PARTITIONS),)))
    await broker.start()
    yield broker
    await broker.stop()


def bootstrap(server: BrokerServer) -> str:
    return ",".join(f"127.0.0.1:{listener.port}" for listener in server.listeners)


def move_every_leader(server: BrokerServer) -> list[int]:
    """Each partition's leader goes to the next node: its epoch + 1, the epoch cache entry at the log end."""
    layout = server.nodes.layout
    epochs = []
    for partition in range(PARTITIONS):
        leader = layout.leadership(TOPIC, partition).leader
        following = layout.order[(layout.order.index(leader) + 1) % len(layout.order)]
        epochs.append(server.nodes.move_leader(TOPIC, partition, following).epoch)
    return epochs


def validations(server: BrokerServer) -> int:
    """OffsetForLeaderEpoch requests answered so far."""
    return sum(e.count for (key, _), e in server.request_stats.by_api.items() if key == ApiKey.OFFSET_FOR_LEADER_EPOCH)


def values(phase: int) -> list[bytes]:
    return [f"{phase}-{i}".encode() for i in range(PER_PHASE)]


def check(got: list[bytes], phases: int) -> None:
    expected = [v for phase in range(phases) for v in values(phase)]
    duplicates = sorted({v for v in got if got.count(v) > 1})
    assert not duplicates, f"read twice (an offset reset?): {duplicates[:5]}"
    assert sorted(got) == sorted(expected), f"lost: {sorted(set(expected) - set(got))[:5]}"


async def test_aiokafka_produces_and_consumes_through_leader_moves_and_a_node_stop(cluster: BrokerServer) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap(cluster), acks="all", enable_idempotence=True, retry_backoff_ms=50
    )
    consumer = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap(cluster), group_id=f"moves-{uuid.uuid4()}", auto_offset_reset="earliest",
        enable_auto_commit=False, retry_backoff_ms=50, metadata_max_age_ms=5000,
    )  # fmt: skip
    got: list[bytes] = []

    async def phase(number: int) -> None:
        for index, value in enumerate(values(number)):
            await producer.send_and_wait(TOPIC, value, partition=index % PARTITIONS)
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < (number + 1) * PER_PHASE:
            assert time.monotonic() < deadline, f"phase {number}: {len(got)} records"
            batches = await consumer.getmany(timeout_ms=200)
            got.extend(record.value for records in batches.values() for record in records)

    await producer.start()
    await consumer.start()
    try:
        await phase(0)
        assert move_every_leader(cluster) == [1, 1, 1]
        await phase(1)
        victim = cluster.nodes.layout.leadership(TOPIC, 0).leader
        await cluster.nodes.stop(victim)
        await phase(2)
        await consumer.commit()
        await asyncio.sleep(0.3)  # anything read twice would arrive now
        got.extend(r.value for rs in (await consumer.getmany(timeout_ms=300)).values() for r in rs)
    finally:
        await consumer.stop()
        await producer.stop()
    check(got, 3)
    log = cluster.topics.get(TOPIC)
    assert log is not None and sum(log.log(p).next_offset for p in range(PARTITIONS)) == 3 * PER_PHASE  # type: ignore[union-attr]


async def _in_thread(cluster: BrokerServer, body: Callable[[Callable[[int], Any]], None]) -> None:
    """Run ``body`` in a thread; it calls its argument with the phase: 1 moves every leader on the broker's loop,
    2 kills the node that leads partition 0 (its connections dropped at once, its leaderships moved)."""
    loop = asyncio.get_running_loop()

    def change(phase: int) -> Any:
        async def on_loop() -> Any:
            if phase == 1:
                return move_every_leader(cluster)
            return await cluster.nodes.stop(cluster.nodes.layout.leadership(TOPIC, 0).leader)

        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(10)

    await asyncio.to_thread(body, change)


async def test_kafka_python_validates_its_position_after_a_move_and_a_node_kill_and_does_not_reset(
    cluster: BrokerServer, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    got: list[bytes] = []

    def body(change: Callable[[int], Any]) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", retry_backoff_ms=50)
        consumer = KafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap(cluster), group_id=f"moves-{uuid.uuid4()}",
            auto_offset_reset="earliest", enable_auto_commit=False, retry_backoff_ms=50, metadata_max_age_ms=5000,
        )  # fmt: skip
        try:
            for number in range(3):
                if number:
                    change(number)
                for index, value in enumerate(values(number)):
                    producer.send(TOPIC, value, partition=index % PARTITIONS).get(timeout=DEADLINE_S)
                deadline = time.monotonic() + DEADLINE_S
                while len(got) < (number + 1) * PER_PHASE:
                    assert time.monotonic() < deadline, f"phase {number}: {len(got)} records"
                    batches = consumer.poll(timeout_ms=200)
                    got.extend(record.value for records in batches.values() for record in records)
            for _ in range(3):  # anything read twice would arrive now
                got.extend(r.value for rs in consumer.poll(timeout_ms=200).values() for r in rs)
        finally:
            consumer.close()
            producer.close()

    with caplog.at_level(logging.INFO, logger="kafka"):
        await _in_thread(cluster, body)
    check(got, 3)
    assert "Truncation detected" not in caplog.text
    assert validations(cluster) > 0, "kafka-python never validated its positions"
    assert cluster.nodes.layout.leadership(TOPIC, 0).epoch == 2  # moved, then moved off the killed node


async def test_confluent_kafka_through_a_leader_move_and_a_node_kill(cluster: BrokerServer) -> None:
    from confluent_kafka import Consumer, Producer

    got: list[bytes] = []
    errors: list[str] = []

    def body(change: Callable[[int], Any]) -> None:
        producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "enable.idempotence": True,
                             "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 5000})  # fmt: skip
        consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"moves-{uuid.uuid4()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "topic.metadata.refresh.interval.ms": 5000})  # fmt: skip
        consumer.subscribe([TOPIC])
        try:
            for number in range(3):
                if number:
                    change(number)
                for index, value in enumerate(values(number)):
                    producer.produce(
                        TOPIC, value, partition=index % PARTITIONS,
                        on_delivery=lambda error, _msg: errors.append(str(error)) if error else None,
                    )  # fmt: skip
                assert producer.flush(DEADLINE_S) == 0
                deadline = time.monotonic() + DEADLINE_S
                while len(got) < (number + 1) * PER_PHASE:
                    assert time.monotonic() < deadline, f"phase {number}: {len(got)} records"
                    message = consumer.poll(0.2)
                    if message is not None and message.error() is None:
                        got.append(message.value())
            for _ in range(3):
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    got.append(message.value())
        finally:
            consumer.close()

    await _in_thread(cluster, body)
    assert errors == []
    check(got, 3)
    assert validations(cluster) > 0, "librdkafka never validated its positions"  # it does, on each epoch rise
