"""Share-group consumers as OS processes (``tests/clients/share_worker.py``), their broker, producer and admin calls.

``start_share_target`` starts the broker under test: our broker as a process (``tests/conftest.py``
``start_broker_process``) with short share-group timings (``SHARE_FLAGS``) and the test's topic. For validating the
harness itself against another broker that has share groups (librdkafka's mock cluster, franz-go's kfake), set
``SHARE_TEST_BOOTSTRAP=host:port``: the tests then use that broker, which must have been started with the same
timings (lock 2000 ms, delivery limit 5, ...); topics are created with CreateTopics, or, when the broker has no
CreateTopics (the mock), by running ``SHARE_TEST_CREATE_TOPIC`` (a shell command, ``{topic}`` and ``{partitions}``
replaced); ``SHARE_TEST_GROUP_CONFIGS=0`` says it has no group configs (IncrementalAlterConfigs GROUP: the mock),
so it must deliver from the earliest offset by itself. None of these is set in CI.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.clients.processes import WorkerProcess
from tests.conftest import BrokerProcess, start_broker_process

LOCK_MS = 2000
DELIVERY_LIMIT = 5
SESSION_MS = 6000
#: The broker's share-group settings for these tests (share-groups spec 11.1; Kafka's own tests lower them too).
SHARE_FLAGS = [
    "--group-share-record-lock-duration-ms", str(LOCK_MS),
    "--group-share-min-record-lock-duration-ms", "1000",
    "--group-share-heartbeat-interval-ms", "1000",
    "--group-share-min-heartbeat-interval-ms", "1000",
    "--group-share-session-timeout-ms", str(SESSION_MS),
    "--group-share-min-session-timeout-ms", str(SESSION_MS),
    "--group-share-delivery-count-limit", str(DELIVERY_LIMIT),
]  # fmt: skip
DEADLINE_S = 20.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the broker under test -----------------------------------------------------------------------------------------


@dataclass
class ShareTarget:
    """Where the share consumers go: our broker process (``broker``), or another broker given by the environment."""

    bootstrap: str
    broker: BrokerProcess | None
    group_configs: bool = True
    _admin: Any = field(default=None, repr=False)

    @property
    def admin(self) -> Any:
        """One AdminClient for the test (kept: a collected client fails its pending futures with _DESTROY)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def alive(self) -> bool:
        return self.broker is None or self.broker.process.poll() is None

    def log_lines(self, *needles: str, last: int = 60) -> list[str]:
        """Our broker's log lines naming any of ``needles`` (all lines without needles), the last ``last`` of them."""
        if self.broker is None:
            return ["(an external broker: no log)"]
        lines = self.broker.log().splitlines()
        if needles:
            lines = [line for line in lines if any(needle in line for needle in needles)]
        return lines[-last:]

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()


def start_share_target(tmp_path: Path, topic: str, partitions: int = 1) -> ShareTarget:
    external = os.environ.get("SHARE_TEST_BOOTSTRAP")
    if not external:
        broker = start_broker_process(
            tmp_path, *SHARE_FLAGS, "--log-level", "debug", "--topic", f"{topic}:{partitions}"
        )
        return ShareTarget(broker.bootstrap, broker)
    target = ShareTarget(external, None, group_configs=os.environ.get("SHARE_TEST_GROUP_CONFIGS", "1") != "0")
    create_topic(target, topic, partitions)
    return target


def create_topic(target: ShareTarget, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # re-exported from cimpl

    command = os.environ.get("SHARE_TEST_CREATE_TOPIC")
    if command:
        subprocess.run(command.format(topic=shlex.quote(topic), partitions=partitions), shell=True, check=True)
    else:
        futures = target.admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=10)
        futures[topic].result(timeout=DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while topic not in target.admin.list_topics(timeout=5).topics:
        assert time.monotonic() < deadline, f"topic {topic} never appeared in the metadata"
        time.sleep(0.1)


def set_group_configs(target: ShareTarget, group: str, configs: dict[str, str]) -> bool:
    """IncrementalAlterConfigs SET on resource GROUP ``group`` (share-groups spec 11.2); False if the target has no
    group configs (then it was started with what the tests need)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported from admin._config/_resource
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    if not target.group_configs:
        return False
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    futures = target.admin.incremental_alter_configs([resource], request_timeout=10)
    futures[resource].result(timeout=DEADLINE_S)
    return True


def describe_group_configs(target: ShareTarget, group: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    resource = ConfigResource(ResourceType.GROUP, group)
    entries = target.admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=DEADLINE_S)
    return {name: entry.value for name, entry in entries.items()}


# -- producing -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int
    value: str


def produce(target: ShareTarget, topic: str, values: Iterable[str], *, one_batch: bool = False) -> list[Produced]:
    """Records with these values through confluent-kafka's Producer, each in a record batch of its own (a flush per
    record) unless ``one_batch``; their partitions and offsets, in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 50 if one_batch else 0})
    produced: list[Produced] = []
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            produced.append(Produced(message.partition(), message.offset(), message.value().decode()))

    for value in values:
        producer.produce(topic, value=value.encode(), on_delivery=delivered)
        if not one_batch:
            assert producer.flush(DEADLINE_S) == 0, "the producer did not deliver"
    assert producer.flush(DEADLINE_S) == 0, "the producer did not deliver"
    assert not errors, errors
    return sorted(produced, key=lambda p: (p.partition, p.offset))


# -- share consumer processes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One record as a worker's poll returned it; ``ts`` is when the batch was printed."""

    worker: str
    partition: int
    offset: int
    delivery_count: int
    value: str
    ts: float


