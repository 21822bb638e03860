"""The hand-written Heartbeat codec against kio's generated one, for every version."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.base import NO_THROTTLE
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import build, decode_request, encode_response, response_schema
from protocol.heartbeat import decode_heartbeat, encode_heartbeat_response
from tests.wire.client import WireClient, request

LOW, HIGH = SUPPORTED_VERSIONS[ApiKey.HEARTBEAT]
VERSIONS = list(range(LOW, HIGH + 1))


def frame_of(version: int, client_id: str | None = "fast-client", **overrides: object) -> bytes:
    values: dict[str, object] = {
        "group_id": "group-é",  # non-ASCII: lengths are bytes, not characters
        "generation_id": i32(7),
        "member_id": "member-1",
        "group_instance_id": "instance-1",
    }
    encoded = WireClient(None, None, client_id).encode(  # type: ignore[arg-type]
        request(ApiKey.HEARTBEAT, version, **(values | overrides)), 4242
    )
    return encoded[4:]  # without the size prefix, as FrameReader hands frames over


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("instance", ["instance-1", None])
@pytest.mark.parametrize("client_id", ["fast-client", "", None])
def test_decodes_what_kio_decodes(version: int, instance: str | None, client_id: str | None) -> None:
    frame = frame_of(version, client_id, group_instance_id=instance)
    fast = decode_heartbeat(frame, HIGH)
    generic = decode_request(frame)
    assert fast is not None
    api_version, correlation_id, raw_client_id, group_id, generation_id, member_id, instance_id = fast
    assert (api_version, correlation_id) == (generic.api_version, generic.correlation_id) == (version, 4242)
    assert raw_client_id.decode() == generic.client_id
    body = generic.body
    assert (group_id, generation_id, member_id) == (body.group_id, body.generation_id, body.member_id)
    assert instance_id == getattr(body, "group_instance_id", None)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("error", [ErrorCode.none, ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id])
def test_encodes_what_kio_encodes(version: int, error: ErrorCode) -> None:
    body = build(response_schema(ApiKey.HEARTBEAT, version), throttle_time=NO_THROTTLE, error_code=error)
    assert encode_heartbeat_response(version, 99, error) == encode_response(ApiKey.HEARTBEAT, version, 99, body)


def with_tag_byte(frame: bytes, position: int) -> bytes:
    """One tagged field (tag 0, one byte) in the tag buffer at ``position``."""
    assert frame[position] == 0
    return frame[:position] + b"\x01\x00\x01\x2a" + frame[position + 1 :]


LEFT_TO_KIO = {
    "other api": lambda: frame_of(4)[:1] + b"\x0b" + frame_of(4)[2:],
    "version above the table": lambda: frame_of(4)[:2] + b"\x00\x05" + frame_of(4)[4:],
    "negative version": lambda: frame_of(4)[:2] + b"\xff\xff" + frame_of(4)[4:],
    "header tagged field": lambda: with_tag_byte(frame_of(4), 10 + len(b"fast-client")),
    "body tagged field": lambda: with_tag_byte(frame_of(4), len(frame_of(4)) - 1),
    "trailing byte": lambda: frame_of(3) + b"\x00",
    "cut short": lambda: frame_of(3)[:-3],
    "only a header prefix": lambda: frame_of(3)[:6],
    "bad utf-8": lambda: frame_of(2, group_id="gx").replace(b"\x00\x02gx", b"\x00\x02g\xff"),
    "group id of 127 bytes (multi-byte compact length)": lambda: frame_of(4, group_id="g" * 127),
    "null member id": lambda: frame_of(2, member_id="")[:-2] + b"\xff\xff",
}


@pytest.mark.parametrize("case", sorted(LEFT_TO_KIO))
def test_anything_unusual_is_left_to_the_generic_path(case: str) -> None:
    assert decode_heartbeat(LEFT_TO_KIO[case](), HIGH) is None


def test_the_unusual_cases_are_well_formed_apart_from_their_one_difference() -> None:
    """The bad-UTF-8 and null-member frames differ from good ones only where they should."""
    assert decode_heartbeat(frame_of(2, group_id="gx"), HIGH) is not None
    assert decode_heartbeat(frame_of(2, member_id=""), HIGH) is not None
