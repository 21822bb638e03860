"""Transactional producers end to end against a broker in this process (docs/spec/transactions.md sections 1 and 9,
"Client end-to-end"): confluent-kafka (librdkafka, TV1: InitProducerId, AddPartitionsToTxn v0, EndTxn v0-1) and
aiokafka. Markers are checked in the partition logs themselves, read on the broker's loop."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.storage.control import MarkerType
from broker.testing.embedded import EmbeddedBroker, run_broker
from broker.transactions.config import TxnConfig

TOPIC = "txn"
SCAN_MS = 200  # the timed-out transaction scan, short so a test sees the broker abort


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=SCAN_MS)
    with run_broker(topics={TOPIC: 3}, txn=config) as running:
        yield running


def log_summary(broker: EmbeddedBroker, partition: int, name: str = TOPIC) -> tuple[list[MarkerType], int, int]:
    """(the partition's markers in order, its last stable offset, its high watermark)."""

    def read() -> tuple[list[MarkerType], int, int]:
        assert broker.server is not None
        topic = broker.server.topics.get(name)
        assert topic is not None
        log = topic.log(partition)
        assert log is not None
        found = [log.marker_at(offset) for offset in range(log.log_start_offset, log.next_offset)]
        return [m.type for m in found if m is not None], log.last_stable_offset, log.high_watermark

    return broker.call(read)


def producer(broker: EmbeddedBroker, tid: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0, **extra})


def deliver(p: Any, partition: int, value: bytes) -> None:
    p.produce(TOPIC, value=value, partition=partition)
    assert p.flush(10) == 0


def test_confluent_commit_and_abort(broker: EmbeddedBroker) -> None:
    p = producer(broker, f"commit-{uuid.uuid4()}")
    p.init_transactions(10)
    before, _, start = log_summary(broker, 0)
    p.begin_transaction()
    deliver(p, 0, b"committed-1")
    deliver(p, 0, b"committed-2")
    p.commit_transaction(10)
    p.begin_transaction()
    deliver(p, 0, b"aborted")
    p.abort_transaction(10)
    p.begin_transaction()  # the same pid/epoch goes on after both (TV1 never bumps on EndTxn)
    deliver(p, 0, b"committed-3")
    p.commit_transaction(10)
    markers, lso, hwm = log_summary(broker, 0)
    assert markers[len(before) :] == [MarkerType.COMMIT, MarkerType.ABORT, MarkerType.COMMIT]
    assert lso == hwm == start + 7  # 4 records and 3 markers, nothing left open


def test_confluent_fenced_by_a_second_instance(broker: EmbeddedBroker) -> None:
    from confluent_kafka import KafkaException

    tid = f"fence-{uuid.uuid4()}"
    first = producer(broker, tid)
    first.init_transactions(10)
    first.begin_transaction()
    deliver(first, 1, b"first")
    second = producer(broker, tid)
    second.init_transactions(10)  # aborts the first's open transaction and bumps the epoch
    markers, lso, hwm = log_summary(broker, 1)
    assert markers[-1] is MarkerType.ABORT and lso == hwm
    with pytest.raises(KafkaException) as raised:
        first.produce(TOPIC, value=b"zombie", partition=1)
        first.flush(10)
        first.commit_transaction(10)
    assert raised.value.args[0].fatal()
    second.begin_transaction()
    deliver(second, 1, b"second")
    second.commit_transaction(10)
    assert log_summary(broker, 1)[0][-1] is MarkerType.COMMIT


def test_confluent_transaction_timeout_is_aborted_by_the_broker(broker: EmbeddedBroker) -> None:
    p = producer(broker, f"timeout-{uuid.uuid4()}", **{"transaction.timeout.ms": 1000, "socket.timeout.ms": 1000})
    p.init_transactions(10)
    p.begin_transaction()
    deliver(p, 2, b"left-open")
    before = log_summary(broker, 2)[0]
    deadline = time.monotonic() + 10
    while log_summary(broker, 2)[0] == before:  # the scan runs every SCAN_MS; the txn times out after 1 s
        assert time.monotonic() < deadline, "the broker never aborted the timed-out transaction"
        time.sleep(0.05)
    markers, lso, hwm = log_summary(broker, 2)
    assert markers[-1] is MarkerType.ABORT and lso == hwm


async def test_aiokafka_transaction(broker: EmbeddedBroker) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{uuid.uuid4()}")
    await p.start()
    try:
        before = log_summary(broker, 0)[0]
        async with p.transaction():
            await p.send_and_wait(TOPIC, b"aio-committed", partition=0)
        await p.begin_transaction()
        await p.send_and_wait(TOPIC, b"aio-aborted", partition=0)
        await p.abort_transaction()
        async with p.transaction():
            await p.send_and_wait(TOPIC, b"aio-again", partition=0)
    finally:
        await p.stop()
    markers, lso, hwm = log_summary(broker, 0)
    assert markers[len(before) :] == [MarkerType.COMMIT, MarkerType.ABORT, MarkerType.COMMIT]
    assert lso == hwm
