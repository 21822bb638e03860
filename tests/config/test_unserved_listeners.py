"""A listener whose security protocol the broker cannot speak refuses the start (issue 25 item 7): one line on
stderr naming the listener and the protocol, exit 2, before anything binds, whether the listener comes from the
flag, the variable or the TOML file. PLAINTEXT and SASL_PLAINTEXT are served (issue 30; SSL and SASL_SSL come with
TLS); a listener named after
no security protocol (INTERNAL, EXTERNAL) is a label on a plaintext listener, as ``listener.security.protocol.map``
would map it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config import settings
from broker.config.settings import Endpoint, Settings, SettingsError
from protocol.apis import ApiKey
from protocol.codec import build
from tests.conftest import ROOT, free_port, start_broker_process
from tests.wire.client import WireClient, request_schema

UNSERVED = ("SSL", "SASL_SSL")


def refusal(protocol: str, listener: str) -> str:
    return (
        f"group-broker serve: error: listener {listener}: security protocol {protocol} is not served by this broker "
        "(only PLAINTEXT, SASL_PLAINTEXT)"
    )


@pytest.fixture
def held_ports() -> Iterator[tuple[int, int]]:
    """Two ports this test listens on (a Kafka listener's and the control API's): a broker that bound either
    before refusing would fail with "address in use" instead of the refusal."""
    holders = []
    for _ in range(2):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        holders.append(holder)
    yield holders[0].getsockname()[1], holders[1].getsockname()[1]
    for holder in holders:
        holder.close()


def serve(*flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "serve", *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})},
    )


def assert_refused(result: subprocess.CompletedProcess[str], protocol: str, listener: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [refusal(protocol, listener)]
    assert result.stdout == ""


@pytest.mark.parametrize("protocol", UNSERVED)
@pytest.mark.parametrize("source", ["flag", "variable", "toml"])
def test_an_unserved_listener_stops_serve_with_one_line_and_exit_2(
    protocol: str, source: str, held_ports: tuple[int, int], tmp_path: Path
) -> None:
    kafka_port, admin_port = held_ports
    free = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{free},{protocol}://127.0.0.1:{kafka_port}"
    common = ["--admin-host", "127.0.0.1", "--admin-port", str(admin_port)]
    if source == "flag":
        result = serve("--listeners", listeners, *common)
    elif source == "variable":
        result = serve(*common, env={"GROUP_BROKER_LISTENERS": listeners})
    else:
        config = tmp_path / "broker.toml"
        config.write_text(f'listeners = ["PLAINTEXT://127.0.0.1:{free}", "{protocol}://127.0.0.1:{kafka_port}"]\n')
        result = serve("--config", str(config), *common)
    assert_refused(result, protocol, f"{protocol}://127.0.0.1:{kafka_port}")
    with socket.socket() as probe:  # the PLAINTEXT listener before it was never bound either: its port is free
        probe.bind(("127.0.0.1", free))


def test_listener_names_are_read_as_kafka_reads_them_case_blind(held_ports: tuple[int, int]) -> None:
    kafka_port, admin_port = held_ports
    result = serve("--listeners", f"sasl_ssl://:{kafka_port}", "--admin-port", str(admin_port))
    assert_refused(result, "SASL_SSL", f"sasl_ssl://:{kafka_port}")


def test_the_refusal_is_a_settings_error_for_every_caller() -> None:
    """The embedded broker and the pytest plugin build Settings too: none of them serves plaintext for SSL."""
    with pytest.raises(SettingsError, match=r"^listener SSL://:9093: security protocol SSL is not served"):
        settings.parse(["--listeners", "SSL://:9093"], environ={})
    with pytest.raises(ValueError, match="security protocol SASL_SSL is not served by this broker"):
        Settings(listeners=(Endpoint("INTERNAL", "", 9092), Endpoint("SASL_SSL", "", 9093)))
    named = Settings(listeners=(Endpoint("INTERNAL", "", 9092), Endpoint("PLAINTEXT", "", 9093)))
    assert [e.security_protocol for e in named.bind_endpoints()] == ["PLAINTEXT", "PLAINTEXT"]


async def test_plaintext_and_named_listeners_still_serve(tmp_path: Path) -> None:
    plain, named = free_port(), free_port()
    broker = start_broker_process(
        tmp_path, "--listeners", f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://127.0.0.1:{named}", listen_port=plain
    )
    try:
        for port in (plain, named):
            client = await WireClient.connect(port)
            try:
                answer = await client.call(build(request_schema(ApiKey.API_VERSIONS, 3), client_software_name="t",
                                                 client_software_version="1"))
                assert answer.error_code == 0
            finally:
                await client.close()
    finally:
        broker.stop()
