"""The processes of a chaos run: the broker (unless a running one is used), the producer and the consumers.

Every child is a ``python -m`` of this checkout, in its own session (``spawn``). The broker is started on free
ports (``--port 0 --admin-port 0``); which ports it got is read from its JSON log lines, the only place it says.
With ``--broker-restart-every`` it gets a data directory and fixed ports picked before it starts instead, so that
``Broker.restart`` (SIGKILL, the same command again) brings it back where every client looks for it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from broker.chaos.records import KEY_PREFIX, Produced
from broker.coordinator.config import GroupConfig

START_TIMEOUT_S = 30.0  # for the broker to listen, and for the producer to be ready
STOP_TIMEOUT_S = 20.0
READY_POLL_S = 0.1
# The log lines (``--log-format json``) with the Kafka listener's and the control API's addresses.
LISTENING_LINES = ("broker listening", "control api listening")

JSON = dict[str, Any]


class ChaosError(Exception):
    """The run cannot go on (the broker did not start, the group never became Stable, ...)."""


def child_env() -> dict[str, str]:
    """The children import ``broker.chaos``: put this checkout first on their path, unbuffer their output."""
    root = str(Path(__file__).resolve().parent.parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": root + (os.pathsep + path if path else "")}


def spawn(argv: list[str], stdout: IO[bytes] | int, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
    """A child in its own session: a Ctrl-C on the terminal reaches only the runner, which stops every child
    itself (consumers gracefully, in order) instead of having them all interrupted at once."""
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=child_env(), start_new_session=True
    )


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def stop_all(processes: list[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM every process still running, then SIGKILL those not gone ``grace_s`` seconds later."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        process.terminate()
        # A share run's SIGSTOPped member would hold its SIGTERM until continued: continue it (a no-op otherwise).
        process.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tail(path: Path, chars: int = 1500) -> str:
    """The end of a process's log, for a note or an error."""
    return path.read_text(errors="replace")[-chars:].strip() if path.exists() else ""


# -- the broker ------------------------------------------------------------------------------------------------

# The broker's defaults for the bounds of the consumer-group timers (Kafka's GroupCoordinatorConfig,
# docs/spec/consumer-groups.md section 11): a value outside its bounds refuses the broker's start, so the runner
# moves the bounds with it.
_DEFAULTS = GroupConfig()


def consumer_group_timers(session_ms: int, heartbeat_ms: int) -> list[str]:
    """The broker flags that give consumer groups this session timeout and heartbeat interval.

    With the consumer protocol the broker dictates both (section 7.1, 7.2; librdkafka refuses them as client
    settings, section 12.1), so a chaos run shortens them on the broker it starts, as it shortens the classic
    minimum session timeout for its classic consumers."""
    return [
        "--group-consumer-session-timeout-ms", str(session_ms),
        "--group-consumer-min-session-timeout-ms", str(min(session_ms, _DEFAULTS.consumer_min_session_timeout_ms)),
        "--group-consumer-max-session-timeout-ms", str(max(session_ms, _DEFAULTS.consumer_max_session_timeout_ms)),
        "--group-consumer-heartbeat-interval-ms", str(heartbeat_ms),
        "--group-consumer-min-heartbeat-interval-ms",
        str(min(heartbeat_ms, _DEFAULTS.consumer_min_heartbeat_interval_ms)),
        "--group-consumer-max-heartbeat-interval-ms",
        str(max(heartbeat_ms, _DEFAULTS.consumer_max_heartbeat_interval_ms)),
    ]  # fmt: skip


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports nothing listens on now: a broker that is restarted must come back on the ports its
    clients know, so it cannot take ``--port 0``. All are held open together until all are picked (no repeats)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class Listening:
    """A started broker process and its two addresses, read from its log lines."""

    process: subprocess.Popen[bytes]
    bootstrap: str
    admin: str


