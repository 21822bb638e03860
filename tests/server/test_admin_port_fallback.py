"""A taken admin port (issue 18, broker/server/control_listener.py): the default one (9644, asked for by nobody)
gives way to a free port and the broker logs the real URL; a port asked for by flag, variable or TOML key fails
start-up with one line. Real processes, real sockets."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import settings
from broker.server.broker import BrokerServer
from broker.testing.embedded import run_broker
from tests.conftest import ROOT, TEST_GROUP_FLAGS, broker_settings, free_port, wait_for_port

DEFAULT_ADMIN_PORT = 9644
LISTENING = "control api listening"
MOVED = "control api default port taken, listening on a free one"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without GROUP_BROKER_* variables (the defaults apply), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUP_BROKER_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def serve(log_path: Path, port: int, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [
                sys.executable, "-m", "broker", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--log-format", "json", *TEST_GROUP_FLAGS, *extra,
            ],
            stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=env if env is not None else clean_env(),
        )  # fmt: skip


def log_lines(log_path: Path, event: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The JSON log lines of ``event``, once there is one."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for line in log_path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("event") == event:
                    found.append(record)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def healthz(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{url}/healthz", timeout=5) as answer:
        return int(answer.status)


@contextlib.contextmanager
def default_port_held() -> Iterator[None]:
    """9644 taken for the block: by this test if nobody holds it (SO_REUSEADDR as the broker binds, so connections
    of earlier tests in TIME_WAIT do not stop it), else by whoever does."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        with contextlib.suppress(OSError):
            holder.bind(("127.0.0.1", DEFAULT_ADMIN_PORT))
            holder.listen()
        yield
    finally:
        holder.close()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_two_brokers_started_at_once_with_the_default_admin_port_both_serve(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"broker-{port}.log" for port in ports]
    processes.extend(serve(log, port) for log, port in zip(logs, ports, strict=True))
    for process, port in zip(processes, ports, strict=True):
        wait_for_port(port, process)
    urls = []
    for log in logs:
        (listening,) = log_lines(log, LISTENING)
        assert listening["url"] == f"http://127.0.0.1:{listening['port']}"
        urls.append(listening["url"])
        if listening["port"] != DEFAULT_ADMIN_PORT:  # this one gave way (both do if another process holds 9644)
            (moved,) = log_lines(log, MOVED)
            assert moved["level"] == "warning"
            assert (moved["taken_port"], moved["port"], moved["url"]) == (
                DEFAULT_ADMIN_PORT, listening["port"], listening["url"]
            )
    assert urls[0] != urls[1]
    assert [healthz(url) for url in urls] == [200, 200]
    assert all(process.poll() is None for process in processes)

    # `group-broker health` reads the settings `serve` reads: it finds the moved API through the broker.
    for port in ports:
        env = clean_env(GROUP_BROKER_HOST="127.0.0.1", GROUP_BROKER_PORT=str(port))
        done = subprocess.run(
            [sys.executable, "-m", "broker", "health"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=30
        )
        assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("where", ["flag", "variable", "toml"])
def test_an_admin_port_asked_for_that_is_taken_fails_with_one_line(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]], where: str
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        config = tmp_path / "broker.toml"
        config.write_text(f"admin_port = {taken}\n")
        extra, env = {
            "flag": (["--admin-port", str(taken)], clean_env()),
            "variable": ([], clean_env(GROUP_BROKER_ADMIN_PORT=str(taken))),
            "toml": (["--config", str(config)], clean_env()),
        }[where]
        log = tmp_path / "broker.log"
        process = serve(log, free_port(), *extra, env=env)
        processes.append(process)
        assert process.wait(timeout=30) == 1
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("group-broker: ")
    assert f"control API cannot listen on 127.0.0.1:{taken}: Address already in use" in lines[0]
    assert "--admin-port" in lines[0]


async def test_an_explicit_port_in_process_fails_and_releases_the_kafka_port() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        config = settings.parse(["--host", "127.0.0.1", "--port", "0", "--admin-port", str(taken)], environ={})
        assert not config.admin_port_movable()
        server = BrokerServer(config)
        with pytest.raises(OSError, match=f"control API cannot listen on 127.0.0.1:{taken}"):
            await server.start()
        assert server.control is None and server.listeners == []


async def test_the_default_port_gives_way_in_process() -> None:
    with default_port_held():
        assert broker_settings(admin_port=DEFAULT_ADMIN_PORT).admin_port_movable()
        assert not settings.parse(["--admin-port", str(DEFAULT_ADMIN_PORT)], environ={}).admin_port_movable()
        server = BrokerServer(broker_settings(admin_port=DEFAULT_ADMIN_PORT))
        await server.start()
        try:
            assert server.control is not None
            assert server.control.moved_from == DEFAULT_ADMIN_PORT
            assert server.control.port not in (0, DEFAULT_ADMIN_PORT)
            assert server.api.control_url == f"http://127.0.0.1:{server.control.port}"
        finally:
            await server.stop()


def test_the_embedded_broker_and_the_pytest_plugin_report_the_real_port(group_broker_factory: Any) -> None:
    with default_port_held():
        with run_broker(admin_port=DEFAULT_ADMIN_PORT) as embedded:
            assert embedded.admin_url != f"http://127.0.0.1:{DEFAULT_ADMIN_PORT}"
            assert healthz(embedded.admin_url) == 200
        from_plugin = group_broker_factory(admin_port=DEFAULT_ADMIN_PORT)
        assert from_plugin.admin_url != f"http://127.0.0.1:{DEFAULT_ADMIN_PORT}"
        assert healthz(from_plugin.admin_url) == 200
