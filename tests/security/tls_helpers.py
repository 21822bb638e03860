"""What the TLS tests share: an in-process broker with TLS listeners, client contexts, client certificates."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from broker.config.settings import Endpoint
from broker.security.certs import sign_client_certificate
from broker.server.broker import BrokerServer
from broker.server.connection import Connection
from broker.server.settings import TlsConfig
from protocol.apis import ApiKey
from protocol.codec import build
from tests.conftest import broker_settings
from tests.wire.client import WireClient, request_schema


async def tls_broker(tmp_path: Path, *, listeners: str = "SSL", **tls: Any) -> BrokerServer:
    """A started broker with one listener per comma-separated name (ports chosen by the kernel)."""
    endpoints = tuple(Endpoint(name, "127.0.0.1", 0) for name in listeners.split(","))
    extra = {key: tls.pop(key) for key in ("advertised_listeners", "listener_security_protocol_map", "cluster")
             if key in tls}
    settings = broker_settings(listeners=endpoints, tls=TlsConfig(ssl_dir=str(tmp_path / "tls"), **tls), **extra)
    server = BrokerServer(settings)
    await server.start()
    return server


def client_context(
    cafile: Path | None, *, strict: bool = True, cert: tuple[Path, Path] | None = None,
    maximum: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    """What a Python client builds: hostname checks on, the CA given, Python 3.13's strict X.509 checks too."""
    context = ssl.create_default_context(cafile=None if cafile is None else str(cafile))
    if strict:
        context.verify_flags |= ssl.VERIFY_X509_STRICT
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    if maximum is not None:
        context.maximum_version = maximum
    return context


async def tls_client(port: int, context: ssl.SSLContext, server_hostname: str = "localhost") -> WireClient:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_hostname
    )
    return WireClient(reader, writer, "tls-test")


async def api_versions(client: WireClient) -> int:
    answer = await client.call(
        build(request_schema(ApiKey.API_VERSIONS, 3), client_software_name="t", client_software_version="1")
    )
    return int(answer.error_code)


def client_certificate(tls_dir: Path, out: Path, **names: str) -> tuple[Path, Path]:
    """A client certificate signed by the broker's generated CA, subject in ASN.1 order (C, O, OU, CN...)."""
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME, "EMAIL": NameOID.EMAIL_ADDRESS}
    subject = x509.Name([x509.NameAttribute(oids[key], value) for key, value in names.items()])
    return sign_client_certificate(tls_dir, subject, out)


def principals(server: BrokerServer) -> list[str]:
    """The principal of each open connection of the broker (what handlers see as ``call.client.principal``)."""
    return sorted(c.pipeline.principal for c in server.connections if isinstance(c, Connection))
