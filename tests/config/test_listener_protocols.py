"""Listener security protocols from the name or ``listener.security.protocol.map`` (docs/spec/security.md 1, 14.1,
14.6 item 1), and the TLS settings' checks, refused before anything binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import settings
from broker.config.settings import Endpoint, SettingsError


def test_the_map_gives_each_listener_its_protocol_case_blind() -> None:
    config = settings.parse(
        ["--listeners", "internal://:9092,EXTERNAL://:9093,SSL://:9094,Plain://:9095",
         "--listener-security-protocol-map", "INTERNAL:plaintext,external:SSL"],
        environ={},
    )
    assert [config.security_protocol(e) for e in config.bind_endpoints()] == ["PLAINTEXT", "SSL", "SSL", "PLAINTEXT"]
    assert [e.name for e in config.unmapped_listeners()] == ["Plain"]  # served as PLAINTEXT, with a warning


def test_compose_names_without_a_map_stay_plaintext_with_a_warning_to_come() -> None:
    config = settings.parse(["--listeners", "INTERNAL://:9092,EXTERNAL://:9093"], environ={})
    assert [config.security_protocol(e) for e in config.bind_endpoints()] == ["PLAINTEXT", "PLAINTEXT"]
    assert [e.name for e in config.unmapped_listeners()] == ["INTERNAL", "EXTERNAL"]


def test_the_map_from_toml_as_a_table_and_from_the_variable(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('listeners = ["EXTERNAL://:9093"]\n[listener.security.protocol]\nmap = {EXTERNAL = "SSL"}\n')
    config = settings.parse(["--config", str(toml)], environ={})
    assert config.listener_security_protocol_map == (("EXTERNAL", "SSL"),)
    config = settings.parse(
        ["--listeners", "EXTERNAL://:9093"], environ={"GROUP_BROKER_LISTENER_SECURITY_PROTOCOL_MAP": "EXTERNAL:SSL"}
    )
    assert config.security_protocol(config.bind_endpoints()[0]) == "SSL"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("EXTERNAL", "'EXTERNAL' is not LISTENER_NAME:SECURITY_PROTOCOL"),
        ("EXTERNAL:TLS", "'EXTERNAL:TLS': TLS is not a security protocol"),
        ("A:SSL,a:PLAINTEXT", "listener name a appears twice"),
    ],
)
def test_a_bad_map_refuses_the_start(value: str, message: str) -> None:
    with pytest.raises(SystemExit):
        settings.parse(["--listener-security-protocol-map", value], environ={})
    with pytest.raises(SettingsError, match=message):
        settings.parse([], environ={"GROUP_BROKER_LISTENER_SECURITY_PROTOCOL_MAP": value})


def test_a_map_to_a_sasl_protocol_serves_it_on_the_mapped_listener() -> None:
    """Every protocol is served since the SASL and TLS merge: the map's SASL_PLAINTEXT and SASL_SSL are the
    listener's protocol (the SASL login, and TLS under it for SASL_SSL), as Kafka's listener.security.protocol.map."""
    config = settings.parse(
        ["--listeners", "EXTERNAL://:9093,INTERNAL://:9094",
         "--listener-security-protocol-map", "EXTERNAL:SASL_PLAINTEXT,INTERNAL:SASL_SSL"],
        environ={},
    )  # fmt: skip
    assert [config.security_protocol(e) for e in config.bind_endpoints()] == ["SASL_PLAINTEXT", "SASL_SSL"]
    assert config.unmapped_listeners() == []


def test_tls_advertised_hosts_are_every_nodes_advertised_host_of_every_tls_listener() -> None:
    config = settings.parse(
        ["--listeners", "SSL://10.0.0.5:9093,PLAINTEXT://:9092,EXTERNAL://:9094", "--nodes", "2",
         "--listener-security-protocol-map", "EXTERNAL:SSL",
         "--advertised-listeners", "EXTERNAL://broker:9094",
         "--node-advertised-listeners", "2=EXTERNAL://broker-2:39094"],
        environ={},
    )
    assert config.tls_advertised_hosts() == ["10.0.0.5", "broker", "broker-2"]
    assert Endpoint("SSL", "", 1).security_protocol == "SSL"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ssl-client-auth", "sometimes"], None),
        (["--ssl-key", "k.pem"], "is the key of --ssl-cert"),
        (["--ssl-cert", "c.pem", "--ssl-client-auth", "required"], "--ssl-truststore must name the CA"),
        (["--ssl-principal-mapping-rules", "RULE:^CN=(.*)$/$1/X"], "Invalid rule: `RULE:.*unmatched substring: `X`"),
        (["--ssl-principal-mapping-rules", "RULE:^CN=((.*$/$1/"], "Invalid rule: RULE:"),
    ],
)
def test_tls_settings_that_cannot_work_refuse_the_start(flags: list[str], message: str | None) -> None:
    if message is None:
        with pytest.raises(SystemExit):
            settings.parse(flags, environ={})
        return
    with pytest.raises(SettingsError, match=message):
        settings.parse(flags, environ={})


def test_serve_with_a_certificate_it_cannot_read_says_so_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--listeners", "SSL://127.0.0.1:0", "--admin-port", "-1",
         "--ssl-cert", str(tmp_path / "missing.pem")],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"group-broker: TLS listeners: cannot load --ssl-cert {tmp_path / 'missing.pem'}: No such file or directory"
    ]
