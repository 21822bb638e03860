"""The Docker image and the compose demo, for real (docs/docker.md).

Builds the images from this checkout, brings ``compose.yaml`` up under a project name and host ports of its own,
and checks what a user of the demo would see: the broker healthy, the three consumers (aiokafka, kafka-python,
confluent-kafka) Stable in one group, records flowing, and after ``docker compose kill consumer-1`` the group
rebalanced to two members that own consumer-1's partitions; from the host through the EXTERNAL listener, as a
Kafka client on the host would; and the ``chaos`` profile's run against the compose broker. ``docker compose
--profile '*' down -v`` (the documented command) always runs at the end, and nothing of the project may be left.

Skipped, with the reason, when no Docker engine answers or Compose v2 is missing. ``.ci/run`` tries to start one
first. Timings go to the terminal (``[docker] ...`` lines).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from broker.control.client import ControlClient, ControlError
from tests.conftest import ROOT, free_port

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]

BASE_IMAGE = "python:3.12-slim"  # the Dockerfile's default PYTHON_IMAGE
BROKER_IMAGE = "kafka-group-broker:test"
DEMO_IMAGE = "kafka-group-broker-demo:test"
GROUP = TOPIC = "demo"  # compose.yaml's group and topic
PARTITIONS = 6
CONSUMERS = {"consumer-1", "consumer-2", "consumer-3"}
VICTIM = "consumer-1"
BUILD_TIMEOUT_S = 1200.0  # a cold build downloads every dependency
UP_TIMEOUT_S = 180
CHAOS_ENV = {"CHAOS_DURATION": "12", "CHAOS_INTERVAL": "5"}  # two kills; the run then drains and reports
ANSI = re.compile(r"\x1b\[[0-9;]*m")

T = TypeVar("T")


def docker_unavailable() -> str | None:
    """Why the docker tests cannot run here, or None when they can."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "docker info did not answer within 30 s"
    if info.returncode != 0:
        lines = (info.stderr or info.stdout).strip().splitlines()
        return f"no Docker engine answers (docker info: {lines[-1] if lines else f'exit {info.returncode}'})"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )
    if compose.returncode != 0:
        return "Docker Compose v2 (`docker compose`) is not installed"
    for command, timeout in ((["docker", "image", "inspect", BASE_IMAGE], 30), (["docker", "pull", BASE_IMAGE], 180)):
        try:
            if subprocess.run(command, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL).returncode == 0:
                return None
        except subprocess.TimeoutExpired:
            pass
    return f"the base image {BASE_IMAGE} is not here and cannot be pulled"


def image_id(image: str) -> str:
    """The image's id, or "" when there is no such image."""
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return result.stdout.strip() if result.returncode == 0 else ""


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(ANSI.sub("", text).rstrip().splitlines()[-lines:])


def run(args: list[str], env: dict[str, str], timeout: float, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as error:
        raise AssertionError(f"{' '.join(args)}: no end within {timeout:.0f}s") from error
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {result.returncode}\n--- stdout\n{tail(result.stdout)}\n"
            f"--- stderr\n{tail(result.stderr)}"
        )
    return result


@dataclass
class Stack:
    """One compose project: its own name, images and host ports (parallel runs and other brokers don't clash)."""

    project: str
    kafka_port: int
    admin_port: int
    env: dict[str, str]

    @classmethod
    def new(cls) -> Stack:
        kafka_port, admin_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}  # no COMPOSE_PROFILES etc.
        env |= {
            "HOST_KAFKA_PORT": str(kafka_port),
            "HOST_ADMIN_PORT": str(admin_port),
            "GROUP_BROKER_IMAGE": BROKER_IMAGE,
            "GROUP_BROKER_DEMO_IMAGE": DEMO_IMAGE,
            **CHAOS_ENV,
        }
        return cls(f"gbtest-{os.getpid()}-{uuid.uuid4().hex[:6]}", kafka_port, admin_port, env)

    def compose(self, *args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = ["docker", "compose", "-f", str(ROOT / "compose.yaml"), "-p", self.project, *args]
        return run(command, self.env, timeout, check)

    @property
    def bootstrap(self) -> str:
        """The EXTERNAL listener, as a client on the host reaches it (what the broker advertises there)."""
        return f"localhost:{self.kafka_port}"

    @property
    def control(self) -> ControlClient:
        return ControlClient(f"http://127.0.0.1:{self.admin_port}", timeout=10.0)

    def logs(self, *services: str, lines: int = 200) -> str:
        result = self.compose("logs", "--no-color", "--tail", str(lines), *services, check=False)
        return ANSI.sub("", result.stdout + result.stderr)

    def diagnosis(self) -> str:
        ps = self.compose("--profile", "chaos", "ps", "-a", check=False).stdout
        return f"--- docker compose ps -a\n{ps}\n--- docker compose logs (last lines)\n{tail(self.logs(), 150)}"

    @contextlib.contextmanager
    def explained(self) -> Iterator[None]:
        """A failure inside carries the containers' state and logs."""
        try:
            yield
        except (AssertionError, ControlError, TimeoutError) as error:
            raise AssertionError(f"{error}\n{self.diagnosis()}") from error


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, every_s: float = 0.5) -> T:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            value = probe()
        except Exception as error:  # the client libraries raise their own kinds while things settle
            value, last = None, error
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f}s (last error: {last!r})")
        time.sleep(every_s)


