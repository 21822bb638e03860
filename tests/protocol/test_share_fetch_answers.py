"""The hand-written ShareFetch answer against kio's writer, byte for byte (docs/spec/share-groups.md 2.3), for every
shape hypothesis finds: top-level errors, empty answers, several topics and partitions, error and acknowledgement
messages (past one uvarint byte of length, non-ASCII), CurrentLeader, NodeEndpoints with and without a rack."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i64

from protocol.apis import ApiKey
from protocol.codec import HandEncoded, build, encode_response, nested, response_schema
from protocol.share_fetch_answers import Endpoint, PartitionAnswer, share_fetch_body, share_fetch_parts

ERRORS = [int(e.value) for e in (ErrorCode.none, ErrorCode.invalid_request, ErrorCode.not_leader_or_follower,
                                 ErrorCode.unknown_topic_id, ErrorCode.invalid_record_state,
                                 ErrorCode.share_session_not_found)]  # fmt: skip
messages = st.none() | st.text(max_size=300)
int16s = st.sampled_from(ERRORS)
int32s = st.integers(-(2**31), 2**31 - 1)
ranges = st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(-(2**15), 2**15 - 1))
partitions = st.tuples(
    int32s, int16s, messages, int16s, messages, int32s, int32s, st.lists(st.binary(max_size=300), max_size=3),
    st.lists(ranges, max_size=5),
)  # fmt: skip
topics = st.lists(st.tuples(st.uuids(), st.lists(partitions, max_size=4)), max_size=3)
endpoints = st.lists(st.tuples(int32s, st.text(max_size=200), int32s, st.none() | st.text(max_size=20)), max_size=3)


def kio_answer(
    version: int,
    error: int,
    message: str | None,
    lock_ms: int,
    answer_topics: list[tuple[uuid.UUID, list[PartitionAnswer]]],
    answer_endpoints: list[Endpoint],
) -> Any:
    cls = response_schema(ApiKey.SHARE_FETCH, version)
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    acquired_cls = nested(cls, "AcquiredRecords")
    partition_cls = nested(cls, "PartitionData")
    return build(
        cls,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode(error),
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=tuple(
            build(
                nested(cls, "ShareFetchableTopicResponse"),
                topic_id=topic_id,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=i32(index),
                        error_code=ErrorCode(p_error),
                        error_message=p_message,
                        acknowledge_error_code=i16(ack_error),
                        acknowledge_error_message=ack_message,
                        current_leader=build(leader_cls, leader_id=i32(leader_id), leader_epoch=i32(leader_epoch)),
                        records=b"".join(records),
                        acquired_records=tuple(
                            build(acquired_cls, first_offset=i64(a), last_offset=i64(b), delivery_count=i16(c))
                            for a, b, c in acquired
                        ),
                    )
                    for index, p_error, p_message, ack_error, ack_message, leader_id, leader_epoch, records, acquired
                    in ps
                ),
            )
            for topic_id, ps in answer_topics
        ),
        node_endpoints=tuple(
            nested(cls, "NodeEndpoint")(node_id=BrokerId(node), host=host, port=i32(port), rack=rack)
            for node, host, port, rack in answer_endpoints
        ),
    )


def assert_same(
    version: int,
    error: int,
    message: str | None,
    lock_ms: int,
    answer_topics: list[tuple[uuid.UUID, list[PartitionAnswer]]],
    answer_endpoints: list[Endpoint],
) -> None:
    expected = encode_response(
        ApiKey.SHARE_FETCH, version, 7, kio_answer(version, error, message, lock_ms, answer_topics, answer_endpoints)
    )
    fast = HandEncoded(lambda: share_fetch_body(error, message, lock_ms, answer_topics, answer_endpoints))
    assert encode_response(ApiKey.SHARE_FETCH, version, 7, fast) == expected
    pieces = HandEncoded(lambda: share_fetch_parts(error, message, lock_ms, answer_topics, answer_endpoints))
    assert encode_response(ApiKey.SHARE_FETCH, version, 7, pieces) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([1, 2]), int16s, messages, st.integers(0, 2**31 - 1), topics, endpoints
)
def test_any_share_fetch_answer_is_kios_bytes(
    version: int,
    error: int,
    message: str | None,
    lock_ms: int,
    answer_topics: list[tuple[uuid.UUID, list[PartitionAnswer]]],
    answer_endpoints: list[Endpoint],
) -> None:
    assert_same(version, error, message, lock_ms, answer_topics, answer_endpoints)


TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BATCH = bytes(range(256)) * 30  # a record batch's bytes, long enough for a three-byte uvarint length


@pytest.mark.parametrize(
    ("error", "message", "answer_topics", "answer_endpoints"),
    [
        (0, None, [], []),  # an empty answer
        (int(ErrorCode.share_session_not_found.value), "Share session not found for member m.", [], []),
        # the benchmark's steady answer: one partition, acknowledgements accepted, records and their ranges
        (0, None, [(TOPIC, [(0, 0, None, 0, None, -1, -1, [BATCH, BATCH[:100]], [(1000, 1499, 1)])])], []),
        # a failed acknowledgement beside records redelivered
        (0, None, [(TOPIC, [(3, 0, None, int(ErrorCode.invalid_record_state.value),
                             "The offset cannot be acknowledged. The offset is not acquired.", -1, -1, [BATCH],
                             [(0, 9, 2), (10, 99, 1)])])], []),
        # a partition led elsewhere: NOT_LEADER_OR_FOLLOWER with its leader and the leader's endpoint
        (0, None, [(TOPIC, [(1, int(ErrorCode.not_leader_or_follower.value), None,
                             int(ErrorCode.not_leader_or_follower.value), None, 2, 5, [], [])])],
         [(2, "127.0.0.1", 9094, None)]),
    ],
)
def test_known_share_fetch_answers_are_kios_bytes(
    error: int,
    message: str | None,
    answer_topics: list[tuple[uuid.UUID, list[PartitionAnswer]]],
    answer_endpoints: list[Endpoint],
) -> None:
    for version in (1, 2):
        assert_same(version, error, message, 30_000, answer_topics, answer_endpoints)


def test_the_handlers_answers_are_fetch_responses_bytes() -> None:
    """broker/api/share_fetch.py's ``fetch_answer`` (hand) against its ``fetch_response`` (kio) for the coordinator's
    answers: records, acknowledgement errors, a refused partition with its CurrentLeader, a top-level error."""
    from broker.api.share_fetch import fetch_answer, fetch_response
    from broker.coordinator.modern.share.messages import FetchedPartition, ShareAnswer

    other = uuid.UUID(int=3)
    answers = [
        ShareAnswer(ErrorCode.none, None, 30_000, []),
        ShareAnswer(ErrorCode.invalid_share_session_epoch, "The share session epoch 3 does not match the expected 4."),
        ShareAnswer(ErrorCode.none, None, 30_000, [
            FetchedPartition(TOPIC, 0, records=[BATCH, BATCH], acquired=[(0, 499, 1), (500, 999, 2)]),
            FetchedPartition(other, 2, ErrorCode.unknown_topic_id),
            FetchedPartition(TOPIC, 1, acknowledge_error=ErrorCode.invalid_record_state,
                             acknowledge_error_message="Member is not the owner of offset"),
            FetchedPartition(TOPIC, 4, ErrorCode.not_leader_or_follower),
        ]),
    ]
    leaders = {(TOPIC, 4): (2, 7)}
    for version in (1, 2):
        for answer in answers:
            fast = fetch_answer(version, answer, leaders)
            assert type(fast) is HandEncoded
            slow = fetch_response(version, answer, leaders)
            expected = encode_response(ApiKey.SHARE_FETCH, version, 1, slow)
            assert encode_response(ApiKey.SHARE_FETCH, version, 1, fast) == expected
