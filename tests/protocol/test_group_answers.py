"""The hand-written JoinGroup and SyncGroup answers against kio's writers, byte for byte, for every version."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.serial.errors import OutOfBoundValue

from broker.api.membership import join_answer, join_response, sync_answer, sync_response
from broker.coordinator.messages import JoinedMember, JoinResult, SyncResult
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import HandEncoded, encode_response

JOIN_LOW, JOIN_HIGH = SUPPORTED_VERSIONS[ApiKey.JOIN_GROUP]
SYNC_LOW, SYNC_HIGH = SUPPORTED_VERSIONS[ApiKey.SYNC_GROUP]

LONG = "m" * 300  # past one uvarint byte of length, past 127 for compact strings
MEMBERS = (
    JoinedMember("leader-é", None, b"\x00\x01subscription"),
    JoinedMember("follower-1", "instance-1", b""),
    JoinedMember(LONG, "i" * 200, bytes(range(256)) * 2),
)
JOINS = [
    JoinResult(ErrorCode.member_id_required, member_id="client-uuid"),
    JoinResult(ErrorCode.none, "leader-é", 7, "consumer", "range", "leader-é", False, MEMBERS),
    JoinResult(ErrorCode.none, "follower-1", 7, "consumer", "range", "leader-é", True, ()),
    JoinResult(ErrorCode.unknown_member_id),
    JoinResult(ErrorCode.none, LONG, 2**31 - 1, None, "", LONG, False, MEMBERS[:1]),
    JoinResult(ErrorCode.inconsistent_group_protocol, "", -1, "", None, "", False, ()),
]
SYNCS = [
    SyncResult(ErrorCode.none, b"\x00\x00assignment", "consumer", "range"),
    SyncResult(ErrorCode.rebalance_in_progress),
    SyncResult(ErrorCode.none, bytes(range(256)) * 3, None, None),
    SyncResult(ErrorCode.inconsistent_group_protocol, b"", "", "range-é"),
]


@pytest.mark.parametrize("version", range(JOIN_LOW, JOIN_HIGH + 1))
@pytest.mark.parametrize("result", JOINS)
def test_join_answer_is_kios_bytes(version: int, result: JoinResult) -> None:
    fast = encode_response(ApiKey.JOIN_GROUP, version, 4242, join_answer(version, result))
    assert fast == encode_response(ApiKey.JOIN_GROUP, version, 4242, join_response(version, result))


@pytest.mark.parametrize("version", range(SYNC_LOW, SYNC_HIGH + 1))
@pytest.mark.parametrize("result", SYNCS)
def test_sync_answer_is_kios_bytes(version: int, result: SyncResult) -> None:
    fast = encode_response(ApiKey.SYNC_GROUP, version, -7, sync_answer(version, result))
    assert fast == encode_response(ApiKey.SYNC_GROUP, version, -7, sync_response(version, result))


def test_an_encoded_body_goes_out_as_is() -> None:
    assert (
        encode_response(ApiKey.SYNC_GROUP, 0, 1, HandEncoded(lambda: b"body"))
        == b"\x00\x00\x00\x08\x00\x00\x00\x01body"
    )
    # Flexible versions put the response header's empty tagged fields between the correlation id and the body.
    flexible = encode_response(ApiKey.SYNC_GROUP, 4, 1, HandEncoded(lambda: b""))
    assert flexible == b"\x00\x00\x00\x05\x00\x00\x00\x01\x00"


def test_a_string_too_long_fails_when_sent_not_when_built() -> None:
    """As kio's writer: OutOfBoundValue, which the connection turns into closing with the reason; building the
    answer (inside the coordinator, when a parked join completes) never raises."""
    answer = join_answer(5, JoinResult(ErrorCode.none, "m" * 32768, 1, "consumer", "range", "", False, ()))
    with pytest.raises(OutOfBoundValue):
        encode_response(ApiKey.JOIN_GROUP, 5, 1, answer)
    # Compact strings (v6+) have no such limit.
    encode_response(ApiKey.JOIN_GROUP, 6, 1, join_answer(6, JoinResult(ErrorCode.none, "m" * 32768)))
