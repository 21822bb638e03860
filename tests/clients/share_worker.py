"""One member of a KIP-932 share group: a confluent-kafka ``ShareConsumer`` run as its own OS process.

    python -m tests.clients.share_worker --bootstrap HOST:PORT --group GROUP --topic TOPIC
        [--mode implicit|explicit] [--release REGEX [--release-times N]] [--reject REGEX]
        [--hold-after-batches N] [--close-after-batches N] [--commit sync|async|none] [--on-close commit|plain] ...

What confluent-kafka 2.16.1 (librdkafka 2.16.0) offers, read in the installed package (``help(ShareConsumer)``,
``cimpl.pyi``) and tried against librdkafka's mock cluster:

* ``ShareConsumer(config)``: ``bootstrap.servers``, ``group.id``, ``share.acknowledgement.mode`` ("implicit", the
  default, or "explicit"), ``max.poll.records`` (500; librdkafka sends it as ShareFetch MaxRecords and BatchSize),
  and the common client settings (``client.id``, ``debug``, ``statistics.interval.ms`` with ``stats_cb``,
  ``error_cb``). Lock duration, delivery limit, session and heartbeat timing and ``share.auto.offset.reset`` are the
  broker's and the group's: the client has no setting for them. No rebalance callback, no assign(), no member id
  accessor; subscription by exact topic names only, and the consumer does not create topics.
* ``subscribe(topics)``, ``unsubscribe()``, ``subscription()``; ``poll(timeout)`` returns a ``Messages`` batch (a
  sequence; ``len``, iteration, ``is_empty()``), possibly holding error messages (``error()`` not None).
* ``Message.delivery_count()``: 1 on the first acquisition, +1 on each one after a RELEASE or a lock expiry (None for
  a record of a classic consumer).
* ``AcknowledgeType``: ACCEPT (1), RELEASE (2), REJECT (3) only (no RENEW in 2.16). ``acknowledge(message, type)`` and
  ``acknowledge_offset(topic, partition, offset, type)`` work in explicit mode only (IllegalStateException otherwise)
  and only record the decision; it goes to the broker with the next poll() (on its ShareFetch) or commit.
* Explicit mode: every record of a poll must be acknowledged before the next poll(), or poll() raises
  IllegalStateException. Implicit mode: the records of a poll are ACCEPTed by the next poll(), commit_sync() or
  commit_async(), and **not** by close() (share-groups spec 12.6: close() releases the last poll's records).
* ``commit_sync(timeout=60)`` sends what is pending (ShareAcknowledge, or ShareFetch acknowledgements) and returns
  ``{TopicPartition: None | KafkaException}`` ({} when nothing was pending); ``commit_async()`` returns at once.
  ``set_acknowledgement_commit_callback(cb)``: ``cb({TopicPartition: set(offsets)}, KafkaException | None)``, run on
  the application thread inside poll/commit/close.
* ``close()`` sends the acknowledgements already given with ShareAcknowledge epoch -1 and leaves the group
  (ShareGroupHeartbeat epoch -1); it blocks up to about ``socket.timeout.ms``.
* The statistics (``stats_cb``, served by poll()) carry ``cgrp.state`` and ``cgrp.assignment_size``: the only way the
  process learns that it has been assigned partitions, so it is how this worker reports "joined".
* Against a broker that does not advertise ShareGroupHeartbeat v1 the consumer says nothing and poll() returns empty
  batches forever (spec 12.5).

Each record of a batch is acknowledged in explicit mode according to the flags: RELEASE if its value matches
``--release`` (every time, or only while its delivery count is at most ``--release-times``), REJECT if it matches
``--reject``, ACCEPT otherwise. Everything the worker does is one JSON line on stdout, flushed at once:

    {"event": "started", "pid": ..., "mode": "implicit"|"explicit", "ts": ...}
    {"event": "joined", "assignment_size": n, "ts": ...}          (the first statistics with partitions assigned)
    {"event": "assignment", "assignment_size": n, "state": s, "ts": ...}   (each change the statistics show)
    {"event": "batch", "records": [{"topic", "partition", "offset", "delivery_count", "key", "value"}, ...], "ts": ...}
    {"event": "acknowledged", "acks": [{"topic", "partition", "offset", "type": "ACCEPT"|"RELEASE"|"REJECT"}], ...}
    {"event": "committed", "how": "sync"|"async"|"close", "results": {"topic:partition": null | "error"}, "ts": ...}
    {"event": "ack_callback", "offsets": {"topic:partition": [offsets]}, "error": null | "...", "ts": ...}
    {"event": "error", "where": "poll"|"message"|"commit"|"acknowledge"|"client", "error": "...", "ts": ...}
    {"event": "holding", "ts": ...}                  (no more polls, no acknowledgements: the records stay acquired)
    {"event": "closing", "why": "signal"|"close-after-batches", "ts": ...}
    {"event": "closed", "seconds": close_duration, "ts": ...}

SIGTERM stops the poll loop (or the hold) and closes the consumer (after a commit_sync with ``--on-close commit``,
the default); SIGKILL and SIGSTOP are the test's to send. SIGUSR1 dumps every thread's stack on stderr.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import re
import signal
import sys
import threading
import time
from typing import Any

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields, "ts": time.time()})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def text(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode(errors="replace")


def partition_key(topic: str | None, partition: int | None) -> str:
    return f"{topic}:{partition}"


class Statistics:
    """Reports the assignment size librdkafka's statistics show: "joined" once, "assignment" on each change."""

    def __init__(self) -> None:
        self.size = -1
        self.joined = False

    def __call__(self, raw: str) -> None:
        cgrp = json.loads(raw).get("cgrp") or {}
        size = int(cgrp.get("assignment_size", 0))
        if size != self.size:
            self.size = size
            emit("assignment", assignment_size=size, state=cgrp.get("state"), join_state=cgrp.get("join_state"))
        if size > 0 and not self.joined:
            self.joined = True
            emit("joined", assignment_size=size)


