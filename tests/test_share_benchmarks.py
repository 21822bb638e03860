"""The share-group benchmarks (issue 28): their hand-built frames match kio's, the answers they read parse as kio
writes them, and both scenarios run end to end against our broker at tiny sizes (no mock, no kfake: CI has
neither). No timing is asserted."""

from __future__ import annotations

import datetime
import json
import os
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from benchmarks import share_loadgen, share_wire, wire
from protocol.codec import encode_response, nested, response_schema
from protocol.consumer_heartbeat import decode_share_steady
from protocol.share_fetch_requests import decode_steady_share_fetch
from tests.test_benchmarks import _kio_frame
from tests.wire.client import part

ROOT = Path(__file__).resolve().parent.parent
TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
MEMBER = "Q7YTt/jmRy6R8wuUst3dqg"  # librdkafka's kind of member id: standard base64, + and / included


def _answer(api_key: int, version: int, body: Any) -> bytes:
    return encode_response(api_key, version, 7, body)[4:]


@pytest.mark.parametrize(
    ("epoch", "topics", "rack"), [(0, ("b", "a"), None), (0, ("t",), "r1"), (3, None, None), (-1, None, None)]
)
def test_share_heartbeat_frame_matches_kio(epoch: int, topics: tuple[str, ...] | None, rack: str | None) -> None:
    expected = _kio_frame(
        wire.SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id=MEMBER, member_epoch=i32(epoch), rack_id=rack,
        subscribed_topic_names=topics,
    )  # fmt: skip
    body = share_wire.share_heartbeat_body("g", MEMBER, epoch, topics, rack)
    assert wire.frame(wire.SHARE_GROUP_HEARTBEAT, 1, 7, "c", body) == expected


def test_the_timed_share_heartbeats_take_the_brokers_fast_path() -> None:
    """A deterministic proxy for the share-heartbeat figure: the frames the timed run sends (a settled member's
    steady beat, ``share_loadgen._heartbeat`` with its epoch) are read by the broker's hand decoder, so the run
    measures the fast path (``RequestPipeline.run``) and not kio's; a join or a leave is not."""
    steady = share_loadgen._heartbeat("g", MEMBER, 3)
    decoded = decode_share_steady(steady[4:])
    assert decoded is not None
    assert decoded[3:] == ("g", MEMBER, MEMBER.encode(), 3)
    assert decode_share_steady(share_loadgen._heartbeat("g", MEMBER, 0, ["t"])[4:]) is None
    assert decode_share_steady(share_loadgen._heartbeat("g", MEMBER, -1)[4:]) is None


def _kio_share_fetch(epoch: int, partitions: tuple[Any, ...], **limits: int) -> bytes:
    api = wire.SHARE_FETCH
    topics = (part(api, 1, "FetchTopic", topic_id=TOPIC, partitions=partitions),) if partitions else ()
    return _kio_frame(
        api, 1, group_id="g", member_id=MEMBER, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=limits.get("max_wait_ms", 500)), min_bytes=i32(1),
        max_bytes=i32(0x7FFFFFFF), max_records=i32(limits.get("max_records", 500)),
        batch_size=i32(limits.get("batch_size", 500)), topics=topics, forgotten_topics_data=(),
    )  # fmt: skip


def _kio_batches(api: int, acks: share_wire.Acks) -> tuple[Any, ...]:
    return tuple(
        part(api, 1, "AcknowledgementBatch", first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(1),))
        for f, last in acks
    )


@pytest.mark.parametrize(
    ("add", "acks"), [(True, ()), (False, ((0, 99),)), (False, ((0, 4), (10, 499), (600, 600))), (False, ())]
)
def test_share_fetch_frame_matches_kio(add: bool, acks: share_wire.Acks) -> None:
    api = wire.SHARE_FETCH
    partitions = ()
    if add or acks:
        partitions = (part(api, 1, "FetchPartition", partition_index=i32(2),
                           acknowledgement_batches=_kio_batches(api, acks)),)  # fmt: skip
    expected = _kio_share_fetch(0 if add else 4, partitions)
    body = share_wire.share_fetch_body("g", MEMBER, 0 if add else 4, TOPIC.bytes, 2, add=add, acks=acks)
    assert wire.frame(api, 1, 7, "c", body) == expected
    limits = {"max_wait_ms": 0, "max_records": 7, "batch_size": 3}
    tight = share_wire.share_fetch_body("g", MEMBER, 4, TOPIC.bytes, 2, acks=acks, **limits)
    assert wire.frame(api, 1, 7, "c", tight) == _kio_share_fetch(4, partitions if acks else (), **limits)


@pytest.mark.parametrize(("epoch", "add", "acks"), [(0, True, ()), (4, False, ((0, 99),)), (5, False, ()),
                                                  (6, False, ((0, 4), (10, 499)))])  # fmt: skip
