"""The hand-written steady ShareGroupHeartbeat codec (``protocol/consumer_heartbeat.py``: ``decode_share_steady``,
and the answer written by ``encode_steady_answer``) against kio's generated one and the handler's own answers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.share_groups import heartbeat_answer, heartbeat_response
from broker.coordinator.modern.share.messages import ShareHeartbeatResult
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import decode_request, encode_response
from protocol.consumer_heartbeat import decode_share_steady, decode_steady, encode_steady_answer
from protocol.errors import MalformedRequest
from tests.wire.client import WireClient, request

API = ApiKey.SHARE_GROUP_HEARTBEAT


def frame_of(client_id: str | None = "fast-client", version: int = 1, **overrides: object) -> bytes:
    values: dict[str, object] = {
        "group_id": "group-é",  # non-ASCII: lengths are bytes, not characters
        "member_id": "Q7YTt/jmRy6R8wuUst3dqg",  # librdkafka's standard base64 ids carry / and +
        "member_epoch": i32(7),
        "rack_id": None,
        "subscribed_topic_names": None,
    }
    encoded = WireClient(None, None, client_id).encode(  # type: ignore[arg-type]
        request(API, version, **(values | overrides)), 4242
    )
    return encoded[4:]  # without the size prefix, as FrameReader hands frames over


def test_the_one_served_version_is_the_one_read() -> None:
    assert SUPPORTED_VERSIONS[API] == (1, 1)


@pytest.mark.parametrize("client_id", ["fast-client", "", None])
def test_decodes_what_kio_decodes(client_id: str | None) -> None:
    frame = frame_of(client_id)
    fast = decode_share_steady(frame)
    generic = decode_request(frame)
    assert fast is not None
    api_version, correlation_id, raw_client_id, group_id, member_id, raw_member_id, epoch = fast
    assert (api_version, correlation_id) == (generic.api_version, generic.correlation_id) == (1, 4242)
    assert raw_client_id.decode() == generic.client_id
    body = generic.body
    assert (group_id, member_id, epoch) == (body.group_id, body.member_id, body.member_epoch)
    assert raw_member_id == member_id.encode()


NOT_STEADY = [
    {"member_epoch": i32(0)},  # a join
    {"member_epoch": i32(-1)},  # a leave
    {"member_epoch": i32(-2)},  # INVALID_REQUEST, the full way
    {"rack_id": "rack"},
    {"rack_id": ""},
    {"subscribed_topic_names": ("t",)},  # a full request after a coordinator change
    {"subscribed_topic_names": ()},
    {"group_id": ""},
    {"member_id": ""},
    {"member_id": "m" * 127},  # a two-byte compact length
    {"group_id": "g" * 127},
]


@pytest.mark.parametrize("override", NOT_STEADY, ids=lambda o: f"{next(iter(o))}={next(iter(o.values()))!r:.12}")
def test_anything_but_the_steady_beat_takes_the_generic_path(override: dict[str, object]) -> None:
    assert decode_share_steady(frame_of(**override)) is None


def test_short_long_and_tagged_frames_take_the_generic_path() -> None:
    frame = frame_of()
    for broken in (frame[:-1], frame + b"\x00", frame[:-1] + b"\x01\x00\x01\x2a", frame[:12], frame[:4]):
        assert decode_share_steady(broken) is None
    tagged_header = frame[:10 + len("fast-client")] + b"\x01\x00\x01\x2a" + frame[11 + len("fast-client"):]
    assert decode_share_steady(tagged_header) is None
    bad_utf8 = frame.replace("group-é".encode(), b"group-\xff\xfe")
    assert decode_share_steady(bad_utf8) is None


def test_other_versions_and_apis_take_the_generic_path() -> None:
    frame = frame_of()
    assert decode_share_steady(frame[:2] + struct.pack(">h", 0) + frame[4:]) is None
    assert decode_share_steady(frame[:2] + struct.pack(">h", 2) + frame[4:]) is None
    assert decode_share_steady(struct.pack(">h", ApiKey.CONSUMER_GROUP_HEARTBEAT) + frame[2:]) is None
    assert decode_steady(frame, 1) is None  # and the consumer decoder does not read it


@pytest.mark.parametrize("member_id", ["m", "Q7YTt/jmRy6R8wuUst3dqg", "é" * 63])
@pytest.mark.parametrize("interval", [1000, 5000])
def test_encodes_what_the_handler_and_kio_encode(member_id: str, interval: int) -> None:
    """The fast answer is the generic path's: the handler's hand-encoded v1 answer, and kio's (fault rules)."""
    result = ShareHeartbeatResult(ErrorCode.none, None, member_id, 12, interval, None)
    fast = encode_steady_answer(99, member_id.encode(), 12, interval)
    assert fast == encode_response(API, 1, 99, heartbeat_answer(1, result))
    assert fast == encode_response(API, 1, 99, heartbeat_response(1, result))


@settings(derandomize=True, max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_steady_beat_never_raises_and_agrees_with_the_generic_path(data: st.DataObject) -> None:
    """Bytes changed and cut anywhere: the decoder answers None or exactly what kio reads, a steady beat."""
    frame = frame_of()
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(frame) - 1), st.integers(0, 255)), max_size=3))
    changed = bytearray(frame[: data.draw(st.integers(0, len(frame)))] if data.draw(st.booleans()) else frame)
    for position, value in edits:
        if position < len(changed):
            changed[position] = value
    fast = decode_share_steady(bytes(changed))  # must not raise, whatever the bytes
    if fast is None:
        return
    try:
        generic = decode_request(bytes(changed))
    except MalformedRequest as error:
        # A client id that is not UTF-8: the pipeline refuses it before the fast path answers (_learn_client_id).
        assert "InvalidUnicode" in str(error), error
        return
    _, correlation_id, client_id, group_id, member_id, _, epoch = fast
    body = generic.body
    assert (generic.api_key, generic.api_version, correlation_id, client_id.decode()) == (
        API, 1, generic.correlation_id, generic.client_id,
    )  # fmt: skip
    assert (group_id, member_id, epoch) == (body.group_id, body.member_id, body.member_epoch)
    assert body.rack_id is None and body.subscribed_topic_names is None and epoch > 0
