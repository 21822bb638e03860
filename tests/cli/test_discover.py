"""The CLI finds the control API from the Kafka address (issue 18, broker/cli/discover.py): ``--bootstrap`` and
``GROUP_BROKER_BOOTSTRAP`` ask the broker (Metadata, then DescribeConfigs for ``group.broker.control.url``), and
say clearly why when they cannot. Real broker processes, the CLI as real subprocesses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cli import discover
from broker.testing.embedded import run_broker
from tests.conftest import ROOT, BrokerProcess, free_port, start_broker_process


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUP_BROKER_")}
    return {**env, **extra}


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        cwd=ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def control_url(broker: BrokerProcess) -> str:
    """The URL of the broker's "control api listening" line (logged once it is up, just after the Kafka port)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in broker.log().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "control api listening":
                return str(json.loads(line)["url"])
        time.sleep(0.05)
    raise AssertionError("no 'control api listening' line")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker on a port of its own with its control API on another (not 9644): only the broker knows which."""
    process = start_broker_process(tmp_path_factory.mktemp("discover"))
    yield process
    process.stop()


def test_groups_and_watch_find_the_control_api_from_the_kafka_port(broker: BrokerProcess) -> None:
    url = control_url(broker)
    assert not url.endswith(":9644")
    groups = cli("groups", "--bootstrap", broker.bootstrap, "--json")
    assert (groups.returncode, json.loads(groups.stdout), groups.stderr) == (0, [], "")
    watch = cli("watch", "--once", "--bootstrap", broker.bootstrap)
    assert watch.returncode == 0, watch.stderr
    assert url in watch.stdout  # watch's header names the API it polls
    from_env = cli("groups", GROUP_BROKER_BOOTSTRAP=broker.bootstrap)
    assert (from_env.returncode, from_env.stdout.strip()) == (0, "no groups")


def test_chaos_commands_reach_the_same_broker(broker: BrokerProcess) -> None:
    added = cli("chaos", "fault", "add", "--api", "Heartbeat", "--close", "--bootstrap", broker.bootstrap, "--json")
    assert added.returncode == 0, added.stderr
    rule_id = json.loads(added.stdout)["id"]
    listed = cli("chaos", "fault", "list", "--json", "--admin", control_url(broker))
    assert rule_id in {rule["id"] for rule in json.loads(listed.stdout)}
    cleared = cli("chaos", "fault", "clear", GROUP_BROKER_BOOTSTRAP=broker.bootstrap)
    assert cleared.returncode == 0, cleared.stderr


def test_admin_wins_over_bootstrap(broker: BrokerProcess) -> None:
    elsewhere = f"http://127.0.0.1:{free_port()}"
    done = cli("groups", "--bootstrap", broker.bootstrap, "--admin", elsewhere, "--wait-for-broker", "0")
    assert done.returncode == 1
    assert elsewhere in done.stderr
    # The URL variable wins over the bootstrap variable; the --bootstrap flag over both variables.
    done = cli("groups", GROUP_BROKER_ADMIN_URL=elsewhere, GROUP_BROKER_BOOTSTRAP=broker.bootstrap,
               GROUP_BROKER_WAIT_FOR_BROKER="0")
    assert (done.returncode, elsewhere in done.stderr) == (1, True)
    done = cli("groups", "--bootstrap", broker.bootstrap, GROUP_BROKER_ADMIN_URL=elsewhere)
    assert (done.returncode, done.stdout.strip()) == (0, "no groups")


def test_nothing_listening_and_not_kafka_are_told_apart(broker: BrokerProcess) -> None:
    port = free_port()
    done = cli("groups", "--bootstrap", f"127.0.0.1:{port}", "--wait-for-broker", "0")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == (
        f"group-broker: nothing listens at 127.0.0.1:{port} (is the broker running, on that port?)"
    )
    http = control_url(broker).removeprefix("http://")
    done = cli("watch", "--once", "--bootstrap", http)
    assert done.returncode == 1
    assert done.stderr.startswith(f"group-broker: {http} did not answer as a Kafka broker")
    assert "--admin URL" in done.stderr
    done = cli("groups", "--bootstrap", "no-port")
    assert (done.returncode, done.stderr.strip()) == (2, "group-broker: --bootstrap 'no-port' is not HOST:PORT")


def test_a_kafka_broker_without_the_config_is_not_a_group_broker() -> None:
    with run_broker() as embedded:
        assert discover.control_url(embedded.bootstrap) == embedded.admin_url

        def as_plain_kafka() -> None:
            assert embedded.server is not None
            for listener in embedded.server.listeners:
                listener.api.settings = None  # DescribeConfigs then lists Kafka's names only

        embedded.call(as_plain_kafka)
        with pytest.raises(discover.DiscoveryError) as refused:
            discover.control_url(embedded.bootstrap)
        assert str(refused.value) == (
            f"{embedded.bootstrap} is a Kafka broker but not a group-broker (no group.broker.control.url in its "
            "configs): pass --admin URL"
        )
        done = cli("groups", "--bootstrap", embedded.bootstrap)
        assert (done.returncode, done.stderr.strip()) == (1, f"group-broker: {refused.value}")


def test_a_broker_without_its_control_api_says_so(tmp_path: Path) -> None:
    off = start_broker_process(tmp_path, "--admin-port", "-1")
    try:
        done = cli("groups", "--bootstrap", off.bootstrap)
    finally:
        off.stop()
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"group-broker: the group-broker at {off.bootstrap} runs without its control API (--admin-port -1)"
    )


def test_the_first_answering_address_of_a_list_wins_and_chaos_run_uses_its_bootstrap(broker: BrokerProcess) -> None:
    url = control_url(broker)
    assert discover.control_url(f"127.0.0.1:{free_port()},{broker.bootstrap}") == url
    run = argparse.Namespace(_handler="run", bootstrap=broker.bootstrap, admin=None)
    discover.settle_admin(run)
    assert run.admin == url
    own = argparse.Namespace(_handler="run", bootstrap=None, admin=None)  # the runner starts its own broker
    discover.settle_admin(own)
    assert own.admin is None