def test_the_timed_share_fetches_take_the_brokers_fast_path(epoch: int, add: bool, acks: share_wire.Acks) -> None:
    """A deterministic proxy for the share-fetch figure: the ShareFetch frames the load generator sends
    (``share_wire.share_fetch_body``: the first one adding the partition, then each carrying the previous answer's
    ACCEPTs, or none) are read by the broker's hand decoder (``RequestPipeline._share_fetch``), not by kio."""
    body = share_wire.share_fetch_body("g", MEMBER, epoch, TOPIC.bytes, 0, add=add, acks=acks)
    decoded = decode_steady_share_fetch(wire.frame(wire.SHARE_FETCH, 1, 7, "c", body)[4:])
    assert decoded is not None
    assert decoded[2:5] == ("g", MEMBER, epoch)
    assert decoded[10] == (TOPIC.bytes if add or acks else None)
    assert [(first, last) for first, last, _ in decoded[12]] == list(acks)


def test_share_acknowledge_frame_matches_kio() -> None:
    api = wire.SHARE_ACKNOWLEDGE
    acks = ((3, 9), (20, 20))
    partitions = (part(api, 1, "AcknowledgePartition", partition_index=i32(0),
                       acknowledgement_batches=_kio_batches(api, acks)),)  # fmt: skip
    topics = (part(api, 1, "AcknowledgeTopic", topic_id=TOPIC, partitions=partitions),)
    expected = _kio_frame(api, 1, group_id="g", member_id=MEMBER, share_session_epoch=i32(6), topics=topics)
    body = share_wire.share_acknowledge_body("g", MEMBER, 6, TOPIC.bytes, 0, acks)
    assert wire.frame(api, 1, 7, "c", body) == expected


def test_record_batch_matches_a_producers() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 24,
    )  # fmt: skip
    for i in range(5):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=b"v" * 10, headers=[])
    assert share_wire.record_batch(5, 10, 1_700_000_000_000) == bytes(builder.build())


def test_produce_and_alter_config_frames_match_kio() -> None:
    batch = share_wire.record_batch(3, 8, 1_700_000_000_000)
    api = wire.PRODUCE
    expected = _kio_frame(api, 7, transactional_id=None, acks=i16(1), timeout=datetime.timedelta(seconds=30),
                          topic_data=(part(api, 7, "TopicProduceData", name="t", partition_data=(
                              part(api, 7, "PartitionProduceData", index=i32(0), records=batch),)),))  # fmt: skip
    assert wire.frame(api, 7, 7, "c", share_wire.produce_body("t", 0, batch)) == expected
    api = wire.INCREMENTAL_ALTER_CONFIGS
    expected = _kio_frame(api, 0, resources=(part(api, 0, "AlterConfigsResource", resource_type=i8(32),
                          resource_name="g", configs=(part(api, 0, "AlterableConfig", name="share.auto.offset.reset",
                          config_operation=i8(0), value="earliest"),)),), validate_only=False)  # fmt: skip
    body = share_wire.alter_group_config_body("g", "share.auto.offset.reset", "earliest")
    assert wire.frame(api, 0, 7, "c", body) == expected


def test_share_heartbeat_answer_parses_as_kio_writes_it() -> None:
    schema = response_schema(wire.SHARE_GROUP_HEARTBEAT, 1)
    topic = nested(schema, "TopicPartitions")(topic_id=TOPIC, partitions=(i32(0),))
    body = schema(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None, member_id=MEMBER,
        member_epoch=i32(3), heartbeat_interval=datetime.timedelta(seconds=5),
        assignment=nested(schema, "Assignment")(topic_partitions=(topic,)),
    )  # fmt: skip
    answer = share_wire.parse_share_heartbeat(_answer(wire.SHARE_GROUP_HEARTBEAT, 1, body))
    assert answer == wire.ConsumerHeartbeatAnswer(0, None, MEMBER, 3, 5000, ((TOPIC.bytes, (0,)),))
    frame = encode_response(wire.SHARE_GROUP_HEARTBEAT, 1, 7, body)
    assert struct.unpack_from(">h", frame, share_wire.share_heartbeat_error_offset()) == (0,)


