"""The control API's socket: bound with the Kafka listeners, served by aiohttp from its first connection on.

aiohttp (and prometheus_client for /metrics) cost about 16 MB of resident memory and a fifth of a second of
imports (issue 17: idle RSS < 40 MB, the first ApiVersions answer within 150 ms), and many brokers never get an
HTTP request. So the port is bound at start-up, before ``/readyz`` could be asked, and a connection that comes
before the API is loaded waits (what it sends kept) while a worker thread imports ``broker.control.app``; then it
is handed to aiohttp's protocol as if aiohttp had accepted it, and every later connection goes to aiohttp
straight away. What a client sees is one slower first answer, never a refused connection.

A port nobody asked for (the default 9644: ``Settings.admin_port_movable``) that another process holds, a second
broker on the machine most often, gives way to a free port on the same host (issue 18): the broker says so and logs
the real URL, and DescribeConfigs on the broker advertises it (``group.broker.control.url``, broker/api/configs.py)
so that ``group-broker watch --bootstrap HOST:PORT`` finds it. A port that was asked for still fails when taken.
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import os
from typing import TYPE_CHECKING, Any, cast

from broker.log import get_logger
from broker.server.settings import host_port, is_wildcard, reachable_host

if TYPE_CHECKING:
    from collections.abc import Callable

log = get_logger("control")  # structlog, imported at the first call (broker/log.py)

_APP_MODULE = "broker.control.app"  # imported by name: the server layer never imports the control layer
# What a connection may send before the API is loaded, kept in memory; past it, its reading pauses.
_HELD_BYTES = 256 * 1024


class ControlListener:
    """The control API of ``server`` on ``host:port``; ``api`` is the ``ControlApi`` once a connection loaded it.

    ``limits``: the HTTP edge's time-outs and sizes (``broker.control.http_guard.HttpLimits``), the defaults
    when None. ``server`` is the broker, handed to the ``ControlApi`` as it is (this module never reads it, so
    that it imports nothing of the broker's: no cycle with broker/server/broker.py)."""

    def __init__(self, server: object, limits: Any = None) -> None:
        self.server = server
        self.limits = limits
        self.host = ""
        self.port = 0
        self.moved_from: int | None = None  # the taken default port this one stands in for
        self.api: Any = None
        self._listening: asyncio.Server | None = None
        self._factory: Callable[[], asyncio.Protocol] | None = None
        self._loading: asyncio.Task[None] | None = None
        self._waiting: set[_Waiting] = set()

    async def start(self, host: str, port: int, *, movable: bool = False) -> None:
        """Listen on ``host:port``; when ``movable`` and the port is taken, on a free port of ``host`` instead."""
        loop = asyncio.get_running_loop()
        try:
            self._listening = await loop.create_server(self._protocol, host, port, reuse_address=True)
        except OSError as error:
            if not (movable and port and error.errno == errno.EADDRINUSE):
                taken = error.errno == errno.EADDRINUSE
                hint = " (pick another --admin-port, or 0 for any free one)" if taken else ""
                reason = os.strerror(error.errno) if error.errno else error.strerror  # uvloop's repeats the address
                message = f"control API cannot listen on {host}:{port}: {reason}{hint}"
                raise OSError(error.errno, message) from error
            await self.start(host, 0)
            self.moved_from = port
            return
        self.host, self.port = self._listening.sockets[0].getsockname()[:2]

    def url(self, advertised_host: str | None = None) -> str:
        """The API's URL: its own host, or for a wildcard host ``advertised_host`` (the Kafka listener's advertised
        host, what DescribeConfigs hands out), else this machine's loopback."""
        host = advertised_host if advertised_host and is_wildcard(self.host) else reachable_host(self.host)
        return f"http://{host_port(host, self.port)}"

    def announce(self) -> None:
        """The "control api listening" line: the broker says it once it is up (logging loads after the first
        Kafka answer, broker/log.py); the port accepts from ``start`` on."""
        url = self.url()
        if self.moved_from is not None:
            log.warning(
                "control api default port taken, listening on a free one",
                taken_port=self.moved_from,
                port=self.port,
                url=url,
                hint="the CLI finds it from the Kafka address: group-broker watch --bootstrap HOST:PORT",
            )
        log.info("control api listening", host=self.host, port=self.port, url=url)

    def _protocol(self) -> asyncio.Protocol:
        if self._factory is not None:
            return self._factory()
        return _Waiting(self)

    def _wait(self, connection: _Waiting) -> None:
        self._waiting.add(connection)
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            # In a worker thread: the loop goes on answering Kafka requests while aiohttp imports.
            module = await loop.run_in_executor(None, importlib.import_module, _APP_MODULE)
            api = module.ControlApi(self.server, self.limits)
            self._factory = await api.protocol_factory()
            self.api = api
        except Exception:
            log.exception("control api failed to load")
            for connection in list(self._waiting):
                connection.abort()
            self._loading = None  # the next connection tries again
            return
        for connection in list(self._waiting):
            connection.hand_over(self._factory())

    async def stop(self) -> None:
        if self._listening is not None:
            self._listening.close()
        for connection in list(self._waiting):
            connection.abort()
        if self._loading is not None and not self._loading.done():
            await asyncio.wait([self._loading])
        if self.api is not None:
            await self.api.stop()
        if self._listening is not None:
            await self._listening.wait_closed()
            self._listening = None


class _Waiting(asyncio.Protocol):
    """A connection accepted before aiohttp was loaded: what it sends is kept (reading paused past a few
    requests' worth) and replayed to aiohttp's protocol when the connection is handed over."""

    def __init__(self, listener: ControlListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.received: list[bytes] = []
        self.size = 0
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        self.listener._wait(self)

    def data_received(self, data: bytes) -> None:
        # uvloop starts reading after connection_made whatever it asked, so pausing there would not hold the
        # first bytes back: they are kept instead, and reading pauses only if a client sends a lot meanwhile.
        self.received.append(data)
        self.size += len(data)
        if self.size > _HELD_BYTES and self.transport is not None:
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        return True  # half-closed: the answer can still go out once aiohttp has the connection

    def connection_lost(self, exc: BaseException | None) -> None:
        self.listener._waiting.discard(self)
        self.transport = None

    def hand_over(self, protocol: asyncio.Protocol) -> None:
        self.listener._waiting.discard(self)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        for data in self.received:
            protocol.data_received(data)
        self.received.clear()
        if self.eof and not protocol.eof_received():
            transport.close()
        elif self.size > _HELD_BYTES:
            transport.resume_reading()

    def abort(self) -> None:
        self.listener._waiting.discard(self)
        if self.transport is not None:
            self.transport.abort()
