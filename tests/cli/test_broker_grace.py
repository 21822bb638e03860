"""Every command that talks to a broker waits for one that is starting (issue 26, item 1).

The README's walkthrough runs ``group-broker serve ... &`` and the next command at once: the command is started
first here, the broker 1.5 s later on the port the command names, and the command succeeds. ``--wait-for-broker 0``
fails at once, as before; the one "waiting" line appears only when stderr is a terminal (a pty).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from broker.cli import discover
from broker.control.client import ControlClient, ControlError
from broker.control.grace import with_grace
from tests.cli.test_control_cli import Broker, start_broker
from tests.conftest import ROOT, free_port

LATE_S = 1.5


@contextmanager
def late_broker(log_path: Path, *flags: str, after_s: float = LATE_S) -> Iterator[dict[str, Broker]]:
    """A broker started ``after_s`` seconds from now with ``flags`` (its ports); stopped at the end."""
    started: dict[str, Broker] = {}

    def start() -> None:
        time.sleep(after_s)
        started["broker"] = start_broker(log_path, *flags)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    try:
        yield started
    finally:
        thread.join(timeout=30)
        if "broker" in started:
            started["broker"].stop()


def group_broker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "broker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, **(env or {})},
    )


def test_a_command_started_before_the_broker_waits_for_it(tmp_path: Path) -> None:
    admin_port = free_port()
    url = f"http://127.0.0.1:{admin_port}"
    started = time.monotonic()
    command = group_broker("groups", "--admin", url)
    with late_broker(tmp_path / "broker.log", "--admin-port", str(admin_port)):
        out, err = command.communicate(timeout=60)
    assert (command.returncode, out.strip()) == (0, "no groups"), err
    assert time.monotonic() - started >= LATE_S
    assert "waiting" not in err  # stderr is a pipe: no line


def test_chaos_verbs_and_bootstrap_discovery_wait_too(tmp_path: Path) -> None:
    kafka_port = free_port()
    command = group_broker("chaos", "fault", "list", "--bootstrap", f"127.0.0.1:{kafka_port}")
    with late_broker(tmp_path / "broker.log", "--port", str(kafka_port)):
        out, err = command.communicate(timeout=60)
    assert (command.returncode, out.strip()) == (0, "no fault rules"), err


def test_chaos_wait_on_a_broker_that_is_starting(tmp_path: Path) -> None:
    admin_port = free_port()
    command = group_broker("chaos", "wait", "nobody-joins", "--timeout-ms", "500", "--admin",
                           f"http://127.0.0.1:{admin_port}")
    with late_broker(tmp_path / "broker.log", "--admin-port", str(admin_port)):
        _, err = command.communicate(timeout=60)
    # It reached the broker: the group's absence is what it reports, not the refused connection.
    assert command.returncode == 1
    assert "no such group: 'nobody-joins'" in err and "cannot reach" not in err, err


def test_no_wait_fails_at_once_and_the_grace_ends_with_the_usual_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = group_broker("groups", "--admin", url, "--wait-for-broker", "0")
    _, err = done.communicate(timeout=30)
    assert done.returncode == 1 and time.monotonic() - started < 5
    assert err.strip() == f"group-broker: cannot reach the control API at {url}: connection refused"
    started = time.monotonic()
    done = group_broker("describe", "g", "--admin", url, env={"GROUP_BROKER_WAIT_FOR_BROKER": "1.5"})
    _, err = done.communicate(timeout=30)
    assert done.returncode == 1 and time.monotonic() - started >= 1.5
    assert err.strip() == f"group-broker: cannot reach the control API at {url}: connection refused"


@pytest.mark.parametrize("value", ["abc", "-1", "inf"])
def test_a_bad_grace_is_a_usage_error(value: str) -> None:
    done = group_broker("groups", "--wait-for-broker", value)
    _, err = done.communicate(timeout=30)
    assert done.returncode == 2
    assert f"--wait-for-broker: {value!r} is not a number of seconds" in err
    done = group_broker("groups", env={"GROUP_BROKER_WAIT_FOR_BROKER": value})
    _, err = done.communicate(timeout=30)
    assert done.returncode == 2
    assert err.strip().startswith(f"group-broker: GROUP_BROKER_WAIT_FOR_BROKER={value!r}: "), err


def test_the_waiting_line_is_printed_once_on_a_terminal() -> None:
    primary, secondary = pty.openpty()
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.Popen(
        [sys.executable, "-m", "broker", "groups", "--admin", url, "--wait-for-broker", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=secondary, cwd=ROOT,
    )
    os.close(secondary)
    output = bytearray()
    try:
        assert done.wait(timeout=30) == 1
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the writer has gone
                break
            if not chunk:
                break
            output.extend(chunk)
    finally:
        os.close(primary)
    text = output.decode()
    assert text.count(f"waiting up to 1 s for the broker at {url} to start…") == 1, text
    assert "cannot reach the control API" in text


def test_with_grace_retries_only_a_refusal() -> None:
    calls: list[int] = []

    def refused_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError
        return "up"

    assert with_grace(refused_twice, target="x", grace_s=5) == "up" and len(calls) == 3
    calls.clear()

    def reset() -> str:
        calls.append(1)
        raise ConnectionResetError

    with pytest.raises(ConnectionResetError):
        with_grace(reset, target="x", grace_s=5)
    assert len(calls) == 1  # not a broker starting: raised at once


def test_the_client_waits_only_until_it_first_got_an_answer(tmp_path: Path) -> None:
    admin_port = free_port()
    api = ControlClient(f"http://127.0.0.1:{admin_port}", grace_s=20)
    with late_broker(tmp_path / "broker.log", "--admin-port", str(admin_port)) as started:
        assert api.groups() == []
    # The broker has stopped: a client that already reached it is told at once.
    begun = time.monotonic()
    with pytest.raises(ControlError) as raised:
        api.groups()
    assert raised.value.refused and time.monotonic() - begun < 2
    assert "broker" in started


def test_discovery_waits_for_the_kafka_port(tmp_path: Path) -> None:
    kafka_port = free_port()
    with late_broker(tmp_path / "broker.log", "--port", str(kafka_port)) as started:
        url = discover.control_url(f"127.0.0.1:{kafka_port}", grace_s=20)
        # Discovery may answer before start_broker (in the other thread) has returned and recorded the broker.
        deadline = time.monotonic() + 30
        while "broker" not in started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert url == started["broker"].admin_url
    with pytest.raises(discover.DiscoveryError) as raised:
        discover.control_url(f"127.0.0.1:{kafka_port}", grace_s=0)
    assert raised.value.refused