def owners(group: dict[str, Any]) -> dict[str, list[int]]:
    """client id -> the partitions of TOPIC it owns, from the control API's group detail."""
    return {m["client_id"]: sorted((m["assignment"] or {}).get(TOPIC, [])) for m in group["members"]}


def committed_offsets(admin: Any) -> dict[int, int]:
    """The group's committed offsets (partition -> offset), asked from the host through the EXTERNAL listener."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(timeout=15)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == TOPIC and tp.offset >= 0}


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def say(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Print a line on the terminal even while pytest captures output."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def say(message: str) -> None:
        if reporter is None or capture is None:  # pragma: no cover - -p no:terminal or no:capture
            print(f"[docker] {message}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[docker] {message}")

    return say


@pytest.fixture(scope="module")
def docker_ready() -> None:
    reason = docker_unavailable()
    if reason is not None:
        pytest.skip(f"docker: {reason} (.ci/run tries to start an engine with offline-docker-base.sh)")


@pytest.fixture(scope="module")
def built(docker_ready: None, say: Callable[[str], None]) -> Stack:
    """Both images, built from this checkout (the build cache makes a second run quick)."""
    stack = Stack.new()
    # Pip's index settings reach the build when the environment has them (URLs only: no host paths).
    build_args = [
        arg for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
        if re.match(r"https?://", stack.env.get(name, "")) for arg in ("--build-arg", name)
    ]  # fmt: skip
    previous = {image: image_id(image) for image in (BROKER_IMAGE, DEMO_IMAGE)}
    started = time.monotonic()
    stack.compose("build", *build_args, timeout=BUILD_TIMEOUT_S)  # the chaos service uses the demo image too
    # A rebuild moves the tags: drop the images they left behind, untagged (not if a container still uses one).
    for image, old in previous.items():
        if old and old != image_id(image):
            run(["docker", "image", "rm", old], stack.env, 60, check=False)
    say(f"images built in {time.monotonic() - started:.1f}s ({BROKER_IMAGE}, {DEMO_IMAGE})")
    return stack


@pytest.fixture(scope="module")
def stack(built: Stack, say: Callable[[str], None]) -> Iterator[Stack]:
    """The compose demo up and healthy, and the chaos profile's run started alongside (other group and topic)."""
    stack = built
    started = time.monotonic()
    try:
        with stack.explained():
            stack.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), "--no-build",
                          timeout=UP_TIMEOUT_S + 60)  # fmt: skip
            say(
                f"compose up --wait: healthy in {time.monotonic() - started:.1f}s "
                f"(project {stack.project}, kafka localhost:{stack.kafka_port}, admin 127.0.0.1:{stack.admin_port})"
            )
            stack.compose("--profile", "chaos", "up", "-d", "--no-build", "--no-deps", "chaos")
        yield stack
    finally:
        stopped = time.monotonic()
        # The documented command (docs/docker.md, issue 26 item 6): every profile's services, the chaos run's too.
        stack.compose("--profile", "*", "down", "-v", "--remove-orphans", "-t", "5", timeout=180, check=False)
        say(f"compose down -v in {time.monotonic() - stopped:.1f}s")
        left = project_resources(stack)
        if left:
            stack.compose("--profile", "chaos", "down", "-v", "--remove-orphans", "-t", "1", timeout=180, check=False)
            raise AssertionError(f"`docker compose --profile '*' down -v` left {left} of project {stack.project}")


