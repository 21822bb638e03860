"""A Kafka client pointed at the control port (issue 26, item 7): told apart from bad HTTP, and said once a while.

A Kafka producer given the control API's address (``localhost:9644`` for ``localhost:9092``) sends a Kafka frame:
a 4-byte big-endian size, then the request header (API key, version, correlation id). aiohttp refuses it as "not an
HTTP method" and the connection closes; the client reconnects at once and again, and the log filled with one
warning per attempt (81 in 6 s from one librdkafka producer), none saying what was wrong. Now such a connection
logs one line saying "this is the control API (HTTP); the Kafka listener is at HOST:PORT", at most once per
``INTERVAL_S`` per client host; the next line says how many were left out meanwhile.

No aiohttp here: the HTTP edge (``http_guard.py``) asks ``looks_like_kafka`` about a connection's first bytes and
``KafkaFrameNotices.due`` whether to log.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

INTERVAL_S = 10.0
# What is kept of a connection's first bytes to tell: the size (4), the API key (2) and the version (2).
PREFIX_BYTES = 8
_MAX_API_KEY = 200  # Kafka's keys run to about 90; an HTTP method's letters read as far larger numbers
_MAX_FRAME = 100 * 1024 * 1024
_MAX_HOSTS = 1024  # hosts remembered; the oldest are forgotten past it


def looks_like_kafka(first: bytes) -> bool:
    """Whether a connection's first bytes are a Kafka request frame: a plausible size, API key and version. No
    HTTP request starts so (a method is upper-case letters, each byte 0x41 or above, so its "size" is huge)."""
    if len(first) < PREFIX_BYTES:
        return False
    size, api_key, version = struct.unpack(">ihh", first[:PREFIX_BYTES])
    return bool(4 <= size <= _MAX_FRAME and 0 <= api_key <= _MAX_API_KEY and 0 <= version <= 100)


@dataclass
class KafkaFrameNotices:
    """Whether to log a Kafka client met on the control port now: once per ``interval_s`` per client host."""

    interval_s: float = INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict)
    _left_out: dict[str, int] = field(default_factory=dict)

    def due(self, host: str) -> int | None:
        """None: leave this one out (counted); else log it now, saying how many were left out since the last."""
        now = self.clock()
        last = self._last.get(host)
        if last is not None and now - last < self.interval_s:
            self._left_out[host] = self._left_out.get(host, 0) + 1
            return None
        if host not in self._last and len(self._last) >= _MAX_HOSTS:
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]
            self._left_out.pop(oldest, None)
        self._last[host] = now
        return self._left_out.pop(host, 0)
