"""What the multi-node client tests drive (issue 29; cluster-and-durability.md 5 and 9, items 19-28).

``Cluster`` is ``serve --nodes 3`` in its own process: node i on port+i, the control API's ``/v1/cluster`` verbs,
and a raw FindCoordinator probe. ``Producer`` is a steady confluent-kafka producer (acks=all, idempotent) in a
thread of the test, keeping every acknowledged (partition, offset) with the time it was acknowledged.
``Members`` are consumer processes (tests/clients/worker.py, one JSON line per thing they do) of two groups on one
topic: a classic group of aiokafka, kafka-python and confluent-kafka, and a KIP-848 group of three confluent-kafka
members (group.protocol=consumer), both coordinated by the same node.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kio.static.primitive import i8

from broker.control.client import ControlClient
from protocol.apis import ApiKey
from tests.clients.processes import WorkerProcess
from tests.conftest import ROOT, TEST_GROUP_FLAGS, free_port, free_ports
from tests.wire.client import WireClient, part, request

T = TypeVar("T")

TOPIC, PARTITIONS, NODES = "t", 6, 3
SESSION_MS, HEARTBEAT_MS = 10_000, 500
CLASSIC = ("aiokafka", "kafka-python", "confluent")
KIP848 = ("consumer-1", "consumer-2", "consumer-3")


def wait(what: str, probe: Callable[[], T | None], seen: Callable[[], object], timeout: float = 30.0) -> T:
    """``probe()`` once it is truthy; an AssertionError with ``seen()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s; {seen()}"
        time.sleep(0.1)


