"""Kafka's Acceptor: the listening sockets of one listener, and the loop that accepts from them under the quotas.

asyncio's ``create_server`` accepts whatever arrives; Kafka's Acceptor stops accepting at ``max.connections`` and
lets the kernel's listen backlog hold the rest. So the broker binds its own sockets and accepts with
``loop.sock_accept``: one task per listening socket, which awaits a free slot (``ConnectionQuotas``), refuses an
address over its own limit, and hands every other connection to the event loop as a ``Connection``. On an SSL or
SASL_SSL listener the event loop wraps the transport in TLS first (``ssl=``): the connection sees plaintext bytes
once the handshake is done, and a handshake that fails (a plaintext client, a client that does not trust the
certificate, a missing client certificate) closes the socket with a line naming the peer, never a Kafka answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.log import get_logger
from broker.server.quotas import ConnectionQuotas, Slot, normalized

if TYPE_CHECKING:
    import ssl

log = get_logger("server")  # structlog, imported at the first call (broker/log.py)

# asyncio's create_server default; Kafka's socket.listen.backlog.size is 50.
BACKLOG = 100

# Kafka's connections.max.idle.ms does not bound a handshake; asyncio's default (60 s) holds a slot too long for a
# client that connects and says nothing, so a TLS handshake gets this long.
TLS_HANDSHAKE_TIMEOUT_S = 10.0

# Builds the protocol of one accepted connection; the slot is released when the connection is lost.
ProtocolFactory = Callable[[Slot], asyncio.Protocol]


async def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (every interface when empty), as ``create_server`` binds them: one per
    address the host resolves to, IPv6 sockets IPv6-only, SO_REUSEADDR set."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    """Accepts the connections of one listener (Kafka's ``Acceptor``), counted by the broker-wide quotas."""

    def __init__(
        self, name: str, sockets: list[socket.socket], quotas: ConnectionQuotas, tls: ssl.SSLContext | None = None
    ) -> None:
        self.name = name
        self.sockets = sockets
        self._quotas = quotas
        self._tls = tls  # an SSL or SASL_SSL listener's server context
        self._tasks: list[asyncio.Task[None]] = []
        self._serving: set[asyncio.Task[None]] = set()  # connections being handed to the loop

    @property
    def port(self) -> int:
        return int(self.sockets[0].getsockname()[1])

    def start(self, protocol: ProtocolFactory) -> None:
        self._tasks = [asyncio.create_task(self._accept(sock, protocol)) for sock in self.sockets]

    def close(self) -> None:
        """Stop accepting (asyncio.Server's ``close``); the connections already made are the broker's."""
        for task in self._tasks:
            task.cancel()

    async def wait_closed(self) -> None:
        """Once the accept loops have ended, close the listening sockets (asyncio.Server's ``wait_closed``)."""
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for sock in self.sockets:
            sock.close()

    async def _accept(self, listening: socket.socket, protocol: ProtocolFactory) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                accepted = [await loop.sock_accept(listening)]
            except OSError as error:  # EMFILE and the like: the connection stays in the backlog; try again soon
                log.warning("accept failed", listener=self.name, error=repr(error))
                await asyncio.sleep(0.1)
                continue
            # What else the kernel holds is taken in the same turn, as asyncio's own accept loop does; but only
            # while there is room, so that at max.connections one connection waits here, as with Kafka.
            while self._quotas.slot_available and len(accepted) < BACKLOG:
                try:
                    accepted.append(listening.accept())
                except OSError:  # BlockingIOError: nothing more waiting (any other error: the next await says)
                    break
            for index, (conn, address) in enumerate(accepted):
                try:
                    await self._admit(loop, conn, address, protocol)
                except asyncio.CancelledError:  # the broker stops, maybe while this connection waits for a slot
                    for waiting, _ in accepted[index:]:
                        waiting.close()
                    raise
                except Exception:
                    conn.close()
                    log.exception("could not take a connection", listener=self.name, peer=f"{address[0]}:{address[1]}")

    async def _admit(
        self, loop: asyncio.AbstractEventLoop, conn: socket.socket, address: tuple[str, int], protocol: ProtocolFactory
    ) -> None:
        quotas = self._quotas
        host = normalized(address[0])
        peer = f"{address[0]}:{address[1]}"
        if not quotas.slot_available:
            # Kafka's Acceptor blocks here: this connection is accepted but unread, the next ones wait in the backlog.
            log.info(
                "not accepting connections until one closes",
                listener=self.name,
                waiting_peer=peer,
                limit=quotas.max_connections,
                reason=f"the broker holds {quotas.total} connections (max.connections is {quotas.max_connections})",
            )
            await quotas.wait_for_slot()
            log.info("accepting connections again", listener=self.name, connections=quotas.total)
        slot = quotas.take(host)
        if slot is None:
            limit, setting = quotas.limit_for(host)
            # Kafka: "Rejected connection from /host, address already has the configured maximum of N connections."
            log.info(
                "connection refused",
                listener=self.name,
                peer=peer,
                limit=limit,
                reason=f"address {host} already has the configured maximum of {limit} connections ({setting})",
            )
            conn.close()
            return
        conn.setblocking(False)
        # The transport is built on a task of its own: the next accept does not wait for it.
        task = loop.create_task(self._serve(loop, conn, peer, slot, protocol))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _serve(
        self, loop: asyncio.AbstractEventLoop, conn: socket.socket, peer: str, slot: Slot, protocol: ProtocolFactory
    ) -> None:
        try:
            if self._tls is None:
                await loop.connect_accepted_socket(lambda: protocol(slot), conn)
            else:
                await loop.connect_accepted_socket(
                    lambda: protocol(slot), conn, ssl=self._tls, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S
                )
        except BaseException as error:
            slot.release()
            conn.close()
            if self._tls is not None and isinstance(error, OSError):  # ssl.SSLError, a reset, the timeout
                self._handshake_failed(peer, error)
            elif not isinstance(error, asyncio.CancelledError):
                log.exception("could not take a connection", listener=self.name, peer=peer)

    def _handshake_failed(self, peer: str, error: OSError) -> None:
        from broker.security.tls import handshake_failure

        if isinstance(error, TimeoutError | ConnectionResetError) or "EOF" in str(error):
            # Closed before or during the hello: a port probe, a client giving up, or one refusing the certificate
            # without an alert (Python's ssl; uvloop reports any such close as a reset), so no warning.
            log.info("tls handshake not completed", listener=self.name, peer=peer, reason=handshake_failure(error))
        else:
            log.warning(
                "tls handshake failed, connection closed", listener=self.name, peer=peer,
                reason=handshake_failure(error),
            )  # fmt: skip
