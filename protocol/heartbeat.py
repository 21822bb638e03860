"""Heartbeat, the hot path, decoded and answered by hand.

A consumer group's steady state is nothing but Heartbeats, so this one API skips
kio's generic readers and writers: the request is read with a few struct calls
and the answer is packed whole by one struct call.
Anything unusual (tagged fields, bad UTF-8, a short frame) returns None and the
frame takes the generic kio path, which owns every error and edge case. Tests
check both paths give the same answers for every version.
"""

from __future__ import annotations

import struct

from protocol.apis import ApiKey

FLEXIBLE_FROM = 4
_HEARTBEAT = int(ApiKey.HEARTBEAT)  # a plain int: compared once per heartbeat

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_INT16 = struct.Struct(">ih")


# (api version, correlation id, raw client id, group id, generation id, member id, group instance id).
# A plain tuple: the connection unpacks it at once, and building a NamedTuple costs more than decoding.
HeartbeatRequest = tuple[int, int, bytes, str, int, str, str | None]


def decode_heartbeat(frame: bytes, max_version: int) -> HeartbeatRequest | None:
    """The request, or None when the generic path must decide (any doubt at all).

    Lengths are read inline rather than through helpers (this runs for every heartbeat). A string
    length past the end shows up as an IndexError or as a final position that is not the frame's end.
    """
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != _HEARTBEAT or not 0 <= version <= max_version:
            return None
        end = 10 + client_length if client_length > 0 else 10
        client_id = frame[10:end]
        instance_id: str | None = None
        if version >= FLEXIBLE_FROM:
            # Compact strings: one uvarint byte of length + 1 below 0x80; 0 is null. Any tagged field: generic.
            length = frame[end + 1]
            if frame[end] or not 0 < length < 0x80:
                return None
            start, end = end + 2, end + 1 + length
            group_id = frame[start:end].decode()
            (generation_id,) = _INT32.unpack_from(frame, end)
            length = frame[end + 4]
            if not 0 < length < 0x80:
                return None
            start, end = end + 5, end + 4 + length
            member_id = frame[start:end].decode()
            length = frame[end]
            if length >= 0x80:
                return None
            if length:
                start, end = end + 1, end + length
                instance_id = frame[start:end].decode()
            else:
                end += 1
            if frame[end] or end + 1 != len(frame):
                return None
        else:
            (length,) = _INT16.unpack_from(frame, end)
            if length < 0:
                return None
            start, end = end + 2, end + 2 + length
            group_id = frame[start:end].decode()
            generation_id, length = _INT32_INT16.unpack_from(frame, end)
            if length < 0:
                return None
            start, end = end + 6, end + 6 + length
            member_id = frame[start:end].decode()
            if version >= 3:
                (length,) = _INT16.unpack_from(frame, end)
                start, end = end + 2, end + 2 + max(length, 0)
                if length >= 0:
                    instance_id = frame[start:end].decode()
            if end != len(frame):
                return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return version, correlation_id, client_id, group_id, generation_id, member_id, instance_id


# Whole answer frames, one struct call each: size, correlation id, then by version
# v0 error; v1-3 throttle 0, error; v4+ (flexible) header tags, throttle 0, error, body tags.
_ANSWER_V0 = struct.Struct(">iih")
_ANSWER_V1 = struct.Struct(">iiih")
_ANSWER_FLEXIBLE = struct.Struct(">iibihb")


def encode_heartbeat_response(version: int, correlation_id: int, error_code: int) -> bytes:
    """A complete response frame; the throttle time is always 0 and every tagged-field section empty."""
    if version >= FLEXIBLE_FROM:
        return _ANSWER_FLEXIBLE.pack(_ANSWER_FLEXIBLE.size - 4, correlation_id, 0, 0, error_code, 0)
    if version:
        return _ANSWER_V1.pack(_ANSWER_V1.size - 4, correlation_id, 0, error_code)
    return _ANSWER_V0.pack(_ANSWER_V0.size - 4, correlation_id, error_code)
