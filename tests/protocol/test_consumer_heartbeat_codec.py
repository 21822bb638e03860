"""The hand-written steady ConsumerGroupHeartbeat codec against kio's generated one, for every version."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from broker.api.base import NO_THROTTLE
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import build, decode_request, encode_response, response_schema
from protocol.consumer_heartbeat import decode_steady, encode_steady_answer
from tests.wire.client import WireClient, request

LOW, HIGH = SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT]
VERSIONS = list(range(LOW, HIGH + 1))
API = ApiKey.CONSUMER_GROUP_HEARTBEAT


def frame_of(version: int, client_id: str | None = "fast-client", **overrides: object) -> bytes:
    values: dict[str, object] = {
        "group_id": "group-é",  # non-ASCII: lengths are bytes, not characters
        "member_id": "Q7YTt/jmRy6R8wuUst3dqg",  # librdkafka's standard base64 ids carry / and +
        "member_epoch": i32(7),
        "topic_partitions": None,
    }
    encoded = WireClient(None, None, client_id).encode(  # type: ignore[arg-type]
        request(API, version, **(values | overrides)), 4242
    )
    return encoded[4:]  # without the size prefix, as FrameReader hands frames over


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("client_id", ["fast-client", "", None])
def test_decodes_what_kio_decodes(version: int, client_id: str | None) -> None:
    frame = frame_of(version, client_id)
    fast = decode_steady(frame, HIGH)
    generic = decode_request(frame)
    assert fast is not None
    api_version, correlation_id, raw_client_id, group_id, member_id, raw_member_id, epoch = fast
    assert (api_version, correlation_id) == (generic.api_version, generic.correlation_id) == (version, 4242)
    assert raw_client_id.decode() == generic.client_id
    body = generic.body
    assert (group_id, member_id, epoch) == (body.group_id, body.member_id, body.member_epoch)
    assert raw_member_id == member_id.encode()


NOT_STEADY = [
    {"member_epoch": i32(0)},
    {"member_epoch": i32(-1)},
    {"instance_id": "instance-1"},
    {"rack_id": "rack"},
    {"rebalance_timeout": i32Timedelta.parse(datetime.timedelta(milliseconds=300_000))},
    {"subscribed_topic_names": ("t",)},
    {"subscribed_topic_names": ()},
    {"server_assignor": "uniform"},
    {"topic_partitions": ()},
    {"group_id": ""},
    {"member_id": ""},
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("override", NOT_STEADY, ids=lambda o: next(iter(o)))
def test_anything_but_the_steady_beat_takes_the_generic_path(version: int, override: dict[str, object]) -> None:
    assert decode_steady(frame_of(version, **override), HIGH) is None


def test_a_regex_takes_the_generic_path() -> None:
    assert decode_steady(frame_of(1, subscribed_topic_regex="orders.*"), HIGH) is None
    assert decode_steady(frame_of(1, subscribed_topic_regex=""), HIGH) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_short_long_and_tagged_frames_take_the_generic_path(version: int) -> None:
    frame = frame_of(version)
    for broken in (frame[:-1], frame + b"\x00", frame[:-1] + b"\x01\x00\x01\x2a", frame[:12]):
        assert decode_steady(broken, HIGH) is None
    if version > 0:
        assert decode_steady(frame, version - 1) is None  # above what the broker serves


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("member_id", ["m", "Q7YTt/jmRy6R8wuUst3dqg", "é" * 63])
def test_encodes_what_kio_encodes(version: int, member_id: str) -> None:
    cls = response_schema(API, version)
    body = build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=member_id,
        member_epoch=i32(12),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(milliseconds=5000)),
        assignment=None,
    )
    expected = encode_response(API, version, 99, body)
    assert encode_steady_answer(99, member_id.encode(), 12, 5000) == expected
