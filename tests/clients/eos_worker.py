"""One exactly-once consume-transform-produce worker (confluent-kafka), run as its own OS process.

    python -m tests.clients.eos_worker --bootstrap HOST:PORT --group G --input IN --output OUT
        --transactional-id TID [--transaction-timeout-ms MS]

Each poll batch is one transaction (docs/spec/transactions.md, KIP-98/KIP-447): every record goes to OUT on the
same partition with the value ``t:<input value>``, then ``send_offsets_to_transaction`` puts the batch's next
offsets into the transaction and ``commit_transaction`` ends it. The consumer reads read_committed and never
commits by itself. After an abortable error (a rebalance fencing the group generation, say) the transaction is
aborted and the batch's partitions are rewound to their committed offsets, so nothing is lost or doubled.

JSON lines on stdout: {"event": "started"}, {"event": "ready"} (init_transactions done),
{"event": "open", "count": n} (with --processing-ms: the batch is written, its transaction still open),
{"event": "committed", "count": n}, {"event": "aborted", "error": "..."}, {"event": "closed"}.
SIGTERM stops the loop; SIGKILL (the test's crash) leaves the open transaction to the broker's timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields, "ts": time.time()}) + "\n")
    sys.stdout.flush()


def rewind(consumer: Any, partitions: list[Any]) -> None:
    """Seek the batch's partitions (still ours) back to the group's committed offsets after an abort."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaException

    owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    try:
        committed = consumer.committed([tp for tp in partitions if (tp.topic, tp.partition) in owned], timeout=10)
    except KafkaException as error:
        emit("rewind_failed", error=str(error))
        return
    for tp in committed:
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
        try:
            consumer.seek(tp)
        except KafkaException as error:  # revoked meanwhile: its new owner reads from the committed offset
            emit("rewind_failed", error=str(error))


def run(args: argparse.Namespace, stopping: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    emit("ready")
    consumer.subscribe([args.input])
    try:
        while not stopping.is_set():
            messages = [m for m in consumer.consume(num_messages=100, timeout=0.2) if m.error() is None]
            if not messages:
                continue
            next_offsets: dict[int, int] = {}
            producer.begin_transaction()
            try:
                for message in messages:
                    partition, offset, value = message.partition(), message.offset(), message.value()
                    assert partition is not None and offset is not None and value is not None
                    producer.produce(args.output, key=message.key(), value=b"t:" + value, partition=partition)
                    next_offsets[partition] = max(next_offsets.get(partition, 0), offset + 1)
                if args.processing_ms:  # the records are in the log, the transaction open: a window to kill in
                    assert producer.flush(10) == 0
                    emit("open", count=len(messages))
                    time.sleep(args.processing_ms / 1000)
                positions = [TopicPartition(args.input, p, o) for p, o in sorted(next_offsets.items())]
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10)
                producer.commit_transaction(10)
                emit("committed", count=len(messages))
            except KafkaException as raised:
                error = raised.args[0]
                if not error.txn_requires_abort():
                    raise
                emit("aborted", error=str(error))
                producer.abort_transaction(10)
                rewind(consumer, [TopicPartition(args.input, p) for p in next_offsets])
    finally:
        consumer.close()
        emit("closed")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.eos_worker")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--transaction-timeout-ms", type=int, default=3000)
    parser.add_argument("--processing-ms", type=int, default=0, help="time each open transaction takes")
    args = parser.parse_args(argv)
    emit("started", pid=os.getpid())
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    run(args, stopping)


if __name__ == "__main__":
    main()
