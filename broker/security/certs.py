"""The CA and server certificate a TLS listener presents when none is configured (docs/spec/security.md 8.3).

Made with ``cryptography`` once per directory and reused on the next start: ``ca.pem`` (what clients trust:
``ssl.ca.location``, ``ssl_cafile``), ``ca-key.pem`` (mode 0600, to sign client certificates for mTLS tests),
``server.pem`` (the leaf, then the CA: the chain the listener serves) and ``server-key.pem``. The server
certificate is made again when its names change (another advertised host), when the CA is not its issuer any more,
or when it is about to expire. Extensions are those Python 3.13's ``VERIFY_X509_STRICT`` asks for: a critical
basicConstraints on the CA, key identifiers on both, subjectAltName (never a CN-only certificate: every client
checks the host name against the SANs, and an IP address only against an IP SAN, spec 8.4 items 1-3).

Imported only when a listener speaks TLS: cryptography's import costs tens of milliseconds that a plaintext
``serve`` does not pay (tests/cli/test_serve_imports.py).
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"
SERVER_FILE = "server.pem"
SERVER_KEY_FILE = "server-key.pem"

_CA_NAME = "group-broker test CA"
_VALIDITY = datetime.timedelta(days=365)
_BACKDATE = datetime.timedelta(hours=1)  # clients whose clock is a little behind still accept it
_RENEW_BEFORE = datetime.timedelta(days=7)  # a certificate closer than this to its end is made again

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    """What a TLS listener loads, and what start-up says about it."""

    ca_file: Path
    cert_file: Path  # leaf + CA
    key_file: Path
    made_ca: bool
    made_server: bool
    names: tuple[str, ...]  # the subjectAltName entries, DNS names then IP addresses


def ensure_server_certificate(directory: Path, hosts: list[str]) -> ServerCertificate:
    """The CA of ``directory`` (made if absent or expiring) and a server certificate for ``hosts`` signed by it
    (made if absent, for other names, by another CA, or expiring)."""
    directory.mkdir(parents=True, exist_ok=True)
    # Two brokers starting at once on one directory (the default one, say) would otherwise each make a CA, and the
    # files left could be one's CA beside the other's certificate: the second waits for the first and reuses its.
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure(directory, hosts)


def _ensure(directory: Path, hosts: list[str]) -> ServerCertificate:
    now = datetime.datetime.now(datetime.UTC)
    ca, ca_key, made_ca = _ca(directory, now)
    dns, ips = _split_hosts(hosts)
    server_file, key_file = directory / SERVER_FILE, directory / SERVER_KEY_FILE
    made_server = made_ca or not _reusable(server_file, key_file, ca, dns, ips, now)
    if made_server:
        key = ec.generate_private_key(ec.SECP256R1())
        san = x509.SubjectAlternativeName(
            [*(x509.DNSName(name) for name in dns), *(x509.IPAddress(ip) for ip in ips)]
        )
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns[0] if dns else str(ips[0]))])
        builder = (
            _signed_by(ca, ca_key, subject, key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(san, critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(_key_usage(digital_signature=True), critical=True)
        )
        leaf = builder.sign(ca_key, hashes.SHA256())
        _write(key_file, _key_pem(key), private=True)
        _write(server_file, _cert_pem(leaf) + _cert_pem(ca))
    return ServerCertificate(
        directory / CA_FILE, server_file, key_file, made_ca, made_server,
        (*dns, *(str(ip) for ip in ips)),
    )  # fmt: skip


def sign_client_certificate(directory: Path, subject: x509.Name, out: Path) -> tuple[Path, Path]:
    """A client certificate for ``subject`` signed by the CA of ``directory`` (extendedKeyUsage clientAuth), for
    mTLS tests: ``out``/client.pem and client-key.pem."""
    now = datetime.datetime.now(datetime.UTC)
    ca, ca_key, _ = _ca(directory, now)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _signed_by(ca, ca_key, subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    out.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = out / "client.pem", out / "client-key.pem"
    _write(key_file, _key_pem(key), private=True)
    _write(cert_file, _cert_pem(cert))
    return cert_file, key_file


def _ca(directory: Path, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, bool]:
    ca_file, key_file = directory / CA_FILE, directory / CA_KEY_FILE
    try:
        ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey) and _valid(ca, now) and ca.public_key() == key.public_key():
            return ca, key, False
    except (OSError, ValueError):  # absent or unreadable: a new one
        pass
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _CA_NAME)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_file, _key_pem(key), private=True)
    _write(ca_file, _cert_pem(ca))
    return ca, key, True


def _signed_by(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, subject: x509.Name, public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + _VALIDITY, ca.not_valid_after_utc))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )


def _reusable(
    cert_file: Path, key_file: Path, ca: x509.Certificate, dns: list[str], ips: list[IpAddress],
    now: datetime.datetime,
) -> bool:
    try:
        leaf = x509.load_pem_x509_certificates(cert_file.read_bytes())[0]
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        leaf.verify_directly_issued_by(ca)
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, IndexError, x509.ExtensionNotFound, InvalidSignature):
        return False
    same_names = (
        sorted(names.get_values_for_type(x509.DNSName)) == sorted(dns)
        and sorted(map(str, names.get_values_for_type(x509.IPAddress))) == sorted(map(str, ips))
    )
    return same_names and _valid(leaf, now) and bool(leaf.public_key() == key.public_key())


def _valid(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now and now + _RENEW_BEFORE < cert.not_valid_after_utc


def _split_hosts(hosts: list[str]) -> tuple[list[str], list[IpAddress]]:
    """DNS names and IP addresses, each once, in the order given (an IP literal needs an IP SAN: spec 8.4 item 2)."""
    dns: list[str] = []
    ips: list[IpAddress] = []
    for host in hosts:
        host = host.strip().strip("[]")
        if not host:
            continue
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            if host.lower() not in dns:
                dns.append(host.lower())
            continue
        if ip not in ips:
            ips.append(ip)
    return dns, ips


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=key_cert_sign, crl_sign=crl_sign,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _cert_pem(cert: x509.Certificate) -> bytes:
    return bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _write(path: Path, content: bytes, *, private: bool = False) -> None:
    """Written beside and renamed into place, so a reader never sees half a file; keys readable by the owner only."""
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    os.replace(partial, path)