class ShareWorker(WorkerProcess):
    """One share consumer process and the JSON lines it has printed (``share_worker.py`` lists them)."""

    def __init__(self, name: str, argv: list[str], stderr_path: Path) -> None:
        super().__init__(name, argv, stderr_path)
        self.killed_at: float | None = None
        self.stopped_at: float | None = None

    def deliveries(self) -> list[Delivery]:
        return [
            Delivery(self.name, r["partition"], r["offset"], r["delivery_count"], r["value"], batch["ts"])
            for batch in self.events("batch")
            for r in batch["records"]
        ]

    def batch_times(self) -> list[float]:
        return [float(batch["ts"]) for batch in self.events("batch")]

    @property
    def joined_at(self) -> float | None:
        joined = self.events("joined")
        return float(joined[0]["ts"]) if joined else None

    def commit_failures(self) -> list[dict[str, Any]]:
        """Commits with a partition that failed, acknowledgement callbacks with an error, and error lines."""
        failed = [e for e in self.events("committed") if any(v is not None for v in e["results"].values())]
        failed += [e for e in self.events("ack_callback") if e["error"] is not None]
        return failed + self.events("error")

    def kill(self) -> float:
        """SIGKILL: no close, no acknowledgement, no leave; its connections drop. When it was sent."""
        if self.stopped_at is not None:
            self.cont()
        sent = time.time()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.killed_at = sent
        self._reader.join(timeout=10)
        return sent

    def stop(self) -> float:
        """SIGSTOP: the process freezes with its connections open (no heartbeat, no fetch, no acknowledgement)."""
        sent = time.time()
        os.kill(self.process.pid, signal.SIGSTOP)
        self.stopped_at = sent
        return sent

    def cont(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)
        self.stopped_at = None

    def terminate(self) -> float:
        sent = time.time()
        self.process.send_signal(signal.SIGTERM)
        return sent

    def wait_exit(self, timeout: float = DEADLINE_S) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def describe(self) -> str:
        lines = [json.dumps(e) for e in self.events()][-25:]
        stderr = self.stderr_path.read_text(errors="replace")[-2000:]
        return (
            f"--- share worker {self.name} pid={self.process.pid} rc={self.process.poll()} "
            f"deliveries={len(self.deliveries())}\n" + "\n".join(lines) + f"\n--- stderr tail:\n{stderr}"
        )


@dataclass
class ShareFleet:
    """The share consumer processes of one group on one topic against one broker."""

    target: ShareTarget
    tmp_path: Path
    group: str
    topic: str
    workers: list[ShareWorker] = field(default_factory=list)

    def start(self, name: str, *options: str) -> ShareWorker:
        argv = [
            sys.executable, "-m", "tests.clients.share_worker", "--bootstrap", self.target.bootstrap,
            "--group", self.group, "--topic", self.topic, "--client-id", name,
            *(["--debug", os.environ["SHARE_WORKER_DEBUG"]] if os.environ.get("SHARE_WORKER_DEBUG") else []),
            *options,
        ]  # fmt: skip
        worker = ShareWorker(name, argv, self.tmp_path / f"{name}-{len(self.workers)}.stderr")
        self.workers.append(worker)
        return worker

    def start_members(self, count: int, *options: str, prefix: str = "m") -> list[ShareWorker]:
        """``count`` workers with the same options, named m0, m1, ..., started at once."""
        return [self.start(f"{prefix}{i}", *options) for i in range(count)]

    def produce(self, values: Iterable[str], *, one_batch: bool = False) -> list[Produced]:
        return produce(self.target, self.topic, values, one_batch=one_batch)

    def deliveries(self) -> list[Delivery]:
        return sorted((d for w in self.workers for d in w.deliveries()), key=lambda d: d.ts)

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> float:
        """Poll ``condition`` until it holds; when it did (time.time()), or fail with everything known."""
        deadline = time.monotonic() + timeout
        while not condition():
            dead = [
                f"{w.name} (pid {w.process.pid}, rc {w.process.poll()})"
                for w in self.workers
                if not w.alive and w.killed_at is None and not w.events("closed")
            ]
            if dead or not self.target.alive() or time.monotonic() > deadline:
                why = f"workers died: {dead}" if dead else f"timed out after {timeout:g} s"
                if not self.target.alive():
                    why = "the broker died"
                for worker in self.workers:
                    if worker.alive and worker.stopped_at is None:
                        worker.process.send_signal(signal.SIGUSR1)  # the worker dumps its threads' stacks
                time.sleep(0.5)
                raise AssertionError(f"{why} waiting for {what}\n{self.describe()}")
            time.sleep(0.05)
        return time.time()

    def quiet(self, seconds: float) -> None:
        """Let ``seconds`` pass, failing early if a worker or the broker dies meanwhile."""
        end = time.monotonic() + seconds
        self.wait(lambda: time.monotonic() >= end, f"{seconds:g} s to pass", timeout=seconds + 5)

    def describe(self) -> str:
        lines = [w.describe() for w in self.workers]
        lines.append(f"--- broker log lines naming {self.group} or {self.topic}:")
        lines += self.target.log_lines(self.group, self.topic)
        return "\n".join(lines)

    def close(self) -> None:
        """Kill what still runs; keep every worker's lines for a post-mortem."""
        for index, worker in enumerate(self.workers):
            if worker.alive:
                worker.kill()
            lines = "".join(json.dumps(e) + "\n" for e in worker.events())
            (self.tmp_path / f"{worker.name}-{index}.jsonl").write_text(lines)
