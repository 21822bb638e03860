"""The two systems under test, each in a process of its own: our broker and librdkafka's mock cluster."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import wire

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(sock: socket.socket, frame: bytes) -> bytes:
    """One request, one answer (the body after the size prefix), on a blocking socket."""
    sock.sendall(frame)
    return read_answer(sock)


def read_answer(sock: socket.socket) -> bytes:
    """The next answer on a blocking socket (the body after the size prefix)."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        raise ConnectionError("connection closed without an answer")
    (size,) = struct.unpack(">i", head)
    body = sock.recv(size, socket.MSG_WAITALL)
    if len(body) < size:
        raise ConnectionError("connection closed inside an answer")
    return body


@dataclass(frozen=True)
class ConsumerSettings:
    """What the broker dictates to KIP-848 members (docs/spec/consumer-groups.md sections 7.1, 7.2, 11).

    The session is long so that no member expires while others are formed or between a formation and its
    heartbeat run (100,000 members take minutes); the interval only travels in the answers.
    """

    session_timeout_ms: int = 1_800_000
    heartbeat_interval_ms: int = 5_000


def api_versions(host: str, port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return wire.parse_api_versions(call(sock, wire.api_versions_request()))


class System:
    """A running system under test."""

    name = ""

    def __init__(self, process: subprocess.Popen[str], host: str, port: int, log: Path) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until the first ApiVersions is answered."""
        deadline = time.perf_counter() + timeout
        while True:
            try:
                api_versions(self.host, self.port, timeout=2.0)
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.process.returncode}: {self.log_tail()}"
                    ) from None
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.002)

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc status")

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the process, all threads."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_idle(self, busy: float = 0.05, window: float = 0.25, timeout: float = 60.0) -> None:
        """Until the process uses under ``busy`` of a core over ``window`` seconds (e.g. done with closes)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            used = self.cpu_seconds()
            time.sleep(window)
            if self.cpu_seconds() - used < busy * window:
                return

    def set_join_delay(self, delay_ms: int) -> None:
        """The classic group initial rebalance delay (only the mock takes it at run time)."""

    def create_topic(self, name: str, partitions: int) -> None:
        """A topic the KIP-848 groups subscribe to (an existing one is fine)."""
        raise NotImplementedError

    def consumer_notes(self) -> list[str]:
        """What this system could not be told of its ConsumerSettings (empty: everything)."""
        return []

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> System:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _log_file(name: str) -> Path:
    return Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])


class Ours(System):
    name = "ours"

    @classmethod
    def start(cls, consumer: ConsumerSettings | None = None, extra: Sequence[str] = ()) -> Ours:
        """With ``consumer`` None the broker's defaults stand (the start-up scenario: nothing but its flags);
        ``extra``: more flags (``--data-dir DIR``: benchmarks/durable.py)."""
        port = free_port()
        log = _log_file(cls.name)
        command = [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--group-initial-rebalance-delay-ms",
            "0",
            "--group-min-session-timeout-ms",
            "1000",
            "--log-level",
            "warning",
            "--admin-port",
            "0",
        ]
        if consumer is not None:
            # KIP-848 members (section 11): the session must lie within [min, max] and the interval within its
            # own bounds, so the bounds move with the values.
            command += [
                "--group-consumer-session-timeout-ms",
                str(consumer.session_timeout_ms),
                "--group-consumer-min-session-timeout-ms",
                str(min(consumer.session_timeout_ms, 45_000)),
                "--group-consumer-max-session-timeout-ms",
                str(max(consumer.session_timeout_ms, 60_000)),
                "--group-consumer-heartbeat-interval-ms",
                str(consumer.heartbeat_interval_ms),
                "--group-consumer-min-heartbeat-interval-ms",
                str(min(consumer.heartbeat_interval_ms, 5_000)),
                "--group-consumer-max-heartbeat-interval-ms",
                str(max(consumer.heartbeat_interval_ms, 15_000)),
            ]
        command += list(extra)
        with log.open("w") as stderr:
            process = subprocess.Popen(
                command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, text=True
            )
        return cls(process, "127.0.0.1", port, log)

    def create_topic(self, name: str, partitions: int) -> None:
        create_topic_over_wire(self, name, partitions)


def create_topic_over_wire(system: System, name: str, partitions: int) -> None:
    """CreateTopics v2 (ours and kfake; the mock has none)."""
    with socket.create_connection((system.host, system.port), timeout=10) as sock:
        frame = wire.frame(wire.CREATE_TOPICS, 2, 1, "bench", wire.create_topics_body(name, partitions))
        for topic, code, message in wire.parse_create_topics(call(sock, frame)):
            if code not in (0, wire.TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"CreateTopics {topic} answered error {code}: {message}")


class Mock(System):
    name = "mock"

    def __init__(self, process: subprocess.Popen[str], host: str, port: int, log: Path) -> None:
        super().__init__(process, host, port, log)
        self.unsupported: list[str] = []

    @classmethod
    def start(cls, consumer: ConsumerSettings | None = None) -> Mock:
        """With ``consumer`` None nothing is sent on stdin (the start-up scenario times the bare process)."""
        log = _log_file(cls.name)
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.mock_cluster"],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        host, _, port = line.rpartition(":")
        if not port.isdigit():
            process.kill()
            raise RuntimeError(f"mock cluster did not print a bootstrap address: {line!r}: {log.read_text()}")
        mock = cls(process, host, int(port), log)
        settings = (
            []
            if consumer is None
            else [
                ("consumer-session", consumer.session_timeout_ms),
                ("consumer-interval", consumer.heartbeat_interval_ms),
            ]
        )
        for setting, value in settings:
            answer = mock.command(f"{setting} {value}")
            if answer != "ok":
                mock.unsupported.append(f"{setting}: {answer}")
        return mock

    def command(self, line: str) -> str:
        """One command on the mock's stdin (benchmarks/mock_cluster.py), its answer line."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def set_join_delay(self, delay_ms: int) -> None:
        answer = self.command(f"delay {delay_ms}")
        if answer != "ok":
            raise RuntimeError(f"mock cluster refused the delay: {answer!r}")

    def create_topic(self, name: str, partitions: int) -> None:
        answer = self.command(f"topic {name} {partitions}")
        if answer != "ok":
            raise RuntimeError(f"mock cluster did not create topic {name}: {answer!r}")

    def consumer_notes(self) -> list[str]:
        return self.unsupported


class Kfake(System):
    """franz-go's kfake (pkg/kfake), for the share-group scenarios: a binary built outside this repository
    (benchmarks/README.md, "Share groups"), started as ``PATH -port 0``; it prints the ``host:port`` it listens on
    (one broker) and runs until SIGTERM. Its configs are its defaults (KIP-932's: 45 s sessions, 30 s locks)."""

    name = "kfake"

    @classmethod
    def start(cls, path: Path) -> Kfake:
        log = _log_file(cls.name)
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [str(path), "-port", "0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        host, _, port = line.rpartition(":")
        if not port.isdigit():
            process.kill()
            process.wait()
            raise RuntimeError(f"kfake at {path} did not print host:port: {line!r}: {log.read_text()[-500:]}")
        return cls(process, host, int(port), log)

    def create_topic(self, name: str, partitions: int) -> None:
        create_topic_over_wire(self, name, partitions)


def startup_seconds(kind: type[Ours] | type[Mock]) -> float:
    """Process start to first answered ApiVersions."""
    started = time.perf_counter()
    system = kind.start()
    try:
        system.wait_ready()
        return time.perf_counter() - started
    finally:
        system.stop()