def launch(argv: list[str], log_path: Path, append: bool = False) -> Listening:
    """Start ``argv`` (a ``serve``) and wait until both listeners log; its JSON log lines (stderr) go on to
    ``log_path`` (appended to with ``append``: a restarted broker's lines follow the killed one's)."""
    process = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found: dict[str, JSON] = {}
    nodes: list[JSON] = []  # every node's "broker listening" line (serve --nodes N: one per node)
    ready = threading.Event()
    start = log_path.stat().st_size if append and log_path.exists() else 0

    def follow() -> None:
        assert process.stderr is not None
        with log_path.open("ab" if append else "wb") as log:
            for raw in process.stderr:
                log.write(raw)
                log.flush()
                if ready.is_set():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and line.get("event") in LISTENING_LINES:
                    found[line["event"]] = line
                    if line["event"] == LISTENING_LINES[0]:
                        nodes.append(line)
                    if len(found) == len(LISTENING_LINES):
                        ready.set()
        ready.set()  # the broker exited: stop waiting

    threading.Thread(target=follow, name="broker-log", daemon=True).start()
    if not ready.wait(START_TIMEOUT_S) or len(found) < len(LISTENING_LINES):
        stop_process(process, STOP_TIMEOUT_S)
        log_end = log_path.read_bytes()[start:].decode(errors="replace")[-2000:] if log_path.exists() else ""
        missing = sorted(set(LISTENING_LINES) - set(found))
        raise ChaosError(f"the broker did not start (no {', '.join(missing)} log line); its log ends:\n{log_end}")
    control = found[LISTENING_LINES[1]]
    # Every node in the bootstrap list: a client started while one is stopped finds the others.
    bootstrap = ",".join(f"127.0.0.1:{node['port']}" for node in nodes)
    return Listening(process, bootstrap, f"http://{control['host']}:{control['port']}")


