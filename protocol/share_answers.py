"""ShareGroupHeartbeat's answer, encoded by hand (KIP-932's hot path, as ``group_answers.py`` is the classic one's).

Every share consumer heartbeats every interval, and kio's generic writer walks each field of the answer with type
checks: on the share-group heartbeat benchmark it was 40% of the handler (``benchmarks/README.md``, "Share groups").
The v1 body (``docs/spec/share-groups.md`` section 2.1; flexible, the only version Kafka 4.2 lists) is a few fixed
fields, two nullable compact strings and a nullable Assignment struct (marker -1 null, 1 present, then its
TopicPartitions and tags), written here directly and handed to ``codec.encode_response`` as ``HandEncoded``. Tests
check the bytes against kio's for errors, null, empty and multi-topic assignments.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from protocol.varint import encode_uvarint

_THROTTLE_ERROR = struct.Struct(">ih")  # throttle_time_ms (always 0 here), error_code
_EPOCH_INTERVAL = struct.Struct(">ii")
_NO_TAGS = b"\x00"
_NULL_ASSIGNMENT = b"\xff"  # the nullable struct's marker: -1


def _string(value: str | None) -> bytes:
    """A compact nullable string: uvarint length + 1, 0 for null."""
    if value is None:
        return b"\x00"
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def share_heartbeat_body(
    error: int,
    error_message: str | None,
    member_id: str | None,
    member_epoch: int,
    heartbeat_interval_ms: int,
    assignment: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
) -> bytes:
    """ShareGroupHeartbeatResponse v1, after the response header: fields in the schema's order."""
    parts = [
        _THROTTLE_ERROR.pack(0, error),
        _string(error_message),
        _string(member_id),
        _EPOCH_INTERVAL.pack(member_epoch, heartbeat_interval_ms),
    ]
    if assignment is None:
        parts.append(_NULL_ASSIGNMENT)
    else:
        parts.append(b"\x01" + encode_uvarint(len(assignment) + 1))
        for topic_id, partitions in assignment:
            parts.append(topic_id.bytes + encode_uvarint(len(partitions) + 1))
            parts.append(struct.pack(f">{len(partitions)}i", *partitions) + _NO_TAGS)
        parts.append(_NO_TAGS)  # the Assignment's tags
    parts.append(_NO_TAGS)
    return b"".join(parts)
