"""Kafka's framing: every request is an int32 size followed by that many bytes."""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be split into frames; the connection must be closed.

    ``frames`` holds the complete frames that came before the bad bytes: Kafka reads a
    connection one request at a time, so those are still answered before it hangs up.
    """

    def __init__(self, reason: str, frames: list[bytes] | None = None) -> None:
        super().__init__(reason)
        self.frames = frames if frames is not None else []


class FrameReader:
    """Splits a byte stream into request frames, refusing sizes Kafka would refuse."""

    __slots__ = ("_buffer", "max_size")

    def __init__(self, max_size: int) -> None:
        self._buffer = bytearray()
        self.max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        position = 0
        available = len(buffer)
        while available - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
            if size < 0:
                raise FrameError(f"negative frame size {size}", frames)
            if size > self.max_size:
                raise FrameError(f"frame size {size} is larger than socket.request.max.bytes ({self.max_size})", frames)
            end = position + 4 + size
            if end > available:
                break
            frames.append(bytes(buffer[position + 4 : end]))
            position = end
        if position:
            del buffer[:position]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buffer)