class Decider:
    """What explicit mode answers for a record: RELEASE, REJECT or ACCEPT (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.release = re.compile(args.release) if args.release else None
        self.release_times: int = args.release_times
        self.reject = re.compile(args.reject) if args.reject else None

    def __call__(self, value: str | None, delivery_count: int | None) -> str:
        value = value or ""
        releasing = self.release_times <= 0 or (delivery_count or 0) <= self.release_times
        if self.release is not None and self.release.search(value) and releasing:
            return "RELEASE"
        if self.reject is not None and self.reject.search(value):
            return "REJECT"
        return "ACCEPT"


def commit_results(results: dict[Any, Any]) -> dict[str, str | None]:
    return {partition_key(tp.topic, tp.partition): None if e is None else str(e) for tp, e in results.items()}


def run(args: argparse.Namespace, stopping: threading.Event) -> None:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    types = {"ACCEPT": AcknowledgeType.ACCEPT, "RELEASE": AcknowledgeType.RELEASE, "REJECT": AcknowledgeType.REJECT}
    statistics = Statistics()
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "share.acknowledgement.mode": args.mode,
        "max.poll.records": args.max_poll_records,
        "statistics.interval.ms": args.statistics_interval_ms,
        "stats_cb": statistics,
        "error_cb": lambda error: emit("error", where="client", error=str(error)),
    }
    if args.debug:
        config["debug"] = args.debug
    consumer = ShareConsumer(config)

    def on_ack_commit(offsets: dict[Any, set[int]], error: Any) -> None:
        emit(
            "ack_callback",
            offsets={partition_key(tp.topic, tp.partition): sorted(o) for tp, o in offsets.items()},
            error=None if error is None else str(error),
        )

    consumer.set_acknowledgement_commit_callback(on_ack_commit)
    consumer.subscribe(args.topic)
    decide = Decider(args)
    batches = 0
    why = "signal"
    try:
        while not stopping.is_set():
            try:
                messages = consumer.poll(args.poll_timeout_ms / 1000)
            except KafkaException as error:
                emit("error", where="poll", error=str(error))
                time.sleep(0.2)
                continue
            records: list[dict[str, Any]] = []
            acks: list[dict[str, Any]] = []
            for message in messages:
                if message.error() is not None:
                    emit("error", where="message", error=str(message.error()))
                    continue
                value = text(message.value())
                record = {
                    "topic": message.topic(),
                    "partition": message.partition(),
                    "offset": message.offset(),
                    "delivery_count": message.delivery_count(),
                    "key": text(message.key()),
                    "value": value,
                }
                records.append(record)
                if args.mode == "explicit" and not (args.hold_after_batches and batches + 1 >= args.hold_after_batches):
                    answer = decide(value, message.delivery_count())
                    try:
                        consumer.acknowledge(message, types[answer])
                    except Exception as error:  # IllegalStateException and friends: report, do not die
                        emit("error", where="acknowledge", error=repr(error))
                        continue
                    acks.append({key: record[key] for key in ("topic", "partition", "offset")} | {"type": answer})
            if not records:
                continue
            batches += 1
            emit("batch", records=records, count=len(records))
            if args.hold_after_batches and batches >= args.hold_after_batches:
                emit("holding")
                while not stopping.wait(0.1):
                    pass
                break
            if acks:
                emit("acknowledged", acks=acks)
            if args.processing_ms:
                time.sleep(args.processing_ms / 1000)
            commit(consumer, args.commit)
            if args.close_after_batches and batches >= args.close_after_batches:
                why = "close-after-batches"
                break
    finally:
        emit("closing", why=why)
        if args.on_close == "commit":
            commit(consumer, "sync", how="close")
        started = time.monotonic()
        try:
            consumer.close()
        except Exception as error:
            emit("error", where="close", error=repr(error))
        emit("closed", seconds=round(time.monotonic() - started, 3))


def commit(consumer: Any, mode: str, how: str | None = None) -> None:
    if mode == "none":
        return
    try:
        if mode == "async":
            consumer.commit_async()
            emit("committed", how="async", results={})
        else:
            emit("committed", how=how or "sync", results=commit_results(consumer.commit_sync(10.0)))
    except Exception as error:
        emit("error", where="commit", error=repr(error))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.share_worker", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True, action="append", help="repeat for several topics")
    parser.add_argument("--client-id", default="share-worker")
    parser.add_argument(
        "--mode", choices=("implicit", "explicit"), default="implicit", help="share.acknowledgement.mode"
    )
    parser.add_argument(
        "--release", default=None, help="explicit mode: RELEASE records whose value matches (re.search)"
    )
    parser.add_argument(
        "--release-times", type=int, default=0,
        help="release a matching record only while its delivery count is at most N (0: every time)",
    )  # fmt: skip
    parser.add_argument("--reject", default=None, help="explicit mode: REJECT records whose value matches")
    parser.add_argument(
        "--hold-after-batches", type=int, default=0,
        help="after the Nth non-empty batch neither acknowledge nor poll again: hold its records until killed",
    )  # fmt: skip
    parser.add_argument(
        "--close-after-batches", type=int, default=0, help="close the consumer right after the Nth non-empty batch"
    )
    parser.add_argument(
        "--commit", choices=("sync", "async", "none"), default="sync",
        help="after each batch: commit_sync, commit_async, or nothing (acknowledgements ride on the next poll)",
    )  # fmt: skip
    parser.add_argument(
        "--on-close", choices=("commit", "plain"), default="commit",
        help="commit_sync before close() (implicit mode: accepts the last batch), or close() alone",
    )  # fmt: skip
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--poll-timeout-ms", type=int, default=500)
    parser.add_argument("--processing-ms", type=int, default=0, help="time each batch takes before its commit")
    parser.add_argument("--statistics-interval-ms", type=int, default=500)
    parser.add_argument("--debug", default="", help="librdkafka debug contexts, e.g. cgrp,fetch (logs on stderr)")
    args = parser.parse_args(argv)
    if args.mode == "implicit" and (args.release or args.reject):
        parser.error("--release and --reject need --mode explicit (implicit mode accepts every record)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    emit("started", pid=os.getpid(), mode=args.mode, client_id=args.client_id)
    run(args, stopping)


if __name__ == "__main__":
    main()
