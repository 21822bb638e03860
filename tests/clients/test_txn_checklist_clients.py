"""Transactions checklist items (``docs/spec/transactions.md`` section 9) that only a real client can show and that
``test_transactions_producer.py`` / ``test_transactions_eos.py`` check only in part: the empty transaction that
sends no EndTxn (item 64), a read_committed position at the LSO (item 77, with aiokafka: no Java client here), and
aborted-then-committed transactions of one producer read by aiokafka and librdkafka (items 78, 92, 93).

The broker is an EmbeddedBroker in this process; its state is read on its own loop (``broker.call``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker
from broker.transactions.state import EMPTY
from protocol.apis import ApiKey

TOPIC = "checklist"
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with run_broker(topics={TOPIC: 3}) as running:
        yield running


def end_txn_count(broker: EmbeddedBroker) -> int:
    def read() -> int:
        assert broker.server is not None
        by_api = broker.server.request_stats.by_api
        return sum(entry.count for (api, _), entry in by_api.items() if api == ApiKey.END_TXN)

    return broker.call(read)


def txn_state(broker: EmbeddedBroker, tid: str) -> Any:
    def read() -> Any:
        assert broker.server is not None
        meta = broker.server.transactions.get(tid)
        return None if meta is None else meta.state

    return broker.call(read)


def lso_and_hw(broker: EmbeddedBroker, partition: int) -> tuple[int, int]:
    def read() -> tuple[int, int]:
        assert broker.server is not None
        topic = broker.server.topics.get(TOPIC)
        assert topic is not None
        log = topic.log(partition)
        assert log is not None
        return log.last_stable_offset, log.high_watermark

    return broker.call(read)


def confluent_producer(broker: EmbeddedBroker, tid: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(10)
    return producer


async def test_item_64_empty_transactions_send_no_end_txn(broker: EmbeddedBroker) -> None:
    """Item 64: aiokafka and librdkafka begin and commit (or abort) a transaction with nothing in it without sending
    EndTxn; the id stays Empty."""
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    before = end_txn_count(broker)
    aio_tid = f"empty-aio-{uuid.uuid4()}"
    aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=aio_tid)
    await aio.start()
    try:
        async with aio.transaction():
            pass
        await aio.begin_transaction()
        await aio.abort_transaction()
    finally:
        await aio.stop()
    rd_tid = f"empty-rd-{uuid.uuid4()}"
    rd = confluent_producer(broker, rd_tid)
    rd.begin_transaction()
    rd.commit_transaction(10)
    rd.begin_transaction()
    rd.abort_transaction(10)
    assert end_txn_count(broker) == before
    assert txn_state(broker, aio_tid) is EMPTY and txn_state(broker, rd_tid) is EMPTY


async def test_item_77_read_committed_latest_starts_at_the_lso(broker: EmbeddedBroker) -> None:
    """Item 77 (the Java consumer is not available here; aiokafka resolves ``latest`` the same way, ListOffsets
    with isolation 1): with a transaction open, a read_committed consumer's end position is the LSO, so the
    transaction's records reach it once committed; a read_uncommitted one starts at the high watermark."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 1)
    producer = confluent_producer(broker, f"latest-{uuid.uuid4()}")
    producer.begin_transaction()
    for value in (b"open-1", b"open-2"):
        producer.produce(TOPIC, value=value, partition=1)
    assert producer.flush(10) == 0
    lso, hw = lso_and_hw(broker, 1)
    assert hw == lso + 2
    positions = {}
    consumers = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, isolation_level=isolation, auto_offset_reset="latest"
        )
        await consumer.start()
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        positions[isolation] = await consumer.position(tp)
        consumers[isolation] = consumer
    try:
        assert positions == {"read_committed": lso, "read_uncommitted": hw}
        producer.commit_transaction(10)
        committed = consumers["read_committed"]
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < 2:
            assert time.monotonic() < deadline, values
            batch = await committed.getmany(tp, timeout_ms=200)
            values += [r.value for r in batch.get(tp, [])]
        assert values == [b"open-1", b"open-2"]
    finally:
        for consumer in consumers.values():
            await consumer.stop()


async def read_aiokafka(broker: EmbeddedBroker, partition: int, isolation: str, end: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, partition)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation)
    await consumer.start()
    values: list[bytes] = []
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + DEADLINE_S
        while await consumer.position(tp) < end:
            assert time.monotonic() < deadline, values
            batch = await consumer.getmany(tp, timeout_ms=200)
            values += [r.value for r in batch.get(tp, [])]
    finally:
        await consumer.stop()
    return values


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname} {record.getMessage()}")


def read_confluent(broker: EmbeddedBroker, partition: int, isolation: str, end: int, logs: Captured) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    logger = logging.getLogger(f"librdkafka-{uuid.uuid4()}")
    logger.addHandler(logs)
    logger.setLevel(logging.DEBUG)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        },
        logger=logger,
    )
    consumer.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            ((position,),) = [consumer.position([TopicPartition(TOPIC, partition)])]
            if position.offset >= end:
                break
            assert time.monotonic() < deadline, values
            for message in consumer.consume(num_messages=100, timeout=0.2):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                values.append(value)
    finally:
        consumer.close()
    return values


async def test_items_78_92_93_aborted_then_committed_transactions_of_one_producer(broker: EmbeddedBroker) -> None:
    """Items 78, 92 and 93: aiokafka commits, aborts and commits again with one pid/epoch (TV1), offsets sent to the
    first two transactions. Read from the start in one fetch, aiokafka and librdkafka read_committed consumers drop
    only the aborted records, read_uncommitted ones see them all; the group's offset is the committed
    transaction's; librdkafka logs nothing about aborted transactions at either isolation level."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    group, partition = f"g-{uuid.uuid4()}", 2
    source = TopicPartition(TOPIC, 0)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"mixed-{uuid.uuid4()}")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(TOPIC, b"committed-1", partition=partition)
            await producer.send_offsets_to_transaction({source: 5}, group)
        await producer.begin_transaction()
        await producer.send_and_wait(TOPIC, b"aborted", partition=partition)
        await producer.send_offsets_to_transaction({source: 9}, group)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(TOPIC, b"committed-2", partition=partition)
    finally:
        await producer.stop()
    lso, end = lso_and_hw(broker, partition)
    assert lso == end  # nothing open
    assert await read_aiokafka(broker, partition, "read_committed", end) == [b"committed-1", b"committed-2"]
    assert await read_aiokafka(broker, partition, "read_uncommitted", end) == [
        b"committed-1",
        b"aborted",
        b"committed-2",
    ]
    logs = Captured()
    assert read_confluent(broker, partition, "read_committed", end, logs) == [b"committed-1", b"committed-2"]
    assert read_confluent(broker, partition, "read_uncommitted", end, logs) == [
        b"committed-1",
        b"aborted",
        b"committed-2",
    ]
    assert [m for m in logs.messages if "abort" in m.lower()] == []
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        assert await consumer.committed(source) == 5
    finally:
        await consumer.stop()
