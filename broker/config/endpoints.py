"""Where the broker listens: Kafka's listener entries (``NAME://host:port``) and the addresses derived from them.

Apart from ``settings.py`` (which re-exports these) to keep that module within the 600-line limit; the command line
(``broker/cli/``) and the embedded broker use ``reachable_host`` and ``host_port`` to build bootstrap strings and
URLs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of Kafka's ``listeners`` or ``advertised.listeners``: ``NAME://host:port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ipv6>[^\]]*)\]|(?P<host>[^:/\[\]]*)):(?P<port>\d+)$")


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """Kafka's listener list: comma-separated ``NAME://host:port``; an empty host means every interface."""
    endpoints = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ValueError(f"{item!r} is not NAME://HOST:PORT")
        port = int(match["port"])
        if port > 65535:
            raise ValueError(f"{item!r}: port {port} is out of range")
        host = match["ipv6"] if match["ipv6"] is not None else match["host"]
        endpoints.append(Endpoint(match["name"], host, port))
    names = [e.name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"listener name {duplicates[0]} appears twice")
    return tuple(endpoints)


def is_wildcard(host: str) -> bool:
    """Kafka's "every interface" hosts: empty (``PLAINTEXT://:9092``), 0.0.0.0 and ::."""
    return host in ("", "0.0.0.0", "::")


def reachable_host(bound: str) -> str:
    """Where a client on this machine reaches a listener bound to ``bound``: loopback for a wildcard."""
    return "127.0.0.1" if bound in ("", "0.0.0.0") else "::1" if bound == "::" else bound


def host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets (for bootstrap strings and URLs)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
