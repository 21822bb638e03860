"""Exactly-once consume-transform-produce with confluent-kafka (and aiokafka) against a real broker
(docs/spec/transactions.md, KIP-98 and KIP-447): a read_committed consumer whose offsets go into the producer's
transaction (``send_offsets_to_transaction``: AddOffsetsToTxn, TxnOffsetCommit), aborted transactions hidden from
read_committed readers, and three worker processes of one group, one of them SIGKILLed mid-stream.

The broker is an EmbeddedBroker in this process; the workers of the last test are OS processes
(``tests/clients/eos_worker.py``) connecting to its port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker
from broker.transactions.config import TxnConfig
from tests.clients.processes import WorkerProcess

PARTITIONS = 3
SCAN_MS = 200  # the timed-out transaction scan: a SIGKILLed worker's open transaction is aborted soon after
DEADLINE_S = 25.0


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=SCAN_MS)
    with run_broker(txn=config) as running:
        yield running


def topics(broker: EmbeddedBroker, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
        future.result(10)


def produce_inputs(broker: EmbeddedBroker, topic: str, values: list[str]) -> dict[int, int]:
    """Plain (idempotent) records, keyed by their value; the end offset of each partition afterwards."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    ends: dict[int, int] = {}

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        ends[message.partition()] = max(ends.get(message.partition(), 0), message.offset() + 1)

    for value in values:
        producer.produce(topic, key=value.encode(), value=value.encode(), on_delivery=delivered)
    assert producer.flush(10) == 0
    return ends


def read_all(broker: EmbeddedBroker, topic: str, isolation: str, expected: int, settle_s: float = 1.0) -> list[str]:
    """Every value in ``topic`` from the start, under ``isolation``: until ``expected`` arrived and then ``settle_s``
    more with nothing new (so a duplicate or a leaked aborted record would show)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(num_messages=500, timeout=0.2)
            for message in messages:
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                values.append(value.decode())
            if messages:
                quiet_since = time.monotonic()
            elif len(values) >= expected and time.monotonic() - quiet_since >= settle_s:
                break
    finally:
        consumer.close()
    return values


def committed(broker: EmbeddedBroker, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch with require_stable, as librdkafka sends it); -1001 when none."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def eos_consumer(broker: EmbeddedBroker, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def txn_producer(broker: EmbeddedBroker) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"eos-{uuid.uuid4()}", "linger.ms": 0}
    )
    producer.init_transactions(10)
    return producer


def transform_batch(producer: Any, consumer: Any, messages: list[Any], output: str) -> None:
    """Write each record transformed to ``output`` (same partition) and put the consumer's positions into the
    transaction; the caller commits or aborts it."""
    producer.begin_transaction()
    for message in messages:
        producer.produce(output, key=message.key(), value=b"t:" + message.value(), partition=message.partition())
    assigned = consumer.assignment()
    positions = [tp for tp in consumer.position(assigned) if tp.offset >= 0]
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10)


def test_consume_transform_produce_exactly_once(broker: EmbeddedBroker) -> None:
    source, sink, group = f"in-{uuid.uuid4()}", f"out-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    topics(broker, source, sink)
    inputs = [f"v{i}" for i in range(60)]
    ends = produce_inputs(broker, source, inputs)
    consumer, producer = eos_consumer(broker, group), txn_producer(broker)
    consumer.subscribe([source])
    done = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while done < len(inputs):
            assert time.monotonic() < deadline, f"only {done} of {len(inputs)} inputs transformed"
            messages = [m for m in consumer.consume(num_messages=7, timeout=0.2) if m.error() is None]
            if messages:
                transform_batch(producer, consumer, messages, sink)
                producer.commit_transaction(10)
                done += len(messages)
    finally:
        consumer.close()
    assert done == len(inputs)
    out = read_all(broker, sink, "read_committed", len(inputs))
    assert Counter(out) == Counter(f"t:{v}" for v in inputs)
    assert committed(broker, group, source) == {p: ends.get(p, -1001) for p in range(PARTITIONS)}


async def test_aiokafka_consume_transform_produce_exactly_once(broker: EmbeddedBroker) -> None:
    """aiokafka 0.14.0: ``send_offsets_to_transaction(offsets, group_id)`` (TxnOffsetCommit without the group's
    generation, the pre-KIP-447 form), a read_committed consumer of the group."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    source, sink, group = f"in-{uuid.uuid4()}", f"out-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    topics(broker, source, sink)
    inputs = [f"k{i}" for i in range(60)]
    ends = produce_inputs(broker, source, inputs)
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"aio-eos-{uuid.uuid4()}")
    await consumer.start()
    await producer.start()
    done = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while done < len(inputs):
            assert time.monotonic() < deadline, f"only {done} of {len(inputs)} inputs transformed"
            batch = await consumer.getmany(timeout_ms=200, max_records=7)
            if not batch:
                continue
            async with producer.transaction():
                for tp, records in batch.items():
                    for record in records:
                        await producer.send(sink, key=record.key, value=b"t:" + record.value, partition=tp.partition)
                    done += len(records)
                positions = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                await producer.send_offsets_to_transaction(positions, group)
    finally:
        await producer.stop()
        await consumer.stop()
    out = read_all(broker, sink, "read_committed", len(inputs))
    assert Counter(out) == Counter(f"t:{v}" for v in inputs)
    assert committed(broker, group, source) == {p: ends.get(p, -1001) for p in range(PARTITIONS)}


