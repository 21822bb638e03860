"""The TCP server: connections, request ordering, and the loop that drives the timers.

Each connection answers its requests one at a time and in order, as Kafka does
by muting a channel until its response is sent: a parked JoinGroup holds back
everything behind it on that connection, and nothing else.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from functools import partial
from typing import Any

import structlog

from broker.api.api_versions import unsupported_version_response
from broker.api.base import NO_RESPONSE, ApiContext, BrokerIdentity, Call, CloseConnection
from broker.api.dispatch import HANDLERS
from broker.coordinator.clock import Clock, SystemClock
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import Client
from broker.coordinator.pending import Pending
from broker.coordinator.purgatory import Purgatory
from broker.settings import Settings
from broker.storage.delayed_fetch import DelayedFetches
from broker.storage.partition_log import StorageBudget
from broker.topics import Topic, TopicRegistry
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, api_name
from protocol.codec import Request, decode_request, encode_response, peek_client_id
from protocol.errors import ProtocolError
from protocol.framing import FrameError, FrameReader
from protocol.heartbeat import HEARTBEAT_KEY, decode_heartbeat, encode_heartbeat_response

log = structlog.get_logger("server")

# Stop reading from a client that has this many requests queued behind a parked one.
_MAX_QUEUED_REQUESTS = 256
_HEARTBEAT_MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1]


class LoopTimer:
    """Drives a Purgatory from the event loop: one loop timer, at the earliest deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock, purgatory: Purgatory) -> None:
        self._loop = loop
        self._clock = clock
        self._purgatory = purgatory
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0
        purgatory.set_wakeup(self.arm)
        first = purgatory.next_deadline()
        if first is not None:
            self.arm(first)

    def arm(self, deadline_ms: int) -> None:
        if self._handle is not None:
            if self._armed_for <= deadline_ms:
                return
            self._handle.cancel()
        # +1 ms: the loop's clock may wake a hair early, and an early wake would find nothing due.
        delay = max(deadline_ms - self._clock.now_ms() + 1, 0) / 1000
        self._armed_for = deadline_ms
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        try:
            self._purgatory.run_due()
        except Exception:
            log.exception("timer action failed")
        upcoming = self._purgatory.next_deadline()
        if upcoming is not None:
            self.arm(upcoming)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self._server = server
        self._reader = FrameReader(server.settings.socket_request_max_bytes)
        self._queue: collections.deque[bytes] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._busy = False
        self._paused = False
        self._closed = False
        self._client_id = ""
        self._client_id_raw = b""  # as the Heartbeat fast path reads it
        self._client = Client("", "/unknown")
        # Answers written during one pass over the queue go out in one write: one syscall, not one per request.
        self._out: list[bytes] = []
        self.peer = "unknown"
        self._drain_scheduled = False
        # Set when the connection must end once what is queued is answered ("" = quietly, else the reason).
        self._close_when_drained: str | None = None

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        host = peer[0] if peer else "unknown"
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._client = Client("", f"/{host}")
        self._server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._closed or self._close_when_drained is not None:
            return
        try:
            frames = self._reader.feed(data)
        except FrameError as error:
            # Kafka reads one request at a time: the requests before the bad bytes are answered first.
            self._queue.extend(error.frames)
            if self._transport is not None and not self._paused:
                self._transport.pause_reading()
                self._paused = True
            self._close_after_drain(str(error))
            return
        self._queue.extend(frames)
        if not self._paused and len(self._queue) > _MAX_QUEUED_REQUESTS and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._drain()

    def eof_received(self) -> bool:
        incomplete = self._reader.buffered
        reason = f"peer closed the connection inside a request ({incomplete} bytes of an incomplete frame)"
        # Keep the transport open to answer what is already queued or parked; _drain closes it.
        self._close_after_drain(reason if incomplete else "")
        return True

    def _close_after_drain(self, reason: str) -> None:
        if self._close_when_drained is None:
            self._close_when_drained = reason
        self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._queue.clear()
        self._server.connections.discard(self)

    # -- requests ----------------------------------------------------------------------

    def _drain(self) -> None:
        self._drain_scheduled = False
        coordinator = self._server.coordinator
        while not self._busy and self._queue and not self._closed:
            frame = self._queue.popleft()
            if len(frame) > 1 and frame[1] == HEARTBEAT_KEY and frame[0] == 0:  # api key 12, no slice
                heartbeat = decode_heartbeat(frame, _HEARTBEAT_MAX_VERSION)
                if heartbeat is not None:
                    version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = heartbeat
                    if client_id != self._client_id_raw:
                        self._client_id_raw = client_id
                        self._set_client_id(client_id.decode(errors="replace"))
                    try:
                        error = coordinator.heartbeat(group_id, generation_id, member_id, instance_id)
                    except Exception:
                        log.exception("request failed", peer=self.peer, client_id=self._client_id, api="HEARTBEAT")
                        self.close("internal error while handling a request")
                        return
                    self._out.append(encode_heartbeat_response(version, correlation_id, error))
                    continue
            try:
                request = decode_request(frame)
            except ProtocolError as error:
                self._note_client_id(frame)
                self.close(str(error))
                return
            if request.client_id != self._client_id:
                self._set_client_id(request.client_id)
            try:
                answer = self._dispatch(request)
            except Exception:
                log.exception(
                    "request failed", peer=self.peer, client_id=self._client_id, api=api_name(request.api_key)
                )
                self.close("internal error while handling a request")
                return
            if isinstance(answer, Pending):
                if not answer.done:
                    self._busy = True
                    self._flush()  # the answers before a parked one must not wait for it
                    answer.add_done_callback(partial(self._answer_parked, request))
                    return
                answer = answer.value
            if isinstance(answer, CloseConnection):
                self.close(answer.reason)
                return
            self._send(request, answer)
        self._flush()
        if self._close_when_drained is not None:
            if not self._busy and not self._queue:
                if self._close_when_drained:
                    self.close(self._close_when_drained)
                else:
                    self.hang_up()
            return
        if self._paused and len(self._queue) <= _MAX_QUEUED_REQUESTS // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def _set_client_id(self, client_id: str) -> None:
        if client_id != self._client_id:
            self._client_id = client_id
            self._client = Client(client_id, self._client.host)

    def _dispatch(self, request: Request) -> Any:
        if request.body is None:  # ApiVersions newer than we speak
            return unsupported_version_response()
        handler = HANDLERS[request.api_key]
        return handler(self._server.api, Call(request.api_version, self._client), request.body)

    def _answer_parked(self, request: Request, response: Any) -> None:
        # Called from inside the coordinator: write now, but read the next request on a
        # fresh loop turn so the coordinator is never re-entered mid-transition.
        self._busy = False
        self._send(request, response)
        self._flush()
        if not self._drain_scheduled and not self._closed:
            self._drain_scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _send(self, request: Request, response: Any) -> None:
        if self._closed or self._transport is None or response is NO_RESPONSE:
            return
        version = 0 if request.body is None else request.api_version  # unsupported ApiVersions: v0 body
        self._out.append(encode_response(request.api_key, version, request.correlation_id, response))

    def _flush(self) -> None:
        out = self._out
        if out and not self._closed and self._transport is not None:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()

    def _note_client_id(self, frame: bytes) -> None:
        """Best effort, for the log line of a request that did not decode."""
        self._client_id = peek_client_id(frame) or self._client_id

    def close(self, reason: str) -> None:
        if self._closed:
            return
        log.warning("closing connection", peer=self.peer, client_id=self._client_id, reason=reason)
        self.hang_up()

    def hang_up(self) -> None:
        if self._closed:
            return
        self._flush()  # what was answered before the reason to close still goes out, as with Kafka
        self._closed = True
        self._queue.clear()
        if self._transport is not None:
            self._transport.close()


