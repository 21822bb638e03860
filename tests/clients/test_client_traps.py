"""Client behaviours from docs/spec/client-traps.md (G1-G17) that the coordinator must absorb."""

from __future__ import annotations

import asyncio
import time
import uuid

from tests.clients.test_group_assignment import DEADLINE_S, TOPIC, assert_split, balanced
from tests.conftest import BrokerProcess


async def test_g8_aiokafka_joins_once_per_assignor(broker_process: BrokerProcess) -> None:
    """G8: with two assignors aiokafka rejoins with a longer protocol list while CompletingRebalance."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    group = f"g8-{uuid.uuid4()}"
    consumers = [
        AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=broker_process.bootstrap,
            group_id=group,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
            partition_assignment_strategy=(RangePartitionAssignor, RoundRobinPartitionAssignor),
        )
        for _ in range(2)
    ]
    try:
        for consumer in consumers:
            await consumer.start()
        deadline = time.monotonic() + DEADLINE_S
        while not balanced([{tp.partition for tp in c.assignment()} for c in consumers]):
            assert time.monotonic() < deadline, "no balanced assignment with two assignors"
            await asyncio.sleep(0.05)
        assert_split([{tp.partition for tp in c.assignment()} for c in consumers])
    finally:
        for consumer in consumers:
            await consumer.stop()


def test_g9_kafka_python_immediate_rejoin_settles(broker_process: BrokerProcess) -> None:
    """G9: kafka-python's leader rejoins right after its first generation; the group settles on a later one."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=broker_process.bootstrap,
        group_id=f"g9-{uuid.uuid4()}",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=200,
        enable_auto_commit=False,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while {tp.partition for tp in consumer.assignment()} != set(range(6)):
            assert time.monotonic() < deadline, "kafka-python never got the whole topic"
            try:
                consumer.poll(timeout_ms=100)
            except Exception:  # no data plane yet: fetch errors are expected
                time.sleep(0.05)
    finally:
        consumer.close()
