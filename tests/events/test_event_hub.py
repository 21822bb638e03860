"""EventHub, EventFile and LoggedEvents: stamping, ring buffers, history, subscribers, debug filtering, rotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from broker.events.hub import EventFile, EventHub, LoggedEvents, Record
from broker.events.names import FORMAT_VERSION
from broker.timing.clock import ManualClock


def hub(ring_size: int = 1000, *, debug: bool = False, file: EventFile | None = None) -> EventHub:
    return EventHub(ManualClock(), ring_size=ring_size, debug=debug, file=file)


def seqs(records: Any) -> list[int]:
    return [r["seq"] for r in records]


def history(events: EventHub, group_id: str, since_seq: int = 0, limit: int | None = None) -> list[Record]:
    found = events.history(group_id, since_seq, limit)
    assert found is not None, f"no ring for {group_id!r}"
    return list(found)


# -- stamping -----------------------------------------------------------------------------------------------------


def test_records_are_stamped_with_version_sequence_time_and_run() -> None:
    clock = ManualClock(start_ms=1_000)
    events = EventHub(clock)
    events.emit("group_created", "g", {})
    clock.advance(250)
    events.emit("member_joined", "g", {"member_id": "m1", "protocols": ["range"]})
    first, second = history(events, "g")
    assert first == {
        "v": 2,
        "seq": 1,
        "ts_ms": 1_000,
        "run_id": events.run_id,
        "event": "group_created",
        "group_id": "g",
    }
    assert second == {
        "v": FORMAT_VERSION,
        "seq": 2,
        "ts_ms": 1_250,
        "run_id": events.run_id,
        "event": "member_joined",
        "group_id": "g",
        "member_id": "m1",
        "protocols": ["range"],
    }
    assert len(events.run_id) == 12 and int(events.run_id, 16) >= 0
    assert EventHub(clock).run_id != events.run_id


def test_sequence_is_broker_wide() -> None:
    events = hub()
    for group in ("a", "b", "a", "c", "b"):
        events.emit("state_changed", group, {})
    assert seqs(events.history("a") or ()) == [1, 3]
    assert seqs(events.history("b") or ()) == [2, 5]
    assert seqs(events.history("c") or ()) == [4]
    assert events.seq == 5


# -- rings and history --------------------------------------------------------------------------------------------


def test_each_group_has_its_own_ring_of_the_newest_records() -> None:
    events = hub(ring_size=3)
    for _ in range(5):
        events.emit("state_changed", "busy", {})
    events.emit("state_changed", "quiet", {})
    assert seqs(events.history("busy") or ()) == [3, 4, 5]
    assert seqs(events.history("quiet") or ()) == [6]  # a busy group does not push others out
    assert set(events.rings) == {"busy", "quiet"}
    assert all(ring.maxlen == 3 for ring in events.rings.values())


def test_history_of_a_group_never_seen_is_none() -> None:
    events = hub()
    events.emit("group_created", "g", {})
    assert events.history("other") is None
    assert events.history("other", since_seq=0, limit=10) is None


def test_history_since_seq_and_limit() -> None:
    events = hub()
    for n in range(1, 11):
        events.emit("state_changed", "g", {"n": n})
        events.emit("state_changed", "h", {"n": n})  # interleaved: g has the odd sequence numbers
    assert seqs(events.history("g") or ()) == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
    assert seqs(events.history("g", since_seq=13) or ()) == [15, 17, 19]  # strictly after since_seq
    assert seqs(events.history("g", since_seq=14) or ()) == [15, 17, 19]
    assert seqs(events.history("g", since_seq=19) or ()) == []
    assert seqs(events.history("g", since_seq=1_000) or ()) == []
    # limit keeps the newest records, still oldest first
    assert seqs(events.history("g", limit=3) or ()) == [15, 17, 19]
    assert seqs(events.history("g", since_seq=4, limit=2) or ()) == [17, 19]
    assert seqs(events.history("g", limit=100) or ()) == seqs(events.history("g") or ())
    assert seqs(events.history("g", limit=0) or ()) == []


def test_history_is_a_snapshot() -> None:
    events = hub()
    events.emit("state_changed", "g", {})
    history = events.history("g")
    assert history is not None
    events.emit("state_changed", "g", {})  # emitting while a reader iterates must not break it
    assert seqs(history) == [1]


# -- subscribers --------------------------------------------------------------------------------------------------


def test_subscribers_see_every_record_until_they_unsubscribe() -> None:
    events = hub()
    first: list[Record] = []
    second: list[Record] = []
    stop_first = events.subscribe(first.append)
    events.subscribe(second.append)
    events.emit("group_created", "g", {})
    events.emit("group_created", "h", {})
    stop_first()
    stop_first()  # a second unsubscribe is harmless
    events.emit("group_deleted", "g", {"reason": "test"})
    assert seqs(first) == [1, 2]
    assert seqs(second) == [1, 2, 3]
    assert second[0] is next(iter(events.history("g") or ()))  # the same record everywhere


def test_subscriber_may_unsubscribe_while_being_called() -> None:
    events = hub()
    seen: list[int] = []
    later: list[int] = []

    def once(record: Record) -> None:
        seen.append(record["seq"])
        unsubscribe()

    unsubscribe = events.subscribe(once)
    events.subscribe(lambda record: later.append(record["seq"]))
    events.emit("state_changed", "g", {})
    events.emit("state_changed", "g", {})
    assert seen == [1]
    assert later == [1, 2]  # the others are still called, in order


def test_subscribing_twice_delivers_twice_and_unsubscribes_one_at_a_time() -> None:
    events = hub()
    seen: list[Record] = []
    stop = events.subscribe(seen.append)
    events.subscribe(seen.append)
    events.emit("state_changed", "g", {})
    stop()
    events.emit("state_changed", "g", {})
    assert len(seen) == 3


# -- debug events --------------------------------------------------------------------------------------------------


def test_debug_events_are_dropped_unless_the_hub_wants_them() -> None:
    quiet = hub(debug=False)
    seen: list[Record] = []
    quiet.subscribe(seen.append)
    assert quiet.wants_debug is False
    quiet.emit("offsets_committed", "g", {"offsets": []}, debug=True)
    assert quiet.seq == 0 and seen == [] and quiet.history("g") is None
    quiet.emit("state_changed", "g", {})
    assert seqs(seen) == [1]  # a dropped debug event takes no sequence number

    loud = hub(debug=True)
    assert loud.wants_debug is True
    loud.emit("offsets_committed", "g", {"offsets": [["t", 0, 5]]}, debug=True)
    loud.emit("state_changed", "g", {})
    assert [r["event"] for r in loud.history("g") or ()] == ["offsets_committed", "state_changed"]


def test_logged_events_write_structlog_lines_and_want_debug() -> None:
    sink = LoggedEvents()
    assert sink.wants_debug is True
    with structlog.testing.capture_logs() as logs:
        sink.emit("member_joined", "g", {"member_id": "m"})
        sink.emit("offsets_committed", "g", {"offsets": []}, debug=True)
    assert [(line["event"], line["log_level"], line["group_id"]) for line in logs] == [
        ("member_joined", "info", "g"),
        ("offsets_committed", "debug", "g"),
    ]
    assert logs[0]["member_id"] == "m"


def test_hub_logs_each_record_with_its_sequence() -> None:
    events = hub(debug=True)
    with structlog.testing.capture_logs() as logs:
        events.emit("member_left", "g", {"member_id": "m", "cause": "leave_group"})
        events.emit("offsets_committed", "g", {"offsets": []}, debug=True)
    assert [(line["event"], line["log_level"], line["seq"]) for line in logs] == [
        ("member_left", "info", 1),
        ("offsets_committed", "debug", 2),
    ]
    assert logs[0]["cause"] == "leave_group"


def test_hub_calls_no_logger_at_warning_and_still_records(capsys: pytest.CaptureFixture[str]) -> None:
    """At --log-level warning (broker/config/logs.py) an info event is recorded, buffered and handed to subscribers,
    and the structlog call is skipped (the filtering logger would drop it anyway: half of an event's cost); a new
    configuration is seen at the next event."""
    from broker.config import logs

    try:
        logs.configure("warning", "json")
        events = hub()
        seen: list[Record] = []
        events.subscribe(seen.append)
        events.emit("member_left", "g", {"member_id": "m"})
        assert events._logs_info() is False
        assert [r["event"] for r in events.history("g") or ()] == ["member_left"] == [r["event"] for r in seen]
        assert capsys.readouterr().err == ""
        logs.configure("info", "json")
        # A logger bound before the change keeps its level (cache_logger_on_first_use): it still writes nothing.
        assert events._logs_info() is False
        fresh = hub()
        fresh.emit("member_left", "g", {"member_id": "m"})
        assert fresh._logs_info() is True
        assert '"event": "member_left"' in capsys.readouterr().err
    finally:
        structlog.reset_defaults()


# -- JSON ----------------------------------------------------------------------------------------------------------


def test_a_record_is_json_serialisable() -> None:
    events = hub()
    fields = {
        "member_id": "m",
        "group_instance_id": None,
        "assignments": {"m": {"orders": [0, 1]}},
        "moved": [{"topic": "orders", "partition": 1, "from": None, "to": "m"}],
        "unowned": 0,
        "protocols": ["range", "cooperative-sticky"],
    }
    events.emit("sync_completed", "g", fields)
    (record,) = history(events, "g")
    text = json.dumps(record, allow_nan=False)
    assert json.loads(text) == record


# -- the JSON-lines file ------------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines, f"{path} is empty"
    return [json.loads(line) for line in lines]


def test_event_file_rotates_by_size(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    max_bytes = 400
    events = hub(file=EventFile(str(path), max_bytes=max_bytes, backups=3))
    for n in range(60):
        events.emit("member_joined", f"group-{n % 3}", {"member_id": f"member-{n}", "reason": "ünïcode % %s"})
    events.close()

    files = [path, *(tmp_path / f"events.jsonl.{i}" for i in (1, 2, 3))]
    assert all(f.exists() for f in files)
    assert not (tmp_path / "events.jsonl.4").exists()  # only `backups` old files are kept
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files)

    kept: list[dict[str, Any]] = []
    for f in reversed(files):  # the highest suffix is the oldest
        assert f.stat().st_size <= max_bytes
        records = read_lines(f)
        assert all(r["v"] == FORMAT_VERSION and r["run_id"] == events.run_id for r in records)
        kept += records
    # Oldest to newest across the files, without gaps, ending with the last record.
    assert seqs(kept) == list(range(kept[0]["seq"], 61))
    assert kept[0]["seq"] > 1  # the oldest files were rotated away
    assert kept[-1]["member_id"] == "member-59" and kept[-1]["reason"] == "ünïcode % %s"
    newest = read_lines(path)[-1]
    assert newest == next(iter(events.history("group-2", since_seq=59) or ()))


def test_event_file_lines_are_compact_json(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = hub(file=EventFile(str(path)))
    events.emit("group_created", "g", {})
    events.emit("state_changed", "g", {"from": "Empty", "to": "PreparingRebalance", "generation_id": 0})
    events.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    records = list(events.history("g") or ())
    assert lines == [json.dumps(r, separators=(",", ":")) for r in records]


def test_event_file_appends_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    runs = []
    for _ in range(2):
        events = hub(file=EventFile(str(path)))
        events.emit("group_created", "g", {})
        events.close()
        runs.append(events.run_id)
    records = read_lines(path)
    assert [(r["run_id"], r["seq"]) for r in records] == [(runs[0], 1), (runs[1], 1)]


@pytest.mark.parametrize("value", [{1, 2}, b"raw", object()])
def test_event_file_still_writes_a_line_for_a_field_json_cannot_encode(tmp_path: Path, value: object) -> None:
    """The coordinator only emits JSON types; should one slip through, the file line falls back to str()."""
    path = tmp_path / "events.jsonl"
    events = hub(file=EventFile(str(path)))
    events.emit("state_changed", "g", {"odd": value})
    events.close()
    (record,) = read_lines(path)
    assert record["odd"] == str(value)


def test_the_buffer_budget_across_groups_drops_the_oldest_records_first() -> None:
    from broker.events.hub import EventHub
    from broker.timing.clock import ManualClock

    hub = EventHub(ManualClock(), ring_size=5, buffer_total=8)
    for i in range(6):
        hub.emit("member_joined", "quiet", {"n": i})
    for i in range(6):
        hub.emit("member_joined", "busy", {"n": i})
    assert sum(len(ring) for ring in hub.rings.values()) <= 8
    assert [r["n"] for r in hub.history("busy") or ()] == [1, 2, 3, 4, 5]  # its own ring holds five
    quiet = [r["n"] for r in hub.history("quiet") or ()]
    assert quiet and quiet == list(range(6))[-len(quiet) :] and len(quiet) < 5  # the budget took the oldest
    for i in range(8):
        hub.emit("member_joined", "busy", {"n": 6 + i})
    assert hub.history("quiet") is None  # every record of it made way, and its empty ring went too
    assert len(list(hub.history("busy") or ())) == 5
