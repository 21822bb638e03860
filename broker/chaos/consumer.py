"""The bundled example consumer: one member of a group, at-least-once, as its own OS process.

    python -m broker.chaos.consumer --client {aiokafka,kafka-python,confluent} --bootstrap HOST:PORT \\
        --group G --topic T --client-id ID --out FILE [--session-timeout-ms N] [--heartbeat-interval-ms N] \\
        [--assignor range|roundrobin|cooperative-sticky] [--instance-id ID] [--group-protocol classic|consumer] \\
        [--commits FILE]

For every batch it gets, it appends one line per record, ``partition offset key``, to FILE, flushes and fsyncs
the file, and only then commits the batch's offsets synchronously: a record whose offset was committed is always
in the file, so a consumer killed at any moment loses nothing (its uncommitted records come again, to whoever owns
the partition next: duplicates, never gaps). With ``--commits FILE`` it also appends a line per acknowledged
commit, ``<received> <acked> partition:first:next ...`` (when the batch came, when the broker acknowledged its
commit, and its offsets): the chaos runner times each client's first commit after a broker restart from it, and
checks that no record came again after a commit past it was acknowledged.

With ``--group-protocol consumer`` (confluent only: librdkafka is the one client here that speaks KIP-848) the
consumer sets ``group.protocol=consumer`` and none of session.timeout.ms, heartbeat.interval.ms and
partition.assignment.strategy, which librdkafka refuses with that protocol (docs/spec/consumer-groups.md 12.1): the
broker dictates the timers and assigns. Commits carry the member epoch, so one that races an epoch change fails
with STALE_MEMBER_EPOCH (12.7 trap 8): it is a failed commit like any other, the records come again.

A fatal error, one the client cannot recover from, ends the process with exit code 3 after a line naming it on
stderr (a process that lives on without consuming would hide the fault from the chaos run): a static member fenced
by another process with its ``group.instance.id`` (FENCED_INSTANCE_ID), a KIP-848 static member whose instance id
another member still holds (UNRELEASED_INSTANCE_ID: docs/spec/consumer-groups.md sections 4.16 and 12.5), or any
error librdkafka calls fatal. A consumer-protocol member fenced at a stale epoch (FENCED_MEMBER_EPOCH) is not
fatal: librdkafka rejoins with epoch 0, as KIP-848 asks. aiokafka 0.14 sends Heartbeat without the instance id, so it
hears UNKNOWN_MEMBER_ID and rejoins: it never learns it was fenced.

SIGTERM stops the poll loop and closes the consumer (a dynamic member sends LeaveGroup, or a consumer-protocol
heartbeat with epoch -1), then the process exits 0.
SIGKILL kills it without a word; the broker notices when the session times out. Diagnostics go to stderr; SIGUSR1
dumps every thread's stack there.

Only the chosen client library is imported; a missing one is a one-line error naming the pip package.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO, Any

from broker.chaos import CLIENTS, MissingLibrary, fail_missing, load, run_client
from broker.chaos.options import CONSUMER_GROUP_PROTOCOLS, CONSUMER_PROTOCOL_CLIENT

ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")
PROGRAM = "python -m broker.chaos.consumer"

Record = tuple[int, int, bytes | None]

FATAL_EXIT = 3


class Fatal(Exception):
    """The client hit an error it cannot recover from: the process logs it and exits ``FATAL_EXIT``."""


class FencedHeartbeats(logging.Handler):
    """kafka-python 3.0.12 only logs a fenced static member's heartbeat (``BaseCoordinator._do_heartbeat`` catches
    FencedInstanceIdError, logs it and stops heartbeating) and polls on as if nothing happened: this handler, on
    its heartbeat logger, is how the poll loop learns of it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.fenced: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "fenced" in str(record.msg).lower():
            self.fenced = record.getMessage()


