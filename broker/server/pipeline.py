"""One connection's requests without its transport: bytes in, answers out, one request at a time and in order.

Kafka answers a connection's requests in order, muting the channel while one is in flight (SocketServer's
Processor mutes a channel on each complete receive and unmutes it once the response is sent). Here too a parked
request (a JoinGroup waiting for its group, a delayed fault) holds back everything behind it on that connection,
and nothing else. The pipeline does no I/O (h11's shape): ``receive`` takes bytes, ``run`` answers what is queued
and hands the answers of the pass to ``PipelineIO.write`` in one write; the asyncio protocol around it
(broker/server/connection.py) keeps the transport and flow control, and a test drives it with bytes alone.

Each pass, the gates (broker/server/gates.py) are asked once whether any is armed. While none is, the fast paths
answer Heartbeat (``protocol/heartbeat.py``), the steady ConsumerGroupHeartbeat and ShareGroupHeartbeat
(``protocol/consumer_heartbeat.py``) and ApiVersions (``protocol/api_versions.py``) by hand; each is a decoder that
either answers or hands the frame back to the generic path (kio, ``protocol/codec.py``), and the client id they
read is checked in one place. While one is armed, every frame takes the generic path, where the gates see it
decoded before its handler does.

Nothing a client sends escapes as a traceback: a frame that does not decode (protocol/bounds.py checks every length
before kio reads it) closes the connection with the reason; a handler's InvalidRequest is logged and answered with
Kafka's error response; an answer that cannot be encoded (a string too long, MemoryError) closes the connection,
logged with peer, client id and reason, never as asyncio's "Fatal error on transport".
"""

from __future__ import annotations

import collections
import itertools
import struct
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any

from broker.api.api_versions import unsupported_version_response
from broker.api.base import NO_RESPONSE, ApiContext, Call, CloseConnection, InvalidRequest
from broker.api.dispatch import HANDLERS
from broker.api.routes import error_answer, request_identity, unsupported_version_answer
from broker.coordinator.client import Client
from broker.log import get_logger
from broker.server.gates import Answer, Close, Delay, GateRequest, Verdict
from broker.server.pipeline_state import CLOSED as _CLOSED
from broker.server.pipeline_state import DELAYED as _DELAYED
from broker.server.pipeline_state import PARKED as _PARKED
from broker.server.pipeline_state import READY as _READY
from broker.server.pipeline_state import PipelineIO as PipelineIO
from broker.server.pipeline_state import PipelineState as PipelineState
from broker.server.sasl_steps import SaslSteps
from broker.timing.deferred import Deferred
from protocol.api_versions import decode_api_versions, encode_api_versions_answer
from protocol.apis import SHARE_APIS, SUPPORTED_VERSIONS, ApiKey, api_name
from protocol.codec import Request, decode_request, encode_response, peek_client_id
from protocol.consumer_heartbeat import decode_share_steady, decode_steady, encode_steady_answer
from protocol.errors import ProtocolError
from protocol.framing import FrameError, FrameReader
from protocol.heartbeat import decode_heartbeat, encode_heartbeat_response
from protocol.share_fetch_requests import SteadyShareFetch, decode_steady_share_fetch

if TYPE_CHECKING:
    from broker.security.sasl.authenticator import SaslAuthenticator
    from broker.server.host import ConnectionHost

log = get_logger("server")  # structlog, imported at the first call (broker/log.py)

_HEARTBEAT = int(ApiKey.HEARTBEAT)  # plain ints: the hot path compares a frame's byte with them
_CONSUMER_HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_SHARE_HEARTBEAT = int(ApiKey.SHARE_GROUP_HEARTBEAT)
_SHARE_HEARTBEAT_VERSION = 1  # the one version its fast path reads
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_SHARE_FETCH = int(ApiKey.SHARE_FETCH)
_SHARE_FETCH_VERSION = 1  # the one version its fast path reads
_GENERIC = -1  # a frame no fast path answers
_HEARTBEAT_MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1]
_CONSUMER_HEARTBEAT_MAX_VERSION = SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT][1]
_CORRELATION = struct.Struct(">i")
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
# The Heartbeats a connection remembers decoded (``RequestPipeline._remember``): more than the members a client has.
_REMEMBERED_HEARTBEATS = 64
# (version, raw client id, group id, generation id, member id, group instance id): a decoded Heartbeat without its
# correlation id, the one part that changes from one beat of a member to the next.
_KnownHeartbeat = tuple[int, bytes, str, int, str, str | None]


