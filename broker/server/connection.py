"""One client connection as asyncio sees it: the transport and flow control, around a ``RequestPipeline``.

The steps are kept apart, after aiohttp's ``web_protocol``: the request pipeline (broker/server/pipeline.py) cuts
frames, answers them in order and hands each pass's answers back in one write, without a transport; this protocol
feeds it what the transport reads, writes what it answers, runs a pass when there is something to answer, and lets
``_update_reading`` decide, alone, whether to read.

Flow control, both ways. Read side: a client that queues more than ``_MAX_QUEUED_REQUESTS`` behind a parked one
is not read until half of them are answered. Write side: a client that sends requests and does not read the
answers (pipelined Fetches, say) would make the broker hold its answers without bound, so the transport's write
buffer has limits (``socket_send_buffer_high_bytes`` / ``..._low_bytes``): past the high-water mark asyncio calls
``pause_writing`` and the connection answers nothing more and reads nothing more until ``resume_writing`` says the
buffer drained to the low-water mark. That is Kafka's muted channel, with room for more than one answer.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from broker.api.base import ApiContext
from broker.server.pipeline import PipelineState, RequestPipeline
from broker.server.quotas import Slot

if TYPE_CHECKING:
    from broker.server.host import ConnectionHost

# The principal of a connection from its TLS session (the transport's ``ssl_object``): broker/security/tls.py.
PrincipalOf = Callable[[Any], str]

# Stop reading from a client that has this many requests queued behind a parked one; read again at half.
_MAX_QUEUED_REQUESTS = 256
_RESUME_QUEUED_REQUESTS = _MAX_QUEUED_REQUESTS // 2
_CLOSED = PipelineState.CLOSED  # a module constant: in Python 3.11 an Enum member read from its class costs more


class Connection(asyncio.Protocol):
    def __init__(
        self, host: ConnectionHost, api: ApiContext, slot: Slot | None = None,
        principal_of: PrincipalOf | None = None,
    ) -> None:
        self._host = host
        self._principal_of = principal_of  # an SSL listener's: the principal from the client's certificate
        self._slot = slot  # this connection's count in max.connections and max.connections.per.ip
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()  # kept: get_running_loop checks the process id, a system call
        self._reading_paused = False
        self._half_close = True  # keep the transport open at end of input to answer what is queued (not on TLS)
        self._drain_scheduled = False
        self.pipeline = RequestPipeline(host, api, self)
        self.node_id = api.identity.node_id  # whose connection it is: stopping a node drops it (server/nodes.py)

    @property
    def peer(self) -> str:
        return self.pipeline.peer

    @property
    def connection_id(self) -> int:
        return self.pipeline.connection_id

    @property
    def reading(self) -> bool:
        """Whether the connection reads requests (flow control pauses it, either side)."""
        return not self._reading_paused and self.pipeline.state is not _CLOSED

    @property
    def unsent_bytes(self) -> int:
        """Answer bytes the transport holds because the client has not read them yet."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    # -- asyncio.Protocol ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's are not asyncio.Transport subclasses, so a cast, not an isinstance check.
        self._transport = cast(asyncio.Transport, transport)
        settings = self._host.settings
        self._transport.set_write_buffer_limits(
            settings.socket_send_buffer_high_bytes, settings.socket_send_buffer_low_bytes
        )
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.pipeline.connected(
            f"{peer[0]}:{peer[1]}" if peer else "unknown", peer[0] if peer else "unknown", self._transport.write
        )
        self._host.connection_opened(self)
        # TLS transports close on end of input whatever eof_received says (and asyncio warns if it says True).
        self._half_close = transport.get_extra_info("sslcontext") is None
        if self._principal_of is not None:
            self._take_principal(transport)

    def _take_principal(self, transport: asyncio.BaseTransport) -> None:
        """An SSL connection's principal, from its certificate, before any request is read (the handshake is done:
        asyncio calls connection_made after it). No mapping rule for the subject closes the connection, as
        Kafka's SslPrincipalMapper.NoMatchingRule fails its authentication."""
        from broker.log import get_logger

        assert self._principal_of is not None
        try:
            principal = self._principal_of(transport.get_extra_info("ssl_object"))
        except ValueError as error:
            get_logger("server").warning(
                "ssl principal not mapped, connection closed", peer=self.pipeline.peer, reason=str(error)
            )
            self.pipeline.lost()
            cast(asyncio.Transport, transport).abort()
            return
        self.pipeline.set_principal(principal)
        # Debug level: one line per connection; what an ACL would be written for (kafka.authorizer.logger's name).
        get_logger("server").debug("ssl connection principal", peer=self.pipeline.peer, principal=principal)

    def data_received(self, data: bytes) -> None:
        pipeline = self.pipeline
        pipeline.receive(data)  # queued and answered as far as they can be
        # Reading changes only when something waits or it is paused: the hot path's pass emptied the queue.
        if self._reading_paused or pipeline.requests or pipeline.output_paused or pipeline.ending is not None:
            self._update_reading()

    def eof_received(self) -> bool:
        # Keep the transport open to answer what is already queued or parked; the pass that answers the last closes it.
        self.pipeline.end_of_input()
        self._update_reading()
        return self._half_close

    def pause_writing(self) -> None:
        # Called from inside transport.write: the pass that wrote stops before its next request.
        self.pipeline.output_paused = True

    def resume_writing(self) -> None:
        self.pipeline.output_paused = False
        self.run_soon()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipeline.lost()
        self._host.connection_lost(self)
        if self._slot is not None:
            self._slot.release()  # an acceptor waiting at max.connections may take the next one

    # -- what the pipeline asks of the transport's side (pipeline.PipelineIO) --------------------------------

    def close_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def run_now(self) -> None:
        self._drain()

    def run_soon(self) -> None:
        # A fresh loop turn: the callers run inside the coordinator or the transport, neither of which to re-enter.
        if not self._drain_scheduled and self.pipeline.state is not _CLOSED:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> None:
        self._loop.call_later(seconds, callback)

    # -- passes and flow control -----------------------------------------------------------------------------

    def _drain(self) -> None:
        self._drain_scheduled = False
        self.pipeline.run()
        self._update_reading()

    def _update_reading(self) -> None:
        """The one place that pauses and resumes reading: paused while either side says so, that is while the
        answers wait to be sent (write side), while too many requests wait to be answered (read side), or once
        the connection is ending."""
        transport = self._transport
        pipeline = self.pipeline
        if transport is None or pipeline.state is _CLOSED:
            return
        if self._reading_paused:
            if (
                not pipeline.output_paused
                and len(pipeline.requests) <= _RESUME_QUEUED_REQUESTS
                and pipeline.ending is None
            ):
                self._reading_paused = False
                transport.resume_reading()
        elif pipeline.output_paused or len(pipeline.requests) > _MAX_QUEUED_REQUESTS or pipeline.ending is not None:
            self._reading_paused = True
            transport.pause_reading()

    # -- closing ---------------------------------------------------------------------------------------------

    def close(self, reason: str) -> None:
        """End the connection with a warning naming ``reason``; what was answered before still goes out."""
        self.pipeline.close(reason)

    def abort(self) -> None:
        """Drop the connection at once, unanswered: what a killed broker does to its clients (issue 27)."""
        if self._transport is not None:
            self._transport.abort()

    def hang_up(self) -> None:
        """End the connection quietly (the broker stopping); what was answered before still goes out."""
        self.pipeline.hang_up()