class Broker:
    """The broker the run uses: started by the runner (``managed``), or a running one."""

    def __init__(
        self,
        bootstrap: str,
        admin: str,
        process: subprocess.Popen[bytes] | None = None,
        argv: list[str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.admin = admin
        self.process = process
        self.argv = argv
        self.log_path = log_path

    @property
    def managed(self) -> bool:
        return self.process is not None

    @classmethod
    def start(
        cls,
        topic: str,
        partitions: int,
        log_path: Path,
        settings: list[str] | None = None,
        data_dir: Path | None = None,
        nodes: int | None = None,
    ) -> Broker:
        """``python -m broker serve``; its JSON log lines (stderr) go on to ``log_path``.

        ``settings``: more flags for it (``consumer_group_timers``). Without ``data_dir``, on free ports
        (``--port 0 --admin-port 0``) and in memory; with it, on fixed free ports and durable there, so that
        ``restart`` brings back the same broker where its clients look for it. ``nodes``: ``serve --nodes``; the
        bootstrap then lists every node."""
        if data_dir is None:
            ports = ["--port", "0", "--admin-port", "0"]
        else:
            kafka_port, admin_port = free_ports(2)
            ports = ["--port", str(kafka_port), "--admin-port", str(admin_port), "--data-dir", str(data_dir)]
        argv = [
            sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", *ports,
            "--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
            "--topic", f"{topic}:{partitions}", "--log-format", "json", *(settings or []),
            *(["--nodes", str(nodes)] if nodes is not None else []),
        ]  # fmt: skip
        up = launch(argv, log_path)
        return cls(up.bootstrap, up.admin, up.process, argv, log_path)

    def restart(self) -> None:
        """SIGKILL, then the same command again (same ports, same data directory); back once it listens.

        ChaosError if it does not come back (or came back elsewhere: a port taken meanwhile)."""
        assert self.process is not None and self.argv is not None and self.log_path is not None
        self.process.kill()
        self.process.wait()
        up = launch(self.argv, self.log_path, append=True)
        self.process = up.process
        if (up.bootstrap, up.admin) != (self.bootstrap, self.admin):
            raise ChaosError(f"the restarted broker listens at {up.bootstrap} ({up.admin}), not {self.bootstrap}")

    def stop(self) -> int | None:
        if self.process is None:
            return None
        return stop_process(self.process, STOP_TIMEOUT_S)


# -- the clients -----------------------------------------------------------------------------------------------


def client_id(slot: int, incarnation: int) -> str:
    return f"chaos-{slot}-{incarnation}"


@dataclass
class Incarnation:
    """One consumer process: slot ``slot``, its ``incarnation``-th start."""

    slot: int
    incarnation: int
    process: subprocess.Popen[bytes]
    out: Path
    log: Path
    started_at: float
    commits: Path | None = None  # its acknowledged commits (``consumer --commits``); None for other members
    signalled: str | None = None  # "SIGKILL" / "SIGTERM" sent by the schedule, or "stop" at the end
    signalled_at: float | None = None
    exited_at: float | None = None
    pauses: list[tuple[float, float | None]] = field(default_factory=list)  # SIGSTOP .. SIGCONT (share runs)

    @property
    def client_id(self) -> str:
        return client_id(self.slot, self.incarnation)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def start_consumer(
    args: argparse.Namespace, bootstrap: str, topic: str, group: str, workdir: Path, slot: int, incarnation: int
) -> Incarnation:
    """``python -m broker.chaos.consumer`` as ``chaos-<slot>-<incarnation>``: its records and its log in
    ``workdir``, named after it."""
    name = client_id(slot, incarnation)
    out, log, commits = workdir / f"{name}.records", workdir / f"{name}.log", workdir / f"{name}.commits"
    argv = [
        sys.executable, "-m", "broker.chaos.consumer", "--client", args.client,
        "--bootstrap", bootstrap, "--group", group, "--topic", topic,
        "--client-id", name, "--out", str(out), "--group-protocol", args.group_protocol,
        "--commits", str(commits),
    ]  # fmt: skip
    consumer = spawn_member(args, argv, slot, incarnation, out, log)
    consumer.commits = commits
    return consumer


def spawn_member(
    args: argparse.Namespace, argv: list[str], slot: int, incarnation: int, out: Path, log: Path
) -> Incarnation:
    """Start a group member's process (``argv``, plus the group flags every member takes), its output in ``log``."""
    argv = list(argv)
    if args.group_protocol == "classic":  # the consumer protocol takes its timers from the broker (section 7)
        argv += ["--session-timeout-ms", str(args.session_timeout_ms)]
        argv += ["--heartbeat-interval-ms", str(args.heartbeat_interval_ms)]
    if args.assignor is not None:
        argv += ["--assignor", args.assignor]
    with log.open("wb") as stderr:
        process = spawn(argv, stdout=stderr, stderr=subprocess.STDOUT)
    return Incarnation(slot, incarnation, process, out, log, time.time())


def start_producer(
    args: argparse.Namespace, bootstrap: str, topic: str, status: Path, log: Path
) -> subprocess.Popen[bytes]:
    """``python -m broker.chaos.producer``, writing its status to ``status`` (see ``wait_until_ready``)."""
    argv = [
        sys.executable, "-m", "broker.chaos.producer", "--client", args.client,
        "--bootstrap", bootstrap, "--topic", topic, "--status", str(status),
        "--rate", str(args.rate), "--prefix", KEY_PREFIX, "--partitions", str(args.partitions),
        "--client-id", "chaos-producer",
    ]  # fmt: skip
    with log.open("wb") as stderr:
        return spawn(argv, stdout=stderr, stderr=subprocess.STDOUT)


def wait_until_ready(producer: subprocess.Popen[bytes], status: Path, log: Path) -> None:
    """Until the producer's status says it is connected and the topic exists; ChaosError if it exits first or
    takes longer than ``START_TIMEOUT_S`` (it is left running: the caller stops every process it started)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not Produced.load(status).ready:
        if producer.poll() is not None:
            raise ChaosError(f"the producer exited with {producer.returncode}: {tail(log)}")
        if time.monotonic() > deadline:
            raise ChaosError(f"the producer was not ready after {START_TIMEOUT_S:.0f}s")
        time.sleep(READY_POLL_S)