_CONNECTION_IDS = itertools.count(1)
_FAILED = object()  # what ``_answer`` gives for a handler that raised: the connection is already closed


_steady_share_fetch_handler: Callable[[ApiContext, Call, SteadyShareFetch], Any] | None = None


def _steady_share_fetch() -> Callable[[ApiContext, Call, SteadyShareFetch], Any]:
    """broker/api/share_fetch.py's ``share_fetch_steady``, loaded as its family is (``HANDLERS``, which finishes
    loading the broker's state first): kio's modules stay off serve's path to its first answer."""
    global _steady_share_fetch_handler
    if _steady_share_fetch_handler is None:
        HANDLERS[ApiKey.SHARE_FETCH]  # the lookup loads the module the way every handler's loads
        from broker.api.share_fetch import share_fetch_steady

        _steady_share_fetch_handler = share_fetch_steady
    return _steady_share_fetch_handler


def _nowhere(data: bytes) -> None:
    """Where answers would go before ``connected``: nothing is received before then, so nothing is answered."""


class RequestPipeline(SaslSteps):
    """One connection's requests, answered in order. ``output_paused`` is set while the transport holds more than
    its high-water mark: a pass then answers nothing more (the asyncio protocol's ``pause_writing``)."""

    def __init__(self, host: ConnectionHost, api: ApiContext, io: PipelineIO) -> None:
        self._host = host
        self._api = api  # the listener's: Metadata and FindCoordinator answer with its advertised address
        self._io = io
        self._write: Callable[[bytes], None] = _nowhere  # the transport's, from ``connected`` on
        settings = host.settings
        self._reader = FrameReader(settings.socket_request_max_bytes)
        self._high_water = settings.socket_send_buffer_high_bytes
        self.requests: collections.deque[bytes] = collections.deque()  # received, not answered yet
        self.state = _READY
        self.output_paused = False
        # Set when the connection must end once what is queued is answered ("" = quietly, else the reason).
        self.ending: str | None = None
        # The request a Delay held back: when it comes round again no gate judges it a second time.
        self._released: bytes | None = None
        self.peer = "unknown"
        self._client_id = ""
        self._client_id_raw = b""  # as the fast paths read it
        self.connection_id = next(_CONNECTION_IDS)
        self._client = Client("", "/unknown", self.connection_id)
        # Answers written during one pass over the queue go out in one write: one syscall, not one per request.
        self._out: list[bytes] = []
        self._out_bytes = 0  # in _out, fast-path answers left out: tiny, and no more of them than one read brought
        # Heartbeats decoded on this connection, by their bytes after the correlation id (``_remember``); None
        # once the connection carries more members than it holds.
        self._beats: dict[bytes, _KnownHeartbeat] | None = {}
        self._heartbeats_seen = 0  # answered on the fast path, for ``_remember``
        self._heartbeats_mark = 0  # ``_heartbeats_seen`` when ``_beats`` was last emptied
        # A SASL listener's connection authenticates first (issue 30): its gate, armed until the login completes.
        self._sasl: SaslAuthenticator | None = api.sasl.authenticator(self._who) if api.sasl is not None else None

    @property
    def client_id(self) -> str:
        return self._client_id

    def connected(self, peer: str, host: str, write: Callable[[bytes], None]) -> None:
        """Who is at the other end: ``peer`` for the log, ``host`` (an address) for the coordinator's members;
        ``write`` sends answers to it, in order (the transport's own: one call, not two, per pass)."""
        self.peer = peer
        self._write = write
        self._client = Client(self._client_id, f"/{host}", self.connection_id, self._client.principal)

    # -- input -----------------------------------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Queue the frames ``data`` completes and answer what can be; nothing once the connection is ending."""
        if self.state is _CLOSED or self.ending is not None:
            return
        try:
            self.requests.extend(self._reader.feed(data))
        except FrameError as error:
            # Kafka reads one request at a time: the requests before the bad bytes are answered first.
            self.requests.extend(error.frames)
            self.ending = str(error)
        self.run()

    def end_of_input(self) -> None:
        """The peer sent its last bytes: answer what is queued or parked, then end."""
        incomplete = self._reader.buffered
        reason = f"peer closed the connection inside a request ({incomplete} bytes of an incomplete frame)"
        if self.ending is None:
            self.ending = reason if incomplete else ""
        self.run()

    # -- the loop over queued requests -----------------------------------------------------------------------

    def run(self) -> None:
        """Answer queued requests in order until none is left or one must wait, then end the pass: its answers go
        out in one write, and a connection that was ending and has nothing left to answer ends."""
        # Every answer of one pass goes out in the final flush, so the pass's length is each one's latency.
        started = perf_counter()
        heartbeats = heartbeat_version = 0  # counted apart from the rest: a local int is the cheapest tally
        steady_beats = steady_version = 0  # likewise the consumer groups' steady ConsumerGroupHeartbeats
        share_beats = 0  # and the share groups' steady ShareGroupHeartbeats (v1)
        answered: list[tuple[int, int]] = []  # (api key, version) of every other answer this pass wrote
        try:
            queue = self.requests
            coordinator = self._host.coordinator
            route = self._api.route  # None on a single-node broker: it coordinates every group
            armed = False  # one truth test per gate and pass: none armed, nothing more to pay
            for gate in self._host.gates:
                if gate.armed:
                    armed = True
                    break
            sasl = self._sasl
            if sasl is not None and queue:
                # Before login every frame is the authenticator's; after it, only the session's end costs a check.
                if sasl.pending:
                    armed = True
                elif sasl.expires_at_ms is not None and sasl.expired():
                    self.close(sasl.expire())  # Kafka closes an expired session at its next request, unanswered
            beats = self._beats
            out = self._out  # emptied in place by _flush, never replaced
            while queue and self.state is _READY and not self.output_paused:
                frame = queue.popleft()
                # Each fast path decodes its frame by hand or hands it back (kind _GENERIC); the byte compare is
                # the cheapest recognition: api key 12, 68, 76, 78 or 18 in the frame's first two bytes, no slice.
                kind = frame[1] if len(frame) > 1 and frame[0] == 0 and not armed else _GENERIC
                if kind == _HEARTBEAT:
                    # A member's Heartbeats differ only in the correlation id until its generation changes: the
                    # rest of the frame (client id and body, from byte 8) keys what it decoded to the last time.
                    rest = frame[8:]
                    known = beats.get(rest) if beats is not None else None
                    if known is not None and frame[3] == known[0] and frame[2] == 0:
                        version, client_id, group_id, generation_id, member_id, instance_id = known
                        (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
                    elif (heartbeat := decode_heartbeat(frame, _HEARTBEAT_MAX_VERSION)) is not None:
                        version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = heartbeat
                        if beats is not None:
                            known = (version, client_id, group_id, generation_id, member_id, instance_id)
                            beats = self._remember(rest, known, heartbeats)
                    else:
                        kind = _GENERIC
                elif kind == _CONSUMER_HEARTBEAT:
                    # KIP-848's steady beat: every optional field null, else the generic path.
                    steady = decode_steady(frame, _CONSUMER_HEARTBEAT_MAX_VERSION)
                    if steady is not None:
                        version, correlation_id, client_id, group_id, member_id, raw_member_id, epoch = steady
                    else:
                        kind = _GENERIC
                elif kind == _SHARE_HEARTBEAT:
                    # KIP-932's steady beat (v1, RackId and SubscribedTopicNames null), once share groups are on:
                    # else the generic path answers UNSUPPORTED_VERSION as Kafka does.
                    steady = decode_share_steady(frame) if self._host.settings.group.share_groups_enabled else None
                    if steady is not None:
                        version, correlation_id, client_id, group_id, member_id, raw_member_id, epoch = steady
                    else:
                        kind = _GENERIC
                elif kind == _SHARE_FETCH:
                    # KIP-932's poll, one partition or none and v1 (protocol/share_fetch_requests.py), on one node
                    # with share groups on: the coordinator's own fetch, without kio's request dataclasses.
                    fetch = (
                        decode_steady_share_fetch(frame)
                        if route is None and self._host.settings.group.share_groups_enabled
                        else None
                    )
                    if fetch is not None:
                        correlation_id, client_id = fetch[0], fetch[1]
                    else:
                        kind = _GENERIC
                elif kind == _API_VERSIONS:
                    # Every client's first request, answered without kio: it is what `serve` answers first, before
                    # kio's readers and writers are imported.
                    versions = decode_api_versions(frame)
                    if versions is not None:
                        version, correlation_id, client_id = versions
                    else:
                        kind = _GENERIC
                else:
                    kind = _GENERIC
                # The client id, for every fast path: a new one that is not UTF-8 goes the generic way, where kio
                # refuses it.
                if kind != _GENERIC and (client_id == self._client_id_raw or self._learn_client_id(client_id)):
                    if kind == _HEARTBEAT:
                        try:
                            # A multi-node broker's other nodes answer NOT_COORDINATOR (cluster/routing.py).
                            routed = route.group_error(group_id) if route is not None else None
                            if routed is None:
                                error = coordinator.heartbeat(group_id, generation_id, member_id, instance_id)
                            else:
                                error = routed
                        except Exception:
                            self._fail("HEARTBEAT")
                            break
                        out.append(encode_heartbeat_response(version, correlation_id, error))
                        heartbeats += 1
                        heartbeat_version = version
                        continue
                    if kind == _SHARE_FETCH and fetch is not None:
                        if self._share_fetch(fetch, correlation_id, started):
                            answered.append((_SHARE_FETCH, _SHARE_FETCH_VERSION))
                        continue  # a parked or failed fetch changed the state: the loop's condition ends the pass
                    if kind == _API_VERSIONS:
                        share_groups = self._host.settings.group.share_groups_enabled
                        cluster = route is not None  # several nodes list OffsetForLeaderEpoch too
                        out.append(encode_api_versions_answer(version, correlation_id, share_groups, cluster))
                        answered.append((_API_VERSIONS, version))
                        continue
                    # The coordinator answers a steady beat only if the member is reconciled and nothing changed
                    # (and, with several nodes, only on the group's coordinator: the generic path answers the rest).
                    if route is not None and route.group_error(group_id) is not None:
                        interval = None
                    elif kind == _CONSUMER_HEARTBEAT:
                        interval = coordinator.consumer_heartbeat_steady(group_id, member_id, epoch, self._client_id)
                    else:
                        client = self._client
                        interval = coordinator.share_heartbeat_steady(
                            group_id, member_id, epoch, client.client_id, client.host
                        )
                    if interval is not None:
                        # The two answers have the same layout (protocol/consumer_heartbeat.py).
                        out.append(encode_steady_answer(correlation_id, raw_member_id, epoch, interval))
                        if kind == _CONSUMER_HEARTBEAT:
                            steady_beats += 1
                            steady_version = version
                        else:
                            share_beats += 1
                        continue
                done = self._handle(frame, started)
                if done is not None:
                    answered.append(done)
                if sasl is not None and sasl.pending:  # a re-authentication began: what follows is its to judge
                    armed = True
            self._flush()  # the answers before a parked one do not wait for it
            if self.ending is not None and self.state is _READY and not queue:
                self._end(self.ending)
        except Exception:
            # Nothing may escape to the transport: asyncio would log "Fatal error" without peer or client.
            log.exception("connection failed", peer=self.peer, client_id=self._client_id)
            self.close("internal error between requests")
        finally:
            if heartbeats:
                self._heartbeats_seen += heartbeats
            if heartbeats or answered or steady_beats or share_beats:
                stats = self._host.request_stats
                elapsed = perf_counter() - started
                if heartbeats:
                    stats.record(_HEARTBEAT, heartbeat_version, elapsed, heartbeats)
                if steady_beats:
                    stats.record(_CONSUMER_HEARTBEAT, steady_version, elapsed, steady_beats)
                if share_beats:
                    stats.record(_SHARE_HEARTBEAT, _SHARE_HEARTBEAT_VERSION, elapsed, share_beats)
                if answered:
                    stats.record_pass(elapsed, answered)

    def _handle(self, frame: bytes, started: float) -> tuple[int, int] | None:
        """Answer one request on the generic path: its (api key, version), or None when it was not answered now
        (it waits, or it ended the connection; either way the loop's condition stops the pass)."""
        sasl = self._sasl
        if sasl is not None and sasl.pending:
            if sasl.too_large(len(frame)):  # sasl.server.max.receive.size, before the login
                self.close(f"SASL frame of {len(frame)} bytes is over sasl.server.max.receive.size")
                return None
            if sasl.raw_tokens:  # after a SaslHandshake v0: a bare token, no request header (spec 2.4)
                self._sasl_step(sasl.raw_token(frame), None)
                return None
        try:
            request = decode_request(frame)
        except ProtocolError as error:
            self._note_client_id(frame)
            self.close(str(error))
            return None
        if request.client_id != self._client_id:
            self._set_client_id(request.client_id)
        if sasl is not None and (sasl.pending or request.api_key == _SASL_HANDSHAKE):
            step = sasl.request(request.api_key, request.api_version, request.body)
            if step is not None:
                return self._sasl_step(step, request)
        if frame is self._released:  # back from its delay: the gates judged it once
            self._released = None
        else:
            verdict = self._judge(request)
            if verdict is not None:
                if not isinstance(verdict, Answer):
                    self._hold_or_close(verdict, frame)
                    return None
                answer = error_answer(request.api_key, request.api_version, request.body, verdict.error)
                if isinstance(answer, CloseConnection):  # a Produce with acks=0: Kafka closes instead of answering
                    self.close(answer.reason)
                    return None
                return (request.api_key, request.api_version) if self._send(request, answer) else None
        if not self._deliver(request, self._answer(request, self._dispatch, request), started):
            return None
        return request.api_key, request.api_version

    def _share_fetch(self, fetch: SteadyShareFetch, correlation_id: int, started: float) -> bool:
        """Answer a steady ShareFetch as ``_handle`` answers one through kio, from ``share_fetch_steady`` (the
        handler's same request, coordinator call and answer); True when its answer was written now."""
        request = Request(_SHARE_FETCH, _SHARE_FETCH_VERSION, correlation_id, self._client_id, fetch)
        call = Call(_SHARE_FETCH_VERSION, self._client)
        return self._deliver(request, self._answer(request, _steady_share_fetch(), self._api, call, fetch), started)

    def _answer(self, request: Request, handler: Callable[..., Any], *args: Any) -> Any:
        """``handler(*args)``: the request's answer, or _FAILED when the handler raised (the connection is closed).
        An InvalidRequest is logged with the request's context and answered with its error response, as
        KafkaApis.handleError does."""
        try:
            return handler(*args)
        except InvalidRequest as invalid:
            log.warning(
                "invalid request", peer=self.peer, client_id=self._client_id, api=api_name(request.api_key),
                version=request.api_version, reason=str(invalid),
            )  # fmt: skip
            return invalid.answer
        except Exception:
            self._fail(api_name(request.api_key))
            return _FAILED

    def _deliver(self, request: Request, answer: Any, started: float) -> bool:
        """Write ``answer`` now, or park the queue until its Deferred is done; True when it was written now."""
        if answer is _FAILED:
            return False
        if isinstance(answer, Deferred):
            if not answer.done:
                self.state = _PARKED
                answer.add_done_callback(partial(self._answer_parked, request, started))
                return False
            answer = answer.value
        if isinstance(answer, CloseConnection):  # a Produce with acks=0 that failed: Kafka closes instead
            self.close(answer.reason)
            return False
        return self._send(request, answer)

    def _judge(self, request: Request) -> Verdict | None:
        """The first verdict of an armed gate, in the gates' order; None lets the request through to its handler."""
        seen: GateRequest | None = None
        for gate in self._host.gates:
            if gate.armed:
                if seen is None:
                    seen = GateRequest(
                        request.api_key, request.api_version, self._client_id, request.body, self._client
                    )
                verdict = gate.check(seen)
                if verdict is not None:
                    return verdict
        return None

    def _hold_or_close(self, verdict: Delay | Close, frame: bytes) -> None:
        if isinstance(verdict, Close):
            self.close(verdict.reason)
            return
        # A Delay. Requests on a connection are answered in order: everything behind this one waits with it.
        self.requests.appendleft(frame)
        self._released = frame
        self.state = _DELAYED
        self._io.call_later(verdict.ms / 1000, self._end_delay)

    def _end_delay(self) -> None:
        if self.state is _DELAYED:
            self.state = _READY
            self._io.run_now()

    def _dispatch(self, request: Request) -> Any:
        # From the settings, not the coordinator: ApiVersions is answered before the coordinator's modules load.
        share_groups = self._host.settings.group.share_groups_enabled
        if request.body is None:  # ApiVersions newer than we speak
            return unsupported_version_response(share_groups, self._api.route is not None)
        if not share_groups and request.api_key in SHARE_APIS:
            # share.version 0: Kafka's KafkaApis answers each share API UNSUPPORTED_VERSION in its own shape.
            return unsupported_version_answer(request.api_key, request.api_version, request.body)
        route = self._api.route
        if route is not None and route.keyed(request.api_key, request.api_version):
            named = request_identity(request.api_key, request.body)
            routed = route.request_error(request.api_key, named.group_id, named.transactional_id)
            if routed is not None:
                return error_answer(request.api_key, request.api_version, request.body, routed)
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
        """A new client id from a fast path; False when it is not UTF-8, so that a fast path never answers a frame
        the generic path (kio's reader) would refuse."""
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
            self._client = Client(client_id, self._client.host, self.connection_id, self._client.principal)

    def set_principal(self, principal: str) -> None:
        """Who the connection is from now on (issue 30: a TLS client certificate or a SASL login)."""
        self._client = Client(self._client_id, self._client.host, self.connection_id, principal)

    @property
    def principal(self) -> str:
        return self._client.principal

    def _note_client_id(self, frame: bytes) -> None:
        """Best effort, for the log line of a request that did not decode."""
        self._client_id = peek_client_id(frame) or self._client_id

    # -- answers ---------------------------------------------------------------------------------------------

    def _answer_parked(self, request: Request, started: float, response: Any) -> None:
        # Called from inside the coordinator: write now, but read the next request on a fresh loop turn.
        if self.state is _PARKED:
            self.state = _READY
        self._send(request, response)
        self._flush()
        self._host.request_stats.record(request.api_key, request.api_version, perf_counter() - started)
        if self.state is not _CLOSED:
            self._io.run_soon()

    def _send(self, request: Request, response: Any) -> bool:
        """Encode and buffer one answer; False when it could not be (the connection is then closed)."""
        if self.state is _CLOSED or response is NO_RESPONSE:
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
        if self._out_bytes + self._io.unsent_bytes > self._high_water:
            # Past the high-water mark the answers go at once, so pause_writing stops the pass one answer past it.
            self._flush()
        return True

    def _flush(self) -> None:
        out = self._out
        if out:
            if self.state is not _CLOSED:
                self._write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            self._out_bytes = 0

    # -- closing ---------------------------------------------------------------------------------------------

    def close(self, reason: str) -> None:
        """End the connection, saying why in a warning; what was answered before still goes out."""
        if self.state is _CLOSED:
            return
        log.warning("closing connection", peer=self.peer, client_id=self._client_id, reason=reason)
        self.hang_up()

    def hang_up(self) -> None:
        """End the connection quietly; what was answered before still goes out, as with Kafka."""
        if self.state is _CLOSED:
            return
        self._flush()
        self.lost()
        self._io.close_transport()

    def lost(self) -> None:
        """The transport is gone: nothing more is read or answered."""
        self.state = _CLOSED
        self.requests.clear()
