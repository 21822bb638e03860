"""Issue 29's benchmark scenario (``--only heartbeat-nodes``) runs end to end at tiny sizes against ours alone, and its
FindCoordinator frames match kio's. No timing is asserted: the bars are printed, never checked."""

from __future__ import annotations

import datetime
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from benchmarks import wire
from benchmarks.nodes_loadgen import Route, find_coordinator_body, parse_find_coordinator
from protocol.codec import build, encode_response, response_schema

ROOT = Path(__file__).resolve().parent.parent


def test_heartbeat_nodes_runs_against_ours(tmp_path: Path) -> None:
    out = tmp_path / "nodes.json"
    command = [sys.executable, "-m", "benchmarks", "--quick", "--only", "heartbeat-nodes", "--nodes-systems", "ours"]
    completed = subprocess.run(
        [*command, "--groups", "3", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(out.read_text())
    results = document["results"]
    for key in ("nodes_heartbeat_1", "nodes_heartbeat", "nodes_failover_max", "nodes_failover_median"):
        measured = results[key]["ours"]
        assert measured["value"] is not None and measured["value"] > 0, (key, measured)
        assert not measured["flagged"], (key, measured)
    # Three groups over three coordinators: one each (the generator picks group ids by FindCoordinator's answers).
    spread = document["meta"]["nodes"]["groups_per_node"]["ours"]
    assert sorted(spread.values()) == [1, 1, 1], spread
    stop = results["nodes_failover_max"]["ours"]["details"]
    assert stop["groups_moved"] == 1 and stop["moved_from_other_nodes"] == 0, stop
    assert str(stop["stopped_node"]) not in stop["new_coordinators"], stop
    assert "heartbeats --nodes 3 / --nodes 1, same run" in completed.stdout
    # Ours' other cases, each on a fresh 3-node process: the graceful stop, one group's coordinator moved, a kill
    # with a 200 ms load delay. Every group that moved recovered with no rebalance: its Heartbeats carry the member
    # id and generation it was formed with, so an answer 0 means both were kept (a rebalance answers 27, a new
    # generation 22, an expired member 25: any of them flags the row, and only these errors are allowed).
    retryable = {"closed", "14", "15", "16"}
    cases = {}
    for key in ("nodes_graceful", "nodes_move", "nodes_load_delay"):
        for suffix in ("max", "median"):
            measured = results[f"{key}_{suffix}"]["ours"]
            assert measured["value"] is not None and measured["value"] > 0, (key, measured)
            assert not measured["flagged"], (key, measured)
        details = cases[key] = results[f"{key}_max"]["ours"]["details"]
        assert details["no_rebalance"] and not details["never_recovered"], details
        assert set(details["error_codes"]) <= retryable, details
        assert details["moved_from_other_nodes"] == 0, details
        assert len(details["recovery_ms"]) == details["groups_moved"] >= 1, details
    graceful = cases["nodes_graceful"]
    assert graceful["case"] == "graceful" and graceful["groups_moved"] == 1, graceful
    assert str(graceful["stopped_node"]) not in graceful["new_coordinators"], graceful
    # The move: the old coordinator keeps running and answers NOT_COORDINATOR; the group is found on the new one.
    move = cases["nodes_move"]
    assert move["first_errors"] == {"16": move["groups_moved"]}, move
    assert move["new_coordinators"] == {str(move["to_node"]): move["groups_moved"]}, move
    assert move["from_node"] != move["to_node"], move
    # The load delay: the new coordinator answered COORDINATOR_LOAD_IN_PROGRESS until its 200 ms load ended.
    delayed = cases["nodes_load_delay"]
    assert delayed["load_delay_ms"] == 200 and "14" in delayed["error_codes"], delayed
    assert results["nodes_load_delay_max"]["ours"]["value"] >= 200, delayed
    assert "load delay, max minus 200 ms" in completed.stdout


def test_find_coordinator_frame_matches_kio() -> None:
    schema = load_request_schema(wire.FIND_COORDINATOR, 1)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    header = header_schema(
        request_api_key=i16(wire.FIND_COORDINATOR), request_api_version=i16(1), correlation_id=i32(7), client_id="c"
    )
    entity_writer(header_schema)(buffer, header)
    entity_writer(schema)(buffer, build(schema, key="group-1", key_type=0))
    expected = struct.pack(">i", buffer.tell()) + buffer.getvalue()
    assert wire.frame(wire.FIND_COORDINATOR, 1, 7, "c", find_coordinator_body("group-1")) == expected


@pytest.mark.parametrize(("error", "message"), [(ErrorCode.none, None), (ErrorCode.not_coordinator, "moved")])
def test_find_coordinator_answer_parses_as_kio_writes_it(error: ErrorCode, message: str | None) -> None:
    body = response_schema(wire.FIND_COORDINATOR, 1)(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        node_id=i32(2),
        host="127.0.0.1",
        port=i32(9093),
    )
    data = encode_response(wire.FIND_COORDINATOR, 1, 7, body)[4:]
    assert parse_find_coordinator(data) == (error.value, Route(2, "127.0.0.1", 9093))
    with pytest.raises(wire.ParseError):
        parse_find_coordinator(data + b"\x00")