class BrokerServer:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.purgatory = Purgatory(self.clock)
        self.coordinator = GroupCoordinator(settings.group, self.clock, self.purgatory)
        self.topics = TopicRegistry(
            auto_create=settings.auto_create_topics,
            default_partitions=settings.num_partitions,
            defaults=settings.log,
            budget=StorageBudget(settings.storage_max_bytes),
        )
        for name, partitions in settings.topics:
            self.topics.create(name, partitions)
        self.topics.on_delete(self._topic_deleted)
        self.fetches = DelayedFetches(self.purgatory)
        self._schedule_retention()
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._timer: LoopTimer | None = None
        self.api: ApiContext
        self.port = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self), self.settings.host, self.settings.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        host, port = self.settings.advertised(self.port)
        self.api = ApiContext(
            self.coordinator,
            self.topics,
            BrokerIdentity(self.settings.node_id, host, port, self.settings.cluster_id),
            self.fetches,
        )
        self._timer = LoopTimer(loop, self.clock, self.purgatory)
        log.info(
            "broker listening",
            host=self.settings.host,
            port=self.port,
            advertised=f"{host}:{port}",
            node_id=self.settings.node_id,
            cluster_id=self.settings.cluster_id,
            initial_rebalance_delay_ms=self.settings.group.initial_rebalance_delay_ms,
        )

    def _topic_deleted(self, topic: Topic) -> None:
        self.coordinator.on_topic_deleted(topic.name)
        log.info("topic deleted", topic=topic.name, topic_id=str(topic.topic_id))

    def _schedule_retention(self) -> None:
        self.purgatory.schedule(("log-retention",), self.settings.log_retention_check_interval_ms, self._retention)

    def _retention(self) -> None:
        dropped = self.topics.enforce_retention(self.clock.now_ms())
        if dropped:
            log.info("log retention", batches_deleted=dropped, stored_bytes=self.topics.budget.used)
        self._schedule_retention()

    async def stop(self) -> None:
        """Stop listening, answer every parked request as Kafka does on unload, then hang up."""
        if self._server is not None:
            self._server.close()
        self.coordinator.shutdown()
        if self._timer is not None:
            self._timer.stop()
        await asyncio.sleep(0)  # let the answers just written reach the transports
        for connection in list(self.connections):
            connection.hang_up()
        if self._server is not None:
            await self._server.wait_closed()
        log.info("broker stopped")
