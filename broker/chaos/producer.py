"""A producer with a known key sequence, for chaos runs.

    python -m broker.chaos.producer --client {aiokafka,kafka-python,confluent} --bootstrap HOST:PORT --topic T \\
        --status FILE [--rate N] [--prefix k] [--partitions N] [--duration S]

It sends records with keys ``k-000000``, ``k-000001``, ... at ``--rate`` records per second (acks=all, idempotent)
until SIGTERM (or ``--duration`` seconds), then flushes what is in flight and exits 0. Every half second, and once
more at the end, it replaces FILE with one JSON object:

    {"ready": bool, "done": bool, "prefix": "k", "sent": n, "acked": a, "unacked": [i, ...], "errors": {...}}

Records ``0 .. sent-1`` were sent; all of them are acknowledged except those listed in ``unacked`` (failed, or
still in flight). Once ``done`` is true that list is final: the acknowledged keys are exactly ``range(sent)`` minus
``unacked``. With ``--partitions N`` the topic is created first (N partitions) unless it exists; ``ready`` turns
true once the producer is connected and the topic exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from broker.chaos import CLIENTS, MissingLibrary, fail_missing, load, run_client

PROGRAM = "python -m broker.chaos.producer"
FLUSH_TIMEOUT_S = 15.0
STATUS_EVERY_S = 0.5
TOPIC_ALREADY_EXISTS = 36


def key_of(prefix: str, index: int) -> str:
    return f"{prefix}-{index:06d}"


class Tally:
    """What was sent and acknowledged; delivery callbacks may run on another thread."""

    def __init__(self, path: str, prefix: str) -> None:
        self.path = path
        self.prefix = prefix
        self.lock = threading.Lock()
        self.sent = 0
        self.acked = 0
        self.in_flight: set[int] = set()
        self.failed: set[int] = set()
        self.errors: Counter[str] = Counter()
        self.ready = False
        self._written = 0.0

    def sending(self) -> int:
        with self.lock:
            index = self.sent
            self.sent += 1
            self.in_flight.add(index)
            return index

    def delivered(self, index: int, error: object | None) -> None:
        with self.lock:
            self.in_flight.discard(index)
            if error is None:
                self.acked += 1
            else:
                self.failed.add(index)
                self.errors[str(error)[:200]] += 1

    def pending(self) -> int:
        with self.lock:
            return len(self.in_flight)

    def write(self, done: bool = False, force: bool = False) -> None:
        """Replace the status file atomically, at most every STATUS_EVERY_S unless forced."""
        now = time.monotonic()
        if not force and not done and now - self._written < STATUS_EVERY_S:
            return
        self._written = now
        with self.lock:
            status = {
                "ready": self.ready,
                "done": done,
                "prefix": self.prefix,
                "sent": self.sent,
                "acked": self.acked,
                "unacked": sorted(self.failed | self.in_flight),
                "errors": dict(self.errors),
            }
        temporary = f"{self.path}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(status, file)
        os.replace(temporary, self.path)


class Pacer:
    """How many records are due by now at a fixed rate, from the first call on."""

    def __init__(self, rate: float, duration: float | None) -> None:
        self.rate = rate
        self.started = time.monotonic()
        self.deadline = None if duration is None else self.started + duration

    def due(self, sent: int) -> int:
        return max(0, int((time.monotonic() - self.started) * self.rate) + 1 - sent)

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


# -- topic creation ----------------------------------------------------------------------------------------


def _already_exists(error: BaseException) -> bool:
    return "TopicAlreadyExists" in type(error).__name__ or "TOPIC_ALREADY_EXISTS" in str(error).upper()


def ensure_topic_kafka_python(args: argparse.Namespace) -> None:
    admin_module = load("kafka-python", "admin")
    admin = admin_module.KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id=args.client_id)
    try:
        admin.create_topics([admin_module.NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)])
    except Exception as error:
        if not _already_exists(error):
            raise
    finally:
        admin.close()


def ensure_topic_confluent(args: argparse.Namespace) -> None:
    admin_module = load("confluent", "admin")
    admin = admin_module.AdminClient({"bootstrap.servers": args.bootstrap, "client.id": args.client_id})
    futures = admin.create_topics(
        [admin_module.NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)]
    )
    for future in futures.values():
        try:
            future.result(timeout=FLUSH_TIMEOUT_S)
        except Exception as error:
            if not _already_exists(error):
                raise


async def ensure_topic_aiokafka(args: argparse.Namespace) -> None:
    admin_module = load("aiokafka", "admin")
    admin = admin_module.AIOKafkaAdminClient(bootstrap_servers=args.bootstrap, client_id=args.client_id)
    await admin.start()
    try:
        response = await admin.create_topics(
            [admin_module.NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)]
        )
        for result in response.topic_errors:
            code = result[1]
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"CreateTopics {args.topic}: error code {code}: {result}")
    finally:
        await admin.close()


# -- the producers -----------------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, tally: Tally, stopping: threading.Event) -> None:
    kafka = load("kafka-python")
    if args.partitions:
        ensure_topic_kafka_python(args)
    producer = kafka.KafkaProducer(
        bootstrap_servers=args.bootstrap, client_id=args.client_id, acks="all", enable_idempotence=True
    )
    producer.partitions_for(args.topic)  # connect and learn the topic before the clock starts
    tally.ready = True
    tally.write(force=True)
    pacer = Pacer(args.rate, args.duration)

    def callbacks(future: Any, index: int) -> None:
        future.add_callback(lambda _metadata: tally.delivered(index, None))
        future.add_errback(lambda error: tally.delivered(index, error))

    try:
        while not stopping.is_set() and not pacer.expired():
            for _ in range(pacer.due(tally.sent)):
                index = tally.sending()
                callbacks(producer.send(args.topic, key=key_of(args.prefix, index).encode(), value=b"chaos"), index)
            tally.write()
            time.sleep(0.01)
        producer.flush(timeout=FLUSH_TIMEOUT_S)
    finally:
        producer.close(timeout=FLUSH_TIMEOUT_S)


def run_confluent(args: argparse.Namespace, tally: Tally, stopping: threading.Event) -> None:
    confluent = load("confluent")
    if args.partitions:
        ensure_topic_confluent(args)
    producer = confluent.Producer(
        {"bootstrap.servers": args.bootstrap, "client.id": args.client_id, "acks": "all", "enable.idempotence": True}
    )
    producer.list_topics(args.topic, timeout=FLUSH_TIMEOUT_S)
    tally.ready = True
    tally.write(force=True)
    pacer = Pacer(args.rate, args.duration)

    def on_delivery(index: int) -> Callable[[Any, Any], None]:
        return lambda error, _message: tally.delivered(index, error)

    while not stopping.is_set() and not pacer.expired():
        for _ in range(pacer.due(tally.sent)):
            index = tally.sending()
            key = key_of(args.prefix, index).encode()
            while True:
                try:
                    producer.produce(args.topic, key=key, value=b"chaos", on_delivery=on_delivery(index))
                    break
                except BufferError:  # the local queue is full: serve delivery reports and try again
                    producer.poll(0.1)
        producer.poll(0)
        tally.write()
        time.sleep(0.01)
    producer.flush(FLUSH_TIMEOUT_S)


async def run_aiokafka(args: argparse.Namespace, tally: Tally) -> None:
    aiokafka = load("aiokafka")
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    if args.partitions:
        await ensure_topic_aiokafka(args)
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=args.bootstrap, client_id=args.client_id, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        await producer.partitions_for(args.topic)
        tally.ready = True
        tally.write(force=True)
        pacer = Pacer(args.rate, args.duration)

        def done(index: int) -> Callable[[asyncio.Future[Any]], None]:
            def callback(future: asyncio.Future[Any]) -> None:
                error = future.exception() if not future.cancelled() else "cancelled"
                tally.delivered(index, error)

            return callback

        while not stopping.is_set() and not pacer.expired():
            for _ in range(pacer.due(tally.sent)):
                index = tally.sending()
                future = await producer.send(args.topic, key=key_of(args.prefix, index).encode(), value=b"chaos")
                future.add_done_callback(done(index))
            tally.write()
            await asyncio.sleep(0.01)
        await asyncio.wait_for(producer.flush(), FLUSH_TIMEOUT_S)
    finally:
        await producer.stop()


# -- main --------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="Produce a known key sequence at a fixed rate.")
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--status", required=True, metavar="FILE", help="the JSON status file (replaced atomically)")
    parser.add_argument("--rate", type=float, default=100.0, help="records per second")
    parser.add_argument("--prefix", default="k", help="keys are PREFIX-000000, PREFIX-000001, ...")
    parser.add_argument("--partitions", type=int, default=0, help="create the topic with N partitions if missing")
    parser.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: at SIGTERM)")
    parser.add_argument("--client-id", default="chaos-producer")
    parser.add_argument("--log-level", default="WARNING", help="the client library's log level (on stderr)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.rate <= 0:
        print(f"{PROGRAM}: error: --rate must be positive", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    tally = Tally(args.status, args.prefix)
    tally.write(force=True)
    try:
        run_client(
            args.client,
            lambda: run_aiokafka(args, tally),
            lambda stopping: run_kafka_python(args, tally, stopping),
            lambda stopping: run_confluent(args, tally, stopping),
        )
    except MissingLibrary as error:
        return fail_missing(error, PROGRAM)
    finally:
        tally.write(done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
