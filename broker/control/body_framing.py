"""Where a control API connection's bytes are in HTTP/1.1 framing, read beside aiohttp's parser for chunk sizes.

llhttp, aiohttp's C parser, reads each chunk-size line but tells Python only that a chunk began
(``StreamReader.begin_http_chunk_receiving``), never its size, and ``client_max_size`` stops a body only once that
much has been read. So a client that declares a 4 GB chunk and sends three bytes was waited for until the body
time-out (408) instead of told at once that its body is too large (413). ``BodyFraming`` follows the framing of
RFC 9112 (section 2.2 for where a header ends, 6.3 for a body's length, 7.1 for chunks) over the bytes the parser
was just handed, and says when the chunks of a body declare more than the limit, as soon as the size line that
passes it is read.

The parser is handed every byte as before (what it answers does not change); each header end found here is paired
with the next request the parser made of the same bytes, which says how long its body is. Whatever cannot be
followed in step (a header end without its request, a request refused, a chunk-size line the parser will refuse,
an upgrade) turns the following off for the connection, and the limit is then aiohttp's, as read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum, auto
from typing import Generic, TypeVar

Body = TypeVar("Body")

# RFC 9112 section 7.1: chunk-size is 1*HEXDIG, then extensions after ";". llhttp refuses more than 16 digits.
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
# A line kept across reads: past it, following stops (aiohttp's max_line_size and max_field_size are 8190).
_MAX_LINE = 8192
_CRLF = 2


@dataclass(frozen=True)
class Framed(Generic[Body]):
    """A request the parser made: its body (whatever the caller keys it by) and how that body is framed."""

    body: Body
    chunked: bool
    content_length: int | None
    upgrade: bool


class _Part(Enum):
    HEADER = auto()  # the next request's header, or the empty lines before it
    LENGTH = auto()  # a body of Content-Length bytes
    CHUNKS = auto()  # a chunked body: size lines, data, trailers
    LOST = auto()  # no longer followed on this connection


class BodyFraming(Generic[Body]):
    """One connection's framing.

    ``follow`` returns the body whose chunks passed the limit, if the bytes it was given did that; ``declared`` is
    then what its chunks declared."""

    __slots__ = ("_began", "_body", "_left", "_line", "_part", "_trailers", "declared", "max_body_bytes")

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.declared = 0  # the chunk sizes of the body followed, so far
        self._part = _Part.HEADER
        self._body: Body | None = None
        self._left = 0  # bytes of a Content-Length body, or of a chunk's data and its CRLF, still to come
        self._line = bytearray()  # a header, size or trailer line begun in earlier bytes
        self._began = False  # a header's request line was read (empty lines before one are skipped)
        self._trailers = False  # past the last chunk: trailer lines until an empty one

    @property
    def lost(self) -> bool:
        return self._part is _Part.LOST

    def follow(self, data: bytes, requests: Iterable[Framed[Body] | None]) -> Body | None:
        """Follows ``data``, the bytes the parser was just handed; ``requests`` are what it made of them, in order
        (None for one it refused)."""
        made = iter(requests)
        at = 0
        while at < len(data) and self._part is not _Part.LOST:
            if self._part is _Part.HEADER:
                at = self._header(data, at, made)
            elif self._part is _Part.LENGTH:
                step = min(self._left, len(data) - at)
                at += step
                self._left -= step
                if not self._left:
                    self._part = _Part.HEADER
            else:
                at = self._chunks(data, at)
                if self.declared > self.max_body_bytes:
                    self._part = _Part.LOST
                    return self._body
        if next(made, False) is not False:
            self._part = _Part.LOST  # the parser made a request whose header end was not seen here
        return None

    def _next_line(self, data: bytes, at: int) -> tuple[bytes | None, int]:
        """The line ending in ``data`` at or after ``at`` (without its CRLF) and where the next begins; None and
        the end of ``data`` when the line goes on past it."""
        newline = data.find(b"\n", at)
        if newline < 0:
            self._line += data[at:]
            if len(self._line) > _MAX_LINE:
                self._part = _Part.LOST  # the parser refuses it itself (max_line_size, max_field_size)
            return None, len(data)
        line = bytes(self._line + data[at:newline]).removesuffix(b"\r")
        self._line.clear()
        return line, newline + 1

    def _header(self, data: bytes, at: int, made: Iterator[Framed[Body] | None]) -> int:
        while self._part is _Part.HEADER:
            line, at = self._next_line(data, at)
            if line is None:
                return at
            if line:
                self._began = True
            elif self._began:
                self._began = False
                self._header_ended(next(made, None))
        return at

    def _header_ended(self, request: Framed[Body] | None) -> None:
        if request is None or request.upgrade:
            self._part = _Part.LOST  # refused (the connection ends with the answer), or no longer HTTP/1.1
        elif request.chunked:
            self._part, self._body, self.declared, self._trailers = _Part.CHUNKS, request.body, 0, False
        elif request.content_length:
            self._part, self._left = _Part.LENGTH, request.content_length

    def _chunks(self, data: bytes, at: int) -> int:
        """Follows the chunked body from ``at``: where it ends in ``data``, or where the size line passing the
        limit ends."""
        while at < len(data):
            if self._left:
                step = min(self._left, len(data) - at)
                at += step
                self._left -= step
                continue
            line, at = self._next_line(data, at)
            if line is None:
                return at
            if self._trailers:
                if not line:
                    self._part = _Part.HEADER
                    return at
                continue
            size = _CHUNK_SIZE.fullmatch(line.split(b";", 1)[0])
            if size is None:
                self._part = _Part.LOST  # the parser answers a bad chunk size itself (400)
                return len(data)
            chunk = int(size[0], 16)
            self._trailers = not chunk
            self.declared += chunk
            if self.declared > self.max_body_bytes:
                return at
            self._left = chunk + _CRLF if chunk else 0
        return at
