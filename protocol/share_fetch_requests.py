"""The steady ShareFetch v1 request, decoded by hand (KIP-932's record path; the answer is ``share_fetch_answers.py``).

Every share consumer's poll is a ShareFetch, and what librdkafka 2.16 sends once its session is open is one shape:
v1, one topic with one partition carrying the previous answer's acknowledgements (or no topic, or one without
partitions: the session remembers them), no forgotten topics, no tagged fields. kio's native reader builds its
request dataclasses (a frozen dataclass per acknowledgement batch) and the handler then rebuilds them as the
coordinator's (``broker/api/share_fetch.py`` ``_partitions``); this reads that one shape straight into plain values
with a few struct calls. ShareFetchRequest v1 (``docs/spec/share-groups.md`` section 2.3, flexible, request header
v2):

    GroupId compact nullable string, MemberId compact nullable string, ShareSessionEpoch int32, MaxWaitMs int32,
    MinBytes int32, MaxBytes int32, MaxRecords int32, BatchSize int32, Topics [TopicId uuid, Partitions
    [PartitionIndex int32, AcknowledgementBatches [FirstOffset int64, LastOffset int64, AcknowledgeTypes [int8],
    tags], tags], tags], ForgottenTopicsData [TopicId uuid, Partitions [int32], tags], tags

Anything else (another version, a null or empty or long id, two topics or partitions, a forgotten topic, a tagged
field, a length past one byte, a short or long frame, an id that is not UTF-8) returns None and the frame takes the
generic kio path, which owns every other case and every error. A frame read here is one kio reads the same way
(tests/protocol/test_share_fetch_requests.py checks the values against kio's over generated requests).
"""

from __future__ import annotations

import struct

__all__ = ["SteadyShareFetch", "decode_steady_share_fetch"]

_API_KEY = 78  # ApiKey.SHARE_FETCH (protocol/apis.py imports kio's enum; this module is stdlib only)
_VERSION = 1  # what librdkafka 2.16 sends; v2 adds ShareAcquireMode and IsRenewAck after BatchSize

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length (request header v2)
_LIMITS = struct.Struct(">iiiiii")  # ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize
_PARTITION = struct.Struct(">i")
_RANGE = struct.Struct(">qqB")  # FirstOffset, LastOffset, AcknowledgeTypes' compact length
_TYPE = struct.Struct(">b")  # int8: signed, as kio reads it

# (first offset, last offset, acknowledge types)
AckRange = tuple[int, int, tuple[int, ...]]
# (correlation id, raw client id, group id, member id, session epoch, max wait ms, min bytes, max bytes, max records,
#  batch size, topic id (16 bytes) or None when no partition is listed, partition index, acknowledgement batches)
SteadyShareFetch = tuple[int, bytes, str, str, int, int, int, int, int, int, bytes | None, int, list[AckRange]]


def decode_steady_share_fetch(frame: bytes) -> SteadyShareFetch | None:
    """The steady ShareFetch v1, or None when the generic path must decide."""
    try:
        api_key, version, correlation_id, client_length = _HEADER.unpack_from(frame, 0)
        if api_key != _API_KEY or version != _VERSION or client_length < -1:
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
        member_id = frame[start:end].decode()
        epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size = _LIMITS.unpack_from(frame, end)
        end += 24
        topics = frame[end]
        end += 1
        topic_id: bytes | None = None
        partition = -1
        batches: list[AckRange] = []
        if topics == 2 and frame[end + 16] == 1:  # one topic without partitions: the handler reads no topic
            if frame[end + 17]:  # the topic's tagged fields
                return None
            end += 18
        elif topics == 2:  # one topic
            topic_id = frame[end : end + 16]
            if len(topic_id) != 16 or frame[end + 16] != 2:  # one partition
                return None
            (partition,) = _PARTITION.unpack_from(frame, end + 17)
            count = frame[end + 21]  # AcknowledgementBatches: compact, not null
            if not 0 < count < 0x80:
                return None
            end += 22
            unpack_range, unpack_type = _RANGE.unpack_from, _TYPE.unpack_from
            for _ in range(count - 1):
                first, last, types = unpack_range(frame, end)
                end += 17
                if types == 2:  # one type, as librdkafka sends each range
                    kinds: tuple[int, ...] = unpack_type(frame, end)
                    end += 1
                elif 0 < types < 0x80:
                    kinds = struct.unpack_from(f">{types - 1}b", frame, end)
                    end += types - 1
                else:
                    return None
                if frame[end]:  # the batch's tagged fields
                    return None
                end += 1
                batches.append((first, last, kinds))
            if frame[end] or frame[end + 1]:  # the partition's and the topic's tagged fields
                return None
            end += 2
        elif topics != 1:  # no topic at all, else the generic path (several, or a null array kio refuses)
            return None
        # ForgottenTopicsData empty, body tagged fields none, and nothing after them.
        if frame[end] != 1 or frame[end + 1] or end + 2 != len(frame):
            return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return (
        correlation_id, client_id, group_id, member_id, epoch, max_wait_ms, min_bytes, max_bytes, max_records,
        batch_size, topic_id, partition, batches,
    )  # fmt: skip
