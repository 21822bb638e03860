"""The benchmark command runs end to end at tiny sizes, and its hand-built frames match kio's.

No timing is asserted here: numbers depend on the machine. The bars are printed, never checked.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from benchmarks import wire
from protocol.codec import build, encode_response, nested, response_schema

ROOT = Path(__file__).resolve().parent.parent


def test_quick_run_measures_both_systems(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(out.read_text())
    results = document["results"]
    keys = ["heartbeat", *(k for k in results if k.startswith("formation_"))]
    assert len(keys) >= 2, sorted(results)
    # KIP-848: steady heartbeats, one group from first join to reconciled, the scale run (librdkafka 2.16's mock
    # serves ConsumerGroupHeartbeat v1, so both systems have figures).
    cg_keys = ["cg_heartbeat", "cg_heartbeat_scale", "cg_rss_members"]
    cg_keys += [k for k in results if k.startswith("cg_formation_")]
    assert len(cg_keys) == 4, sorted(results)
    keys += cg_keys
    for key in keys:
        for system in ("ours", "mock"):
            value = results[key][system]["value"]
            assert value is not None and value > 0, (key, system, results[key][system])
    assert "ours" in completed.stdout and "mock" in completed.stdout
    # Issue 27: each figure memory-only beside --data-dir, and the recovery of a (tiny) directory beside its bytes.
    figures = {f["name"]: f for f in document["durable"]["figures"]}
    assert len(figures) == 4 and all(f["memory"] > 0 and f["durable"] > 0 for f in figures.values()), figures
    assert document["durable"]["recovery"]["load_ms"] > 0 and document["durable"]["recovery"]["bytes"] > 2000 * 100
    assert "--data-dir / memory-only: heartbeats/s" in completed.stdout
    # Issue 29: ours' graceful stop, coordinator move and load delay have a row; the mock moves a coordinator too
    # (rd_kafka_mock_coordinator_set), and its rows for the other two say why it has no figure.
    for key in ("nodes_graceful_max", "nodes_move_max", "nodes_load_delay_max"):
        assert results[key]["ours"]["value"] is not None, (key, results[key]["ours"])
    assert results["nodes_move_max"]["mock"]["value"] is not None, results["nodes_move_max"]["mock"]
    assert results["nodes_move_max"]["mock"]["details"]["first_errors"] == {"16": 1}, results["nodes_move_max"]["mock"]
    for key in ("nodes_graceful_max", "nodes_load_delay_max"):
        mock = results[key]["mock"]
        assert mock["value"] is None and mock["note"].startswith("n/a: "), (key, mock)


def _kio_frame(api_key: int, version: int, **values: Any) -> bytes:
    schema = load_request_schema(api_key, version)
    header_schema = schema.__header_schema__
    header = header_schema(
        request_api_key=i16(api_key), request_api_version=i16(version), correlation_id=i32(7), client_id="c"
    )
    buffer = io.BytesIO()
    entity_writer(header_schema)(buffer, header)
    entity_writer(schema)(buffer, build(schema, **values))
    return struct.pack(">i", buffer.tell()) + buffer.getvalue()


@pytest.mark.parametrize("version", range(10))
def test_join_group_frame_matches_kio(version: int) -> None:
    metadata = wire.subscription(["bench"])
    protocol = nested(load_request_schema(wire.JOIN_GROUP, version), "JoinGroupRequestProtocol")
    expected = _kio_frame(
        wire.JOIN_GROUP,
        version,
        group_id="g",
        session_timeout=datetime.timedelta(milliseconds=60_000),
        rebalance_timeout=datetime.timedelta(milliseconds=30_000),
        member_id="m",
        group_instance_id="i",
        protocol_type="consumer",
        protocols=(protocol(name="range", metadata=metadata),),
        reason=None,
    )
    body = wire.join_body(version, "g", "m", "i", 60_000, 30_000, [("range", metadata)])
    assert wire.frame(wire.JOIN_GROUP, version, 7, "c", body) == expected


@pytest.mark.parametrize("version", range(6))
def test_sync_group_frame_matches_kio(version: int) -> None:
    plan = wire.assignment("bench", [0, 1])
    assignment = nested(load_request_schema(wire.SYNC_GROUP, version), "SyncGroupRequestAssignment")
    expected = _kio_frame(
        wire.SYNC_GROUP,
        version,
        group_id="g",
        generation_id=i32(3),
        member_id="m",
        group_instance_id="i",
        protocol_type="consumer",
        protocol_name="range",
        assignments=(assignment(member_id="m", assignment=plan),),
    )
    assert (
        wire.frame(wire.SYNC_GROUP, version, 7, "c", wire.sync_body(version, "g", 3, "m", "i", [("m", plan)]))
        == expected
    )


@pytest.mark.parametrize("version", range(5))
def test_heartbeat_frame_matches_kio(version: int) -> None:
    expected = _kio_frame(
        wire.HEARTBEAT, version, group_id="g", generation_id=i32(3), member_id="m", group_instance_id=None
    )
    assert wire.frame(wire.HEARTBEAT, version, 7, "c", wire.heartbeat_body(version, "g", 3, "m", None)) == expected


def test_api_versions_frame_matches_kio() -> None:
    assert wire.api_versions_request(7, "c") == _kio_frame(wire.API_VERSIONS, 0)


# -- KIP-848: ConsumerGroupHeartbeat and the CreateTopics the consumer-group scenarios send ----------------------

_TOPIC_A = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
_TOPIC_B = uuid.UUID("00000000-0000-0000-0000-0000000000ff")
_JOIN = {"rebalance_timeout_ms": 300_000, "topic_names": ["bench", "more"], "topic_regex": "", "owned": ()}
_OWNED: wire.Owned = ((_TOPIC_B.bytes, (0, 2)), (_TOPIC_A.bytes, (1,)))


def _kio_consumer_heartbeat(version: int, member_epoch: int, **fields: Any) -> bytes:
    schema = load_request_schema(wire.CONSUMER_GROUP_HEARTBEAT, version)
    partitions = nested(schema, "TopicPartitions")
    owned = fields.get("owned")
    return _kio_frame(
        wire.CONSUMER_GROUP_HEARTBEAT,
        version,
        group_id="g",
        member_id="Q7YTt/jmRy6R8wuUst3dqg",
        member_epoch=i32(member_epoch),
        instance_id=fields.get("instance_id"),
        rack_id=fields.get("rack_id"),
        rebalance_timeout=datetime.timedelta(milliseconds=fields.get("rebalance_timeout_ms", -1)),
        subscribed_topic_names=None if fields.get("topic_names") is None else tuple(fields["topic_names"]),
        subscribed_topic_regex=fields.get("topic_regex"),
        server_assignor=fields.get("server_assignor"),
        topic_partitions=None
        if owned is None
        else tuple(partitions(topic_id=uuid.UUID(bytes=t), partitions=tuple(i32(p) for p in ps)) for t, ps in owned),
    )


@pytest.mark.parametrize("version", range(2))
@pytest.mark.parametrize(
    ("epoch", "fields"),
    [
        (0, _JOIN),  # join (section 12.3)
        (0, {**_JOIN, "instance_id": "i-1", "rack_id": "r", "server_assignor": "range"}),
        (7, {}),  # steady heartbeat: every optional field null / -1
        (7, {"owned": _OWNED}),  # acknowledgement: TopicPartitions = the owned set
        (7, {**_JOIN, "owned": _OWNED}),  # full re-sync after a reconnect
        (-1, {}),  # leave
    ],
)
def test_consumer_group_heartbeat_frame_matches_kio(version: int, epoch: int, fields: dict[str, Any]) -> None:
    if version == 0:
        fields = {k: v for k, v in fields.items() if k != "topic_regex"}  # v1+ only (section 2.1 field 8)
    body = wire.consumer_heartbeat_body(version, "g", "Q7YTt/jmRy6R8wuUst3dqg", epoch, **fields)
    expected = _kio_consumer_heartbeat(version, epoch, **fields)
    assert wire.frame(wire.CONSUMER_GROUP_HEARTBEAT, version, 7, "c", body) == expected


def _kio_answer(api_key: int, version: int, body: Any) -> bytes:
    """The answer body the way our broker writes it (kio), after the size prefix."""
    return encode_response(api_key, version, 7, body)[4:]


@pytest.mark.parametrize("version", range(2))
@pytest.mark.parametrize("assignment", [None, (), _OWNED])
def test_consumer_group_heartbeat_answer_parses_as_kio_writes_it(version: int, assignment: wire.Owned | None) -> None:
    schema = response_schema(wire.CONSUMER_GROUP_HEARTBEAT, version)
    partitions = nested(schema, "TopicPartitions")
    written = None
    if assignment is not None:
        written = nested(schema, "Assignment")(
            topic_partitions=tuple(
                partitions(topic_id=uuid.UUID(bytes=t), partitions=tuple(i32(p) for p in ps)) for t, ps in assignment
            )
        )
    body = schema(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        member_id="m-1",
        member_epoch=i32(5),
        heartbeat_interval=datetime.timedelta(milliseconds=5000),
        assignment=written,
    )
    answer = wire.parse_consumer_heartbeat(_kio_answer(wire.CONSUMER_GROUP_HEARTBEAT, version, body))
    expected = None if assignment is None else tuple(sorted(assignment))
    assert answer == wire.ConsumerHeartbeatAnswer(0, None, "m-1", 5, 5000, expected)
    frame = encode_response(wire.CONSUMER_GROUP_HEARTBEAT, version, 7, body)
    assert struct.unpack_from(">h", frame, wire.consumer_heartbeat_error_offset()) == (0,)


def test_consumer_group_heartbeat_error_answer_parses() -> None:
    schema = response_schema(wire.CONSUMER_GROUP_HEARTBEAT, 1)
    body = schema(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.fenced_member_epoch,
        error_message="The member epoch is fenced.",
        member_id=None,
        member_epoch=i32(0),
        heartbeat_interval=datetime.timedelta(0),
        assignment=None,
    )
    data = _kio_answer(wire.CONSUMER_GROUP_HEARTBEAT, 1, body)
    answer = wire.parse_consumer_heartbeat(data)
    assert answer == wire.ConsumerHeartbeatAnswer(
        wire.FENCED_MEMBER_EPOCH, "The member epoch is fenced.", None, 0, 0, None
    )
    with pytest.raises(wire.ParseError):
        wire.parse_consumer_heartbeat(data + b"\x00")
    with pytest.raises(wire.ParseError):
        wire.parse_consumer_heartbeat(data[:-3])


def test_create_topics_frame_matches_kio() -> None:
    schema = load_request_schema(wire.CREATE_TOPICS, 2)
    expected = _kio_frame(
        wire.CREATE_TOPICS,
        2,
        topics=(
            nested(schema, "CreatableTopic")(
                name="bench", num_partitions=i32(12), replication_factor=i16(1), assignments=(), configs=()
            ),
        ),
        timeout=datetime.timedelta(milliseconds=30_000),
        validate_only=False,
    )
    assert wire.frame(wire.CREATE_TOPICS, 2, 7, "c", wire.create_topics_body("bench", 12)) == expected
    answer_schema = response_schema(wire.CREATE_TOPICS, 2)
    result = nested(answer_schema, "CreatableTopicResult")
    body = answer_schema(
        throttle_time=datetime.timedelta(0),
        topics=(result(name="bench", error_code=ErrorCode.topic_already_exists, error_message="exists"),),
    )
    parsed = wire.parse_create_topics(_kio_answer(wire.CREATE_TOPICS, 2, body))
    assert parsed == [("bench", wire.TOPIC_ALREADY_EXISTS, "exists")]
