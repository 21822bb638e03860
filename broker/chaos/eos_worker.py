"""The bundled exactly-once worker of ``chaos run --exactly-once``: consume, transform, produce, in transactions.

    python -m broker.chaos.eos_worker --bootstrap HOST:PORT --group G --input IN --output OUT --client-id ID \\
        --transactional-id TID [--batch N] [--processing-ms MS] [--transaction-timeout-ms MS]
        [--group-protocol classic|consumer]
        [--session-timeout-ms N] [--heartbeat-interval-ms N] [--assignor NAME]

confluent-kafka (librdkafka) only. A ``read_committed`` consumer in the group G and a transactional producer
(KIP-98, docs/spec/transactions.md). Every batch of at most ``--batch`` input records is one transaction: each
record goes to OUT, same partition, same key, with the header ``chaos-client: ID`` (who committed it), then
``send_offsets_to_transaction`` puts the batch's next offsets into the same transaction (AddOffsetsToTxn,
TxnOffsetCommit with the member's generation or epoch: KIP-447) and ``commit_transaction`` ends it. The consumer
never commits by itself: an input's output and its offset are committed together or not at all. With
``--processing-ms`` the batch's records are flushed to the log and the transaction stays open that long before
its offsets go in (the time a real transformation takes): a kill then often lands inside an open transaction
whose writes are already in the output topic, the case exactly-once is about. Nothing is consumed meanwhile, so
no rebalance callback runs while a transaction is open.

The transactional id belongs to the runner's worker *slot*, not to the process: a restarted slot calls
``init_transactions`` with the id of the incarnation it replaces, which fences that incarnation (its producer epoch
is bumped) and aborts the transaction it left open (Kafka's ``TransactionCoordinator.handleInitProducerId``). A
SIGKILLed worker's output is thus never committed half-way; its partitions go to the survivors, who resume at the
last committed offsets.

When a commit fails with an abortable error (a rebalance moved the generation on: TxnOffsetCommit answers
ILLEGAL_GENERATION, or the member epoch is stale) the transaction is aborted and the batch's partitions still
owned are rewound to their committed offsets, so the batch is done again, by this worker or by the partition's
new owner. A fatal error (this incarnation fenced) ends the process with status 1.

SIGTERM finishes the transaction under way, closes the consumer (LeaveGroup, or a heartbeat with epoch -1) and
exits 0. Diagnostics go to stderr; SIGUSR1 dumps every thread's stack there.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from broker.chaos import MissingLibrary, fail_missing, load
from broker.chaos.consumer import ASSIGNORS, confluent_config, note, subscribe_noting
from broker.chaos.options import CONSUMER_GROUP_PROTOCOLS

PROGRAM = "python -m broker.chaos.eos_worker"
#: The output header naming the worker that committed a record (the runner counts records per worker with it).
CLIENT_HEADER = "chaos-client"
INIT_TIMEOUT_S = 30.0
TXN_CALL_TIMEOUT_S = 10.0
COMMIT_RETRIES = 5


def rewind(confluent: Any, consumer: Any, args: argparse.Namespace, first_offsets: dict[int, int]) -> None:
    """After an abort: the batch's partitions this worker still owns go back to the batch's first offsets.

    That is where the last committed transaction left each of them (every abort rewinds, so a batch always starts
    at the committed offset), without asking the group. A partition revoked meanwhile needs nothing: its next owner
    starts at the committed offset (OffsetFetch with require_stable waits until this aborted transaction's offsets
    are gone, docs/spec/transactions.md 5.2)."""
    owned = {tp.partition for tp in consumer.assignment() if tp.topic == args.input}
    for partition, offset in sorted(first_offsets.items()):
        if partition not in owned:
            continue
        try:
            consumer.seek(confluent.TopicPartition(args.input, partition, offset))
        except confluent.KafkaException as error:  # revoked since: its new owner starts at the committed offset
            note(args, f"rewind of partition {partition}: {error}")


def transact(confluent: Any, producer: Any, consumer: Any, args: argparse.Namespace, messages: list[Any]) -> bool:
    """One batch as one transaction; True when committed, False when aborted (and rewound)."""
    next_offsets: dict[int, int] = {}
    first_offsets: dict[int, int] = {}
    headers = [(CLIENT_HEADER, args.client_id.encode())]
    producer.begin_transaction()
    try:
        for message in messages:
            partition, offset = message.partition(), message.offset()
            producer.produce(
                args.output, key=message.key(), value=message.value(), partition=partition, headers=headers
            )
            next_offsets[partition] = max(next_offsets.get(partition, 0), offset + 1)
            first_offsets.setdefault(partition, offset)
        if args.processing_ms:  # the writes in the log, the transaction open: the window a kill can land in
            producer.flush(TXN_CALL_TIMEOUT_S)  # commit_transaction would wait for any left
            time.sleep(args.processing_ms / 1000)
        positions = [confluent.TopicPartition(args.input, p, o) for p, o in sorted(next_offsets.items())]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TXN_CALL_TIMEOUT_S)
        for attempt in range(COMMIT_RETRIES):
            try:
                producer.commit_transaction(TXN_CALL_TIMEOUT_S)
                return True
            except confluent.KafkaException as raised:  # a retriable one (a time-out): the same commit again
                if not raised.args[0].retriable() or attempt == COMMIT_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")
    except confluent.KafkaException as raised:
        error = raised.args[0]
        if not error.txn_requires_abort():
            raise  # fatal (fenced by a newer incarnation of this slot) or unexpected: the process ends
        note(args, f"aborting a transaction of {len(messages)} records: {error}")
        producer.abort_transaction(TXN_CALL_TIMEOUT_S)
        rewind(confluent, consumer, args, first_offsets)
        return False


def run(args: argparse.Namespace, stopping: threading.Event) -> None:
    confluent = load("confluent")
    # Section 12.1 of docs/spec/consumer-groups.md: with group.protocol=consumer the timers come from the broker,
    # which confluent_config knows; read_committed so an input written by a transaction is read only once committed.
    consumer = confluent.Consumer({**confluent_config(args), "isolation.level": "read_committed"})
    producer = confluent.Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "client.id": f"{args.client_id}-txn",
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(INIT_TIMEOUT_S)  # fences the slot's previous incarnation, aborts what it left open
    note(args, f"transactional id {args.transactional_id} ready")

    subscribe_noting(consumer, args.input, args)
    committed = aborted = 0
    try:
        while not stopping.is_set():
            messages = []
            for message in consumer.consume(num_messages=args.batch, timeout=0.2):
                if message.error() is not None or message.partition() is None or message.offset() is None:
                    note(args, f"consume error: {message.error()}")
                    continue
                messages.append(message)
            if not messages:
                continue
            if transact(confluent, producer, consumer, args, messages):
                committed += 1
            else:
                aborted += 1
    finally:
        note(args, f"closing after {committed} committed and {aborted} aborted transactions")
        consumer.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="An exactly-once consume-transform-produce worker.")
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True, help="the topic read (read_committed)")
    parser.add_argument("--output", required=True, help="the topic written, in transactions")
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--transactional-id", required=True, help="the slot's: a restart fences the old process")
    parser.add_argument("--batch", type=int, default=50, help="at most N input records per transaction")
    parser.add_argument("--processing-ms", type=int, default=0, help="how long each transaction stays open")
    parser.add_argument("--transaction-timeout-ms", type=int, default=10_000)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    parser.add_argument("--assignor", choices=ASSIGNORS, default=None, help="default: the client's own")
    parser.add_argument("--group-protocol", choices=CONSUMER_GROUP_PROTOCOLS, default="classic")
    parser.add_argument("--log-level", default="WARNING", help="the client library's log level (on stderr)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.instance_id = None  # confluent_config's static membership: workers are dynamic members
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    if args.group_protocol == "consumer" and args.assignor is not None:
        parser.error("--group-protocol consumer takes no --assignor: the broker assigns")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    note(args, f"started, pid {os.getpid()}")
    try:
        run(args, stopping)
    except MissingLibrary as error:
        return fail_missing(error, PROGRAM)
    except Exception as error:  # a fatal transaction error (fenced): the runner restarts the slot
        note(args, f"fatal: {error!r}")
        return 1
    note(args, "closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