def project_resources(stack: Stack) -> list[str]:
    """The containers, networks and volumes of the project that still exist."""
    label = f"label=com.docker.compose.project={stack.project}"
    found = []
    for kind, listing in (("container", ["ps", "-a"]), ("network", ["network", "ls"]), ("volume", ["volume", "ls"])):
        names = run(["docker", *listing, "-q", "--filter", label], stack.env, 60, check=False).stdout.split()
        found += [f"{kind} {name}" for name in names]
    return found


# -- tests ---------------------------------------------------------------------------------------------------


def inspect(image: str, template: str) -> str:
    return run(["docker", "image", "inspect", "--format", template, image], dict(os.environ), 60).stdout.strip()


def test_broker_image_is_small_non_root_and_has_no_compilers(built: Stack, say: Callable[[str], None]) -> None:
    env = dict(os.environ)
    sizes = {image: int(inspect(image, "{{.Size}}")) for image in (BROKER_IMAGE, DEMO_IMAGE)}
    say("image sizes: " + ", ".join(f"{image} {size / 1e6:.0f} MB" for image, size in sizes.items()))
    probe = run(
        ["docker", "run", "--rm", "--entrypoint", "sh", BROKER_IMAGE, "-c",
         "id -u; command -v gcc cc c++ clang make; python -c 'import aiokafka' 2>/dev/null && echo clients; true"],
        env, 120,
    )  # fmt: skip
    uid, *rest = probe.stdout.split()
    assert uid != "0", "the broker image runs as root"
    assert rest == [], f"the broker image has compilers or the client libraries: {rest}"
    assert sizes[BROKER_IMAGE] < sizes[DEMO_IMAGE], "the default target is not the small broker image"
    assert "health" in inspect(BROKER_IMAGE, "{{json .Config.Healthcheck.Test}}")
    assert inspect(BROKER_IMAGE, "{{json .Config.Entrypoint}}") == '["group-broker"]'
    exposed = inspect(BROKER_IMAGE, "{{json .Config.ExposedPorts}}")
    assert all(f'"{port}/tcp"' in exposed for port in (9092, 19092, 9644)), exposed


def test_groups_form_and_a_killed_consumers_partitions_move(stack: Stack, say: Callable[[str], None]) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    control = stack.control
    with stack.explained():
        # The three consumers, three client libraries, one Stable group owning every partition.
        started = time.monotonic()
        group = control.wait(GROUP, state="Stable", members=3, timeout_ms=120_000)
        before = owners(group)
        assert set(before) == CONSUMERS, before
        assert sorted(p for parts in before.values() for p in parts) == list(range(PARTITIONS)), before
        say(f"group {GROUP} Stable with 3 members, generation {group['generation_id']}, "
            f"{time.monotonic() - started:.1f}s after healthy: {before}")  # fmt: skip

        # From the host, through the EXTERNAL listener: the coordinator's advertised address must be reachable.
        admin = AdminClient({"bootstrap.servers": stack.bootstrap})
        described = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=20)
        assert {m.client_id for m in described.members} == CONSUMERS
        consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": f"host-{stack.project}"})
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            record = wait_for("a record fetched from the host", lambda: consumer.poll(1.0), 30)
            assert record.error() is None and record.key().startswith(b"k-"), record.error()
        finally:
            consumer.close()

        # Records flow: every partition gets committed offsets (the consumers commit what they wrote).
        def all_committed() -> dict[int, int] | None:
            offsets = committed_offsets(admin)
            return offsets if len(offsets) == PARTITIONS else None

        committed = wait_for("committed offsets on every partition", all_committed, 60)
        say(f"records flow: committed offsets {dict(sorted(committed.items()))} (read from the host)")

        # SIGKILL consumer-1: no LeaveGroup, its session runs out, the group rebalances onto the other two.
        victim = next(m for m in group["members"] if m["client_id"] == VICTIM)
        lost = before[VICTIM]
        killed = time.monotonic()
        stack.compose("kill", VICTIM)
        after = control.wait(
            GROUP, state="Stable", members=2, min_generation=group["generation_id"] + 1, timeout_ms=60_000
        )
        rebalanced_s = time.monotonic() - killed
        now = owners(after)
        assert set(now) == CONSUMERS - {VICTIM}, now
        assert sorted(p for parts in now.values() for p in parts) == list(range(PARTITIONS)), now
        assert set(lost) <= {p for parts in now.values() for p in parts}
        say(f"kill {VICTIM}: Stable with 2 members (generation {after['generation_id']}) {rebalanced_s:.1f}s later; "
            f"its partitions {lost} now owned: {now}")  # fmt: skip

        expired = [e for e in control.events(GROUP) if e["event"] == "member_expired"]
        assert [e["cause"] for e in expired if e["member_id"] == victim["member_id"]] == ["session_timeout"], expired
        broker_log = stack.logs("broker", lines=2000)
        assert "member_expired" in broker_log and victim["member_id"] in broker_log
        watch = stack.compose("exec", "-T", "broker", "group-broker", "watch", "--once", GROUP).stdout
        assert re.search(r"\bStable\b.*\b2 members\b", ANSI.sub("", watch)), watch

        # The survivors consume the victim's partitions: their committed offsets move on.
        def moved_on() -> dict[int, int] | None:
            offsets = committed_offsets(admin)
            return offsets if all(offsets.get(p, 0) > committed[p] for p in lost) else None

        wait_for(f"committed offsets of {VICTIM}'s partitions {lost} moving on", moved_on, 60)
        say(f"records flow again on {lost} {time.monotonic() - killed:.1f}s after the kill")


