"""One consumer of a group, run as its own OS process by the failover tests.

    python -m tests.clients.worker --client {aiokafka|kafka-python|confluent} --bootstrap HOST:PORT
        --group GROUP --topic TOPIC [--instance-id ID] [--assignor NAME] [--session-timeout-ms MS] ...

It subscribes to one topic, processes each poll batch (prints one line per record, then spends
``--processing-ms`` on it), then commits the batch's offsets synchronously before polling again: at-least-once.
Everything it does is one JSON line on stdout, flushed at once, so the test can follow it while it runs:

    {"event": "started", "pid": ..., "ts": ...}
    {"event": "assigned", "partitions": [...], "owned": [...], "generation": g, "member_id": m, "ts": ...}
    {"event": "revoked", "partitions": [...], "owned": [...], "generation": g, "member_id": m, "ts": ...}
    {"event": "lost", ...same fields as revoked...}     (the membership was gone: confluent, kafka-python)
    {"event": "record", "partition": p, "offset": o, "key": k, "ts": ...}
    {"event": "committed", "offsets": {"p": next_offset}, "ts": ...}
    {"event": "commit_failed", "error": "...", "ts": ...}
    {"event": "poll_error", "error": "...", "count": n, "ts": ...}   (--survive-poll-errors: the poll raised)
    {"event": "closing", "ts": ...}                    (the poll loop has stopped; close() is called now)
    {"event": "closed", "ts": ...}

"partitions" is what the client's rebalance callback was given (the whole assignment under the eager protocol,
only the change under the cooperative one); "owned" is what the process holds once the callback has run.
"generation" and "member_id" are the client's current generation and member id when the callback ran, read from
the client (confluent-kafka exposes the generation only inside its serialized consumer group metadata).

SIGTERM stops the poll loop and closes the consumer (LeaveGroup for a dynamic member; static members do not
leave, KIP-345); SIGKILL kills it without a word.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

CLIENTS = ("aiokafka", "kafka-python", "confluent")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields, "ts": time.time()})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class PollErrors:
    """``--survive-poll-errors``: a poll that raises is noted and the loop goes on, as an application that catches
    the library's errors would do. A library that raises on every poll (aiokafka 0.14 after one
    COORDINATOR_LOAD_IN_PROGRESS, cluster-and-durability.md 5.1) would print a line per call: a line is printed
    for the first of each kind and then at most once a second, with the count so far."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.counts: dict[str, int] = {}
        self._last = 0.0

    def raised(self, error: BaseException) -> None:
        if not self.enabled:
            raise error
        kind = repr(error)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = time.monotonic()
        if self.counts[kind] == 1 or now - self._last >= 1.0:
            self._last = now
            emit("poll_error", error=kind, count=self.counts[kind])


class Ownership:
    """The partitions this process holds, updated from the rebalance callbacks.

    ``identity`` reads the client's current (generation, member id) when a callback runs: an eager revocation
    happens before the rejoin (the old generation), a cooperative one after the new generation's SyncGroup.
    """

    def __init__(self) -> None:
        self.owned: set[int] = set()
        self.identity: Callable[[], tuple[int, str]] = lambda: (-1, "")

    def assigned(self, partitions: Iterable[int]) -> None:
        self._change("assigned", sorted(partitions), added=True)

    def revoked(self, partitions: Iterable[int], how: str = "revoked") -> None:
        self._change(how, sorted(partitions), added=False)

    def _change(self, event: str, partitions: list[int], added: bool) -> None:
        if added:
            self.owned |= set(partitions)
        else:
            self.owned -= set(partitions)
        generation, member_id = self.identity()
        emit(event, partitions=partitions, owned=sorted(self.owned), generation=generation, member_id=member_id)


def process(records: Iterable[tuple[int, int, bytes | None]]) -> dict[int, int]:
    """Print each record; return the offsets to commit (last offset + 1 per partition)."""
    next_offsets: dict[int, int] = {}
    for partition, offset, key in records:
        emit("record", partition=partition, offset=offset, key=key.decode() if key is not None else None)
        next_offsets[partition] = max(next_offsets.get(partition, 0), offset + 1)
    return next_offsets


def emit_committed(offsets: dict[int, int]) -> None:
    emit("committed", offsets={str(p): o for p, o in sorted(offsets.items())})


# -- aiokafka ---------------------------------------------------------------------------------------------


