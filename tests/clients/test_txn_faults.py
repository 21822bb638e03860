"""Fault rules on the transaction APIs against real transactional producers (issue 16; docs/spec/transactions.md
section 8, "CONCURRENT_TRANSACTIONS is meant to be retried"): an EndTxn answered CONCURRENT_TRANSACTIONS once is
retried by confluent-kafka (librdkafka) and aiokafka and the transaction commits; a delayed AddOffsetsToTxn only
slows ``send_offsets_to_transaction`` down; a rule with a ``transactional_id`` touches that producer alone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker

TOPIC = "txn-faults"
DELAY_MS = 1000


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with run_broker(topics={TOPIC: 3}) as running:
        yield running


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent_producer(broker: EmbeddedBroker, tid: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})


def confluent_commit_one(p: Any, partition: int, value: bytes) -> None:
    """One record in one transaction, committed."""
    p.begin_transaction()
    p.produce(TOPIC, value=value, partition=partition)
    assert p.flush(10) == 0
    p.commit_transaction(20)


def read_committed_values(broker: EmbeddedBroker, partition: int, wanted: bytes, timeout: float = 10.0) -> list[bytes]:
    """What a read_committed confluent-kafka consumer (its default isolation) reads of the partition, up to
    ``wanted``; fails when ``wanted`` never shows up."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(TOPIC, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while wanted not in values:
            assert time.monotonic() < deadline, f"{wanted!r} never became visible; read {values}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_confluent_retries_an_end_txn_answered_concurrent_transactions(broker: EmbeddedBroker) -> None:
    tid = unique("confluent-end")
    p = confluent_producer(broker, tid)
    p.init_transactions(10)
    with broker.fault("EndTxn", error="CONCURRENT_TRANSACTIONS", count=1, transactional_id=tid) as rule:
        confluent_commit_one(p, 0, b"confluent-retried")
        assert rule.hits() == 1
    assert b"confluent-retried" in read_committed_values(broker, 0, b"confluent-retried")


async def test_aiokafka_retries_an_end_txn_answered_concurrent_transactions(broker: EmbeddedBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    tid = unique("aio-end")
    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid)
    await p.start()
    try:
        async with broker.fault("EndTxn", error="CONCURRENT_TRANSACTIONS", count=1, transactional_id=tid) as rule:
            async with p.transaction():
                await p.send_and_wait(TOPIC, b"aio-retried", partition=1)
            assert rule.hits() == 1
    finally:
        await p.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 1)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        seen: list[bytes] = []
        deadline = time.monotonic() + 10
        while b"aio-retried" not in seen:
            assert time.monotonic() < deadline, f"the committed record never became visible; read {seen}"
            batches = await consumer.getmany(tp, timeout_ms=200)
            seen += [record.value for record in batches.get(tp, [])]
    finally:
        await consumer.stop()


def test_confluent_send_offsets_waits_out_a_delayed_add_offsets_to_txn(broker: EmbeddedBroker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    group = unique("delayed-offsets")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    p = confluent_producer(broker, unique("confluent-offsets"))
    p.init_transactions(10)
    try:
        p.begin_transaction()
        p.produce(TOPIC, value=b"with-offsets", partition=2)
        assert p.flush(10) == 0
        with broker.fault("AddOffsetsToTxn", delay_ms=DELAY_MS, count=1) as rule:
            started = time.monotonic()
            p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 42)], consumer.consumer_group_metadata(), 20)
            took = time.monotonic() - started
            assert rule.hits() == 1
        assert took >= DELAY_MS / 1000
        p.commit_transaction(20)
        committed = consumer.committed([TopicPartition(TOPIC, 0)], 10)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 42)]
    finally:
        consumer.close()


def test_a_transactional_id_rule_touches_only_that_producer(broker: EmbeddedBroker) -> None:
    target, bystander = unique("targeted"), unique("bystander")
    targeted, spared = confluent_producer(broker, target), confluent_producer(broker, bystander)
    targeted.init_transactions(10)
    spared.init_transactions(10)
    with broker.fault("EndTxn", delay_ms=DELAY_MS, transactional_id=target) as rule:
        started = time.monotonic()
        confluent_commit_one(spared, 0, b"spared")
        assert time.monotonic() - started < DELAY_MS / 1000
        assert rule.hits() == 0
        started = time.monotonic()
        confluent_commit_one(targeted, 0, b"targeted")
        assert time.monotonic() - started >= DELAY_MS / 1000
        assert rule.hits() == 1
    assert {b"spared", b"targeted"} <= set(read_committed_values(broker, 0, b"targeted"))
