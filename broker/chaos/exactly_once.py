"""``chaos run --exactly-once``: transactional workers instead of consumers, and the output checked at the end.

The runner's schedule, kills, restarts and measurements are unchanged; what changes is who the group's members
are and what is counted:

- the members are ``broker.chaos.eos_worker`` processes (confluent-kafka): each reads the run's topic (the
  input, fed by the usual producer) read_committed and writes every record to the output topic
  ``<topic>-out``, batch by batch, each batch one transaction that also carries the batch's input offsets
  (``send_offsets_to_transaction``, KIP-447) and stays open ``PROCESSING_MS`` after its writes. A worker slot
  keeps its transactional id across restarts (``chaos-eos-<group>-<slot>``), so a restarted slot fences its
  previous incarnation and aborts the transaction that one left open (Kafka's ``TransactionCoordinator`` on
  InitProducerId);
- what was "consumed" is the output topic, read read_committed while the run goes on (``OutputRecords``: the
  progress line, the drain, the per-worker counts from each record's ``chaos-client`` header);
- at the end, after the workers have stopped, ``read_output`` reads the whole output topic again from the start,
  read_committed, and ``verify`` holds it against the acknowledged inputs: every input exactly once, nothing
  missing, nothing twice, nothing that was never sent. The report gets an ``exactly_once`` section and the run
  fails (exit 1) when the check does.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from broker.chaos import load
from broker.chaos.eos_worker import CLIENT_HEADER
from broker.chaos.launch import Incarnation, client_id, spawn_member
from broker.chaos.producer import key_of
from broker.chaos.records import KEY_PREFIX, Produced, Records

#: The output topic's name is the input's with this suffix.
OUTPUT_SUFFIX = "-out"
#: Input records per transaction at most.
BATCH = 50
#: How long each transaction stays open once its writes are in the log (the worker's --processing-ms): the time a
#: transformation takes, and what makes a kill land inside an open transaction often rather than by luck.
PROCESSING_MS = 100
#: The workers' transaction.timeout.ms. A killed worker's open transaction is normally aborted sooner, when its
#: slot restarts (InitProducerId); the time-out covers a slot that does not come back before the run ends.
TRANSACTION_TIMEOUT_MS = 10_000
#: How often the broker the runner starts looks for transactions open past their time-out (Kafka's default 10 s).
ABORT_SCAN_MS = 1000
READ_TIMEOUT_S = 30.0
POLL_EVERY_S = 0.2
ADMIN_TIMEOUT_S = 15.0

JSON = dict[str, Any]


def output_topic(topic: str) -> str:
    return f"{topic}{OUTPUT_SUFFIX}"


def transactional_id(group: str, slot: int) -> str:
    """The slot's transactional id: the same for every incarnation of the slot, so a restart fences the last."""
    return f"chaos-eos-{group}-{slot}"


def broker_settings() -> list[str]:
    """Flags for the broker the runner starts: abort timed-out transactions within a second of their time-out."""
    return ["--transaction-abort-timed-out-transaction-cleanup-interval-ms", str(ABORT_SCAN_MS)]