async def run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from aiokafka.errors import KafkaError

    assignors: dict[str, Any] = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        # aiokafka 0.14.0 implements only the eager protocol: it has no cooperative assignor.
    }
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    batch_lock = asyncio.Lock()  # a revocation waits for the batch in hand to be committed
    ownership = Ownership()
    options: dict[str, Any] = {}
    if args.assignor is not None:
        options["partition_assignment_strategy"] = (assignors[args.assignor],)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.client_id,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        metadata_max_age_ms=args.metadata_max_age_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            async with batch_lock:
                ownership.revoked(tp.partition for tp in revoked)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            ownership.assigned(tp.partition for tp in assigned)

    ownership.identity = lambda: (consumer._coordinator.generation, consumer._coordinator.member_id)
    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    poll_errors = PollErrors(args.survive_poll_errors)
    try:
        while not stopping.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=200, max_records=args.max_poll_records)
            except KafkaError as error:
                poll_errors.raised(error)
                await asyncio.sleep(0.01)
                continue
            if not batch:
                continue
            async with batch_lock:
                offsets = process((r.partition, r.offset, r.key) for rs in batch.values() for r in rs)
                await asyncio.sleep(args.processing_ms / 1000)
                try:
                    await consumer.commit({TopicPartition(args.topic, p): o for p, o in offsets.items()})
                    emit_committed(offsets)
                except KafkaError as error:
                    emit("commit_failed", error=repr(error))
    finally:
        emit("closing")
        await consumer.stop()
        emit("closed")


# -- kafka-python -----------------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, stopping: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import KafkaError

    assignors: dict[str, Any] = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,  # KIP-429, new in kafka-python 3.0
    }
    ownership = Ownership()
    options: dict[str, Any] = {}
    if args.assignor is not None:
        options["partition_assignment_strategy"] = (assignors[args.assignor],)
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.client_id,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        metadata_max_age_ms=args.metadata_max_age_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=args.max_poll_records,
        **options,
    )

    # The callbacks run on kafka-python's IO thread while the main thread waits in poll() or close(); the main
    # thread commits each batch before it polls again, so nothing processed is uncommitted at a revocation.
    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            ownership.revoked(tp.partition for tp in revoked)

        def on_partitions_lost(self, lost: Any) -> None:
            ownership.revoked((tp.partition for tp in lost), "lost")

        def on_partitions_assigned(self, assigned: Any) -> None:
            ownership.assigned(tp.partition for tp in assigned)

    def identity() -> tuple[int, str]:
        generation = consumer._coordinator._generation
        return generation.generation_id, generation.member_id

    ownership.identity = identity
    consumer.subscribe(topics=[args.topic], listener=Listener())
    # kafka-python 3.0.12 can drop a JoinGroup/SyncGroup round that finishes while no poll() is waiting for it,
    # if that rejoin was started by new topic metadata rather than by the group: the leader's own assignment
    # then makes need_rejoin() false, the finished round is never applied, heartbeats stay disabled, and the
    # broker evicts the member after its session timeout. A leader that joins before it knows the topic always
    # starts such a rejoin (docs/spec/client-traps.md G9), so learn the topic's partitions first, and poll with
    # long timeouts.
    consumer.partitions_for_topic(args.topic)
    poll_errors = PollErrors(args.survive_poll_errors)
    try:
        while not stopping.is_set():
            try:
                batch = consumer.poll(timeout_ms=1000)
            except KafkaError as error:
                poll_errors.raised(error)
                time.sleep(0.01)
                continue
            if not batch:
                continue
            offsets = process((r.partition, r.offset, r.key) for rs in batch.values() for r in rs)
            time.sleep(args.processing_ms / 1000)
            try:
                consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o) for p, o in offsets.items()})
                emit_committed(offsets)
            except KafkaError as error:
                emit("commit_failed", error=repr(error))
    finally:
        emit("closing")
        consumer.close(autocommit=False)
        emit("closed")


# -- confluent-kafka (librdkafka) -------------------------------------------------------------------------


def confluent_generation(consumer: Any) -> tuple[int, str]:
    """The generation and member id from librdkafka's serialized group metadata.

    Layout (rd_kafka_consumer_group_metadata_write): b"CGMDv2:", int32 generation id in host byte order,
    then the NUL-terminated group id and member id.
    """
    blob = bytes(consumer.consumer_group_metadata())
    magic = b"CGMDv2:"
    if not blob.startswith(magic):
        return -1, consumer.memberid() or ""
    generation = int.from_bytes(blob[len(magic) : len(magic) + 4], sys.byteorder, signed=True)
    strings = blob[len(magic) + 4 :].split(b"\0")
    member_id = strings[1].decode() if len(strings) > 1 else ""
    return generation, member_id


