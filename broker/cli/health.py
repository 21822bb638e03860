"""``group-broker health``: is a running broker answering? Made for a container's HEALTHCHECK.

It asks the broker itself: an ApiVersions round trip on the Kafka listener (what every client does first), then
``/readyz`` on the control API when that is on. Stdlib only and no asyncio, so a check every few seconds costs
little. Exit 0 when both answer, 1 otherwise, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import urllib.error
import urllib.request

from broker.cli.discover import DiscoveryError, control_url
from broker.config import settings

_API_VERSIONS = 18
_CORRELATION_ID = 0x6B67  # any value; the answer must echo it
_CLIENT_ID = b"group-broker-health"
_DISCOVER = "discover"  # the control API's URL: the one the broker advertises (broker/cli/discover.py)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="the Kafka listener (default: from the settings)")
    parser.add_argument("--admin", metavar="URL", help="the control API, or 'off' (default: from the settings)")
    parser.add_argument("--timeout", type=float, default=3.0, metavar="S", help="seconds per check (default 3)")


def check(args: argparse.Namespace) -> int:
    try:
        kafka, admin = _targets(args)
        api_versions_round_trip(*kafka, timeout=args.timeout)
        if admin == _DISCOVER:
            # The default admin port gives way to a free one when taken (issue 18): ask the broker where it went.
            admin = control_url(settings.host_port(*kafka), timeout=args.timeout)
        if admin is not None:
            readyz(admin, timeout=args.timeout)
    except (OSError, ValueError, settings.SettingsError, DiscoveryError) as error:
        print(f"group-broker health: {error}", file=sys.stderr)
        return 1
    return 0


def _targets(args: argparse.Namespace) -> tuple[tuple[str, int], str | None]:
    config = settings.parse([])  # the environment and TOML file `serve` reads
    if args.bootstrap:
        host, _, port = args.bootstrap.rpartition(":")
        kafka = (host or "127.0.0.1", int(port))
    else:
        listener = config.bind_endpoints()[0]
        if listener.port == 0:
            raise ValueError("the broker's port is 0 (picked at start): pass --bootstrap HOST:PORT")
        kafka = (settings.reachable_host(listener.host), listener.port)
    if args.admin:
        admin = None if args.admin == "off" else args.admin.rstrip("/")
    else:
        admin = (
            _DISCOVER
            if config.admin_port_movable()
            else f"http://{settings.host_port(settings.reachable_host(config.admin_host), config.admin_port)}"
            if config.admin_port > 0
            else None
        )
    return kafka, admin


def api_versions_round_trip(host: str, port: int, timeout: float) -> None:
    """ApiVersions v0 (request header v1, empty body); the answer must echo the correlation id with error 0."""
    body = struct.pack(">hhih", _API_VERSIONS, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    with socket.create_connection((host, port), timeout=timeout) as connection:
        connection.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(connection, 4))[0]
        correlation_id, error_code = struct.unpack(">ih", _read(connection, size)[:6])
    if correlation_id != _CORRELATION_ID:
        raise ValueError(f"ApiVersions answer from {host}:{port} has correlation id {correlation_id}")
    if error_code != 0:
        raise ValueError(f"ApiVersions answer from {host}:{port} has error code {error_code}")


def _read(connection: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection before answering ApiVersions")
        data += chunk
    return data


def readyz(admin: str, timeout: float) -> None:
    try:
        with urllib.request.urlopen(f"{admin}/readyz", timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as error:
        raise ValueError(f"{admin}/readyz answered {error.code}") from None
    except urllib.error.URLError as error:
        raise ValueError(f"{admin}/readyz: {error.reason}") from None
