"""Every security protocol Kafka names is served (issue 30: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL); what is
refused is a protocol Kafka does not know (issue 25 item 7): ``listener.security.protocol.map`` naming one stops
the start with one line on stderr and exit 2, before anything binds, whether the map comes from the flag, the
variable or the TOML file. A listener named after no security protocol (INTERNAL, EXTERNAL) and absent from the
map is a plaintext one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config import settings
from broker.config.settings import Endpoint, Settings
from broker.server.settings import SECURITY_PROTOCOLS, SERVED_SECURITY_PROTOCOLS, parse_protocol_map
from protocol.apis import ApiKey
from protocol.codec import build
from tests.conftest import ROOT, free_port, start_broker_process
from tests.wire.client import WireClient, request_schema


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
    )  # fmt: skip


def test_every_security_protocol_kafka_names_is_served() -> None:
    assert SERVED_SECURITY_PROTOCOLS == SECURITY_PROTOCOLS == ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    for protocol in SECURITY_PROTOCOLS:
        listeners = (Endpoint(protocol, "", 9092),)
        assert [e.security_protocol for e in Settings(listeners=listeners).bind_endpoints()] == [protocol]
        mapped = settings.parse(
            ["--listeners", "INTERNAL://:9092", "--listener-security-protocol-map", f"internal:{protocol.lower()}"],
            environ={},
        )  # case-blind, as Kafka's ListenerName.normalised and SecurityProtocol.forName read them
        assert [mapped.security_protocol(e) for e in mapped.bind_endpoints()] == [protocol]


@pytest.mark.parametrize("source", ["flag", "variable", "toml"])
def test_an_unknown_protocol_in_the_map_stops_serve_with_one_line_and_exit_2(
    source: str, held_ports: tuple[int, int], tmp_path: Path
) -> None:
    kafka_port, admin_port = held_ports
    free = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{free},INTERNAL://127.0.0.1:{kafka_port}"
    common = ["--admin-host", "127.0.0.1", "--admin-port", str(admin_port)]
    if source == "flag":
        result = serve("--listeners", listeners, "--listener-security-protocol-map", "INTERNAL:KERBEROS", *common)
    elif source == "variable":
        env = {"GROUP_BROKER_LISTENERS": listeners, "GROUP_BROKER_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:KERBEROS"}
        result = serve(*common, env=env)
    else:
        config = tmp_path / "broker.toml"
        config.write_text(
            f'listeners = ["PLAINTEXT://127.0.0.1:{free}", "INTERNAL://127.0.0.1:{kafka_port}"]\n'
            '[listener_security_protocol_map]\nINTERNAL = "KERBEROS"\n'
        )
        result = serve("--config", str(config), *common)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "KERBEROS is not a security protocol" in errors[0], result.stderr
    assert result.stdout == ""
    with socket.socket() as probe:  # the PLAINTEXT listener before it was never bound either: its port is free
        probe.bind(("127.0.0.1", free))


def test_the_refusal_is_a_settings_error_for_every_caller() -> None:
    """The embedded broker and the pytest plugin build Settings too: none of them serves an unknown protocol."""
    with pytest.raises(ValueError, match="KERBEROS is not a security protocol"):
        parse_protocol_map("INTERNAL:KERBEROS")
    with pytest.raises(ValueError, match="security protocol KERBEROS is not served by this broker"):
        Settings(
            listeners=(Endpoint("INTERNAL", "", 9092),), listener_security_protocol_map=(("INTERNAL", "KERBEROS"),)
        )
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
