"""A member of a KIP-932 share group for chaos runs: a confluent-kafka ``ShareConsumer`` as its own OS process.

    python -m broker.chaos.share_consumer --bootstrap HOST:PORT --group G --topic T --client-id ID --out FILE
        [--mode implicit|explicit] [--max-poll-records N] [--processing-ms MS]

It polls, and appends one JSON line per non-empty batch to FILE, flushed before anything acknowledges the batch
(a process SIGKILLed after the flush leaves the line to the OS):

    {"e": "batch", "polled_at": t0, "at": t1, "records": [[partition, offset, delivery_count, key], ...]}

``polled_at`` is when the poll that returned the batch began, ``at`` when it returned: the broker acquired the
records in between (``share_judge`` bounds their lock with it). It takes ``--processing-ms`` over the batch (the
work a real consumer does while it holds the records), then acknowledges it with
``commit_sync``: in implicit mode (librdkafka's default, docs/spec/share-groups.md 12.4) the commit accepts what the
last poll returned; in explicit mode each record is first ACCEPTed with ``acknowledge``. The acknowledgement commit
callback writes what the broker answered, per partition:

    {"e": "ack", "at": t, "partition": p, "offsets": [...], "error": null | "..."}

``error`` is set when the acknowledgement was refused, as it is for records whose lock expired while the process
was SIGSTOPped (INVALID_RECORD_STATE: spec 6.5, someone else holds them or they are available again).

SIGTERM stops the loop; a last ``commit_sync`` accepts what was polled (``close()`` alone would release it: spec
12.6, trap 13), then ``close()`` ends the share session and leaves the group. SIGKILL and SIGSTOP are the runner's.
Diagnostics go to stderr; SIGUSR1 dumps every thread's stack there.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

from broker.chaos import MissingLibrary, fail_missing, load

PROGRAM = "python -m broker.chaos.share_consumer"
ACK_MODES = ("implicit", "explicit")
COMMIT_TIMEOUT_S = 10.0
POLL_TIMEOUT_S = 0.5


class Sink:
    """FILE: a JSON line per batch and per acknowledgement result, flushed at once."""

    def __init__(self, path: str) -> None:
        self.file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.lock = threading.Lock()

    def write(self, line: dict[str, Any]) -> None:
        with self.lock:
            self.file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.file.flush()

    def close(self) -> None:
        self.file.close()


def note(args: argparse.Namespace, message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {args.client_id}: {message}", file=sys.stderr, flush=True)


def text(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode(errors="replace")


def commit(consumer: Any, args: argparse.Namespace, sink: Sink) -> None:
    """``commit_sync``: the acknowledgements go to the broker; the callback writes its answers."""
    try:
        results = consumer.commit_sync(COMMIT_TIMEOUT_S)
        sink.write({
            "e": "commit", "at": time.time(),
            "results": {str(tp.partition): None if e is None else str(e) for tp, e in (results or {}).items()},
        })  # fmt: skip
    except Exception as error:  # KafkaException and IllegalStateException alike: the records come back
        note(args, f"commit failed (the records will come back): {error!r}")


def run(args: argparse.Namespace, sink: Sink, stopping: threading.Event) -> None:
    confluent = load("confluent")
    consumer = confluent.ShareConsumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "share.acknowledgement.mode": args.mode,
        "max.poll.records": args.max_poll_records,
        "error_cb": lambda error: note(args, f"client error: {error}"),
    })  # fmt: skip

    def on_ack_commit(offsets: dict[Any, set[int]], error: Any) -> None:
        at = time.time()
        for tp, found in offsets.items():
            problem = error if error is not None else getattr(tp, "error", None)
            sink.write({
                "e": "ack", "at": at, "partition": tp.partition, "offsets": sorted(found),
                "error": None if problem is None else str(problem),
            })  # fmt: skip

    consumer.set_acknowledgement_commit_callback(on_ack_commit)
    consumer.subscribe([args.topic])
    try:
        while not stopping.is_set():
            polled_at = time.time()
            try:
                messages = consumer.poll(POLL_TIMEOUT_S)
            except confluent.KafkaException as error:
                note(args, f"poll failed: {error}")
                time.sleep(0.2)
                continue
            at = time.time()
            records: list[list[Any]] = []
            for message in messages:
                if message.error() is not None:
                    note(args, f"consume error: {message.error()}")
                    continue
                records.append([message.partition(), message.offset(), message.delivery_count(), text(message.key())])
                if args.mode == "explicit":
                    consumer.acknowledge(message, confluent.AcknowledgeType.ACCEPT)
            if not records:
                continue
            sink.write({"e": "batch", "polled_at": polled_at, "at": at, "records": records})
            if args.processing_ms:
                time.sleep(args.processing_ms / 1000)
            commit(consumer, args, sink)
    finally:
        note(args, "closing")
        commit(consumer, args, sink)  # implicit mode: accept the last poll's records, which close() would release
        consumer.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="A share-group member for chaos runs.")
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--out", required=True, metavar="FILE", help="append a JSON line per batch and ack here")
    parser.add_argument("--mode", choices=ACK_MODES, default="implicit", help="share.acknowledgement.mode")
    parser.add_argument("--max-poll-records", type=int, default=100, metavar="N")
    parser.add_argument(
        "--processing-ms", type=int, default=0, metavar="MS", help="time over each batch before its acknowledgement"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    sink = Sink(args.out)
    note(args, f"started, pid {os.getpid()}, share consumer ({args.mode} acknowledgement)")
    try:
        run(args, sink, stopping)
    except MissingLibrary as error:
        return fail_missing(error, PROGRAM)
    finally:
        sink.close()
    note(args, "closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
