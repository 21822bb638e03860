"""Fixtures shared by the wire and client tests: real brokers on real sockets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import broker.server.broker as server_module
from broker.config.settings import Settings
from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer

ROOT = Path(__file__).resolve().parent.parent

# Test-friendly group settings, as Kafka's own integration tests use them.
TEST_GROUP_FLAGS = ["--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000"]


_HANDED_OUT: set[int] = set()


#: Under pytest-xdist each worker hands out ports of its own block, below the kernel's ephemeral range (32768 and
#: up), so that two workers never hand out one port and no client's outgoing connection takes one.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_PORT_BLOCK = 2000
_PORT_BASE = 12000 + _PORT_BLOCK * int(_WORKER.removeprefix("gw")) if _WORKER.startswith("gw") else 0
if _WORKER:
    # A pytest-xdist worker has COLUMNS=80 and LINES=24 in its environment (a plain run has neither), which the
    # CLI's processes would take for a terminal's size (broker/cli/watch.py folds ids at 80 columns then).
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def _bound_port(port: int) -> int | None:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(sock.getsockname()[1])


def _hear_ctrl_c() -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _sigint_not_ignored() -> Iterator[None]:
    """Keep SIGINT heard in the test process. A child inherits an ignored SIGINT, and a Python child started so
    never turns Ctrl-C into KeyboardInterrupt: the tests that stop `group-broker watch` with SIGINT hung in full
    runs (three in two runs on 2026-12-04) after something earlier in the same xdist worker, outside any one test's
    setup and teardown, left SIGINT, SIGQUIT and SIGHUP ignored (seen in /proc/<pid>/status SigIgn)."""
    _hear_ctrl_c()
    yield
    _hear_ctrl_c()


def free_ports(count: int) -> int:
    """A port p with p..p+count-1 all free and none handed out before, all of them handed out now (``serve
    --nodes N`` listens on p+i): handing out only p let the next ``free_port()`` give p+1 to the control API of the
    same broker, whose node 1 then found its port taken."""
    for _ in range(500):
        base = free_port()
        run = range(base, base + count)
        if all(port == base or (port not in _HANDED_OUT and _bound_port(port)) for port in run):
            _HANDED_OUT.update(run)
            return base
    raise AssertionError(f"no {count} consecutive free ports")


def free_port() -> int:
    """A port nobody listens on, and not one this run handed out before: two calls in a row may otherwise get the
    same port from the kernel, and two brokers given it race for it (seen in CI: one exits with 1)."""
    while True:
        if _PORT_BASE:
            candidates = range(_PORT_BASE, _PORT_BASE + _PORT_BLOCK)
            port = next((p for p in candidates if p not in _HANDED_OUT and _bound_port(p)), 0)
            assert port, f"worker {_WORKER}: every port of {_PORT_BASE}-{_PORT_BASE + _PORT_BLOCK - 1} handed out"
        else:
            port = _bound_port(0) or 0
        if port and port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"broker did not listen on {port} within {timeout}s")


@dataclass
class BrokerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_broker_process(tmp_path: Path, *extra: str, listen_port: int | None = None) -> BrokerProcess:
    """``listen_port``: where to wait for the broker when ``extra`` sets ``--listeners``."""
    port = free_port()
    log_path = tmp_path / f"broker-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "broker", "serve",
                "--host", "127.0.0.1", "--port", str(port), "--log-format", "json", "--admin-port", "0",
                *TEST_GROUP_FLAGS, *extra,
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    wait_for_port(listen_port or port, process)
    return BrokerProcess(process, listen_port or port, log_path)


@pytest.fixture(scope="module")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker in its own process, shared by a test module (use unique group ids per test)."""
    broker = start_broker_process(tmp_path_factory.mktemp("broker"), "--topic", "shared:6")
    yield broker
    broker.stop()


def broker_settings(**overrides: Any) -> Settings:
    """Settings of an in-process test broker: ephemeral port, test-friendly group timers, topic "topic"."""
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "cluster_id": "test-cluster",
        "group": GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000),
        "topics": (("topic", 3),),
        "admin_port": -1,
    }
    return Settings(**(values | overrides))


@pytest.fixture
async def server() -> AsyncIterator[BrokerServer]:
    """A broker in the test's event loop on an ephemeral port, for wire-level tests."""
    broker = BrokerServer(broker_settings())
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
def held_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The background imports of broker/server/broker.py wait until the test releases them."""
    release = threading.Event()
    real = server_module.importlib.import_module

    def import_module(name: str) -> Any:
        assert release.wait(10), "the test never released the imports"
        return real(name)

    monkeypatch.setattr(server_module, "importlib", SimpleNamespace(import_module=import_module))
    yield release
    release.set()
