"""ShareFetch's answer, encoded by hand (KIP-932's record path, as ``share_answers.py`` is its heartbeat's).

Every share consumer's poll is a ShareFetch, and kio's generic writer walks each field of the answer with type checks
(its phantom types' ``isinstance`` on every int): on the share-fetch benchmark the answer's build and kio's encoding
of it were 38% of the broker's time (``benchmarks/README.md``, "Share groups"). ShareFetchResponse v1 and v2 have the
same body (``docs/spec/share-groups.md`` section 2.3; flexible from v0, no tagged fields of their own):

    ThrottleTimeMs int32, ErrorCode int16, ErrorMessage compact nullable string, AcquisitionLockTimeoutMs int32,
    Responses [TopicId uuid, Partitions [PartitionIndex int32, ErrorCode int16, ErrorMessage, AcknowledgeErrorCode
    int16, AcknowledgeErrorMessage, CurrentLeader {LeaderId int32, LeaderEpoch int32, tags}, Records compact bytes,
    AcquiredRecords [FirstOffset int64, LastOffset int64, DeliveryCount int16, tags], tags], tags],
    NodeEndpoints [NodeId int32, Host compact string, Port int32, Rack compact nullable string, tags], tags

Records go through as the stored batches' bytes, never joined before the one join with the response header (never
null: kio writes an absent Records as empty bytes, and so does this). The answer is handed to
``codec.encode_response`` as ``HandEncoded`` (``share_fetch_parts``: its pieces); tests check the bytes against
kio's for errors, empty answers, acknowledgement errors, leaders and endpoints
(tests/protocol/test_share_fetch_answers.py).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from protocol.varint import encode_uvarint

__all__ = ["Endpoint", "PartitionAnswer", "share_fetch_body", "share_fetch_parts"]

# (partition, error code, error message, acknowledge error code, acknowledge error message, leader id, leader epoch,
#  records (the stored batches' bytes, in order: written one after the other, never joined here), acquired (first
#  offset, last offset, delivery count) ranges)
PartitionAnswer = tuple[
    int, int, str | None, int, str | None, int, int, Sequence[bytes], Sequence[tuple[int, int, int]]
]
# (node id, host, port, rack)
Endpoint = tuple[int, str, int, str | None]

_HEAD = struct.Struct(">ih")  # ThrottleTimeMs (always 0 here), ErrorCode
_INT32 = struct.Struct(">i")
# The common partition: no error messages, so PartitionIndex, ErrorCode, null, AcknowledgeErrorCode, null,
# CurrentLeader's two ints and its tags in one pack.
_PARTITION_PLAIN = struct.Struct(">ihBhBiiB")
_PARTITION_START = struct.Struct(">ih")
_ACK_ERROR = struct.Struct(">h")
_LEADER = struct.Struct(">iiB")
_ACQUIRED = struct.Struct(">qqhB")  # FirstOffset, LastOffset, DeliveryCount, tags
_NO_TAGS = b"\x00"


def _string(value: str | None) -> bytes:
    """A compact nullable string: uvarint length + 1, 0 for null."""
    if value is None:
        return b"\x00"
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def _partition(parts: list[bytes], p: PartitionAnswer) -> None:
    index, error, message, ack_error, ack_message, leader_id, leader_epoch, records, acquired = p
    if message is None and ack_message is None:
        parts.append(_PARTITION_PLAIN.pack(index, error, 0, ack_error, 0, leader_id, leader_epoch, 0))
    else:
        parts.append(_PARTITION_START.pack(index, error))
        parts.append(_string(message))
        parts.append(_ACK_ERROR.pack(ack_error))
        parts.append(_string(ack_message))
        parts.append(_LEADER.pack(leader_id, leader_epoch, 0))
    parts.append(encode_uvarint((len(records[0]) if len(records) == 1 else sum(map(len, records))) + 1))
    parts.extend(records)
    parts.append(encode_uvarint(len(acquired) + 1))
    pack = _ACQUIRED.pack
    for first, last, count in acquired:
        parts.append(pack(first, last, count, 0))
    parts.append(_NO_TAGS)


def share_fetch_body(
    error: int,
    error_message: str | None,
    lock_timeout_ms: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[PartitionAnswer]]],
    endpoints: Sequence[Endpoint] = (),
) -> bytes:
    """ShareFetchResponse v1 or v2, after the response header: fields in the schema's order."""
    return b"".join(share_fetch_parts(error, error_message, lock_timeout_ms, topics, endpoints))


def share_fetch_parts(
    error: int,
    error_message: str | None,
    lock_timeout_ms: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[PartitionAnswer]]],
    endpoints: Sequence[Endpoint] = (),
) -> list[bytes]:
    """``share_fetch_body`` as the pieces that make it up, the records' batches among them as they are stored:
    ``codec.encode_response`` joins them once with the response header (a 500-record answer is ~55 kB)."""
    parts = [_HEAD.pack(0, error), _string(error_message), _INT32.pack(lock_timeout_ms)]
    parts.append(encode_uvarint(len(topics) + 1))
    for topic_id, partitions in topics:
        parts.append(topic_id.bytes)
        parts.append(encode_uvarint(len(partitions) + 1))
        for p in partitions:
            _partition(parts, p)
        parts.append(_NO_TAGS)
    parts.append(encode_uvarint(len(endpoints) + 1))
    for node_id, host, port, rack in endpoints:
        parts.append(_INT32.pack(node_id))
        parts.append(_string(host))
        parts.append(_INT32.pack(port))
        parts.append(_string(rack))
        parts.append(_NO_TAGS)
    parts.append(_NO_TAGS)
    return parts
