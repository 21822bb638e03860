"""compose.yaml's ``cluster`` profile for real (issue 29, docs/docker.md): a three-node broker in one container,
reachable from other containers through INTERNAL and from the host through EXTERNAL, each node advertising the
address that side reaches it at.

The host ports are three unrelated free ports (not port, port + 1, port + 2), so only the per-node advertised
listeners (``GROUP_BROKER_NODE_ADVERTISED_LISTENERS``) can make the host's Metadata right. A confluent-kafka
consumer in a container (``cluster-consumer``, group ``cluster-demo``) and one on the host read what the
``cluster-producer`` container writes; the node that coordinates the group (and leads partitions) is killed
through the control API, and both consumers carry on. ``docker compose --profile '*' down -v`` runs at the end.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from broker.control.client import ControlClient, ControlError
from tests.conftest import free_port
from tests.docker.test_compose import (  # noqa: F401 (fixtures)
    Stack,
    built,
    docker_ready,
    project_resources,
    say,
    tail,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]

TOPIC, PARTITIONS, GROUP = "cluster", 6, "cluster-demo"  # compose.yaml's cluster profile
SERVICES = ("broker-cluster", "cluster-producer", "cluster-consumer")
NODE_IDS = (1, 2, 3)
INTERNAL_PORTS = (9092, 9093, 9094)
UP_TIMEOUT_S = 180

# Run inside the cluster-consumer container (the demo image has confluent-kafka): the brokers Metadata names to a
# client of the INTERNAL listener.
_METADATA_INSIDE = """
import json
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": "broker-cluster:9092"})
found = admin.list_topics(timeout=15)
print(json.dumps(sorted([b.id, b.host, b.port] for b in found.brokers.values())))
"""


@dataclass
class ClusterStack:
    stack: Stack
    host_ports: tuple[int, int, int]
    admin_port: int

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.host_ports)

    @property
    def control(self) -> ControlClient:
        return ControlClient(f"http://127.0.0.1:{self.admin_port}", timeout=10.0)

    def compose(self, *args: str, timeout: float = 120.0, check: bool = True) -> Any:
        return self.stack.compose("--profile", "cluster", *args, timeout=timeout, check=check)

    def logs(self, *services: str, lines: int = 200) -> str:
        result = self.compose("logs", "--no-color", "--tail", str(lines), *services, check=False)
        return str(result.stdout + result.stderr)

    @contextlib.contextmanager
    def explained(self) -> Iterator[None]:
        """A failure inside carries the cluster profile's containers and logs."""
        try:
            yield
        except (AssertionError, ControlError, TimeoutError) as error:
            ps = self.compose("ps", "-a", check=False).stdout
            raise AssertionError(f"{error}\n--- ps -a\n{ps}\n--- logs\n{tail(self.logs(), 150)}") from error

    def committed(self) -> dict[int, int]:
        """The container consumer's committed offsets, read from the host through EXTERNAL."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, "socket.timeout.ms": 10_000})
        found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(timeout=15)
        return {tp.partition: tp.offset for tp in found.topic_partitions if tp.offset >= 0}

    def committed_past(self, offsets: dict[int, int]) -> dict[int, int] | None:
        """The committed offsets once every partition's passed ``offsets`` (None before)."""
        now = self.committed()
        return now if len(now) == PARTITIONS and all(now[p] > offsets.get(p, -1) for p in now) else None


def unrelated_free_ports() -> tuple[int, int, int]:
    """Three free ports, none next to another: port + i on one advertised host cannot name them."""
    ports: list[int] = []
    while len(ports) < 3:
        port = free_port()
        if all(abs(port - other) > 1 for other in ports):
            ports.append(port)
    return ports[0], ports[1], ports[2]