def test_aborted_transaction_is_invisible_and_its_offsets_are_not_committed(broker: EmbeddedBroker) -> None:
    source, sink, group = f"in-{uuid.uuid4()}", f"out-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    topics(broker, source, sink)
    inputs = [f"a{i}" for i in range(12)]
    produce_inputs(broker, source, inputs)
    consumer, producer = eos_consumer(broker, group), txn_producer(broker)
    consumer.subscribe([source])
    seen: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(seen) < len(inputs):
            assert time.monotonic() < deadline, f"only {len(seen)} of {len(inputs)} inputs consumed"
            seen += [m for m in consumer.consume(num_messages=100, timeout=0.2) if m.error() is None]
        transform_batch(producer, consumer, seen, sink)
        assert producer.flush(10) == 0  # abort_transaction purges what is still queued: get the records written
        producer.abort_transaction(10)
    finally:
        consumer.close()
    assert read_all(broker, sink, "read_committed", 0) == []
    assert Counter(read_all(broker, sink, "read_uncommitted", len(inputs))) == Counter(f"t:{v}" for v in inputs)
    assert committed(broker, group, source) == {p: -1001 for p in range(PARTITIONS)}


# -- three worker processes, one SIGKILLed ------------------------------------------------------------------


def wait(condition: Callable[[], bool], what: str, workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"{w.name}: {w.events()[-5:]}\n{w.stderr_path.read_text()[-2000:]}" for w in workers)
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.05)


def transformed(workers: list[WorkerProcess]) -> int:
    return sum(e["count"] for w in workers for e in w.events("committed"))


def test_three_workers_one_killed_every_input_exactly_once(broker: EmbeddedBroker, tmp_path: Path) -> None:
    source, sink, group = f"in-{uuid.uuid4()}", f"out-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    topics(broker, source, sink)

    def start(index: int) -> WorkerProcess:
        argv = [
            sys.executable, "-m", "tests.clients.eos_worker", "--bootstrap", broker.bootstrap, "--group", group,
            "--input", source, "--output", sink, "--transactional-id", f"eos-worker-{index}-{uuid.uuid4()}",
            "--processing-ms", "300",
        ]  # fmt: skip
        return WorkerProcess(f"w{index}", argv, tmp_path / f"w{index}.stderr")

    workers = [start(i) for i in range(3)]
    try:
        wait(lambda: all(w.events("ready") for w in workers), "three ready workers", workers)
        victim = workers[0]
        inputs = [f"x{i}" for i in range(300)]
        ends: dict[int, int] = {}
        for chunk in range(0, len(inputs), 30):  # a stream, not one burst: batches keep committing meanwhile
            ends.update(produce_inputs(broker, source, inputs[chunk : chunk + 30]))
            if chunk == 120:  # mid-stream, once the victim is known to be transforming
                # Killed inside an open transaction whose records are already in the log, after at least one
                # committed one: the broker must abort it (its timeout), and the survivors redo that batch.
                opened = len(victim.events("open"))

                def in_transaction(opened: int = opened) -> bool:
                    return bool(victim.events("committed")) and len(victim.events("open")) > opened

                wait(in_transaction, "the victim inside a transaction", workers)
                os.kill(victim.process.pid, signal.SIGKILL)
                victim.process.wait(10)
            time.sleep(0.1)
        # The survivors take the victim's partitions once its session ends and its open transaction is aborted
        # by the broker's timeout (3 s); then each input is committed once, whatever the victim had done.
        out = read_all(broker, sink, "read_committed", len(inputs))
        counts = Counter(out)
        assert set(counts) == {f"t:{v}" for v in inputs}, sorted(set(f"t:{v}" for v in inputs) - set(counts))
        assert [v for v, n in counts.items() if n > 1] == []
        assert committed(broker, group, source) == ends  # the offsets went in the same transactions
        # The victim's aborted records are still in the log: read_uncommitted sees more than there were inputs.
        assert len(read_all(broker, sink, "read_uncommitted", len(inputs) + 1, settle_s=0.2)) > len(inputs)
        assert transformed(workers[1:]) > 0
    finally:
        for w in workers[1:]:
            if w.alive:
                w.process.terminate()
        for w in workers:
            try:
                w.process.wait(10)
            except subprocess.TimeoutExpired:
                w.process.kill()
                w.process.wait()
