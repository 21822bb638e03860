"""TLS on SSL and SASL_SSL listeners (docs/spec/security.md 8): the server context every TLS listener of every
node shares, and the principal of an SSL connection (Kafka's ``SslFactory`` / ``DefaultSslEngineFactory`` and
``DefaultKafkaPrincipalBuilder``).

The acceptor hands the context to asyncio (``ssl=``), which wraps the transport: the connection reads and writes
plaintext bytes as on a PLAINTEXT listener. Once the handshake is done, ``principal_of`` reads the client's
certificate: ``User:`` + its subject DN as Java's ``X500Principal.getName()`` writes it, passed through
``ssl.principal.mapping.rules``; ``User:ANONYMOUS`` without one.

Imported only when a listener speaks TLS (broker/server/broker.py), and cryptography (certs.py) only when a
certificate is generated or a client presents one.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.security.principal_mapping import PrincipalMapper

if TYPE_CHECKING:
    from cryptography import x509

    from broker.server.settings import TlsConfig

ANONYMOUS = "User:ANONYMOUS"
STATE_DIR_ENV = "GROUP_BROKER_STATE_DIR"
_VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

# The attribute names Java's X500Principal.getName() (RFC 2253) writes as keywords; any other attribute it writes
# as its OID and "#" with the hex of the value's DER encoding (RFC 2253 2.4).
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.6": "C",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}  # fmt: skip


def default_ssl_dir() -> Path:
    """``--ssl-dir``'s default (spec 14.1): ``$GROUP_BROKER_STATE_DIR/tls``, else ``./.group-broker/tls``."""
    state = os.environ.get(STATE_DIR_ENV)
    return Path(state) / "tls" if state else Path(".group-broker") / "tls"


def certificate_hosts(advertised: list[str], extra: tuple[str, ...]) -> list[str]:
    """The names the generated certificate carries (spec 8.3): localhost, this machine's name, the loopback
    addresses, every advertised host of every TLS listener of every node, and ``--ssl-cert-hosts``."""
    return ["localhost", socket.gethostname(), "127.0.0.1", "::1", *advertised, *extra]


@dataclass(frozen=True, slots=True)
class TlsListeners:
    """What every TLS listener of the broker shares: the server context, the CA clients trust (None with a
    certificate of the user's own), and the principal mapping."""

    context: ssl.SSLContext
    ca_file: Path | None
    mapper: PrincipalMapper | None  # None: DEFAULT, the DN as it is
    describe: dict[str, Any]  # for the start-up line

    def announce(self) -> None:
        """Start-up's TLS lines (spec 14.1): the certificate, and where clients find the CA to trust."""
        from broker.log import get_logger

        log = get_logger("server")
        log.info("tls listeners", **self.describe)
        if self.ca_file is not None:
            where = str(self.ca_file)
            log.info(f"CA certificate for clients: {where} (ssl.ca.location / ssl_cafile)", ca_file=where)

    def principal_of(self, ssl_object: ssl.SSLObject | None) -> str:
        """The principal of an SSL connection once its handshake is done (DefaultKafkaPrincipalBuilder for an
        SslAuthenticationContext). ``NoMatchingRule`` (a ValueError) when no mapping rule gives a name."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        from cryptography import x509

        dn = java_dn(x509.load_der_x509_certificate(der).subject)
        return "User:" + (dn if self.mapper is None else self.mapper.name(dn))


def server_context(config: TlsConfig, advertised_hosts: list[str]) -> TlsListeners:
    """The context of the TLS listeners: the user's certificate, or one generated in ``--ssl-dir`` for every
    advertised host; client certificates asked for per ``--ssl-client-auth`` and checked against
    ``--ssl-truststore`` (else the generated CA). An OSError (ssl.SSLError is one) refuses the start."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka 4's ssl.enabled.protocols: TLSv1.2,TLSv1.3
    describe: dict[str, Any] = {"client_auth": config.ssl_client_auth}
    ca_file: Path | None = None
    if config.ssl_cert is not None:
        try:
            context.load_cert_chain(config.ssl_cert, config.ssl_key)
        except OSError as error:  # the one line serve prints names the files, not only errno's words
            raise OSError(
                f"TLS listeners: cannot load --ssl-cert {config.ssl_cert}"
                f"{'' if config.ssl_key is None else f' with --ssl-key {config.ssl_key}'}: {error.strerror or error}"
            ) from error
        describe["certificate"] = config.ssl_cert
    else:
        from broker.security.certs import ensure_server_certificate

        directory = Path(config.ssl_dir) if config.ssl_dir else default_ssl_dir()
        made = ensure_server_certificate(directory, certificate_hosts(advertised_hosts, config.ssl_cert_hosts))
        context.load_cert_chain(made.cert_file, made.key_file)
        ca_file = made.ca_file.absolute()
        describe |= {
            "certificate": str(made.cert_file.absolute()), "names": list(made.names),
            "generated": "ca and server" if made.made_ca else "server" if made.made_server else "no, reused",
        }  # fmt: skip
    context.verify_mode = _VERIFY_MODES[config.ssl_client_auth]
    if config.ssl_client_auth != "none":
        trust = config.ssl_truststore or ca_file
        assert trust is not None  # TlsConfig asks for a truststore beside a certificate of the user's own
        try:
            context.load_verify_locations(cafile=trust)
        except OSError as error:
            raise OSError(f"TLS listeners: cannot load --ssl-truststore {trust}: {error.strerror or error}") from error
        describe["truststore"] = str(trust)
    mapper = None if config.ssl_principal_mapping_rules == "DEFAULT" else PrincipalMapper(
        config.ssl_principal_mapping_rules
    )
    return TlsListeners(context, ca_file, mapper, describe)


