"""The control API's HTTP edge: every bad request gets the contract's JSON error, and every wait is bounded.

aiohttp refuses a malformed request (an unknown method, a request line or header field over its limit, raw
non-ASCII in the URL, a bad chunk size) in its protocol class, ``aiohttp.web_protocol.RequestHandler``, before any
route or middleware runs: it answers ``text/plain`` and logs a traceback through the stdlib logger. Its documented
knobs bound sizes and idle time (``max_line_size``, ``max_field_size``, ``max_headers``, ``keepalive_timeout``,
``lingering_time``, ``client_max_size``), but the answer can only be changed through the protocol's
``handle_error`` hook, and nothing bounds how long a request's header may take once it has begun. So:

- ``GuardedAppRunner`` builds the application's server with ``_GuardedRequestHandler``, which renders every
  error the protocol answers itself as ``{"error": ...}`` and logs one structlog line (peer, reason, no traceback),
  and which answers 408 and closes when a header has not arrived ``header_timeout_s`` after it began (what nginx
  calls ``client_header_timeout``; a connection that sends nothing at all is closed too, without an answer);
- before any path is matched, a body declared over the limit is refused (413 from ``Content-Length``, before a byte
  of it is read or a ``100 Continue`` is sent), and so is an ``Expect`` other than ``100-continue`` (417);
- a chunked body whose chunk sizes declare more than the limit is refused (413) as soon as the size line that passes
  it is read, before the chunk's bytes (``BodyFraming`` reads the sizes llhttp keeps to itself): by
  ``_before_routing`` when it came with the header, else by ``read_body``; the connection then reads no more;
- ``error_middleware`` answers what the router and handlers refuse: 404, 405, a chunked body past the limit (413),
  and ``Refused`` (a body that does not arrive in time: 408; or that cannot be decoded: 400; or whose chunks
  declare too much: 413); anything else unexpected is a JSON 500 with its traceback in the JSON log line;
- ``read_body`` reads a body within ``body_timeout_s``; aiohttp's ``client_max_size`` stops a chunked body at the
  limit while it is read (413). An unread body is drained for at most ``body_timeout_s`` (``lingering_time``);
- a client that hangs up in the middle of a request is an ordinary disconnect: one debug line naming the peer
  (``connection_lost``), no answer attempted and no traceback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import structlog
from aiohttp import hdrs, web
from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError, LineTooLong
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_protocol import RequestHandler

from broker.control.body_framing import BodyFraming, Framed
from broker.control.kafka_frames import PREFIX_BYTES, KafkaFrameNotices, looks_like_kafka

log = structlog.get_logger("control")

# What web.Server calls with each request: the application's router and middlewares behind it.
ServerHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class HttpLimits:
    """How long and how much the control API waits for and reads from one client."""

    # From the connection (or the first byte of a later request on it) to the end of the request's header.
    header_timeout_s: float = 10.0
    # To read a whole request body; an unread body is also drained for at most this long before the close.
    body_timeout_s: float = 10.0
    # The contract's 1 MiB (aiohttp's client_max_size).
    max_body_bytes: int = 1024 * 1024
    # An idle kept-alive connection between requests (aiohttp's own default is an hour).
    keepalive_timeout_s: float = 75.0
    # The request line and each header field (aiohttp's defaults), and how many header fields.
    max_line_bytes: int = 8190
    max_headers: int = 128


class Refused(Exception):
    """A request the control API will not serve; ``error_middleware`` answers it with ``status`` and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    """The contract's ``Error`` body (``WaitTimeout`` with ``extra``)."""
    return web.json_response({"error": message, **extra}, status=status, dumps=lambda v: json.dumps(v, default=str))


def _peer(peername: Any) -> str | None:
    if isinstance(peername, tuple) and len(peername) >= 2:
        return f"{peername[0]}:{peername[1]}"
    return None if peername is None else str(peername)


def rejected(request: web.BaseRequest, status: int, message: str, *, close: bool = False) -> web.Response:
    """Answers ``status`` with ``message``, logged with who sent it.

    ``close``: the body was left unread or unreadable, so the connection ends after the answer (always for 408, 413
    and 417, RFC 9110 15.5.9, 15.5.14 and 10.1.1); what remains of the body is drained for at most
    ``body_timeout_s`` first.
    """
    log.warning(
        "control request rejected",
        peer=_peer(request.transport.get_extra_info("peername") if request.transport else None),
        user_agent=request.headers.get("User-Agent"),
        method=request.method,
        path=request.path,
        status=status,
        reason=message,
    )
    answer = json_error(status, message)
    if close or status in (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, 417):
        answer.force_close()
    return answer


