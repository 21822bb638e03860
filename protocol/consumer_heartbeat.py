"""The steady beats of the modern group types, decoded and answered by hand: ConsumerGroupHeartbeat's (KIP-848)
and ShareGroupHeartbeat v1's (KIP-932).

Once a consumer-protocol member is reconciled, every heartbeat it sends is the same: its group, member id and
epoch, and every optional field null ("unchanged": section 12.3 of ``docs/spec/consumer-groups.md``). A share-group
member's steady beat is the same shape with fewer fields: its group, member id and epoch, a null rack and null
topics (librdkafka 2.16, section 12.2 of ``docs/spec/share-groups.md``). This module reads exactly those shapes with
a few struct calls and writes the answer (no assignment change) directly: both responses have the same fields in
the same order (throttle, error, message, member id, epoch, interval, a nullable Assignment), so one encoder writes
either. Anything else (a field set, a tagged field, a non-ASCII-safe length, a short frame) returns None and the
frame takes the generic kio path, which owns every other case and every error. Tests check both paths give the
same bytes.

The share decoder lives here rather than in a module of its own: this one is loaded before serve's first answer
anyway (tests/cli/test_serve_imports.py counts the modules).
"""

from __future__ import annotations

import struct
from functools import cache

from protocol.apis import ApiKey

_API_KEY = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_SHARE_API_KEY = int(ApiKey.SHARE_GROUP_HEARTBEAT)
_SHARE_VERSION = 1  # the only version of ShareGroupHeartbeat Kafka 4.2 lists, and the layout read below

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length (request header v2)
_INT32 = struct.Struct(">i")
# After the member id: epoch, instance id null, rack id null, rebalance timeout -1, topic names null.
_EPOCH_AND_NULLS = struct.Struct(">iBBiB")
_NO_REBALANCE_TIMEOUT = -1

# (api version, correlation id, raw client id, group id, member id, raw member id, member epoch)
SteadyHeartbeat = tuple[int, int, bytes, str, str, bytes, int]


def decode_steady(frame: bytes, max_version: int) -> SteadyHeartbeat | None:
    """The steady heartbeat, or None when the generic path must decide."""
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != _API_KEY or not 0 <= version <= max_version:
            return None
        end = 10 + client_length if client_length > 0 else 10
        client_id = frame[10:end]
        if frame[end]:  # header tagged fields
            return None
        length = frame[end + 1]  # group id: compact string, one-byte uvarint of length + 1
        if not 1 < length < 0x80:
            return None
        start, end = end + 2, end + 1 + length
        group_id = frame[start:end].decode()
        length = frame[end]
        if not 1 < length < 0x80:
            return None
        start, end = end + 1, end + length
        raw_member_id = frame[start:end]
        member_id = raw_member_id.decode()
        epoch, instance, rack, rebalance_timeout, names = _EPOCH_AND_NULLS.unpack_from(frame, end)
        if instance or rack or rebalance_timeout != _NO_REBALANCE_TIMEOUT or names or epoch <= 0:
            return None
        end += 11
        if version >= 1:
            if frame[end]:  # subscribed topic regex
                return None
            end += 1
        # server assignor, topic partitions, body tagged fields: all empty, and nothing after them.
        if frame[end] or frame[end + 1] or frame[end + 2] or end + 3 != len(frame):
            return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return version, correlation_id, client_id, group_id, member_id, raw_member_id, epoch


def decode_share_steady(frame: bytes) -> SteadyHeartbeat | None:
    """ShareGroupHeartbeat v1's steady beat (epoch > 0, RackId null, SubscribedTopicNames null, no tagged fields),
    or None when the generic path must decide."""
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != _SHARE_API_KEY or version != _SHARE_VERSION:
            return None
        end = 10 + client_length if client_length > 0 else 10
        client_id = frame[10:end]
        if frame[end]:  # header tagged fields
            return None
        length = frame[end + 1]  # group id: compact string, one-byte uvarint of length + 1
        if not 1 < length < 0x80:
            return None
        start, end = end + 2, end + 1 + length
        group_id = frame[start:end].decode()
        length = frame[end]
        if not 1 < length < 0x80:
            return None
        start, end = end + 1, end + length
        raw_member_id = frame[start:end]
        member_id = raw_member_id.decode()
        (epoch,) = _INT32.unpack_from(frame, end)
        # RackId null, SubscribedTopicNames null, body tagged fields: all zero bytes, and nothing after them.
        if epoch <= 0 or frame[end + 4] or frame[end + 5] or frame[end + 6] or end + 7 != len(frame):
            return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return version, correlation_id, client_id, group_id, member_id, raw_member_id, epoch


@cache
def _answer(member_id_length: int) -> struct.Struct:
    """The answer's layout for one member id length: size, correlation id, header tags, throttle 0, error 0, error
    message null, member id (compact: one length byte), member epoch, heartbeat interval, Assignment null, tags."""
    return struct.Struct(f">iiBihBB{member_id_length}siibB")


def encode_steady_answer(correlation_id: int, member_id: bytes, member_epoch: int, interval_ms: int) -> bytes:
    """The whole answer frame: no error, the member's id and epoch, the interval, Assignment null.

    ``member_id`` is the UTF-8 id, shorter than 127 bytes (its compact length fits one byte); the response is the
    same for both versions of ConsumerGroupHeartbeat, and for ShareGroupHeartbeat v1. One ``pack`` call: this runs
    for every steady heartbeat.
    """
    length = len(member_id)
    layout = _answer(length)
    return layout.pack(
        layout.size - 4, correlation_id, 0, 0, 0, 0, length + 1, member_id, member_epoch, interval_ms, -1, 0
    )