def run_confluent(args: argparse.Namespace, stopping: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    ownership = Ownership()
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_interval_ms,
        "topic.metadata.refresh.interval.ms": args.metadata_max_age_ms,
        "metadata.max.age.ms": 3 * args.metadata_max_age_ms,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.instance_id is not None:
        config["group.instance.id"] = args.instance_id
    if args.rdkafka_debug:
        config["debug"] = args.rdkafka_debug  # librdkafka logs these contexts on stderr, with epoch-second stamps
    if args.group_protocol == "consumer":
        # KIP-848: the broker sets the session timeout and heartbeat interval, and librdkafka refuses to create
        # a consumer given either (kip-848-consumer-groups.md section 12.1).
        config["group.protocol"] = "consumer"
        del config["session.timeout.ms"], config["heartbeat.interval.ms"]
    if args.assignor is not None:
        if args.assignor == "sticky":
            raise SystemExit("librdkafka has no eager sticky assignor")
        config["partition.assignment.strategy"] = args.assignor
    consumer = Consumer(config)
    ownership.identity = lambda: confluent_generation(consumer)

    # The callbacks run inside consume()/close() on this thread; after they return, confluent-kafka applies
    # the (incremental, for cooperative-sticky) assignment itself.
    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        ownership.assigned(tp.partition for tp in partitions)

    def on_revoke(consumer: Any, partitions: list[Any]) -> None:
        ownership.revoked(tp.partition for tp in partitions)

    def on_lost(consumer: Any, partitions: list[Any]) -> None:
        ownership.revoked((tp.partition for tp in partitions), "lost")

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not stopping.is_set():
            messages = consumer.consume(num_messages=args.max_poll_records, timeout=0.2)
            records: list[tuple[int, int, bytes | None]] = []
            for message in messages:
                partition, offset = message.partition(), message.offset()
                error = message.error()
                if error is not None or partition is None or offset is None:
                    emit("error", error=str(error), fatal=bool(error is not None and error.fatal()))
                    continue
                records.append((partition, offset, message.key()))
            if not records:
                continue
            offsets = process(records)
            time.sleep(args.processing_ms / 1000)
            try:
                consumer.commit(
                    offsets=[TopicPartition(args.topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
                emit_committed(offsets)
            except KafkaException as error:
                emit("commit_failed", error=repr(error))
    finally:
        emit("closing")
        consumer.close()
        emit("closed")


# -- main --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--instance-id", default=None, help="group.instance.id: a static member (KIP-345)")
    parser.add_argument("--assignor", choices=ASSIGNORS, default=None, help="default: the client's own")
    parser.add_argument("--client-id", default="failover-worker")
    parser.add_argument(
        "--group-protocol", choices=("classic", "consumer"), default="classic", help="group.protocol (confluent only)"
    )
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--metadata-max-age-ms", type=int, default=1000)
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument(
        "--processing-ms", type=int, default=0, help="time each batch takes: a pause between its records and its commit"
    )
    parser.add_argument(
        "--survive-poll-errors", action="store_true", help="note a poll that raises and poll again (default: exit)"
    )
    parser.add_argument("--log-level", default="WARNING", help="the client library's log level (on stderr)")
    parser.add_argument(
        "--debug-loggers", default="", help="comma-separated Python loggers set to DEBUG (kafka.consumer.fetcher, ...)"
    )
    parser.add_argument("--rdkafka-debug", default="", help="librdkafka's debug contexts (confluent only: fetch,topic)")
    args = parser.parse_args(argv)
    if args.group_protocol == "consumer" and args.client != "confluent":
        parser.error("only confluent-kafka speaks the consumer protocol (clients.md section 7)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Client logs go to stderr (the test keeps it); SIGUSR1 dumps every thread's stack there, for a stuck client.
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(threadName)s %(name)s %(message)s"
    )
    # A few loggers at DEBUG, not the whole library: what a fetcher says about leaders and epochs without every
    # connection's chatter (the leader-move tests report those lines).
    for name in filter(None, args.debug_loggers.split(",")):
        logging.getLogger(name).setLevel(logging.DEBUG)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    emit("started", pid=os.getpid(), client=args.client, instance_id=args.instance_id)
    if args.client == "aiokafka":
        asyncio.run(run_aiokafka(args))
        return
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    if args.client == "kafka-python":
        run_kafka_python(args, stopping)
    else:
        run_confluent(args, stopping)


if __name__ == "__main__":
    main()