@pytest.fixture(scope="module")
def cluster(built: Stack, say: Callable[[str], None]) -> Iterator[ClusterStack]:  # noqa: F811 (a fixture)
    stack = built
    host_ports, admin_port = unrelated_free_ports(), free_port()
    stack.env |= {f"HOST_CLUSTER_PORT_{n}": str(port) for n, port in zip(NODE_IDS, host_ports, strict=True)}
    stack.env["HOST_CLUSTER_ADMIN_PORT"] = str(admin_port)
    running = ClusterStack(stack, host_ports, admin_port)
    started = time.monotonic()
    try:
        with running.explained():
            running.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), "--no-build", *SERVICES,
                            timeout=UP_TIMEOUT_S + 60)  # fmt: skip
            say(f"compose --profile cluster up --wait: healthy in {time.monotonic() - started:.1f}s (host ports "
                f"{host_ports}, admin 127.0.0.1:{admin_port})")  # fmt: skip
        yield running
    finally:
        stopped = time.monotonic()
        stack.compose("--profile", "*", "down", "-v", "--remove-orphans", "-t", "5", timeout=180, check=False)
        say(f"compose --profile '*' down -v in {time.monotonic() - stopped:.1f}s")
        left = project_resources(stack)
        assert not left, f"`docker compose --profile '*' down -v` left {left} of project {stack.project}"


def host_metadata(bootstrap: str) -> list[list[Any]]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return sorted([b.id, b.host, b.port] for b in admin.list_topics(timeout=15).brokers.values())


def test_a_three_node_broker_from_containers_and_the_host_through_a_node_kill(
    cluster: ClusterStack, say: Callable[[str], None]  # noqa: F811 (a fixture)
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    with cluster.explained():
        # Each side is told the addresses it reaches: the host its three published ports, containers the
        # INTERNAL ports on the service name.
        assert host_metadata(f"localhost:{cluster.host_ports[0]}") == [
            [node, "localhost", port] for node, port in zip(NODE_IDS, cluster.host_ports, strict=True)
        ]
        inside = cluster.compose("exec", "-T", "cluster-consumer", "python", "-c", _METADATA_INSIDE, timeout=60)
        assert json.loads(inside.stdout.strip().splitlines()[-1]) == [
            [node, "broker-cluster", port] for node, port in zip(NODE_IDS, INTERNAL_PORTS, strict=True)
        ], inside.stdout
        say(f"Metadata: the host sees localhost:{cluster.host_ports}, containers broker-cluster:{INTERNAL_PORTS}")

        # The container's consumer (INTERNAL) in a Stable group, committing what the container producer writes.
        control = cluster.control
        group = control.wait(GROUP, state="Stable", members=1, timeout_ms=120_000)
        assert [m["client_id"] for m in group["members"]] == ["cluster-consumer"], group
        before = wait_for("the container consumer's commits on every partition", lambda: cluster.committed_past({}), 90)

        # The host's consumer (EXTERNAL) reads every partition, from the three nodes that lead them.
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "host-reader", "log_level": 0,
                             "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

            def read_from_every_partition(since: float) -> set[int]:
                seen: set[int] = set()
                deadline = time.monotonic() + 60
                while len(seen) < PARTITIONS and time.monotonic() < deadline:
                    message = consumer.poll(0.5)
                    if message is not None and message.error() is None and message.timestamp()[1] / 1000 > since:
                        seen.add(message.partition())
                return seen

            assert read_from_every_partition(0) == set(range(PARTITIONS))
            say(f"the host consumer read all {PARTITIONS} partitions; the container consumer committed {before}")

            # Kill the node that coordinates the group: the container consumer finds its new coordinator, the
            # host consumer its partitions' new leaders, and both go on.
            victim = int(control.coordinator(GROUP)["node"])
            killed_at = time.time()
            stopped = control.stop_node(victim, "kill")
            assert stopped["moved_coordinators"], stopped
            survivors = [n for n in NODE_IDS if n != victim]
            assert [row[0] for row in host_metadata(cluster.bootstrap)] == survivors
            assert read_from_every_partition(killed_at) == set(range(PARTITIONS))
            moved_on = wait_for(
                "the container consumer's commits moving on after the kill", lambda: cluster.committed_past(before), 60
            )
            after = control.group(GROUP)
            assert after["state"] == "Stable" and after["generation_id"] == group["generation_id"], after
            coordinator = int(control.coordinator(GROUP)["node"])
            assert coordinator in survivors
            say(
                f"node {victim} killed: coordinator now node {coordinator}, the host consumer read every partition "
                f"again, the container consumer committed {moved_on}, generation {after['generation_id']} kept"
            )
        finally:
            consumer.close()
        control.start_node(victim)
        assert [row[0] for row in host_metadata(cluster.bootstrap)] == list(NODE_IDS)
        log = tail(cluster.logs("cluster-consumer", lines=400), 40)
        assert "Traceback" not in log, log
