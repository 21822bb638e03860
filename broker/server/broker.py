"""The TCP server: connections, request ordering, and the loop that drives the timers.

Each connection answers its requests one at a time and in order, as Kafka does
by muting a channel until its response is sent: a parked JoinGroup holds back
everything behind it on that connection, and nothing else.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import importlib
import socket
from functools import partial
from time import perf_counter
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.api.api_versions import unsupported_version_response
from broker.api.base import NO_RESPONSE, ApiContext, BrokerIdentity, Call, CloseConnection
from broker.api.dispatch import HANDLERS
from broker.api.fault_answers import error_response, request_identity
from broker.config.settings import Endpoint, Settings
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import Client
from broker.events.hub import EventFile, EventHub
from broker.server.faults import CLOSE, DELAY, SWALLOW, FaultRule, FaultRules
from broker.server.stats import RequestStats
from broker.storage.delayed_fetch import DelayedFetches
from broker.storage.partition_log import StorageBudget
from broker.storage.topics import Topic, TopicRegistry
from broker.timing.clock import Clock, SystemClock
from broker.timing.deferred import Deferred
from broker.timing.keys import LOG_RETENTION
from broker.timing.purgatory import Purgatory
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


class Listener:
    """One of Kafka's listeners: a name, the port it bound, and the API context that advertises its address."""

    __slots__ = ("api", "name", "port")

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self.api: ApiContext


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer, listener: Listener) -> None:
        self._server = server
        self._api = listener.api  # the listener's: Metadata and FindCoordinator answer with its advertised address
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
        # The frame a delay rule held back: when it comes round again it is not matched a second time.
        self._released: bytes | None = None

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
        self._server.connections_accepted += 1

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
        # Every answer of one pass goes out in the final flush, so the pass's length is each one's latency.
        started = perf_counter()
        heartbeats = heartbeat_version = 0  # counted apart from the rest: a local int is the cheapest tally
        answered: list[tuple[int, int]] = []  # (api key, version) of every other answer this pass wrote
        try:
            server = self._server
            coordinator = server.coordinator
            faults = server.faults
            armed = faults.rules  # a dict's truth is a C check; the hot path pays nothing more when no rule is set
            while not self._busy and self._queue and not self._closed:
                frame = self._queue.popleft()
                if len(frame) > 1 and frame[1] == HEARTBEAT_KEY and frame[0] == 0:  # api key 12, no slice
                    heartbeat = decode_heartbeat(frame, _HEARTBEAT_MAX_VERSION)
                    if heartbeat is not None:
                        version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = heartbeat
                        if client_id != self._client_id_raw:
                            self._client_id_raw = client_id
                            self._set_client_id(client_id.decode(errors="replace"))
                        if armed:
                            if frame is self._released:
                                self._released = None
                            elif rule := faults.match(
                                HEARTBEAT_KEY, self._client_id, group_id, member_id, instance_id, coordinator.has_member
                            ):
                                error = self._fault(rule, frame)
                                if error is None:
                                    return
                                self._out.append(encode_heartbeat_response(version, correlation_id, error))
                                answered.append((HEARTBEAT_KEY, version))
                                continue
                        try:
                            error = coordinator.heartbeat(group_id, generation_id, member_id, instance_id)
                        except Exception:
                            log.exception("request failed", peer=self.peer, client_id=self._client_id, api="HEARTBEAT")
                            self.close("internal error while handling a request")
                            return
                        self._out.append(encode_heartbeat_response(version, correlation_id, error))
                        heartbeats += 1
                        heartbeat_version = version
                        continue
                try:
                    request = decode_request(frame)
                except ProtocolError as error:
                    self._note_client_id(frame)
                    self.close(str(error))
                    return
                if request.client_id != self._client_id:
                    self._set_client_id(request.client_id)
                answer: Any
                if armed and request.body is not None:
                    identity = request_identity(request.api_key, request.body)
                    if frame is self._released:
                        self._released = None
                    elif rule := faults.match(request.api_key, self._client_id, *identity, coordinator.has_member):
                        answer_with = self._fault(rule, frame)
                        if answer_with is None:
                            return
                        body = error_response(request.api_key, request.api_version, request.body, answer_with)
                        self._send(request, body)
                        answered.append((request.api_key, request.api_version))
                        continue
                try:
                    answer = self._dispatch(request)
                except Exception:
                    log.exception(
                        "request failed", peer=self.peer, client_id=self._client_id, api=api_name(request.api_key)
                    )
                    self.close("internal error while handling a request")
                    return
                if isinstance(answer, Deferred):
                    if not answer.done:
                        self._busy = True
                        self._flush()  # the answers before a parked one must not wait for it
                        answer.add_done_callback(partial(self._answer_parked, request, started))
                        return
                    answer = answer.value
                if isinstance(answer, CloseConnection):
                    self.close(answer.reason)
                    return
                self._send(request, answer)
                answered.append((request.api_key, request.api_version))
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
        finally:
            if heartbeats or answered:
                stats = self._server.request_stats
                elapsed = perf_counter() - started
                if heartbeats:
                    stats.record(HEARTBEAT_KEY, heartbeat_version, elapsed, heartbeats)
                if answered:
                    stats.record_pass(elapsed, answered)

    def _set_client_id(self, client_id: str) -> None:
        if client_id != self._client_id:
            self._client_id = client_id
            self._client = Client(client_id, self._client.host)

    def _dispatch(self, request: Request) -> Any:
        if request.body is None:  # ApiVersions newer than we speak
            return unsupported_version_response()
        handler = HANDLERS[request.api_key]
        return handler(self._api, Call(request.api_version, self._client), request.body)

    def _answer_parked(self, request: Request, started: float, response: Any) -> None:
        # Called from inside the coordinator: write now, but read the next request on a
        # fresh loop turn so the coordinator is never re-entered mid-transition.
        self._busy = False
        self._send(request, response)
        self._flush()
        self._server.request_stats.record(request.api_key, request.api_version, perf_counter() - started)
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

    # -- fault rules ---------------------------------------------------------------------

    def _fault(self, rule: FaultRule, frame: bytes) -> ErrorCode | None:
        """The error a faulted request is answered with, or None when the rule took the request away."""
        if rule.action == SWALLOW:
            return ErrorCode.none  # all is well, says the broker, while the session runs out
        if rule.error is not None:
            return rule.error
        self._take_away(rule, frame)
        return None

    def _take_away(self, rule: FaultRule, frame: bytes) -> None:
        if rule.action == CLOSE:
            self.close(f"fault rule {rule.id} closes the connection")
            return
        assert rule.action == DELAY and rule.delay_ms is not None
        # Requests on a connection are answered in order: everything behind this one waits with it.
        self._queue.appendleft(frame)
        self._released = frame
        self._busy = True
        self._flush()
        asyncio.get_running_loop().call_later(rule.delay_ms / 1000, self._end_delay)

    def _end_delay(self) -> None:
        self._busy = False
        if not self._closed:
            self._drain()

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
        self.events = EventHub(
            self.clock,
            ring_size=settings.event_buffer_size,
            buffer_total=settings.event_buffer_total,
            debug=settings.log_level == "debug",
            file=EventFile(settings.event_log, settings.event_log_max_bytes, settings.event_log_backups)
            if settings.event_log
            else None,
        )
        self.coordinator = GroupCoordinator(
            settings.group, self.clock, self.purgatory, events=self.events, partition_count=self._partition_count
        )
        self.faults = FaultRules(self.clock)
        self.request_stats = RequestStats()
        self.connections_accepted = 0
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
        self._servers: list[asyncio.Server] = []
        self.listeners: list[Listener] = []
        self._timer: LoopTimer | None = None
        self.api: ApiContext
        self.port = 0
        self.ready = False
        self.control: Any = None  # the control API's site, when it runs

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = LoopTimer(loop, self.clock, self.purgatory)
        try:
            for endpoint in self.settings.bind_endpoints():
                await self._listen(loop, endpoint)
        except OSError:
            await self._close_listeners()
            raise
        self.port, self.api = self.listeners[0].port, self.listeners[0].api
        self.ready = True
        if self.settings.admin_port >= 0:
            # aiohttp takes ~200 ms to import: a worker thread does it while this loop already answers Kafka.
            control = await loop.run_in_executor(None, importlib.import_module, "broker.control.app")
            self.control = control.ControlApi(self)
            try:
                await self.control.start(self.settings.admin_host, self.settings.admin_port)
            except OSError:
                await self._close_listeners()
                self.control = None
                raise

    async def _listen(self, loop: asyncio.AbstractEventLoop, endpoint: Endpoint) -> None:
        listener = Listener(endpoint.name)
        host = endpoint.host or None  # Kafka's "PLAINTEXT://:9092" listens on every interface
        server = await loop.create_server(lambda: Connection(self, listener), host, endpoint.port, reuse_address=True)
        self._servers.append(server)
        listener.port = server.sockets[0].getsockname()[1]
        advertised_host, advertised_port = self.settings.advertised_for(endpoint, listener.port)
        identity = BrokerIdentity(self.settings.node_id, advertised_host, advertised_port, self.settings.cluster_id)
        # Listeners share all state (producer ids included); only the address they hand out differs.
        listener.api = (
            dataclasses.replace(self.listeners[0].api, identity=identity)
            if self.listeners
            else ApiContext(self.coordinator, self.topics, identity, self.fetches)
        )
        self.listeners.append(listener)
        log.info(
            "broker listening",
            listener=endpoint.name,
            host=endpoint.host,
            port=listener.port,
            advertised=f"{advertised_host}:{advertised_port}",
            node_id=self.settings.node_id,
            cluster_id=self.settings.cluster_id,
            initial_rebalance_delay_ms=self.settings.group.initial_rebalance_delay_ms,
        )

    async def _close_listeners(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    def _partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return topic.partitions if topic is not None else None

    def _topic_deleted(self, topic: Topic) -> None:
        self.coordinator.on_topic_deleted(topic.name)
        log.info("topic deleted", topic=topic.name, topic_id=str(topic.topic_id))

    def _schedule_retention(self) -> None:
        self.purgatory.schedule(LOG_RETENTION, self.settings.log_retention_check_interval_ms, self._retention)

    def _retention(self) -> None:
        dropped = self.topics.enforce_retention(self.clock.now_ms())
        if dropped:
            log.info("log retention", batches_deleted=dropped, stored_bytes=self.topics.budget.used)
        self._schedule_retention()

    async def stop(self) -> None:
        """Stop listening, answer every parked request as Kafka does on unload, then hang up."""
        self.ready = False
        for server in self._servers:
            server.close()
        self.coordinator.shutdown()
        if self._timer is not None:
            self._timer.stop()
        await asyncio.sleep(0)  # let the answers just written reach the transports
        for connection in list(self.connections):
            connection.hang_up()
        for server in self._servers:
            await server.wait_closed()
        if self.control is not None:
            await self.control.stop()
        self.events.close()
        log.info("broker stopped")