def test_share_fetch_answer_parses_as_kio_writes_it() -> None:
    schema = response_schema(wire.SHARE_FETCH, 1)
    batch = share_wire.record_batch(4, 5, 1_700_000_000_000)
    ranges = tuple(nested(schema, "AcquiredRecords")(first_offset=i64(f), last_offset=i64(last),
                   delivery_count=i16(n)) for f, last, n in ((0, 1, 1), (3, 3, 2)))  # fmt: skip
    leader = nested(schema, "LeaderIdAndEpoch")(leader_id=i32(-1), leader_epoch=i32(-1))
    data = nested(schema, "PartitionData")
    partitions = (
        data(partition_index=i32(0), error_code=ErrorCode.none, acknowledge_error_code=i16(0), current_leader=leader,
             records=batch, acquired_records=ranges),
        data(partition_index=i32(1), error_code=ErrorCode.none, acknowledge_error_code=i16(62), current_leader=leader,
             records=b"", acquired_records=()),
    )  # fmt: skip
    body = schema(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=datetime.timedelta(seconds=30),
        responses=(nested(schema, "ShareFetchableTopicResponse")(topic_id=TOPIC, partitions=partitions),),
        node_endpoints=(nested(schema, "NodeEndpoint")(node_id=i32(1), host="h", port=i32(9), rack=None),),
    )  # fmt: skip
    answer = share_wire.parse_share_fetch(_answer(wire.SHARE_FETCH, 1, body))
    assert answer == share_wire.ShareFetchAnswer(0, None, 30_000, (
        share_wire.FetchedPartition(TOPIC.bytes, 0, 0, 0, ((0, 1, 1), (3, 3, 2)), len(batch)),
        share_wire.FetchedPartition(TOPIC.bytes, 1, 0, 62, (), 0),
    ))  # fmt: skip
    data_bytes = _answer(wire.SHARE_FETCH, 1, body)
    with pytest.raises(wire.ParseError):
        share_wire.parse_share_fetch(data_bytes + b"\x00")
    with pytest.raises(wire.ParseError):
        share_wire.parse_share_fetch(data_bytes[:-40])


def test_share_acknowledge_produce_and_alter_answers_parse_as_kio_writes_them() -> None:
    schema = response_schema(wire.SHARE_ACKNOWLEDGE, 1)
    leader = nested(schema, "LeaderIdAndEpoch")(leader_id=i32(-1), leader_epoch=i32(-1))
    partition = nested(schema, "PartitionData")(partition_index=i32(0), error_code=ErrorCode.invalid_record_state,
                                                current_leader=leader)  # fmt: skip
    body = schema(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                  responses=(nested(schema, "ShareAcknowledgeTopicResponse")(topic_id=TOPIC, partitions=(partition,)),),
                  node_endpoints=())  # fmt: skip
    parsed = share_wire.parse_share_acknowledge(_answer(wire.SHARE_ACKNOWLEDGE, 1, body))
    assert parsed == share_wire.AcknowledgeAnswer(0, None, ((TOPIC.bytes, 0, 121),))
    schema = response_schema(wire.PRODUCE, 7)
    result = nested(schema, "PartitionProduceResponse")(index=i32(0), error_code=ErrorCode.none, base_offset=i64(40),
                                                        log_append_time=None, log_start_offset=i64(0))  # fmt: skip
    body = schema(responses=(nested(schema, "TopicProduceResponse")(name="t", partition_responses=(result,)),),
                  throttle_time=datetime.timedelta(0))  # fmt: skip
    assert share_wire.parse_produce(_answer(wire.PRODUCE, 7, body)) == [(0, 40)]
    schema = response_schema(wire.INCREMENTAL_ALTER_CONFIGS, 0)
    resource = nested(schema, "AlterConfigsResourceResponse")(error_code=ErrorCode.none, error_message=None,
                                                              resource_type=i8(32), resource_name="g")  # fmt: skip
    body = schema(throttle_time=datetime.timedelta(0), responses=(resource,))
    assert share_wire.parse_alter_configs(_answer(wire.INCREMENTAL_ALTER_CONFIGS, 0, body)) == [(0, None)]


def test_quick_share_run_measures_ours(tmp_path: Path) -> None:
    """Both share scenarios at tiny sizes against ours alone (CI has neither the mock's share groups in every
    librdkafka nor a kfake binary): every record delivered and acknowledged, heartbeats answered without error."""
    out = tmp_path / "share.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "share-fetch,share-heartbeat", "--share-systems",
         "ours", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env={**os.environ, "KFAKE": ""},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(out.read_text())
    fetch, beats = document["results"]["share_fetch"]["ours"], document["results"]["share_heartbeat"]["ours"]
    assert fetch["value"] > 0 and not fetch["flagged"], fetch
    assert fetch["details"]["acknowledged"] == fetch["details"]["records"] == 2000, fetch["details"]
    assert fetch["details"]["redelivered"] == 0 and fetch["details"]["ack_errors"] == {}
    assert beats["value"] > 0 and not beats["flagged"] and beats["details"]["members"] == 6, beats
    assert set(document["results"]) == {"share_fetch", "share_heartbeat"}
    assert "share records/s vs the faster of mock and kfake" in completed.stdout