class Sink:
    """The output file: one line per record, durable before the batch is committed; and, with ``commits``, one
    line per acknowledged commit (``CommitLog``)."""

    def __init__(self, path: str, commits: str | None = None) -> None:
        self.file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.commits: IO[str] | None = None
        if commits is not None:
            self.commits = open(commits, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.received = 0.0
        self.first_offsets: dict[int, int] = {}

    def write(self, records: Iterable[Record]) -> dict[int, int]:
        """Append the batch, flush and fsync; return the offsets to commit (last offset + 1 per partition)."""
        self.received = time.time()
        lines: list[str] = []
        next_offsets: dict[int, int] = {}
        firsts: dict[int, int] = {}
        for partition, offset, key in records:
            lines.append(f"{partition} {offset} {key.decode(errors='replace') if key is not None else '-'}\n")
            next_offsets[partition] = max(next_offsets.get(partition, 0), offset + 1)
            firsts[partition] = min(firsts.get(partition, offset), offset)
        self.first_offsets = firsts
        if lines:
            self.file.write("".join(lines))
            self.file.flush()
            os.fsync(self.file.fileno())
        return next_offsets

    def committed(self, offsets: dict[int, int]) -> None:
        """The broker acknowledged the commit of the batch last written: ``<received> <acked> p:first:next ...``
        (wall-clock seconds). No fsync: a process killed after the flush still leaves the line to the OS, and the
        chaos runner reads it only to time commits and to check that no acknowledged commit went back."""
        if self.commits is None:
            return
        ranges = " ".join(f"{p}:{self.first_offsets.get(p, o - 1)}:{o}" for p, o in sorted(offsets.items()))
        self.commits.write(f"{self.received:.6f} {time.time():.6f} {ranges}\n")
        self.commits.flush()

    def close(self) -> None:
        self.file.close()
        if self.commits is not None:
            self.commits.close()


def note(args: argparse.Namespace, message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {args.client_id}: {message}", file=sys.stderr, flush=True)


# -- aiokafka ---------------------------------------------------------------------------------------------


async def run_aiokafka(args: argparse.Namespace, sink: Sink) -> None:
    aiokafka = load("aiokafka")
    errors = load("aiokafka", "errors")
    assignors: dict[str, Any] = {
        "range": load("aiokafka", "coordinator.assignors.range").RangePartitionAssignor,
        "roundrobin": load("aiokafka", "coordinator.assignors.roundrobin").RoundRobinPartitionAssignor,
    }
    if args.assignor == "cooperative-sticky":
        raise SystemExit(f"{PROGRAM}: error: aiokafka has no cooperative rebalance protocol (no cooperative-sticky)")
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    options: dict[str, Any] = {}
    if args.assignor is not None:
        options["partition_assignment_strategy"] = (assignors[args.assignor],)

    class Listener(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc,name-defined]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            note(args, f"revoked {sorted(tp.partition for tp in revoked)}")

        async def on_partitions_assigned(self, assigned: Any) -> None:
            note(args, f"assigned {sorted(tp.partition for tp in assigned)}")

    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.client_id,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    )
    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    try:
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            if not batch:
                continue
            offsets = sink.write((r.partition, r.offset, r.key) for rs in batch.values() for r in rs)
            try:
                await consumer.commit({aiokafka.TopicPartition(args.topic, p): o for p, o in offsets.items()})
                sink.committed(offsets)
            except errors.KafkaError as error:
                note(args, f"commit failed (the records will come again): {error!r}")
    finally:
        note(args, "closing")
        await consumer.stop()


# -- kafka-python -----------------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, sink: Sink, stopping: threading.Event) -> None:
    kafka = load("kafka-python")
    errors = load("kafka-python", "errors")
    assignors: dict[str, Any] = {
        "range": load("kafka-python", "coordinator.assignors.range").RangePartitionAssignor,
        "roundrobin": load("kafka-python", "coordinator.assignors.roundrobin").RoundRobinPartitionAssignor,
        "cooperative-sticky": load(
            "kafka-python", "coordinator.assignors.cooperative_sticky"
        ).CooperativeStickyAssignor,
    }
    options: dict[str, Any] = {}
    if args.assignor is not None:
        options["partition_assignment_strategy"] = (assignors[args.assignor],)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.client_id,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    )

    class Listener(kafka.ConsumerRebalanceListener):  # type: ignore[misc,name-defined]
        def on_partitions_revoked(self, revoked: Any) -> None:
            note(args, f"revoked {sorted(tp.partition for tp in revoked)}")

        def on_partitions_lost(self, lost: Any) -> None:
            note(args, f"lost {sorted(tp.partition for tp in lost)}")

        def on_partitions_assigned(self, assigned: Any) -> None:
            note(args, f"assigned {sorted(tp.partition for tp in assigned)}")

    consumer.subscribe(topics=[args.topic], listener=Listener())
    # kafka-python 3.0.12 can drop a JoinGroup/SyncGroup round that finishes while no poll() waits for it, when
    # the round was started by new topic metadata (a leader that joined before it knew the topic): the member
    # then stops heartbeating and is expired. Learn the topic's partitions before the first join, and poll with
    # long (1 s) timeouts: short ones make that client-side hang likely.
    consumer.partitions_for_topic(args.topic)
    fenced = FencedHeartbeats()
    logging.getLogger("kafka.coordinator.heartbeat").addHandler(fenced)
    try:
        while not stopping.is_set():
            try:
                batch = consumer.poll(timeout_ms=1000)
            except errors.FencedInstanceIdError as error:
                raise Fatal(f"fenced: {error!r}") from error
            if fenced.fenced is not None:
                raise Fatal(f"fenced: {fenced.fenced}")
            if not batch:
                continue
            offsets = sink.write((r.partition, r.offset, r.key) for rs in batch.values() for r in rs)
            try:
                consumer.commit(
                    {kafka.TopicPartition(args.topic, p): kafka.OffsetAndMetadata(o) for p, o in offsets.items()}
                )
                sink.committed(offsets)
            except errors.FencedInstanceIdError as error:
                raise Fatal(f"fenced: {error!r}") from error
            except errors.KafkaError as error:
                note(args, f"commit failed (the records will come again): {error!r}")
    finally:
        note(args, "closing")
        consumer.close(autocommit=False)


