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
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from benchmarks import wire
from protocol.codec import build, nested

ROOT = Path(__file__).resolve().parent.parent


def test_quick_run_measures_both_systems(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = json.loads(out.read_text())["results"]
    keys = ["heartbeat", *(k for k in results if k.startswith("formation_"))]
    assert len(keys) >= 2, sorted(results)
    for key in keys:
        for system in ("ours", "mock"):
            value = results[key][system]["value"]
            assert value is not None and value > 0, (key, system, results[key][system])
    assert "ours" in completed.stdout and "mock" in completed.stdout


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
