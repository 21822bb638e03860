"""TLS on SSL listeners over real TCP with Python's ssl module (docs/spec/security.md 8, checklist 32-37): the
generated CA and certificate, hostname checks for every advertised host, client certificates and the principal
they give, the handshakes that fail, and the CA reused by the next start."""

from __future__ import annotations

import asyncio
import ssl
import stat
from pathlib import Path

import pytest
import structlog
from cryptography import x509

from broker.config.settings import Endpoint
from broker.server.settings import ClusterConfig
from protocol.apis import ApiKey
from protocol.codec import build
from tests.security.tls_helpers import (
    api_versions,
    client_certificate,
    client_context,
    principals,
    tls_broker,
    tls_client,
)
from tests.wire.client import WireClient, request_schema


async def wait_for(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


async def test_32_generated_certificate_verifies_for_localhost_and_127_0_0_1_under_strict_checks(
    tmp_path: Path,
) -> None:
    server = await tls_broker(tmp_path)
    try:
        ca = tmp_path / "tls" / "ca.pem"
        for name in ("localhost", "127.0.0.1"):
            client = await tls_client(server.port, client_context(ca), server_hostname=name)
            try:
                assert await api_versions(client) == 0
                assert client.writer.get_extra_info("ssl_object").version() == "TLSv1.3"
            finally:
                await client.close()
        # TLS 1.2 too (Kafka 4 enables both).
        client = await tls_client(server.port, client_context(ca, maximum=ssl.TLSVersion.TLSv1_2))
        try:
            assert await api_versions(client) == 0
            assert client.writer.get_extra_info("ssl_object").version() == "TLSv1.2"
        finally:
            await client.close()
    finally:
        await server.stop()
    files = {path.name: path for path in (tmp_path / "tls").iterdir() if path.name != ".lock"}
    assert sorted(files) == ["ca-key.pem", "ca.pem", "server-key.pem", "server.pem"]
    for key in ("ca-key.pem", "server-key.pem"):
        assert stat.S_IMODE(files[key].stat().st_mode) == 0o600
    chain = x509.load_pem_x509_certificates(files["server.pem"].read_bytes())
    assert [c.subject for c in chain[1:]] == [x509.load_pem_x509_certificate(files["ca.pem"].read_bytes()).subject]


async def test_33_without_the_ca_the_handshake_fails_self_signed_certificate_in_chain(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path)
    try:
        with pytest.raises(ssl.SSLCertVerificationError, match="self-signed certificate in certificate chain"):
            await tls_client(server.port, client_context(None))
    finally:
        await server.stop()


async def test_a_wrong_ca_is_refused_and_the_broker_logs_the_peer(tmp_path: Path) -> None:
    other = await tls_broker(tmp_path / "other")
    await other.stop()
    server = await tls_broker(tmp_path)
    try:
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
                await tls_client(server.port, client_context(tmp_path / "other" / "tls" / "ca.pem"))
            # Python's ssl drops the socket without an alert: an info line, with what to check.
            await wait_for(lambda: any(e["event"] == "tls handshake not completed" for e in logs))
        failed = next(e for e in logs if e["event"] == "tls handshake not completed")
        assert failed["peer"].startswith("127.0.0.1:")
        assert "does it trust ca.pem?" in failed["reason"]
    finally:
        await server.stop()


async def test_34_every_advertised_address_of_every_node_verifies(tmp_path: Path) -> None:
    """Two nodes, one SSL listener advertised as ssl.broker.test (node i on port + i): every node's Metadata
    names a host the certificate carries, and each node serves the same certificate."""
    server = await tls_broker(
        tmp_path, listeners="SSL,PLAINTEXT", cluster=ClusterConfig(nodes=2),
        advertised_listeners=(Endpoint("SSL", "ssl.broker.test", 0),), ssl_cert_hosts=("extra.test",),
    )
    try:
        ca = tmp_path / "tls" / "ca.pem"
        ssl_ports = [listener.port for listener in server.listeners if listener.name == "SSL"]
        assert len(ssl_ports) == 2
        client = await tls_client(ssl_ports[0], client_context(ca), server_hostname="ssl.broker.test")
        try:
            metadata = await client.call(build(
                request_schema(ApiKey.METADATA, 12), topics=[], allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ))
        finally:
            await client.close()
        hosts = {(b.host, b.port) for b in metadata.brokers}
        assert hosts == {("ssl.broker.test", port) for port in ssl_ports}
        peer_certs = set()
        for host, port in sorted(hosts):
            for name in (host, "extra.test", "localhost", "::1"):
                client = await tls_client(port, client_context(ca), server_hostname=name)
                try:
                    assert await api_versions(client) == 0
                    peer_certs.add(client.writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
                finally:
                    await client.close()
        assert len(peer_certs) == 1  # every node's listener serves the one certificate
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            await tls_client(ssl_ports[1], client_context(ca), server_hostname="not-in-the-certificate.test")
        # The PLAINTEXT listener beside it stays plaintext.
        plain = next(listener.port for listener in server.listeners if listener.name == "PLAINTEXT")
        client = await WireClient.connect(plain)
        try:
            assert await api_versions(client) == 0
        finally:
            await client.close()
    finally:
        await server.stop()


async def test_restart_reuses_the_ca_and_makes_the_server_certificate_again_when_its_names_change(
    tmp_path: Path,
) -> None:
    tls = tmp_path / "tls"
    seen: list[tuple[bytes, bytes]] = []  # (ca.pem, server.pem) after each start
    for hosts in ((), (), ("kafka.test",)):
        server = await tls_broker(tmp_path, ssl_cert_hosts=hosts)
        await server.stop()
        seen.append(((tls / "ca.pem").read_bytes(), (tls / "server.pem").read_bytes()))
    assert seen[0] == seen[1]  # the same names: both files reused
    assert seen[2][0] == seen[0][0]  # another name: the CA reused ...
    assert seen[2][1] != seen[0][1]  # ... and the server certificate made again
    (tls / "first-ca.pem").write_bytes(seen[0][0])
    leaf = x509.load_pem_x509_certificates((tls / "server.pem").read_bytes())[0]
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kafka.test" in names.get_values_for_type(x509.DNSName)
    # The old ca.pem still verifies the new certificate: clients keep their CA across restarts.
    server = await tls_broker(tmp_path, ssl_cert_hosts=("kafka.test",))
    try:
        client = await tls_client(server.port, client_context(tls / "first-ca.pem"), server_hostname="kafka.test")
        try:
            assert await api_versions(client) == 0
        finally:
            await client.close()
    finally:
        await server.stop()


async def test_36_client_auth_required_gives_the_certificate_dn_as_principal(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path, ssl_client_auth="required")
    try:
        ca = tmp_path / "tls" / "ca.pem"
        carol = client_certificate(tmp_path / "tls", tmp_path / "carol", O="test", CN="carol")
        client = await tls_client(server.port, client_context(ca, cert=carol))
        try:
            assert await api_versions(client) == 0
            assert principals(server) == ["User:CN=carol,O=test"]
        finally:
            await client.close()
        # Without a certificate: no connection (TLS 1.3 says so at the first read, after the client's Finished).
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            client = await tls_client(server.port, client_context(ca))
            try:
                await api_versions(client)
            finally:
                await client.close()
    finally:
        await server.stop()


async def test_36_a_mapping_rule_turns_the_dn_into_the_common_name(tmp_path: Path) -> None:
    server = await tls_broker(
        tmp_path, ssl_client_auth="required", ssl_principal_mapping_rules="RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
    )
    try:
        ca = tmp_path / "tls" / "ca.pem"
        carol = client_certificate(tmp_path / "tls", tmp_path / "carol", O="test", CN="carol")
        client = await tls_client(server.port, client_context(ca, cert=carol))
        try:
            assert await api_versions(client) == 0
            assert principals(server) == ["User:carol"]
        finally:
            await client.close()
    finally:
        await server.stop()


async def test_a_subject_no_rule_maps_closes_the_connection(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path, ssl_client_auth="required", ssl_principal_mapping_rules="RULE:^CN=x$/x/")
    try:
        ca = tmp_path / "tls" / "ca.pem"
        carol = client_certificate(tmp_path / "tls", tmp_path / "carol", CN="carol")
        with structlog.testing.capture_logs() as logs:
            client = await tls_client(server.port, client_context(ca, cert=carol))
            try:
                assert await client.closed_by_peer()
            finally:
                await client.close()
        unmapped = next(e for e in logs if e["event"] == "ssl principal not mapped, connection closed")
        assert unmapped["reason"] == "No rules apply to CN=carol, rules RULE:^CN=x$/x/"
    finally:
        await server.stop()


async def test_37_client_auth_requested_without_a_certificate_is_anonymous(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path, ssl_client_auth="requested")
    try:
        ca = tmp_path / "tls" / "ca.pem"
        client = await tls_client(server.port, client_context(ca))
        try:
            assert await api_versions(client) == 0
            assert principals(server) == ["User:ANONYMOUS"]
        finally:
            await client.close()
        dave = client_certificate(tmp_path / "tls", tmp_path / "dave", C="US", O="Acme", OU="eng", CN="dave")
        client = await tls_client(server.port, client_context(ca, cert=dave))
        try:
            assert await api_versions(client) == 0
            assert principals(server) == ["User:CN=dave,OU=eng,O=Acme,C=US"]
        finally:
            await client.close()
    finally:
        await server.stop()


async def test_client_auth_none_ignores_a_certificate_and_a_foreign_ca_is_refused_when_required(
    tmp_path: Path,
) -> None:
    other = await tls_broker(tmp_path / "other")
    await other.stop()
    stranger = client_certificate(tmp_path / "other" / "tls", tmp_path / "stranger", CN="stranger")
    server = await tls_broker(tmp_path)
    try:
        client = await tls_client(server.port, client_context(tmp_path / "tls" / "ca.pem", cert=stranger))
        try:
            assert await api_versions(client) == 0
            assert principals(server) == ["User:ANONYMOUS"]  # ssl.client.auth=none: never asked for
        finally:
            await client.close()
    finally:
        await server.stop()
    server = await tls_broker(tmp_path, ssl_client_auth="required")
    try:
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            client = await tls_client(server.port, client_context(tmp_path / "tls" / "ca.pem", cert=stranger))
            try:
                await api_versions(client)
            finally:
                await client.close()
        assert principals(server) == []
    finally:
        await server.stop()


async def test_a_plaintext_client_on_the_ssl_port_is_closed_with_a_line_naming_it(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path)
    try:
        with structlog.testing.capture_logs() as logs:
            client = await WireClient.connect(server.port)
            try:
                await client.send_raw(client.encode(build(
                    request_schema(ApiKey.API_VERSIONS, 3), client_software_name="t", client_software_version="1"
                )))
                assert await client.closed_by_peer()
                local = client.writer.get_extra_info("sockname")
            finally:
                await client.close()
            await wait_for(lambda: any(e["event"].startswith("tls handshake failed") for e in logs))
        failed = next(e for e in logs if e["event"].startswith("tls handshake failed"))
        assert failed["peer"] == f"{local[0]}:{local[1]}"
        assert failed["listener"] == "SSL"
        assert "does not speak TLS" in failed["reason"]
        assert principals(server) == []
    finally:
        await server.stop()


async def test_a_tls_client_on_a_plaintext_port_is_closed(tmp_path: Path) -> None:
    server = await tls_broker(tmp_path, listeners="SSL,PLAINTEXT")
    try:
        plain = next(listener.port for listener in server.listeners if listener.name == "PLAINTEXT")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await asyncio.wait_for(tls_client(plain, client_context(tmp_path / "tls" / "ca.pem")), 5)
    finally:
        await server.stop()


async def test_a_listener_mapped_to_ssl_speaks_tls_and_the_ca_line_is_logged(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        server = await tls_broker(
            tmp_path, listeners="EXTERNAL,INTERNAL", listener_security_protocol_map=(("EXTERNAL", "SSL"),)
        )
    try:
        external, internal = (listener.port for listener in server.listeners)
        client = await tls_client(external, client_context(tmp_path / "tls" / "ca.pem"))
        try:
            assert await api_versions(client) == 0
        finally:
            await client.close()
        client = await WireClient.connect(internal)
        try:
            assert await api_versions(client) == 0
        finally:
            await client.close()
    finally:
        await server.stop()
    ca = (tmp_path / "tls" / "ca.pem").absolute()
    events = [e["event"] for e in logs]
    assert f"CA certificate for clients: {ca} (ssl.ca.location / ssl_cafile)" in events
    unmapped = [e for e in logs if e["event"] == "listener has no security protocol, served as PLAINTEXT"]
    assert [e["listener"] for e in unmapped] == ["INTERNAL"]
    listening = {e["listener"]: e["security_protocol"] for e in logs if e["event"] == "broker listening"}
    assert listening == {"EXTERNAL": "SSL", "INTERNAL": "PLAINTEXT"}


async def test_a_certificate_of_your_own_is_served_and_a_missing_one_refuses_the_start(tmp_path: Path) -> None:
    from broker.security.certs import ensure_server_certificate

    own = ensure_server_certificate(tmp_path / "own", ["kafka.own.test"])
    server = await tls_broker(tmp_path, ssl_cert=str(own.cert_file), ssl_key=str(own.key_file))
    try:
        client = await tls_client(server.port, client_context(own.ca_file), server_hostname="kafka.own.test")
        try:
            assert await api_versions(client) == 0
        finally:
            await client.close()
        assert not (tmp_path / "tls").exists()  # nothing generated
    finally:
        await server.stop()
    with pytest.raises(OSError, match=r"^TLS listeners: cannot load --ssl-cert /nonexistent.pem: No such file"):
        await tls_broker(tmp_path, ssl_cert="/nonexistent.pem")


def test_brokers_starting_together_on_one_directory_agree_on_one_ca(tmp_path: Path) -> None:
    """The generation is locked: four threads making the files at once leave one CA that signed the one server
    certificate every one of them loaded."""
    from concurrent.futures import ThreadPoolExecutor

    from broker.security.certs import ensure_server_certificate

    with ThreadPoolExecutor(4) as pool:
        made = list(pool.map(lambda _: ensure_server_certificate(tmp_path, ["localhost"]), range(4)))
    assert sum(m.made_ca for m in made) == 1
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    leaf = x509.load_pem_x509_certificates((tmp_path / "server.pem").read_bytes())[0]
    leaf.verify_directly_issued_by(ca)