def test_chaos_profile_runs_against_the_compose_broker(stack: Stack, say: Callable[[str], None]) -> None:
    with stack.explained():
        container = stack.compose("--profile", "chaos", "ps", "-a", "-q", "chaos").stdout.strip()
        assert container, "no chaos container"
        started = time.monotonic()
        code = run(["docker", "wait", container], stack.env, 240).stdout.strip()
        log = stack.logs("chaos", lines=400)
        assert code == "0", f"chaos run exited {code}\n{tail(log, 80)}"
        assert "kill #1" in log, tail(log, 80)
        say(f"chaos profile: `group-broker chaos run` passed (waited {time.monotonic() - started:.1f}s for its end)")


def test_the_image_serves_the_web_console(stack: Stack, say: Callable[[str], None]) -> None:
    """The console's files are package data (pyproject.toml): the wheel the image installs must carry every one."""
    import urllib.request

    from broker.control.console import FILES

    base = f"http://127.0.0.1:{stack.admin_port}"
    with stack.explained():
        with urllib.request.urlopen(f"{base}/", timeout=10) as page:
            assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
            assert b"/console/console.js" in page.read()
        for name, content_type in FILES.items():
            with urllib.request.urlopen(f"{base}/console/{name}", timeout=10) as answer:
                assert answer.status == 200 and answer.headers["Content-Type"] == content_type, name
                assert answer.read(), name
        say(f"the image serves the web console: / and its {len(FILES)} files")


def test_a_killed_broker_restarts_with_its_groups_offsets_and_records(stack: Stack, say: Callable[[str], None]) -> None:
    """Issue 27: compose keeps the broker's state in the broker-data volume. SIGKILL the broker and start it again:
    the demo group's committed offsets are all still there (none goes back), the group is Stable again with its
    consumers, and records flow on. Last in the module: the restart would disturb the chaos run above."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    control = stack.control
    with stack.explained():
        group = control.wait(GROUP, state="Stable", timeout_ms=60_000)
        before = wait_for("committed offsets before the kill", lambda: committed_offsets(admin) or None, 60)
        killed = time.monotonic()
        stack.compose("kill", "-s", "KILL", "broker")
        stack.compose("start", "broker")
        stack.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), "--no-build", "--no-recreate",
                      "broker", timeout=UP_TIMEOUT_S + 60)  # fmt: skip
        healthy_s = time.monotonic() - killed
        # A new client: the host's connection through the published port can outlive the killed broker (Docker's
        # proxy keeps its side open), and a request on it waits for librdkafka's socket timeout.
        admin = AdminClient({"bootstrap.servers": stack.bootstrap, "socket.timeout.ms": 10_000})
        after = wait_for("committed offsets after the restart", lambda: committed_offsets(admin) or None, 60)
        assert all(after.get(p, -1) >= offset for p, offset in before.items()), (before, after)
        back = control.wait(GROUP, state="Stable", timeout_ms=120_000)
        assert {m["client_id"] for m in back["members"]} <= CONSUMERS, back
        say(f"broker SIGKILLed and started: healthy in {healthy_s:.1f}s, committed offsets kept "
            f"{dict(sorted(after.items()))} "
            f"(before {dict(sorted(before.items()))}), group {GROUP} Stable at generation {back['generation_id']} "
            f"(was {group['generation_id']})")  # fmt: skip

        def moved_on() -> dict[int, int] | None:
            offsets = committed_offsets(admin)
            return offsets if sum(offsets.values()) > sum(after.values()) else None

        wait_for("committed offsets moving on after the restart", moved_on, 60)