def java_dn(name: x509.Name) -> str:
    """``name`` as Java's ``X500Principal.getName()`` (RFC 2253) writes it, which Kafka's principal carries: the
    most specific RDN first (cryptography's ``rfc4514_string`` order), RFC 2253's keywords, and any other
    attribute (emailAddress, say) as ``OID=#hex`` of its DER value, where rfc4514_string would write the text."""
    rdns = []
    for rdn in reversed(name.rdns):
        rdns.append("+".join(_attribute(attribute) for attribute in rdn))
    return ",".join(rdns)


def _attribute(attribute: x509.NameAttribute[Any]) -> str:
    oid = attribute.oid.dotted_string
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is not None:
        return f"{keyword}={attribute.rfc4514_string().partition('=')[2]}"
    value = attribute.value
    raw = value if isinstance(value, bytes) else value.encode("utf-16-be" if attribute._type.value == 30 else "utf-8")
    return f"{oid}=#{_der_header(attribute._type.value, len(raw)).hex()}{raw.hex()}"


def _der_header(tag: int, length: int) -> bytes:
    if length < 0x80:
        return bytes((tag, length))
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(size))) + size


def handshake_failure(error: BaseException) -> str:
    """Why a TLS handshake failed, in words a user can act on (spec 8.4 item 5: a plaintext client on a TLS port
    is closed, never answered)."""
    text = str(error) or type(error).__name__
    if isinstance(error, TimeoutError):
        return f"no TLS handshake within the timeout: {text}"
    if isinstance(error, ConnectionResetError) or "EOF" in text:
        return (
            "the client closed the connection during the TLS handshake (a port probe, or a client refusing the "
            f"broker's certificate: does it trust ca.pem? is the host it dialled in the certificate?): {text}"
        )
    reason = getattr(error, "reason", None)
    if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNEXPECTED_MESSAGE", "UNKNOWN_PROTOCOL") or (
        isinstance(reason, str) and "RECORD" in reason
    ):
        return f"the client does not speak TLS (a PLAINTEXT client on an SSL listener?): {text}"
    if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED"):
        return f"the client certificate was missing or not trusted (--ssl-client-auth, --ssl-truststore): {text}"
    if reason in ("TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_CERTIFICATE_UNKNOWN"):
        return f"the client refused the broker's certificate (does it trust ca.pem? is its host in the SANs?): {text}"
    return text