class Cluster:
    """A ``serve --nodes 3`` process and its control API."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.port = free_ports(NODES)
        self.admin_port = free_port()
        self.log_path = tmp_path / f"broker-{self.port}.log"
        argv = [
            sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--admin-port", str(self.admin_port), "--nodes", str(NODES), "--log-format", "json",
            "--topic", f"{TOPIC}:{PARTITIONS}", *TEST_GROUP_FLAGS, *extra,
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )
        self.ctl = ControlClient(f"http://127.0.0.1:{self.admin_port}")
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"broker exited: {self.log_path.read_text()[-2000:]}"
            try:
                self.ctl.ready()
                break
            except Exception:  # not listening yet
                assert time.monotonic() < deadline, f"broker not ready: {self.log_path.read_text()[-2000:]}"
                time.sleep(0.05)
        self.node_ids = [node["node_id"] for node in self.describe()["nodes"]]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(NODES))

    def port_of(self, node_id: int) -> int:
        return self.port + self.node_ids.index(node_id)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    # -- the control API's /v1/cluster ----------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return self.ctl._json("GET", "/v1/cluster")

    def up(self) -> list[int]:
        return [node["node_id"] for node in self.describe()["nodes"] if node["up"]]

    def coordinator(self, group: str) -> int:
        return int(self.ctl._json("GET", f"/v1/cluster/coordinators?type=group&key={group}")["node"])

    def stop(self, node_id: int, mode: str = "kill") -> dict[str, Any]:
        return self.ctl._json("POST", f"/v1/cluster/nodes/{node_id}/stop", {"mode": mode})

    def start(self, node_id: int) -> dict[str, Any]:
        return self.ctl._json("POST", f"/v1/cluster/nodes/{node_id}/start", {})

    def move(self, group: str, node_id: int) -> dict[str, Any]:
        return self.ctl._json("POST", "/v1/cluster/coordinators", {"type": "group", "key": group, "node": node_id})

    def move_leader(self, partition: int, node_id: int | None) -> dict[str, Any]:
        """``POST /v1/cluster/partitions/t/{partition}/leader``: to ``node_id``, or (None) to its preferred replica.
        The answer: {"leader", "epoch"}."""
        body: dict[str, Any] = {"preferred": True} if node_id is None else {"node": node_id}
        return self.ctl._json("POST", f"/v1/cluster/partitions/{TOPIC}/{partition}/leader", body)

    def load_delay(self, ms: int) -> None:
        self.ctl._json("POST", "/v1/cluster/coordinators/load-delay", {"ms": ms})

    def group(self, group: str) -> dict[str, Any]:
        return self.ctl.group(group)

    def groups_on(self, node_id: int, prefix: str, count: int) -> list[str]:
        """``count`` group ids ``prefix-N`` whose coordinator is ``node_id``, on distinct partitions."""
        found: dict[int, str] = {}
        for n in range(2000):
            group = f"{prefix}-{n}"
            answer = self.ctl._json("GET", f"/v1/cluster/coordinators?type=group&key={group}")
            if answer["node"] == node_id and answer["partition"] not in found:
                found[answer["partition"]] = group
                if len(found) == count:
                    return list(found.values())
        raise AssertionError(f"no {count} groups on node {node_id}")

    # -- FindCoordinator, asked of one node ---------------------------------------------------------------

    def find_coordinator(self, node_id: int, group: str) -> tuple[int, int]:
        """(error code, node id) that node ``node_id`` answers FindCoordinator v3 for ``group``."""

        async def ask() -> tuple[int, int]:
            client = await WireClient.connect(self.port_of(node_id), "probe")
            try:
                answer = await client.call(request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=i8(0)))
            finally:
                client.writer.close()
            return int(answer.error_code), int(answer.node_id)

        return asyncio.run(ask())

    def leaders(self, node_id: int) -> dict[int, tuple[int, int, tuple[int, ...]]]:
        """What node ``node_id`` answers Metadata v12 for the topic: partition -> (leader, leader epoch, replicas)."""

        async def ask() -> dict[int, tuple[int, int, tuple[int, ...]]]:
            client = await WireClient.connect(self.port_of(node_id), "probe")
            try:
                topic = part(ApiKey.METADATA, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC)
                answer = await client.call(
                    request(ApiKey.METADATA, 12, topics=(topic,), allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)
                )  # fmt: skip
            finally:
                client.writer.close()
            (found,) = answer.topics
            assert int(found.error_code) == 0, found
            return {
                int(p.partition_index): (int(p.leader_id), int(p.leader_epoch), tuple(int(n) for n in p.replica_nodes))
                for p in found.partitions
            }

        return asyncio.run(ask())

    def probe_coordinator(self, group: str, gone: set[int], since: float, timeout: float = 5.0) -> float:
        """Seconds from ``since`` (a ``time.monotonic()``, before the fault) until every live node names a live
        coordinator for ``group`` (none of ``gone``)."""
        started = since
        while True:
            live = [n for n in self.node_ids if n not in gone]
            answers = [self.find_coordinator(n, group) for n in live]
            if all(error == 0 and node in live for error, node in answers):
                return time.monotonic() - started
            assert time.monotonic() - started < timeout, f"FindCoordinator({group}) at {live}: {answers}"
            time.sleep(0.02)


class Producer:
    """One record every ``interval`` seconds, round robin over the partitions, acks=all, idempotent."""

    def __init__(self, bootstrap: str, interval: float = 0.02) -> None:
        from confluent_kafka import Producer as Kafka

        self.kafka = Kafka(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
             "message.timeout.ms": 60_000, "topic.metadata.refresh.interval.ms": 1000}
        )  # fmt: skip
        self.interval = interval
        self.lock = threading.Lock()
        self.acknowledged: list[tuple[int, int, float]] = []  # (partition, offset, when acknowledged)
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self._thread.start()

    def _delivered(self, error: Any, message: Any) -> None:
        with self.lock:
            if error is not None:
                self.failed.append(str(error))
            else:
                self.acknowledged.append((message.partition(), message.offset(), time.time()))

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self.kafka.produce(TOPIC, value=b"v%06d" % sent, key=b"k%06d" % sent, partition=sent % PARTITIONS,
                               on_delivery=self._delivered)  # fmt: skip
            sent += 1
            self.kafka.poll(0)
            time.sleep(self.interval)
        self.kafka.flush(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(40)

    def since(self, when: float) -> set[tuple[int, int]]:
        with self.lock:
            return {(p, o) for p, o, at in self.acknowledged if at >= when}

    def ends(self) -> dict[int, int]:
        with self.lock:
            ends: dict[int, int] = {}
            for p, o, _ in self.acknowledged:
                ends[p] = max(ends.get(p, 0), o + 1)
            return ends


@dataclass
class Member:
    """One consumer process: its library (and protocol) and its JSON lines."""

    name: str
    group: str
    client: str
    protocol: str
    worker: WorkerProcess
    stderr_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.stderr_path = self.worker.stderr_path

    def events(self, *kinds: str) -> list[dict[str, Any]]:
        return self.worker.events(*kinds)

    def after(self, when: float, *kinds: str) -> list[dict[str, Any]]:
        return [e for e in self.events(*kinds) if e["ts"] >= when]

    def consumed(self) -> list[tuple[int, int, float]]:
        return [(e["partition"], e["offset"], e["ts"]) for e in self.events("record")]

    def commits(self) -> list[tuple[float, dict[int, int]]]:
        return [(e["ts"], {int(p): o for p, o in e["offsets"].items()}) for e in self.events("committed")]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.worker.alive:
            self.worker.process.send_signal(signal.SIGTERM)
            try:
                self.worker.process.wait(15)
            except subprocess.TimeoutExpired:
                self.worker.process.kill()
                self.worker.process.wait(10)

    def describe(self) -> str:
        lines = [json.dumps(e) for e in self.events() if e["event"] != "record"][-12:]
        return (
            f"--- {self.name} ({self.client}/{self.protocol}) rc={self.worker.process.poll()} "
            f"records={len(self.events('record'))}\n" + "\n".join(lines) + "\n--- stderr:\n" + self.stderr()[-1500:]
        )


def start_member(
    cluster: Cluster, tmp_path: Path, group: str, name: str, client: str, protocol: str = "classic",
    extra: tuple[str, ...] = (),
) -> Member:
    argv = [
        sys.executable, "-m", "tests.clients.worker", "--client", client, "--bootstrap", cluster.bootstrap,
        "--group", group, "--topic", TOPIC, "--client-id", name, "--group-protocol", protocol,
        "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
        "--max-poll-records", "50", "--survive-poll-errors",
        "--log-level", os.environ.get("CLUSTER_WORKER_LOG_LEVEL", "WARNING"), *extra,
    ]  # fmt: skip
    worker = WorkerProcess(name, argv, tmp_path / f"{group}-{name}.stderr")
    return Member(name, group, client, protocol, worker)
