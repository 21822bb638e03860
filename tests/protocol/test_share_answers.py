"""The hand-written ShareGroupHeartbeat answer against kio's writer, byte for byte (docs/spec/share-groups.md 2.1)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.api.share_groups import heartbeat_answer, heartbeat_response
from broker.coordinator.modern.share.messages import ShareHeartbeatResult
from protocol.apis import ApiKey
from protocol.codec import HandEncoded, encode_response

TOPIC_A = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
TOPIC_B = uuid.UUID(int=255)
LONG = "m" * 300  # past one uvarint byte of length
RESULTS = [
    ShareHeartbeatResult(ErrorCode.none, None, "Q7YTt/jmRy6R8wuUst3dqg", 7, 5000, None),  # steady: no change
    ShareHeartbeatResult(ErrorCode.none, None, "m-é", 1, 5000, ((TOPIC_A, (0,)),)),
    ShareHeartbeatResult(ErrorCode.none, None, LONG, 2**31 - 1, 1000, ()),  # an empty assignment: marker 1, []
    ShareHeartbeatResult(ErrorCode.none, None, "m", 3, 5000, ((TOPIC_B, (2, 0, 1)), (TOPIC_A, tuple(range(200))))),
    ShareHeartbeatResult(ErrorCode.invalid_request, "MemberId can't be empty."),
    ShareHeartbeatResult(ErrorCode.fenced_member_epoch, "é" * 200),
    ShareHeartbeatResult(ErrorCode.none, None, "leaving", -1, 0, None),
]


@pytest.mark.parametrize("result", RESULTS)
def test_share_heartbeat_answer_is_kios_bytes(result: ShareHeartbeatResult) -> None:
    fast = heartbeat_answer(1, result)
    assert type(fast) is HandEncoded
    expected = encode_response(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 99, heartbeat_response(1, result))
    assert encode_response(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 99, fast) == expected
