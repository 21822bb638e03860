"""The generated CA and server certificate (docs/spec/security.md 8.3): the extensions strict verifiers ask for,
IP addresses as IP SANs, and the default directory (spec 14.1)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from broker.security.certs import ensure_server_certificate
from broker.security.tls import certificate_hosts, default_ssl_dir


def test_the_ca_and_leaf_carry_what_python_3_13_strict_verification_asks_for(tmp_path: Path) -> None:
    made = ensure_server_certificate(tmp_path, ["localhost", "Broker", "10.0.0.5", "[::1]", "broker"])
    assert made.names == ("localhost", "broker", "10.0.0.5", "::1")  # each once, IPs as IP SANs
    ca = x509.load_pem_x509_certificate(made.ca_file.read_bytes())
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign
    ca_key_id = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    leaf, chained_ca = x509.load_pem_x509_certificates(made.cert_file.read_bytes())
    assert chained_ca == ca  # the chain served: leaf, then the CA
    assert leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == ca_key_id
    assert leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.SERVER_AUTH]
    )
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.5"), ipaddress.ip_address("::1")]
    assert leaf.not_valid_before_utc < ca.not_valid_after_utc and leaf.not_valid_after_utc <= ca.not_valid_after_utc


def test_the_default_directory_follows_the_state_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUP_BROKER_STATE_DIR", raising=False)
    assert default_ssl_dir() == Path(".group-broker") / "tls"
    monkeypatch.setenv("GROUP_BROKER_STATE_DIR", "/var/lib/broker")
    assert default_ssl_dir() == Path("/var/lib/broker/tls")


def test_the_certificate_names_loopback_this_host_and_every_advertised_host() -> None:
    import socket

    hosts = certificate_hosts(["broker", "10.0.0.5"], ("kafka.local",))
    assert hosts == ["localhost", socket.gethostname(), "127.0.0.1", "::1", "broker", "10.0.0.5", "kafka.local"]