async def read_body(request: web.Request, limits: HttpLimits) -> bytes:
    """The whole body, or ``Refused``: 408 when it does not arrive in time, 400 when it cannot be decoded.

    A body over ``client_max_size`` raises aiohttp's 413 as soon as that much has been read (chunked included).
    """
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            return await request.read()
    except TimeoutError:
        raise Refused(408, f"the request body did not arrive within {limits.body_timeout_s:g} s") from None
    except web.RequestPayloadError as bad:
        raise Refused(400, _payload_reason(bad)) from None


def _payload_reason(bad: web.RequestPayloadError) -> str:
    """A truncated chunk, a bad Content-Encoding (gzip that is not gzip): aiohttp's payload parser says why."""
    cause = bad.__cause__ or bad
    reason = cause.message if isinstance(cause, HttpProcessingError) else str(cause)
    return f"the request body cannot be read: {str(reason).strip() or type(cause).__name__}"


def error_middleware(limits: HttpLimits) -> Middleware:
    @web.middleware
    async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except Refused as refused:
            return rejected(request, refused.status, refused.message, close=True)
        except web.HTTPException as failure:
            if failure.status < 400:
                raise
            if failure.status == 404:
                return json_error(404, f"no such endpoint: {request.method} {request.path}")
            if failure.status == 405:
                answer = json_error(405, f"{request.method} is not allowed on {request.path}")
                if "Allow" in failure.headers:
                    answer.headers["Allow"] = failure.headers["Allow"]
                return answer
            if failure.status == 413:  # a chunked body that passed the limit while it was read
                return rejected(request, 413, _too_large(limits, "more was sent"))
            return json_error(failure.status, failure.reason)
        except (ConnectionError, asyncio.CancelledError):
            raise  # the client is gone: nobody to answer
        except Exception as bug:
            # Not a client's fault: the traceback goes in the JSON log line, the client gets the contract's shape.
            log.exception("control handler failed", method=request.method, path=request.path)
            return json_error(500, f"internal error: {type(bug).__name__}")

    return json_errors


def _too_large(limits: HttpLimits, what: str) -> str:
    return f"the request body is larger than the {limits.max_body_bytes} bytes allowed ({what})"


def _parser_reason(status: int, exc: BaseException | None, message: str | None) -> str:
    """What the protocol refused, in one line: aiohttp's messages quote the request's bytes on further lines."""
    if isinstance(exc, LineTooLong):
        return f"the request line or a header field is longer than {exc.args[1]} bytes"
    text = message or (exc.message if isinstance(exc, HttpProcessingError) else None) or ""
    words = []
    for line in str(text).splitlines():
        line = line.strip().rstrip(":")
        if line.startswith(("b'", 'b"', "bytearray(", "^")):
            break  # the quoted request and a caret under the bad byte
        if line:
            words.append(line)
    reason = ": ".join(words)[:200] or HTTPStatus(status).phrase
    if isinstance(exc, BadHttpMethod):
        return f"not an HTTP method this server knows ({reason})"
    return reason


