"""Connection limits with Kafka's names: ``max.connections``, ``max.connections.per.ip`` and its overrides.

Kafka's ``ConnectionQuotas`` (core, ``SocketServer.scala``) counts every client connection, broker-wide and per
address, all listeners together:

- ``max.connections.per.ip`` (or the address's entry in ``max.connections.per.ip.overrides``): a connection from an
  address that already holds that many is closed at once (``TooManyConnectionsException``; the Acceptor logs
  "Rejected connection from ..., address already has the configured maximum of N connections.").
- ``max.connections``: at the limit the Acceptor stops accepting (``waitForConnectionSlot``) until a connection
  closes. The connection it has just accepted waits, unread; the ones behind it wait in the kernel's listen backlog.
  (Kafka also closes the least recently used connection when the total is *over* the limit, which only happens when
  the limit is lowered at run time or for the protected inter-broker listener: neither exists here.)

Waiting for a slot is an awaited future, never a blocked thread: the event loop answers every other connection
meanwhile.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable


def normalized(host: str) -> str:
    """An address as the quotas count it: IP literals in one spelling (``::1``, not ``0:0:...:1``)."""
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


class Slot:
    """One counted connection; released once, whoever releases it first (the connection or its acceptor)."""

    __slots__ = ("_host", "_quotas")

    def __init__(self, quotas: ConnectionQuotas, host: str) -> None:
        self._quotas: ConnectionQuotas | None = quotas
        self._host = host

    def release(self) -> None:
        quotas, self._quotas = self._quotas, None
        if quotas is not None:
            quotas.release(self._host)


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, overrides: Iterable[tuple[str, int]] = ()) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = {normalized(host): count for host, count in overrides}
        self.total = 0
        self._counts: dict[str, int] = {}
        self._waiters: list[asyncio.Future[None]] = []

    def limit_for(self, host: str) -> tuple[int, str]:
        """The per-address limit of ``host`` and the setting it comes from."""
        override = self.overrides.get(host)
        if override is not None:
            return override, "max.connections.per.ip.overrides"
        return self.max_per_ip, "max.connections.per.ip"

    def count(self, host: str) -> int:
        return self._counts.get(host, 0)

    @property
    def slot_available(self) -> bool:
        return self.total < self.max_connections

    async def wait_for_slot(self) -> None:
        """Returns once the broker holds fewer than ``max.connections`` (Kafka's ``waitForConnectionSlot``)."""
        while not self.slot_available:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def take(self, host: str) -> Slot | None:
        """Count a connection from ``host``, or None when the address is at its limit (to be closed at once)."""
        count = self._counts.get(host, 0)
        if count >= self.limit_for(host)[0]:
            return None
        self._counts[host] = count + 1
        self.total += 1
        return Slot(self, host)

    def release(self, host: str) -> None:
        count = self._counts.get(host, 0) - 1
        if count > 0:
            self._counts[host] = count
        else:
            self._counts.pop(host, None)
        self.total -= 1
        # Wake every waiting acceptor (Kafka's notifyAll): each checks the slot again, one of them takes it.
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
