"""The bundled chaos consumer (``python -m broker.chaos.consumer``) after an error it cannot recover from: it logs
the error and exits 3, instead of living on without consuming (issue 18).

Real processes against a real broker: a static member fenced through the control API gets FENCED_INSTANCE_ID on
its next Heartbeat (docs/spec/group-coordinator.md), fatal for librdkafka and for kafka-python (which only logs
it); a KIP-848 member that joins with an instance id another active member holds gets UNRELEASED_INSTANCE_ID,
fatal for the client (docs/spec/consumer-groups.md sections 4.16 and 12.5).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.chaos.consumer import FATAL_EXIT
from tests.cli.test_control_cli import TOPIC, Broker, start_broker
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("fenced") / "broker.log")
    yield started
    started.stop()


def consumer(
    broker: Broker, tmp_path: Path, client: str, group: str, name: str, *extra: str
) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            [
                sys.executable, "-m", "broker.chaos.consumer", "--client", client, "--bootstrap", broker.bootstrap,
                "--group", group, "--topic", TOPIC, "--client-id", name, "--out", str(tmp_path / f"{name}.records"),
                "--instance-id", f"{group}-static", *extra,
            ],
            stderr=log, cwd=ROOT,
        )  # fmt: skip


def exit_code(process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"still running {timeout} s after the fatal error:\n{log.read_text()[-3000:]}")


def stop(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_fenced_static_member_logs_the_error_and_exits(broker: Broker, tmp_path: Path, client: str) -> None:
    group = f"fenced-{client}"
    process = consumer(broker, tmp_path, client, group, "c1", "--session-timeout-ms", "6000",
                       "--heartbeat-interval-ms", "500")  # fmt: skip
    try:
        api = broker.api()
        api.wait(group, state="Stable", members=1, timeout_ms=30000)
        api.fence(group, f"{group}-static")
        started = time.monotonic()
        log = tmp_path / "c1.log"
        assert exit_code(process, log) == FATAL_EXIT, log.read_text()
        assert time.monotonic() - started < 10  # its next heartbeat, not a session timeout
        fatal = [line for line in log.read_text().splitlines() if f"fatal error, exiting {FATAL_EXIT}" in line]
        assert fatal and "fenced" in fatal[0].lower(), log.read_text()
    finally:
        stop(process)


def test_a_consumer_group_member_refused_its_instance_id_exits(broker: Broker, tmp_path: Path) -> None:
    group = "fenced-kip848"
    first = consumer(broker, tmp_path, "confluent", group, "c1", "--group-protocol", "consumer")
    second: subprocess.Popen[bytes] | None = None
    try:
        broker.api().wait(group, state="Stable", members=1, timeout_ms=30000)
        second = consumer(broker, tmp_path, "confluent", group, "c2", "--group-protocol", "consumer")
        log = tmp_path / "c2.log"
        assert exit_code(second, log) == FATAL_EXIT, log.read_text()
        fatal = [line for line in log.read_text().splitlines() if f"fatal error, exiting {FATAL_EXIT}" in line]
        assert fatal and "instance" in fatal[0].lower(), log.read_text()
        assert first.poll() is None  # the member that holds the instance id consumes on
    finally:
        stop(first, *([second] if second is not None else []))
