"""``serve``'s flag and setting errors, through the command line (issue 26, item 8): each names the flag (or the
variable, or the TOML key) as typed, the value and what is allowed; a near miss gets "did you mean"; a port clash
between the Kafka and the control port is refused before anything binds. One line, exit 2, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port


def serve(*flags: str, env: dict[str, str] | None = None) -> str:
    """``group-broker serve FLAGS``, which must refuse to start: its one error line."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUP_BROKER_")}
    done = subprocess.run(
        [sys.executable, "-m", "broker", "serve", *flags], cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={**clean, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--port", "abc"], "argument --port: expected an integer from 0 to 65535, got 'abc'"),
        (["--port", "70000"], "argument --port: expected an integer from 0 to 65535, got '70000'"),
        (["--admin-port", "-2"], "argument --admin-port: expected an integer from -1 to 65535, got '-2'"),
        (["--node-id", "one"], "argument --node-id: expected an integer, got 'one'"),
        (["--topic", "orders:0"], "argument --topic: bad topic spec orders:0: partitions must be >= 1, got 0"),
        (["--topic", "orders:six"], "argument --topic: bad topic spec orders:six: partitions 'six' is not an integer"),
        (["--log-format", "jsn"], "argument --log-format: expected one of auto, console, json, got 'jsn' "
                                  "(did you mean 'json'?)"),
        (["--prot", "9092"], "unrecognized arguments: --prot 9092 (did you mean --port?)"),
        (["--group-max-size", "0"], "--group-max-size (0) must be at least 1"),
        (["--group-min-session-timeout-ms", "10", "--group-max-session-timeout-ms", "5"],
         "--group-min-session-timeout-ms (10) exceeds --group-max-session-timeout-ms (5)"),
    ],
)
def test_a_bad_flag_names_the_flag_the_value_and_what_is_allowed(flags: list[str], line: str) -> None:
    got = serve(*flags)
    assert line in got, got
    assert "invalid literal" not in got


def test_a_bad_variable_or_toml_key_is_named_as_written(tmp_path: Path) -> None:
    assert serve(env={"GROUP_BROKER_PORT": "abc"}).endswith(
        "GROUP_BROKER_PORT='abc': expected an integer from 0 to 65535, got 'abc'"
    )
    line = serve(env={"GROUP_BROKER_GROUP_MAX_SIZE": "0"})
    assert line.endswith("GROUP_BROKER_GROUP_MAX_SIZE (0) must be at least 1")
    config = tmp_path / "broker.toml"
    config.write_text('"group.max.size" = 0\n')
    assert serve("--config", str(config)).endswith(f"group.max.size in {config} (0) must be at least 1")


def test_the_kafka_and_control_ports_cannot_be_one_port() -> None:
    port = free_port()
    line = serve("--port", str(port), "--admin-port", str(port))
    assert line.endswith(
        f"--port and --admin-port are both {port}: the Kafka listener and the control API need a port each"
    )
    # Refused before anything bound: the port is still free.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
    line = serve("--listeners", f"PLAINTEXT://127.0.0.1:{port}", env={"GROUP_BROKER_ADMIN_PORT": str(port)})
    assert line.endswith(f"--listeners and GROUP_BROKER_ADMIN_PORT are both {port}: "
                         "the Kafka listener and the control API need a port each")


def test_a_near_miss_command_or_choice_gets_did_you_mean() -> None:
    done = subprocess.run([sys.executable, "-m", "broker", "grups"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and done.stderr.rstrip().endswith("(did you mean 'groups'?)"), done.stderr
    done = subprocess.run([sys.executable, "-m", "broker", "groups", "--type", "clasic"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.rstrip().endswith("(did you mean 'classic'?)"), done.stderr
