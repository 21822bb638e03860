"""Heartbeat, the hot path, decoded and answered by hand.

A consumer group's steady state is nothing but Heartbeats, so this one API skips
kio's generic readers and writers: the request is read with a few struct calls
and the answer is a pre-encoded body behind a fresh size and correlation id.
Anything unusual (tagged fields, bad UTF-8, a short frame) returns None and the
frame takes the generic kio path, which owns every error and edge case. Tests
check both paths give the same answers for every version.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import NamedTuple

HEARTBEAT_KEY = 12
FLEXIBLE_FROM = 4

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_FRAME_START = struct.Struct(">ii")  # size, correlation id


class HeartbeatRequest(NamedTuple):
    api_version: int
    correlation_id: int
    client_id: bytes  # raw, as the connection only needs to notice when it changes
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def _string(frame: bytes, position: int) -> tuple[str | None, int]:
    (length,) = _INT16.unpack_from(frame, position)
    position += 2
    if length < 0:
        return None, position
    end = position + length
    if end > len(frame):
        raise IndexError
    return frame[position:end].decode(), end


def _compact_string(frame: bytes, position: int) -> tuple[str | None, int]:
    length = frame[position] - 1  # lengths below 127 fit one uvarint byte
    position += 1
    if length < 0:
        return None, position
    end = position + length
    if end > len(frame):
        raise IndexError
    return frame[position:end].decode(), end


def decode_heartbeat(frame: bytes, max_version: int) -> HeartbeatRequest | None:
    """The request, or None when the generic path must decide (any doubt at all)."""
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != HEARTBEAT_KEY or not 0 <= version <= max_version:
            return None
        position = 10 + max(client_length, 0)
        client_id = frame[10:position]
        if version >= FLEXIBLE_FROM:
            if frame[position] != 0:  # header tagged fields
                return None
            position += 1
            if frame[position] >= 0x80:  # a group id of 127 bytes or more: a multi-byte length
                return None
            group_id, position = _compact_string(frame, position)
            (generation_id,) = _INT32.unpack_from(frame, position)
            position += 4
            if frame[position] >= 0x80:
                return None
            member_id, position = _compact_string(frame, position)
            if frame[position] >= 0x80:
                return None
            instance_id, position = _compact_string(frame, position)
            if frame[position] != 0 or position + 1 != len(frame):  # body tagged fields, or trailing bytes
                return None
        else:
            group_id, position = _string(frame, position)
            (generation_id,) = _INT32.unpack_from(frame, position)
            position += 4
            member_id, position = _string(frame, position)
            instance_id = None
            if version >= 3:
                instance_id, position = _string(frame, position)
            if position != len(frame):
                return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    if group_id is None or member_id is None:
        return None  # not nullable: kio's error message is the one to log
    return HeartbeatRequest(version, correlation_id, client_id, group_id, generation_id, member_id, instance_id)


@cache
def _body(version: int, error_code: int) -> bytes:
    """Response header tail and body after the correlation id: [tags] [throttle 0] error [tags]."""
    if version == 0:
        return _INT16.pack(error_code)
    body = _INT32.pack(0) + _INT16.pack(error_code)
    return b"\x00" + body + b"\x00" if version >= FLEXIBLE_FROM else body


def encode_heartbeat_response(version: int, correlation_id: int, error_code: int) -> bytes:
    """A complete response frame: size, correlation id, then the cached rest."""
    rest = _body(version, error_code)
    return _FRAME_START.pack(4 + len(rest), correlation_id) + rest
