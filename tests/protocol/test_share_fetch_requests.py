"""The hand-written steady ShareFetch v1 decoder (``protocol/share_fetch_requests.py``) against kio's reader: over
generated requests it reads exactly the steady shapes (v1, one topic with one partition or none, or no topic, no
forgotten topics, non-empty ids), with kio's values, and hands every other frame back (None)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import i8, i32, i64

from broker.api.base import millis
from broker.api.share_fetch import _partitions
from protocol.apis import ApiKey
from protocol.codec import decode_request
from protocol.share_fetch_requests import decode_steady_share_fetch
from tests.wire.client import WireClient, part, request

API = ApiKey.SHARE_FETCH
TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
MEMBER = "Q7YTt/jmRy6R8wuUst3dqg"

_ints = st.integers(-(2**31), 2**31 - 1)
_offsets = st.integers(-(2**63), 2**63 - 1)
_batch = st.tuples(_offsets, _offsets, st.lists(st.integers(-128, 127), max_size=3))
_partition = st.tuples(_ints, st.lists(_batch, max_size=4))
_topic = st.tuples(st.sampled_from([TOPIC, uuid.UUID(int=0), uuid.uuid4()]), st.lists(_partition, max_size=2))
_id = st.one_of(st.none(), st.just(""), st.text(max_size=8), st.just(MEMBER), st.just("x" * 130))


def frame_of(
    version: int,
    client_id: str | None,
    group: str | None,
    member: str | None,
    limits: tuple[int, int, int, int, int, int],
    topics: list[tuple[uuid.UUID, list[tuple[int, list[tuple[int, int, list[int]]]]]]],
    forgotten: list[int],
) -> bytes:
    epoch, wait, min_bytes, max_bytes, max_records, batch_size = limits
    kio_topics = tuple(
        part(API, version, "FetchTopic", topic_id=topic_id, partitions=tuple(
            part(API, version, "FetchPartition", partition_index=i32(index), acknowledgement_batches=tuple(
                part(API, version, "AcknowledgementBatch", first_offset=i64(first), last_offset=i64(last),
                     acknowledge_types=tuple(i8(t) for t in types))
                for first, last, types in batches
            ))
            for index, batches in partitions
        ))
        for topic_id, partitions in topics
    )  # fmt: skip
    body = request(
        API, version, group_id=group, member_id=member, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=wait), min_bytes=i32(min_bytes), max_bytes=i32(max_bytes),
        max_records=i32(max_records), batch_size=i32(batch_size), topics=kio_topics,
        forgotten_topics_data=tuple(
            part(API, version, "ForgottenTopic", topic_id=TOPIC, partitions=tuple(i32(p) for p in forgotten))
            for _ in [0] if forgotten
        ),
    )  # fmt: skip
    return WireClient(None, None, client_id).encode(body, 4242)[4:]  # type: ignore[arg-type]


def _steady_shape(version: int, group: str | None, member: str | None, topics: list[Any], forgotten: list[int]) -> bool:
    def short(value: str | None) -> bool:
        return bool(value) and len(value.encode()) < 127  # type: ignore[union-attr]

    one_partition = not topics or (len(topics) == 1 and len(topics[0][1]) <= 1)
    return version == 1 and short(group) and short(member) and one_partition and not forgotten


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from([1, 1, 1, 2]),
    client_id=st.one_of(st.none(), st.just(""), st.just("rdkafka-é")),
    group=_id,
    member=_id,
    limits=st.tuples(_ints, _ints, _ints, _ints, _ints, _ints),
    topics=st.lists(_topic, max_size=2),
    forgotten=st.lists(_ints, max_size=2),
)
def test_reads_the_steady_shapes_as_kio_does(
    version: int,
    client_id: str | None,
    group: str | None,
    member: str | None,
    limits: tuple[int, int, int, int, int, int],
    topics: list[Any],
    forgotten: list[int],
) -> None:
    frame = frame_of(version, client_id, group, member, limits, topics, forgotten)
    fast = decode_steady_share_fetch(frame)
    if not _steady_shape(version, group, member, topics, forgotten):
        assert fast is None
        return
    assert fast is not None
    generic = decode_request(frame)
    body = generic.body
    correlation, raw_client, group_id, member_id, epoch, wait, min_bytes, max_bytes, records, size = fast[:10]
    topic, index, acks = fast[10:]
    assert (correlation, raw_client.decode()) == (generic.correlation_id, generic.client_id)
    assert (group_id, member_id, epoch, wait, min_bytes, max_bytes, records, size) == (
        body.group_id, body.member_id, body.share_session_epoch, millis(body.max_wait), body.min_bytes,
        body.max_bytes, body.max_records, body.batch_size,
    )  # fmt: skip
    merged = _partitions(body.topics)  # the handler's view of kio's body
    if topic is None:
        assert merged == ()
    else:
        (only,) = merged
        assert (only.topic_id, only.partition) == (uuid.UUID(bytes=topic), index)
        assert [(b.first_offset, b.last_offset, b.types) for b in only.batches] == acks
        assert only.acknowledged == bool(acks)


_short_id = st.text(min_size=1, max_size=40).filter(lambda value: len(value.encode()) < 127)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    client_id=st.one_of(st.none(), st.just(""), st.just("rdkafka-é")),
    group=_short_id,
    member=st.one_of(_short_id, st.just(MEMBER)),
    limits=st.tuples(_ints, _ints, _ints, _ints, _ints, _ints),
    topic=st.one_of(st.none(), st.tuples(_topic.map(lambda t: t[0]), _partition)),
)
def test_reads_every_steady_shape(
    client_id: str | None,
    group: str,
    member: str,
    limits: tuple[int, int, int, int, int, int],
    topic: tuple[uuid.UUID, tuple[int, list[Any]]] | None,
) -> None:
    topics = [] if topic is None else [(topic[0], [topic[1]])]
    test_reads_the_steady_shapes_as_kio_does.hypothesis.inner_test(  # type: ignore[attr-defined]
        1, client_id, group, member, limits, topics, []
    )
    assert decode_steady_share_fetch(frame_of(1, client_id, group, member, limits, topics, [])) is not None


def _steady_frame() -> bytes:
    topics = [(TOPIC, [(0, [(0, 99, [1]), (100, 104, [1, 2, 0])])])]
    return frame_of(1, "c", "g", MEMBER, (3, 500, 1, 2**31 - 1, 500, 500), topics, [])


def test_a_tagged_field_anywhere_goes_the_generic_way() -> None:
    frame = _steady_frame()
    assert decode_steady_share_fetch(frame) is not None
    # Every zero byte that is a tagged-field count: the header's (after the client id), each batch's, the
    # partition's, the topic's and the body's; a count of 1 there is what a tagged field makes kio read.
    header_tags = 10 + 1
    tag_offsets = [header_tags, len(frame) - 1, len(frame) - 3, len(frame) - 4]
    for offset in tag_offsets:
        assert frame[offset] == 0, offset
        changed = frame[:offset] + b"\x01" + frame[offset + 1 :]
        assert decode_steady_share_fetch(changed) is None, offset


def test_a_short_or_long_frame_goes_the_generic_way() -> None:
    frame = _steady_frame()
    for end in range(len(frame)):
        assert decode_steady_share_fetch(frame[:end]) is None, end
    assert decode_steady_share_fetch(frame + b"\x00") is None


def test_a_member_id_that_is_not_utf8_goes_the_generic_way() -> None:
    frame = _steady_frame()
    at = frame.index(MEMBER.encode())
    assert decode_steady_share_fetch(frame[:at] + b"\xff" + frame[at + 1 :]) is None