def ensure_output_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the output topic (as many partitions as the input) unless it exists."""
    admin_module = load("confluent", "admin")
    admin = admin_module.AdminClient({"bootstrap.servers": bootstrap, "client.id": "chaos-runner"})
    futures = admin.create_topics([admin_module.NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except Exception as error:
            if "TOPIC_ALREADY_EXISTS" not in str(error).upper():
                raise


def start_worker(
    args: argparse.Namespace, bootstrap: str, topic: str, group: str, workdir: Path, slot: int, incarnation: int
) -> Incarnation:
    """``python -m broker.chaos.eos_worker`` as ``chaos-<slot>-<incarnation>``, with the slot's transactional id;
    its log in ``workdir``. It writes no record file: its records are in the output topic."""
    name = client_id(slot, incarnation)
    out, log = workdir / f"{name}.records", workdir / f"{name}.log"
    argv = [
        sys.executable, "-m", "broker.chaos.eos_worker", "--bootstrap", bootstrap, "--group", group,
        "--input", topic, "--output", output_topic(topic), "--client-id", name,
        "--transactional-id", transactional_id(group, slot), "--batch", str(BATCH),
        "--processing-ms", str(PROCESSING_MS), "--transaction-timeout-ms", str(TRANSACTION_TIMEOUT_MS),
        "--group-protocol", args.group_protocol,
    ]  # fmt: skip
    return spawn_member(args, argv, slot, incarnation, out, log)


def reader(bootstrap: str, topic: str, partitions: int, eof: bool = False, committed: bool = True) -> Any:
    """A read_committed (or read_uncommitted) consumer of every partition of ``topic`` from the start, outside any
    group."""
    confluent = load("confluent")
    consumer = confluent.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-verify-{uuid.uuid4().hex[:8]}",  # never joined: assign() only, nothing committed
            "client.id": "chaos-verify",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": eof,
        }
    )
    consumer.assign([confluent.TopicPartition(topic, p, confluent.OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


def header(message: Any, name: str) -> str | None:
    for key, value in message.headers() or []:
        if key == name and value is not None:
            return bytes(value).decode(errors="replace")
    return None


class OutputRecords(Records):
    """The output topic as the workers commit to it, in place of the consumers' record files.

    The runner calls ``read`` once per incarnation every tick; this reads the topic (read_committed) at most every
    ``POLL_EVERY_S``, whatever the path. ``per_file`` counts by the file name the runner gives each incarnation
    (``<client id>.records``), from the ``chaos-client`` header of the record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__()
        self.consumer = reader(bootstrap, topic, partitions)
        self._polled = 0.0

    def read(self, path: Path) -> None:
        if time.monotonic() - self._polled < POLL_EVERY_S:
            return
        self._polled = time.monotonic()
        for message in self.consumer.consume(num_messages=10_000, timeout=0.05):
            if message.error() is not None:
                continue
            key = message.key()
            self.keys[key.decode(errors="replace") if key is not None else "-"] += 1
            self.lines += 1
            self.per_file[f"{header(message, CLIENT_HEADER)}.records"] += 1

    def close(self) -> None:
        self.consumer.close()


def read_output(
    bootstrap: str, topic: str, partitions: int, committed: bool = True, timeout_s: float = READ_TIMEOUT_S
) -> list[str] | None:
    """Every key in ``topic``, read from the start with read_committed (or read_uncommitted), up to the end of
    every partition (read_committed: its last stable offset; the workers have stopped, so no transaction is left
    open and that is the end of the log). None when the end was not reached within ``timeout_s``."""
    confluent = load("confluent")
    consumer = reader(bootstrap, topic, partitions, eof=True, committed=committed)
    keys: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                return None
            for message in consumer.consume(num_messages=10_000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() == confluent.KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                key = message.key()
                keys.append(key.decode(errors="replace") if key is not None else "-")
    finally:
        consumer.close()
    return keys


def verify(produced: Produced, output: Iterable[str] | None, topic: str, written: int | None = None) -> JSON:
    """The report's ``exactly_once``: the output (read read_committed) against the inputs. Every acknowledged
    input must be there once (``missing``, ``duplicated``); an input sent but never acknowledged may be there at
    most once (its write may have landed); a key never sent at all is ``unexpected``. ``ok`` when all three are
    zero and the output was read to its end.

    ``written``: the records in the output topic read read_uncommitted; what read_committed hid of them
    (``aborted``: the writes of transactions that were aborted, a killed worker's among them) is reported."""
    counts: Counter[str] = Counter(output or [])
    wanted = produced.keys()
    sent = {key_of(KEY_PREFIX, i) for i in range(produced.sent)}
    missing = sorted(wanted - counts.keys())
    duplicated = sorted(k for k, n in counts.items() if n > 1)
    unexpected = sorted(k for k in counts if k not in sent)
    return {
        "ok": output is not None and not missing and not duplicated and not unexpected,
        "output_topic": topic,
        "read_to_end": output is not None,
        "inputs": len(wanted),
        "outputs": sum(counts.values()),
        "aborted": None if written is None or output is None else written - sum(counts.values()),
        "unique": len(counts),
        "missing": len(missing),
        "duplicated": sum(counts[k] - 1 for k in duplicated),
        "unexpected": len(unexpected),
        "missing_keys": missing[:100],
        "duplicated_keys": duplicated[:100],
        "unexpected_keys": unexpected[:100],
    }


def check_output(
    bootstrap: str, topic: str, partitions: int, produced: Produced, notes: list[str], say: Callable[[str], None]
) -> JSON:
    """--exactly-once: the whole output topic of ``topic``, read read_committed once the workers have stopped."""
    output = output_topic(topic)
    say(f"reading {output} (read_committed) to check every input came out exactly once")
    keys = read_output(bootstrap, output, partitions)
    if keys is None:
        notes.append(f"{output} was not read to its end within {READ_TIMEOUT_S:.0f}s")
    written = read_output(bootstrap, output, partitions, committed=False)
    return verify(produced, keys, output, None if written is None else len(written))