# -- confluent-kafka (librdkafka) -------------------------------------------------------------------------


def confluent_config(args: argparse.Namespace) -> dict[str, Any]:
    """librdkafka's settings for this consumer, for either group protocol."""
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.instance_id is not None:
        config["group.instance.id"] = args.instance_id
    if args.group_protocol == "consumer":
        # Section 12.1: the timers come from the broker; setting them (or an assignment strategy) fails creation.
        config["group.protocol"] = "consumer"
        return config
    config["session.timeout.ms"] = args.session_timeout_ms
    config["heartbeat.interval.ms"] = args.heartbeat_interval_ms
    if args.assignor is not None:
        config["partition.assignment.strategy"] = args.assignor
    return config


def subscribe_noting(consumer: Any, topic: str, args: argparse.Namespace) -> None:
    """Subscribe a confluent-kafka consumer to ``topic``, noting each assignment, revocation and loss in its log
    (the runner reads them back: ``launch.tail``); the exactly-once worker subscribes the same way."""

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        note(args, f"assigned {sorted(tp.partition for tp in partitions)}")

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        note(args, f"revoked {sorted(tp.partition for tp in partitions)}")

    def on_lost(_consumer: Any, partitions: list[Any]) -> None:
        note(args, f"lost {sorted(tp.partition for tp in partitions)}")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)


def is_fatal(confluent: Any, error: Any) -> bool:
    """librdkafka's fatal errors (FENCED_INSTANCE_ID, say) reach the consumer as messages with code _FATAL."""
    return bool(error.fatal()) or error.code() == confluent.KafkaError._FATAL


def run_confluent(args: argparse.Namespace, sink: Sink, stopping: threading.Event) -> None:
    confluent = load("confluent")
    config = confluent_config(args)
    consumer = confluent.Consumer(config)
    subscribe_noting(consumer, args.topic, args)
    try:
        while not stopping.is_set():
            records: list[Record] = []
            for message in consumer.consume(num_messages=500, timeout=0.2):
                partition, offset = message.partition(), message.offset()
                error = message.error()
                if error is not None and is_fatal(confluent, error):
                    raise Fatal(f"consume error: {error}")
                if error is not None or partition is None or offset is None:
                    note(args, f"consume error: {error}")
                    continue
                records.append((partition, offset, message.key()))
            if not records:
                continue
            offsets = sink.write(records)
            try:
                consumer.commit(
                    offsets=[confluent.TopicPartition(args.topic, p, o) for p, o in offsets.items()],
                    asynchronous=False,
                )
                sink.committed(offsets)
            except confluent.KafkaException as error:
                if error.args and is_fatal(confluent, error.args[0]):
                    raise Fatal(f"commit failed: {error.args[0]}") from error
                note(args, f"commit failed (the records will come again): {error!r}")
    finally:
        note(args, "closing")
        consumer.close()


# -- main --------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="An at-least-once consumer for chaos runs.")
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--out", required=True, metavar="FILE", help="append 'partition offset key' lines here")
    parser.add_argument(
        "--commits", default=None, metavar="FILE",
        help="append '<received> <acked> partition:first:next ...' here for every acknowledged commit",
    )  # fmt: skip
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    parser.add_argument("--assignor", choices=ASSIGNORS, default=None, help="default: the client's own")
    parser.add_argument("--instance-id", default=None, help="group.instance.id: a static member (KIP-345)")
    parser.add_argument("--log-level", default="WARNING", help="the client library's log level (on stderr)")
    parser.add_argument(
        "--group-protocol", choices=CONSUMER_GROUP_PROTOCOLS, default="classic",
        help="classic, or consumer (KIP-848: confluent only, without session/heartbeat/assignor settings)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.group_protocol == "consumer":
        if args.client != CONSUMER_PROTOCOL_CLIENT:
            parser.error(f"--group-protocol consumer needs --client {CONSUMER_PROTOCOL_CLIENT} "
                         f"({args.client} speaks only the classic protocol)")  # fmt: skip
        if args.assignor is not None:
            parser.error("--group-protocol consumer takes no --assignor: the broker assigns")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sink = Sink(args.out, args.commits)
    note(args, f"started, pid {os.getpid()}, {args.client}")
    try:
        run_client(
            args.client,
            lambda: run_aiokafka(args, sink),
            lambda stopping: run_kafka_python(args, sink, stopping),
            lambda stopping: run_confluent(args, sink, stopping),
        )
    except MissingLibrary as error:
        return fail_missing(error, PROGRAM)
    except Fatal as error:
        note(args, f"fatal error, exiting {FATAL_EXIT}: {error}")
        return FATAL_EXIT
    finally:
        sink.close()
    note(args, "closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
