"""One client connection: bytes in, requests answered one at a time and in order, answers out.

Kafka answers a connection's requests in order, muting the channel while one is in flight (SocketServer's
Processor mutes a channel on each complete receive and unmutes it once the response is sent). Here too a parked
request (a JoinGroup waiting for its group, a delayed fault) holds back everything behind it on that connection,
and nothing else.

The steps are kept apart, after aiohttp's ``web_protocol``: ``data_received`` parses bytes into frames (the
``FrameReader`` does no I/O); ``_drain`` is the loop over the queued frames, with the Heartbeat fast path inline
because it is the hot path; ``_handle`` answers any other request; ``_fail`` closes on an error; the end of each
pass flushes the answers, then either closes (``_end``) or lets ``_update_reading`` decide, alone, whether to read.

Nothing a client sends escapes as a traceback: a frame that does not decode (protocol/bounds.py checks every length
before kio reads it) closes the connection with the reason; a handler's InvalidRequest is logged and answered with
Kafka's error response; an answer that cannot be encoded (a string too long, MemoryError) closes the connection,
logged with peer, client id and reason, never as asyncio's "Fatal error on transport".

Flow control, both ways. Read side: a client that queues more than ``_MAX_QUEUED_REQUESTS`` behind a parked one
is not read until half of them are answered. Write side: a client that sends requests and does not read the
answers (pipelined Fetches, say) would make the broker hold its answers without bound, so the transport's write
buffer has limits (``socket_send_buffer_high_bytes`` / ``..._low_bytes``): past the high-water mark asyncio calls
``pause_writing`` and the connection answers nothing more and reads nothing more until ``resume_writing`` says the
buffer drained to the low-water mark. That is Kafka's muted channel, with room for more than one answer.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import struct
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from broker.api.api_versions import unsupported_version_response
from broker.api.base import NO_RESPONSE, ApiContext, Call, CloseConnection, InvalidRequest
from broker.api.dispatch import HANDLERS
from broker.api.routes import error_answer, request_identity
from broker.coordinator.client import Client
from broker.log import get_logger
from broker.server.faults import CLOSE, DELAY, SWALLOW, FaultRule
from broker.server.quotas import Slot
from broker.timing.deferred import Deferred
from protocol.api_versions import decode_api_versions, encode_api_versions_answer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, api_name
from protocol.codec import Request, decode_request, encode_response, peek_client_id
from protocol.consumer_heartbeat import decode_steady, encode_steady_answer
from protocol.errors import ProtocolError
from protocol.framing import FrameError, FrameReader
from protocol.heartbeat import decode_heartbeat, encode_heartbeat_response

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

log = get_logger("server")  # structlog, imported at the first call (broker/log.py)

# Stop reading from a client that has this many requests queued behind a parked one; read again at half.
_MAX_QUEUED_REQUESTS = 256
_RESUME_QUEUED_REQUESTS = _MAX_QUEUED_REQUESTS // 2
_HEARTBEAT = int(ApiKey.HEARTBEAT)  # a plain int: the hot path compares a frame's byte with it
_HEARTBEAT_MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1]
_CORRELATION = struct.Struct(">i")
# The Heartbeats a connection remembers decoded (``Connection._remember``): more than the members a client has.
_REMEMBERED_HEARTBEATS = 64
# (version, raw client id, group id, generation id, member id, group instance id): a decoded Heartbeat without its
# correlation id, the one part that changes from one beat of a member to the next.
_KnownHeartbeat = tuple[int, bytes, str, int, str, str | None]
_CONSUMER_HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_CONSUMER_HEARTBEAT_MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT][1]


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer, api: ApiContext, slot: Slot | None = None) -> None:
        self._server = server
        self._slot = slot  # this connection's count in max.connections and max.connections.per.ip
        self._api = api  # the listener's: Metadata and FindCoordinator answer with its advertised address
        self._reader = FrameReader(server.settings.socket_request_max_bytes)
        self._high_water = server.settings.socket_send_buffer_high_bytes
        self._queue: collections.deque[bytes] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()  # kept: get_running_loop checks the process id, a system call
        self._busy = False  # a parked or delayed request holds the queue
        self._writing_paused = False  # the transport holds more than the high-water mark (pause_writing)
        self._reading_paused = False
        self._closed = False
        self._client_id = ""
        self._client_id_raw = b""  # as the Heartbeat fast path reads it
        self._client = Client("", "/unknown")
        # Answers written during one pass over the queue go out in one write: one syscall, not one per request.
        self._out: list[bytes] = []
        self._out_bytes = 0  # in _out, heartbeat answers left out: tiny, and no more of them than one read brought
        self.peer = "unknown"
        self._drain_scheduled = False
        # Set when the connection must end once what is queued is answered ("" = quietly, else the reason).
        self._close_when_drained: str | None = None
        # The frame a delay rule held back: when it comes round again it is not matched a second time.
        self._released: bytes | None = None
        # Heartbeats decoded on this connection, by their bytes after the correlation id (``_remember``); None
        # once the connection carries more members than it holds.
        self._beats: dict[bytes, _KnownHeartbeat] | None = {}
        self._heartbeats_seen = 0  # answered on the fast path, for ``_remember``
        self._heartbeats_mark = 0  # ``_heartbeats_seen`` when ``_beats`` was last emptied

    @property
    def reading(self) -> bool:
        """Whether the connection reads requests (flow control pauses it, either side)."""
        return not self._reading_paused and not self._closed

    @property
    def unsent_bytes(self) -> int:
        """Answer bytes the transport holds because the client has not read them yet."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    # -- asyncio.Protocol: I/O -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's are not asyncio.Transport subclasses, so a cast, not an isinstance check.
        self._transport = cast(asyncio.Transport, transport)
        self._transport.set_write_buffer_limits(self._high_water, self._server.settings.socket_send_buffer_low_bytes)
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
            self._queue.extend(self._reader.feed(data))
        except FrameError as error:
            # Kafka reads one request at a time: the requests before the bad bytes are answered first.
            self._queue.extend(error.frames)
            self._close_after_drain(str(error))
            return
        self._drain()

    def eof_received(self) -> bool:
        incomplete = self._reader.buffered
        reason = f"peer closed the connection inside a request ({incomplete} bytes of an incomplete frame)"
        # Keep the transport open to answer what is already queued or parked; the pass that answers the last closes it.
        self._close_after_drain(reason if incomplete else "")
        return True

    def pause_writing(self) -> None:
        # Called from inside transport.write: the pass that wrote stops at its loop's next turn.
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._schedule_drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._queue.clear()
        self._server.connections.discard(self)
        if self._slot is not None:
            self._slot.release()  # an acceptor waiting at max.connections may take the next one
        self._server.connection_closed()

    def _close_after_drain(self, reason: str) -> None:
        if self._close_when_drained is None:
            self._close_when_drained = reason
        self._drain()

    def _schedule_drain(self) -> None:
        # A fresh loop turn: the callers run inside the coordinator or the transport, neither of which to re-enter.
        if not self._drain_scheduled and not self._closed:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    # -- the loop over queued requests -----------------------------------------------------------------------

    def _drain(self) -> None:
        """Answer queued requests in order until none is left or one must wait, then end the pass."""
        self._drain_scheduled = False
        # Every answer of one pass goes out in the final flush, so the pass's length is each one's latency.
        started = perf_counter()
        heartbeats = heartbeat_version = 0  # counted apart from the rest: a local int is the cheapest tally
        steady_beats = steady_version = 0  # likewise the consumer groups' steady ConsumerGroupHeartbeats
        answered: list[tuple[int, int]] = []  # (api key, version) of every other answer this pass wrote
        try:
            queue = self._queue
            coordinator = self._server.coordinator
            armed = self._server.faults.rules  # a dict's truth is a C check: no rule set, nothing more to pay
            beats = self._beats
            out = self._out  # emptied in place by _flush, never replaced
            while queue and not (self._busy or self._writing_paused or self._closed):
                frame = queue.popleft()
                if len(frame) > 1 and frame[1] == _HEARTBEAT and frame[0] == 0:  # api key 12, no slice
                    # A member's Heartbeats differ only in the correlation id until its generation changes: the
                    # rest of the frame (client id and body, from byte 8) keys what it decoded to the last time.
                    rest = frame[8:]
                    known = beats.get(rest) if beats is not None else None
                    if known is not None and frame[3] == known[0] and frame[2] == 0:
                        version, client_id, group_id, generation_id, member_id, instance_id = known
                        (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
                    else:
                        heartbeat = decode_heartbeat(frame, _HEARTBEAT_MAX_VERSION)
                        if heartbeat is None:
                            done = self._handle(frame, started)  # the generic path decides
                            if done is not None:
                                answered.append(done)
                            continue
                        version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = heartbeat
                        if beats is not None:
                            known = (version, client_id, group_id, generation_id, member_id, instance_id)
                            beats = self._remember(rest, known, heartbeats)
                    # A new client id that is not UTF-8 goes the generic way, where kio refuses it.
                    if client_id == self._client_id_raw or self._learn_client_id(client_id):
                        if armed and (rule := self._fault_rule(frame, _HEARTBEAT, group_id, member_id, instance_id)):
                            error = self._fault(rule, frame)
                            if error is not None:
                                out.append(encode_heartbeat_response(version, correlation_id, error))
                                answered.append((_HEARTBEAT, version))
                            continue
                        try:
                            error = coordinator.heartbeat(group_id, generation_id, member_id, instance_id)
                        except Exception:
                            self._fail("HEARTBEAT")
                            break
                        out.append(encode_heartbeat_response(version, correlation_id, error))
                        heartbeats += 1
                        heartbeat_version = version
                        continue
                elif len(frame) > 1 and frame[1] == _CONSUMER_HEARTBEAT and frame[0] == 0 and not armed:
                    # KIP-848's steady beat (protocol/consumer_heartbeat.py); fault rules take the generic path.
                    steady = decode_steady(frame, _CONSUMER_HEARTBEAT_MAX_VERSION)
                    if steady is not None:
                        version, correlation_id, client_id, group_id, member_id, raw_member_id, epoch = steady
                        if client_id == self._client_id_raw or self._learn_client_id(client_id):
                            interval = coordinator.consumer_heartbeat_steady(
                                group_id, member_id, epoch, self._client_id
                            )
                            if interval is not None:
                                out.append(encode_steady_answer(correlation_id, raw_member_id, epoch, interval))
                                steady_beats += 1
                                steady_version = version
                                continue
                elif len(frame) > 1 and frame[1] == _API_VERSIONS and frame[0] == 0 and not armed:
                    # Every client's first request, answered without kio (protocol/api_versions.py): it is what
                    # `serve` answers first, before kio's readers and writers are imported.
                    versions = decode_api_versions(frame)
                    if versions is not None and (
                        versions[2] == self._client_id_raw or self._learn_client_id(versions[2])
                    ):
                        out.append(encode_api_versions_answer(versions[0], versions[1]))
                        answered.append((_API_VERSIONS, versions[0]))
                        continue
                done = self._handle(frame, started)
                if done is not None:
                    answered.append(done)
            self._flush()  # the answers before a parked one do not wait for it
            if self._close_when_drained is not None and not self._busy and not queue:
                self._end(self._close_when_drained)
            else:
                self._update_reading()
        except Exception:
            # Nothing may escape to the transport: asyncio would log "Fatal error" without peer or client.
            log.exception("connection failed", peer=self.peer, client_id=self._client_id)
            self.close("internal error between requests")
        finally:
            if heartbeats:
                self._heartbeats_seen += heartbeats
            if heartbeats or answered or steady_beats:
                stats = self._server.request_stats
                elapsed = perf_counter() - started
                if heartbeats:
                    stats.record(_HEARTBEAT, heartbeat_version, elapsed, heartbeats)
                if steady_beats:
                    stats.record(_CONSUMER_HEARTBEAT, steady_version, elapsed, steady_beats)
                if answered:
                    stats.record_pass(elapsed, answered)

    def _handle(self, frame: bytes, started: float) -> tuple[int, int] | None:
        """Answer one request on the generic path: its (api key, version), or None when it was not answered now
        (it waits, or it ended the connection; either way the loop's condition stops the pass)."""
        try:
            request = decode_request(frame)
        except ProtocolError as error:
            self._note_client_id(frame)
            self.close(str(error))
            return None
        if request.client_id != self._client_id:
            self._set_client_id(request.client_id)
        if self._server.faults.rules and request.body is not None:
            identity = request_identity(request.api_key, request.body)
            if rule := self._fault_rule(frame, request.api_key, *identity):
                answer_with = self._fault(rule, frame)
                if answer_with is None:
                    return None
                answer = error_answer(request.api_key, request.api_version, request.body, answer_with)
                if isinstance(answer, CloseConnection):
                    self.close(answer.reason)
                    return None
                self._send(request, answer)
                return request.api_key, request.api_version
        try:
            answer = self._dispatch(request)
        except InvalidRequest as invalid:
            # KafkaApis.handleError: logged with the request's context, answered with the request's error response.
            log.warning(
                "invalid request",
                peer=self.peer,
                client_id=self._client_id,
                api=api_name(request.api_key),
                version=request.api_version,
                reason=str(invalid),
            )
            answer = invalid.answer
        except Exception:
            self._fail(api_name(request.api_key))
            return None
        if isinstance(answer, Deferred):
            if not answer.done:
                self._busy = True
                answer.add_done_callback(partial(self._answer_parked, request, started))
                return None
            answer = answer.value
        if isinstance(answer, CloseConnection):
            self.close(answer.reason)
            return None
        if not self._send(request, answer):
            return None
        return request.api_key, request.api_version

    def _dispatch(self, request: Request) -> Any:
        if request.body is None:  # ApiVersions newer than we speak
            return unsupported_version_response()
        handler = HANDLERS[request.api_key]
        return handler(self._api, Call(request.api_version, self._client), request.body)

    def _fail(self, api: str) -> None:
        log.exception("request failed", peer=self.peer, client_id=self._client_id, api=api)
        self.close("internal error while handling a request")

    def _end(self, reason: str) -> None:
        """Close once everything queued is answered: with a warning naming ``reason``, or quietly without one."""
        if reason:
            self.close(reason)
        else:
            self.hang_up()

    def _update_reading(self) -> None:
        """The one place that pauses and resumes reading: paused while either side says so, that is while the
        answers wait to be sent (write side), while too many requests wait to be answered (read side), or once
        the connection is ending."""
        transport = self._transport
        if transport is None or self._closed:
            return
        if self._reading_paused:
            if (
                not self._writing_paused
                and len(self._queue) <= _RESUME_QUEUED_REQUESTS
                and self._close_when_drained is None
            ):
                self._reading_paused = False
                transport.resume_reading()
        elif self._writing_paused or len(self._queue) > _MAX_QUEUED_REQUESTS or self._close_when_drained is not None:
            self._reading_paused = True
            transport.pause_reading()

    def _remember(self, rest: bytes, known: _KnownHeartbeat, this_pass: int) -> dict[bytes, _KnownHeartbeat] | None:
        """Keep a decoded Heartbeat under its bytes; the memo, or None once it stopped paying on this connection.

        A client has one member (or a few) on its coordinator connection, so the memo stays small and nearly every
        Heartbeat is found in it. When it fills up with fewer than three finds per entry since it was last emptied,
        the connection carries more members than it holds (a load generator cycling through thousands): it is
        dropped and every Heartbeat there is decoded, as before the memo.
        """
        beats = self._beats
        assert beats is not None
        if len(beats) >= _REMEMBERED_HEARTBEATS:
            seen = self._heartbeats_seen + this_pass
            if seen - self._heartbeats_mark < 4 * _REMEMBERED_HEARTBEATS:
                self._beats = None
                return None
            self._heartbeats_mark = seen
            beats.clear()
        beats[rest] = known
        return beats

    def _learn_client_id(self, raw: bytes) -> bool:
        """A new client id from the Heartbeat fast path; False when it is not UTF-8, so that the fast path never
        answers a frame the generic path (kio's reader) would refuse."""
        try:
            client_id = raw.decode()
        except UnicodeDecodeError:
            return False
        self._client_id_raw = raw
        self._set_client_id(client_id)
        return True

    def _set_client_id(self, client_id: str) -> None:
        if client_id != self._client_id:
            self._client_id = client_id
            self._client = Client(client_id, self._client.host)

    def _note_client_id(self, frame: bytes) -> None:
        """Best effort, for the log line of a request that did not decode."""
        self._client_id = peek_client_id(frame) or self._client_id

    # -- answers ---------------------------------------------------------------------------------------------

    def _answer_parked(self, request: Request, started: float, response: Any) -> None:
        # Called from inside the coordinator: write now, but read the next request on a fresh loop turn.
        self._busy = False
        self._send(request, response)
        self._flush()
        self._server.request_stats.record(request.api_key, request.api_version, perf_counter() - started)
        self._schedule_drain()

    def _send(self, request: Request, response: Any) -> bool:
        """Encode and buffer one answer; False when it could not be (the connection is then closed)."""
        transport = self._transport
        if self._closed or transport is None or response is NO_RESPONSE:
            return True
        version = 0 if request.body is None else request.api_version  # unsupported ApiVersions: v0 body
        try:
            answer = encode_response(request.api_key, version, request.correlation_id, response)
        except Exception as error:  # MemoryError included: an answer too large to build is this connection's end
            # Kafka's writers throw ("field is too long to be serialized"); the channel closes. Said here with the
            # peer and client, never as the transport's "Fatal error" (which names neither).
            self.close(f"the answer to {api_name(request.api_key)} v{version} cannot be encoded: {error!r}")
            return False
        self._out.append(answer)
        self._out_bytes += len(answer)
        if self._out_bytes + transport.get_write_buffer_size() > self._high_water:
            # Past the high-water mark the answers go at once, so pause_writing stops the pass one answer past it.
            self._flush()
        return True

    def _flush(self) -> None:
        out = self._out
        if out:
            if not self._closed and self._transport is not None:
                self._transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            self._out_bytes = 0

    # -- fault rules -----------------------------------------------------------------------------------------

    def _fault_rule(
        self,
        frame: bytes,
        api_key: int,
        group_id: str | None,
        member_id: str | None,
        instance_id: str | None,
        transactional_id: str | None = None,
    ) -> FaultRule | None:
        if frame is self._released:  # a delayed request back from its delay is not matched a second time
            self._released = None
            return None
        server = self._server
        return server.faults.match(
            api_key, self._client_id, group_id, member_id, instance_id, server.coordinator.has_member, transactional_id
        )

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
        self._loop.call_later(rule.delay_ms / 1000, self._end_delay)

    def _end_delay(self) -> None:
        self._busy = False
        if not self._closed:
            self._drain()

    # -- closing ---------------------------------------------------------------------------------------------

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