class _GuardedRequestHandler(RequestHandler):
    """aiohttp's protocol class with the contract's error answers and a header read time-out."""

    __slots__ = ("_first", "_framing", "_header_bytes", "_header_timer", "_kafka", "_limits", "_peer_closed")

    def __init__(self, manager: web.Server, *, limits: HttpLimits, kafka: KafkaOnControl | None = None,
                 **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._kafka = kafka
        self._first = b""  # the connection's first bytes: a Kafka frame is told apart from bad HTTP (issue 26)
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._peer_closed = False  # the client's FIN came (a reset comes as connection_lost's exception)
        self._framing: BodyFraming[StreamReader] = BodyFraming(limits.max_body_bytes)

    # -- the header read time-out -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_header_timer()  # the first request must begin and end within the time-out

    def data_received(self, data: bytes) -> None:
        if len(self._first) < PREFIX_BYTES:
            self._first += data[: PREFIX_BYTES - len(self._first)]
        if self._header_timer is None and self._awaiting_request():
            self._arm_header_timer()  # a later request on a kept-alive connection has begun
        if self._header_timer is not None:
            self._header_bytes += len(data)
        parsed = self._request_count
        super().data_received(data)
        if not self._framing.lost:
            self._follow(data, self._request_count - parsed)
        if self._header_timer is not None and self._messages:
            self._disarm_header_timer()  # a whole header was parsed (or refused: handle_error answers it)

    def _follow(self, data: bytes, made: int) -> None:
        """A chunked body past the limit, from its size lines (``BodyFraming``): answered 413 by whoever reads the
        body (``read_body``, or ``_before_routing`` if its handler has not begun) before a byte of the chunk
        arrives, and nothing more is read from the connection."""
        requests = [
            Framed(payload, message.chunked, _content_length(message), message.upgrade)
            if isinstance(message, RawRequestMessage)
            else None  # an _ErrInfo: handle_error answers it, and the connection ends
            for message, payload in list(self._messages)[len(self._messages) - made :]
        ]
        body = self._framing.follow(data, requests)
        if body is not None:
            reason = _too_large(self._limits, f"its chunks declare {self._framing.declared} bytes")
            body.set_exception(Refused(413, reason))
            self.close()

    def eof_received(self) -> None:
        self._peer_closed = True
        super().eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm_header_timer()
        if (exc is not None or self._peer_closed) and self._serving_request():
            # An ordinary disconnect, whether the body was being read or drained: said once, here, and nowhere
            # else (``handle_error`` stays quiet about the ConnectionResetError aiohttp then hands the handler).
            peer = _peer(self.peername)
            log.debug("control connection closed by the client mid-request", peer=peer, reason=str(exc or "EOF"))
        super().connection_lost(exc)

    def _serving_request(self) -> bool:
        """A request was begun and not yet done with: its handler runs, or its unread body is drained."""
        task = self._task_handler
        return task is not None and not task.done() and not self._awaiting_request()

    def _awaiting_request(self) -> bool:
        """Between requests: the protocol waits for the next header and has none queued."""
        return self._waiter is not None and not self._waiter.done() and not self._messages

    def _arm_header_timer(self) -> None:
        self._header_bytes = 0
        self._header_timer = self._loop.call_later(self._limits.header_timeout_s, self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        transport = self.transport
        if transport is None or not self._awaiting_request():
            return
        peer = _peer(transport.get_extra_info("peername"))
        if self._header_bytes == 0:
            # Nothing was asked, so there is nothing to answer (a port check, a pre-connect): just close.
            log.debug("control connection closed: nothing sent", peer=peer, timeout_s=self._limits.header_timeout_s)
        else:
            reason = f"the request header did not arrive within {self._limits.header_timeout_s:g} s"
            log.warning("control request rejected", peer=peer, user_agent=None, status=408, reason=reason)
            transport.write(_raw_answer(408, reason))  # the close below sends it first
        self.force_close()

    # -- errors the protocol answers itself ----------------------------------------------------------------

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Called for a request the parser refused (400), and for what escapes a handler (500, 504)."""
        if request.writer.output_size > 0:  # as aiohttp: an answer has begun, so the connection is broken
            raise ConnectionError("the answer was begun; the error cannot be sent")
        if isinstance(exc, ConnectionError):
            # The client hung up while the handler read its body (aiohttp's payload raises ConnectionResetError):
            # nobody to answer, and connection_lost has said so. aiohttp's protocol takes a ConnectionError from
            # here as a premature disconnect and ends the connection without a word.
            raise ConnectionError("the client is gone; the error cannot be sent") from exc
        peer = _peer(self.peername)
        if status >= 500:
            log.error("control request failed", peer=peer, status=status, exc_info=exc)
            answer = json_error(status, f"internal error ({HTTPStatus(status).phrase})")
        elif self._kafka is not None and isinstance(exc, BadHttpMethod) and looks_like_kafka(self._first):
            answer = json_error(status, f"bad HTTP request: {self._kafka.said_to(self.peername)}")
        else:
            reason = _parser_reason(status, exc, message)
            user_agent = request.headers.get("User-Agent")
            log.warning("control request rejected", peer=peer, user_agent=user_agent, status=status, reason=reason)
            answer = json_error(status, f"bad HTTP request: {reason}")
        answer.force_close()
        return answer

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """What aiohttp's protocol logs as an exception, as one structlog line (the log stays JSON lines)."""
        exc = kw.get("exc_info")
        peer = _peer(self.peername)
        if isinstance(exc, Refused):
            # The rest of a body refused from its chunk sizes, met while draining it after the handler's answer.
            log.debug("control connection closed", peer=peer, reason=exc.message)
            return
        if isinstance(exc, web.RequestPayloadError):
            # A body that cannot be decoded, met again while draining it after the 400: the client's fault.
            log.warning("control connection closed", peer=peer, reason=_payload_reason(exc))
            return
        message = str(args[0]) % args[1:] if args else "error"
        log.error("control http error", peer=peer, message=message, exc_info=exc)


def _content_length(message: RawRequestMessage) -> int | None:
    length = message.headers.get(hdrs.CONTENT_LENGTH)
    return int(length) if length else None  # the parser refused one that is not a number


def _raw_answer(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 answer, for when no request object exists (the header never ended)."""
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _before_routing(handle: ServerHandler, limits: HttpLimits) -> ServerHandler:
    """The application's handler behind what is decided from the header alone, before any path is matched.

    aiohttp answers ``Expect`` before the middlewares run (in ``Application._handle``): it would send
    ``100 Continue`` for a body it is about to refuse, and a text/plain 417 for any other expectation.
    """

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        declared = request.content_length
        if declared is not None and declared > limits.max_body_bytes:
            # Refused from the header alone, on every path: no byte of the body is read, and a client that sent
            # "Expect: 100-continue" is told before it sends one (RFC 9110 10.1.1 and 15.5.14).
            return rejected(request, 413, _too_large(limits, f"declared {declared} bytes"))
        refused = request.content.exception()
        if isinstance(refused, Refused):  # chunk sizes past the limit came with the header: on every path too
            return rejected(request, refused.status, refused.message)
        expect = request.headers.get(hdrs.EXPECT)
        if expect is not None and expect.strip().lower() != "100-continue":
            # RFC 9110 10.1.1: an expectation other than 100-continue cannot be met (417). aiohttp says so in
            # text/plain; 100-continue stays for aiohttp to answer.
            return rejected(request, 417, f"the only expectation this server meets is 100-continue, not {expect!r}")
        return await handle(request)

    return handler


class KafkaOnControl:
    """A Kafka client's frame on the control port: one warning per connection at most, and at most one per
    ``kafka_frames.INTERVAL_S`` per client host, naming the Kafka listener (``kafka_listener()``, asked when said:
    the control port is bound before the Kafka port)."""

    def __init__(self, kafka_listener: Callable[[], str | None]) -> None:
        self.kafka_listener = kafka_listener
        self.notices = KafkaFrameNotices()

    def said_to(self, peername: Any) -> str:
        """What the client is told (and, when due, the log): this is HTTP, and where Kafka is."""
        where = self.kafka_listener()
        said = "this is the control API (HTTP)" + (f"; the Kafka listener is at {where}" if where else "")
        host = str(peername[0]) if isinstance(peername, tuple) and peername else str(peername)
        left_out = self.notices.due(host)
        if left_out is not None:
            log.warning(
                "kafka client on the control port", peer=_peer(peername), reason=said, kafka_listener=where,
                left_out=left_out, left_out_s=self.notices.interval_s,
            )
        return said


class _GuardedServer(web.Server):
    """``web.Server`` whose connections are ``_GuardedRequestHandler``s (``__call__`` is the protocol factory)."""

    def __init__(
        self, base: web.Server, limits: HttpLimits, handler_options: dict[str, Any], kafka: KafkaOnControl | None
    ) -> None:
        super().__init__(
            _before_routing(base.request_handler, limits),
            request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation,
            **handler_options,
        )
        self.limits = limits
        self.kafka = kafka

    def __call__(self) -> RequestHandler:
        return _GuardedRequestHandler(self, loop=self._loop, limits=self.limits, kafka=self.kafka, **self._kwargs)


class GuardedAppRunner(web.AppRunner):
    """``web.AppRunner`` serving ``app`` within ``limits``, every error as the contract's JSON."""

    __slots__ = ("_handler_options", "_kafka", "_limits")

    def __init__(
        self, app: web.Application, limits: HttpLimits, shutdown_timeout: float = 1.0,
        kafka_listener: Callable[[], str | None] | None = None,
    ) -> None:
        """``kafka_listener``: the Kafka listener's address, which a Kafka client on this port is told."""
        self._limits = limits
        self._kafka = KafkaOnControl(kafka_listener) if kafka_listener is not None else None
        self._handler_options: dict[str, Any] = {
            "access_log": None,
            "keepalive_timeout": limits.keepalive_timeout_s,
            "lingering_time": limits.body_timeout_s,
            "max_line_size": limits.max_line_bytes,
            "max_field_size": limits.max_line_bytes,
            "max_headers": limits.max_headers,
        }
        super().__init__(app, shutdown_timeout=shutdown_timeout, **self._handler_options)

    async def _make_server(self) -> web.Server:
        # The application's own server (its start-up signals run, its handler and request factory), then the
        # same with the guarded protocol class: Server's __call__ is the one place that class is named.
        base = await super()._make_server()
        options = {"loop": asyncio.get_running_loop(), **self._handler_options}
        return _GuardedServer(base, self._limits, options, self._kafka)
