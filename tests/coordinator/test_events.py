"""The group events the coordinator emits: exact sequences on a manual clock, through a real ``EventHub``.

Every scenario checks the event names in order and the fields that matter; ``EventHarness.take`` also checks
the stamps (``v`` 1, ``seq`` one more than the last, one ``run_id``) of everything emitted since the last take.
The last test checks that every event name the coordinator can emit is documented in ``docs/events.md``.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.consumer_protocol import Assignment, encode_assignment
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import CommitRequest, LeavingMember, PartitionCommit
from broker.events import names as event_names
from broker.events.hub import EventHub, Record
from broker.timing.purgatory import Purgatory
from tests.coordinator.harness import GROUP, REBALANCE_MS, SESSION_MS, E, Harness, stable_static_group

ROOT = Path(__file__).resolve().parents[2]
COORDINATOR_PACKAGE = ROOT / "broker" / "coordinator"
EVENTS_DOC = ROOT / "docs" / "events.md"

Expected = Sequence[tuple[str, dict[str, Any]]]


@dataclass
class EventHarness(Harness):
    """The manual-clock harness with an ``EventHub`` as the coordinator's event sink.

    ``topics`` is what the coordinator's ``partition_count`` callback knows; ``debug`` is the hub's debug switch.
    """

    debug: bool = False
    topics: dict[str, int] = field(default_factory=lambda: {"topic": 4})

    def __post_init__(self) -> None:
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        counter = itertools.count(1)
        self.hub = EventHub(self.clock, debug=self.debug)
        self.emitted: list[Record] = []
        self.hub.subscribe(self.emitted.append)
        self._taken = 0
        self.coordinator = GroupCoordinator(
            self.config,
            self.clock,
            self.purgatory,
            new_uuid=lambda: f"uuid{next(counter)}",
            events=self.hub,
            partition_count=self.topics.get,
        )

    def take(self) -> list[Record]:
        """The records emitted since the last take, after checking the stamps of all of them."""
        start, self._taken = self._taken, len(self.emitted)
        records = self.emitted[start:]
        for expected_seq, record in enumerate(records, start=start + 1):
            assert record["v"] == event_names.FORMAT_VERSION
            assert record["run_id"] == self.hub.run_id
            assert record["seq"] == expected_seq, "seq must grow by exactly one per event"
            json.dumps(record, allow_nan=False)  # plain JSON types only, no default= needed
        return records


def assign(**partitions: Sequence[int]) -> bytes:
    """A consumer protocol assignment (v0) of the given partitions."""
    return encode_assignment(Assignment(0, tuple((topic, tuple(ps)) for topic, ps in partitions.items()), None))


def assert_events(records: Sequence[Record], expected: Expected) -> None:
    """The records have exactly the expected names in order, and each has at least the expected fields."""
    assert [r["event"] for r in records] == [name for name, _ in expected], records
    for record, (name, fields) in zip(records, expected, strict=True):
        for key, value in fields.items():
            assert key in record, (name, key, record)
            assert record[key] == value, (name, key, record[key], value)


def stable_pair(h: EventHarness) -> tuple[str, str]:
    """Two dynamic members, Stable at generation 2 with the leader owning topic 0-1 and the follower 2-3."""
    first = h.join_new()
    h.advance(0)
    a = first.value.member_id
    assert h.sync(a, 1, {a: assign(topic=[0, 1, 2, 3])}).value.error is E.none
    second = h.join_new()
    assert h.join(a).value.error is E.none
    b = second.value.member_id
    assert h.sync(b, 2).done is False
    assert h.sync(a, 2, {a: assign(topic=[0, 1]), b: assign(topic=[2, 3])}).value.error is E.none
    assert h.state() is GroupState.STABLE
    return a, b


# -- joining ----------------------------------------------------------------------------------------------------


def test_first_member_joining_an_empty_group() -> None:
    h = EventHarness(config=GroupConfig(initial_rebalance_delay_ms=3_000))
    t0 = h.clock.now_ms()
    first = h.join("", reason="starting up")
    assert first.value.error is E.member_id_required  # KIP-394: no member yet, no member event
    member = first.value.member_id
    assert_events(h.take(), [("group_created", {"group_id": GROUP, "ts_ms": t0})])

    h.advance(100)
    join = h.join(member, reason="starting up")
    assert_events(
        h.take(),
        [
            (
                "member_joined",
                {
                    "ts_ms": t0 + 100,
                    "member_id": member,
                    "group_instance_id": None,
                    "client_id": "client",
                    "client_host": "/127.0.0.1",
                    "protocols": ["range"],
                    "reason": "starting up",
                },
            ),
            ("state_changed", {"from": "Empty", "to": "PreparingRebalance", "generation_id": 0}),
            (
                "rebalance_started",
                {
                    "ts_ms": t0 + 100,
                    "generation_id": 0,
                    "previous_state": "Empty",
                    "members": 1,
                    "cause": "member_joined",
                    "member_id": member,
                },
            ),
        ],
    )
    assert "starting up" in h.emitted[-1]["reason"]

    h.advance(2_999)
    assert not join.done and h.take() == []
    h.advance(1)  # the initial rebalance delay runs out
    assert join.value.error is E.none and join.value.generation_id == 1
    assert_events(
        h.take(),
        [
            (
                "state_changed",
                {"ts_ms": t0 + 3_100, "from": "PreparingRebalance", "to": "CompletingRebalance", "generation_id": 1},
            ),
            (
                "join_completed",
                {
                    "ts_ms": t0 + 3_100,
                    "generation_id": 1,
                    "protocol_type": "consumer",
                    "protocol": "range",
                    "leader": member,
                    "members": [member],
                    "state": "CompletingRebalance",
                },
            ),
        ],
    )

    h.advance(500)
    sync = h.sync(member, 1, {member: assign(topic=[3, 1, 0, 2])})
    assert sync.value.error is E.none
    assert_events(
        h.take(),
        [
            ("state_changed", {"from": "CompletingRebalance", "to": "Stable", "generation_id": 1}),
            (
                "sync_completed",
                {
                    "ts_ms": t0 + 3_600,
                    "generation_id": 1,
                    "protocol": "range",
                    "assignments": {member: {"topic": [0, 1, 2, 3]}},
                    "moved": [],  # the first generation: nobody owned anything before
                    "unowned": 0,
                    "rebalance_ms": 3_500,  # from the join that started the rebalance to the leader's sync
                    "rebalance_protocol": "eager",
                },
            ),
        ],
    )


def test_second_member_joining_moves_partitions_to_it() -> None:
    h = EventHarness()
    first = h.join_new()
    h.advance(0)
    a = first.value.member_id
    h.sync(a, 1, {a: assign(topic=[0, 1, 2, 3])})
    h.take()

    h.advance(1_000)
    second = h.join_new()
    assert not second.done
    (b,) = h.group().members.keys() - {a}
    assert_events(
        h.take(),
        [
            ("member_joined", {"member_id": b, "protocols": ["range"]}),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 1}),
            (
                "rebalance_started",
                {
                    "generation_id": 1,
                    "previous_state": "Stable",
                    "members": 2,
                    "cause": "member_joined",
                    "member_id": b,
                },
            ),
        ],
    )

    h.advance(250)
    rejoin = h.join(a)
    assert rejoin.value.generation_id == 2 and second.value.generation_id == 2
    assert_events(
        h.take(),
        [
            ("member_rejoined", {"member_id": a, "state": "PreparingRebalance"}),
            ("state_changed", {"from": "PreparingRebalance", "to": "CompletingRebalance", "generation_id": 2}),
            ("join_completed", {"generation_id": 2, "leader": a, "members": [a, b]}),
        ],
    )

    follower_sync = h.sync(b, 2)
    assert not follower_sync.done and h.take() == []
    h.advance(250)
    leader_sync = h.sync(a, 2, {a: assign(topic=[0, 1]), b: assign(topic=[2, 3])})
    assert leader_sync.value.assignment == assign(topic=[0, 1])
    assert follower_sync.value.assignment == assign(topic=[2, 3])
    assert_events(
        h.take(),
        [
            ("state_changed", {"from": "CompletingRebalance", "to": "Stable", "generation_id": 2}),
            (
                "sync_completed",
                {
                    "generation_id": 2,
                    "assignments": {a: {"topic": [0, 1]}, b: {"topic": [2, 3]}},
                    "moved": [
                        {"topic": "topic", "partition": 2, "from": a, "to": b},
                        {"topic": "topic", "partition": 3, "from": a, "to": b},
                    ],
                    "unowned": 0,
                    "rebalance_ms": 500,
                    "rebalance_protocol": "eager",
                },
            ),
        ],
    )


# -- members going away -----------------------------------------------------------------------------------------


def test_leave_group() -> None:
    h = EventHarness()
    _, b = stable_pair(h)
    h.take()
    result = h.leave(LeavingMember(b, reason="shutting down"))
    assert result.members[0].error is E.none
    assert_events(
        h.take(),
        [
            (
                "member_left",
                {"member_id": b, "group_instance_id": None, "client_id": "client", "cause": "leave_group"},
            ),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 2}),
            (
                "rebalance_started",
                {"previous_state": "Stable", "members": 1, "cause": "member_left", "member_id": b},
            ),
        ],
    )
    assert h.emitted[-3]["reason"] == "shutting down"


def test_session_expiry() -> None:
    h = EventHarness()
    a, b = stable_pair(h)
    h.take()
    t0 = h.clock.now_ms()  # both sessions were (re)started when the join completed, at t0
    h.advance(SESSION_MS // 2)
    assert h.heartbeat(a, 2) is E.none
    h.advance(SESSION_MS // 2 - 1)
    assert h.take() == []
    h.advance(1)
    assert_events(
        h.take(),
        [
            (
                "member_expired",
                {
                    "ts_ms": t0 + SESSION_MS,
                    "member_id": b,
                    "group_instance_id": None,
                    "client_id": "client",
                    "since_last_heartbeat_ms": SESSION_MS,
                    "session_timeout_ms": SESSION_MS,
                    "cause": "session_timeout",
                },
            ),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance"}),
            (
                "rebalance_started",
                {"previous_state": "Stable", "members": 1, "cause": "member_expired", "member_id": b},
            ),
        ],
    )


def test_rejoin_timeout() -> None:
    """A member that keeps heartbeating but never rejoins is dropped when the rebalance timeout runs out."""
    h = EventHarness()
    a, b = stable_pair(h)
    h.take()
    t0 = h.clock.now_ms()
    rejoin = h.join(a)
    assert_events(h.take(), [("member_rejoined", {}), ("state_changed", {}), ("rebalance_started", {})])
    assert h.emitted[-1]["cause"] == "member_rejoined" and h.emitted[-1]["member_id"] == a
    for _ in range(REBALANCE_MS // 5_000 - 1):
        h.advance(5_000)
        assert h.heartbeat(b, 2) is E.rebalance_in_progress
    h.advance(5_000)
    assert rejoin.value.generation_id == 3
    assert_events(
        h.take(),
        [
            (
                "member_left",
                {
                    "ts_ms": t0 + REBALANCE_MS,
                    "member_id": b,
                    "group_instance_id": None,
                    "client_id": "client",
                    "cause": "rejoin_timeout",
                },
            ),
            ("state_changed", {"from": "PreparingRebalance", "to": "CompletingRebalance", "generation_id": 3}),
            ("join_completed", {"generation_id": 3, "members": [a], "leader": a}),
        ],
    )


def test_sync_timeout() -> None:
    """A member that heartbeats but never sends SyncGroup is dropped when the rebalance timeout runs out."""
    h = EventHarness()
    a, b = stable_pair(h)
    h.join(a)
    h.join(b)
    assert h.sync(a, 3, {a: assign(topic=[0, 1]), b: assign(topic=[2, 3])}).value.error is E.none
    h.take()
    t0 = h.clock.now_ms()
    for _ in range(REBALANCE_MS // 5_000 - 1):
        h.advance(5_000)
        assert h.heartbeat(a, 3) is E.none
        assert h.heartbeat(b, 3) is E.none
    h.advance(5_000)
    assert_events(
        h.take(),
        [
            (
                "member_left",
                {
                    "ts_ms": t0 + REBALANCE_MS,
                    "member_id": b,
                    "group_instance_id": None,
                    "cause": "sync_timeout",
                },
            ),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 3}),
            ("rebalance_started", {"previous_state": "Stable", "cause": "sync_timeout", "member_id": b}),
        ],
    )


def test_static_member_replaced_in_stable_fences_without_a_rebalance() -> None:
    h = EventHarness()
    _, follower = stable_static_group(h, "i1", "i2")
    h.take()
    join = h.join(instance_id="i2", reason="restarted")
    new_id = join.value.member_id
    assert join.value.error is E.none and new_id != follower
    assert_events(
        h.take(),
        [
            (
                "member_fenced",
                {
                    "member_id": follower,
                    "new_member_id": new_id,
                    "group_instance_id": "i2",
                    "cause": "static_member_replaced",
                    "reason": "restarted",
                },
            )
        ],
    )
    assert h.state() is GroupState.STABLE


def test_static_member_replaced_in_completing_rebalance_rebalances() -> None:
    h = EventHarness()
    leader, follower = stable_static_group(h, "i1", "i2")
    h.join(leader, instance_id="i1")
    h.join(follower, instance_id="i2")
    assert h.state() is GroupState.COMPLETING_REBALANCE
    h.take()
    join = h.join(instance_id="i2")
    (new_id,) = set(h.group().members) - {leader}
    assert not join.done
    assert_events(
        h.take(),
        [
            ("member_fenced", {"member_id": follower, "new_member_id": new_id, "cause": "static_member_replaced"}),
            ("state_changed", {"from": "CompletingRebalance", "to": "PreparingRebalance"}),
            (
                "rebalance_started",
                {"previous_state": "CompletingRebalance", "cause": "static_member_replaced", "member_id": new_id},
            ),
        ],
    )


# -- group lifecycle --------------------------------------------------------------------------------------------


def test_group_emptied_and_deleted() -> None:
    h = EventHarness()
    first = h.join_new()
    h.advance(0)
    a = first.value.member_id
    h.sync(a, 1, {a: assign(topic=[0, 1, 2, 3])})
    h.take()
    h.leave(a)
    assert h.state() is GroupState.EMPTY
    assert_events(
        h.take(),
        [
            ("member_left", {"member_id": a, "cause": "leave_group"}),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 1}),
            ("rebalance_started", {"cause": "member_left", "members": 0}),
            ("state_changed", {"from": "PreparingRebalance", "to": "Empty", "generation_id": 2}),
            (
                "join_completed",
                {"generation_id": 2, "state": "Empty", "protocol": None, "leader": None, "members": []},
            ),
            ("group_emptied", {"generation_id": 2}),
        ],
    )
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    assert_events(
        h.take(),
        [
            ("state_changed", {"from": "Empty", "to": "Dead", "generation_id": 2}),
            ("group_deleted", {"group_id": GROUP, "reason": "deleted by DeleteGroups"}),
        ],
    )


class RecordingSink:
    """A bare ``GroupEvents`` sink: what the coordinator emits, before any hub filtering."""

    def __init__(self, wants_debug: bool) -> None:
        self.wants_debug = wants_debug
        self.calls: list[tuple[str, str, dict[str, Any], bool]] = []

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        self.calls.append((event, group_id, fields, debug))


def test_offsets_committed_only_when_the_sink_wants_debug_events() -> None:
    for wants_debug in (False, True):
        h = Harness()
        sink = RecordingSink(wants_debug)
        h.coordinator = GroupCoordinator(h.config, h.clock, h.purgatory, events=sink)
        (member,) = h.stable_group(1)
        sink.calls.clear()
        assert h.commit({("topic", 0): 5, ("topic", 1): 7}, generation_id=1, member_id=member) == {
            ("topic", 0): E.none,
            ("topic", 1): E.none,
        }
        if wants_debug:
            assert sink.calls == [
                (
                    "offsets_committed",
                    GROUP,
                    {"member_id": member, "generation_id": 1, "offsets": [["topic", 0, 5], ["topic", 1, 7]]},
                    True,
                )
            ]
        else:
            assert sink.calls == []


def test_offsets_committed_through_the_hub() -> None:
    quiet = EventHarness(debug=False)
    (member,) = quiet.stable_group(1)
    quiet.take()
    quiet.commit({("topic", 0): 5}, generation_id=1, member_id=member)
    assert quiet.take() == []
    assert quiet.hub.seq == len(quiet.emitted)  # a dropped debug event uses no sequence number

    loud = EventHarness(debug=True)
    (member,) = loud.stable_group(1)
    loud.take()
    loud.commit({("topic", 0): 5}, generation_id=1, member_id=member)
    assert_events(
        loud.take(),
        [("offsets_committed", {"member_id": member, "generation_id": 1, "offsets": [["topic", 0, 5]]})],
    )


def test_failed_commit_emits_nothing() -> None:
    h = EventHarness(debug=True)
    (member,) = h.stable_group(1)
    h.take()
    assert h.commit({("topic", 0): 5}, generation_id=7, member_id=member) == {("topic", 0): E.illegal_generation}
    assert h.take() == []


def test_offsets_committed_lists_only_the_offsets_that_were_committed() -> None:
    h = EventHarness(debug=True)
    (member,) = h.stable_group(1)
    h.take()
    too_long = "x" * (h.config.offset_metadata_max_bytes + 1)
    answer = h.coordinator.commit_offsets(
        CommitRequest(
            group_id=GROUP,
            topics=(("topic", (PartitionCommit(0, 5, -1, too_long), PartitionCommit(1, 7, -1, ""))),),
            generation_id=1,
            member_id=member,
        )
    )
    assert answer == (("topic", ((0, E.offset_metadata_too_large), (1, E.none))),)
    assert h.coordinator.fetch_offsets(GROUP, [("topic", [0])]).topics[0][1][0].offset == -1
    assert_events(h.take(), [("offsets_committed", {"offsets": [["topic", 1, 7]]})])


def test_offsets_expired_then_group_deleted() -> None:
    h = EventHarness(
        config=GroupConfig(
            initial_rebalance_delay_ms=0, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000
        )
    )
    t0 = h.clock.now_ms()
    assert h.commit({("topic", 0): 5}) == {("topic", 0): E.none}  # a simple group (standalone consumer)
    assert_events(h.take(), [("group_created", {})])
    h.advance(50_000)
    assert h.take() == []
    h.advance(10_000)
    assert_events(
        h.take(),
        [
            ("offsets_expired", {"ts_ms": t0 + 60_000, "group_id": GROUP}),
            ("state_changed", {"from": "Empty", "to": "Dead"}),
            ("group_deleted", {"reason": "empty group without offsets expired"}),
        ],
    )
    assert GROUP not in h.coordinator.groups


def test_group_deleted_when_its_last_offsets_belonged_to_a_deleted_topic() -> None:
    h = EventHarness()
    h.commit({("doomed", 0): 1})
    h.commit({("doomed", 0): 1, ("kept", 0): 2}, group_id="other")
    h.take()
    h.coordinator.on_topic_deleted("doomed")
    assert_events(
        h.take(),
        [
            ("state_changed", {"group_id": GROUP, "from": "Empty", "to": "Dead"}),
            ("group_deleted", {"group_id": GROUP, "reason": "its last offsets belonged to deleted topic doomed"}),
        ],
    )
    assert "other" in h.coordinator.groups


def test_shutdown_unloads_every_group_to_dead() -> None:
    h = EventHarness()
    stable_pair(h)
    h.join_new(group_id="other")
    h.join_new(group_id="other")
    assert h.state("other") is GroupState.PREPARING_REBALANCE
    h.take()
    h.coordinator.shutdown()
    assert_events(
        h.take(),
        [
            ("state_changed", {"group_id": GROUP, "from": "Stable", "to": "Dead", "generation_id": 2}),
            ("state_changed", {"group_id": "other", "from": "PreparingRebalance", "to": "Dead", "generation_id": 0}),
        ],
    )


def test_sequence_and_time_across_a_whole_life() -> None:
    """seq counts every event broker-wide from 1; ts_ms is the manual clock at the moment of each event."""
    h = EventHarness()
    t0 = h.clock.now_ms()
    first = h.join_new()
    h.advance(0)
    a = first.value.member_id
    h.advance(40)
    h.sync(a, 1, {a: assign(topic=[0, 1, 2, 3])})
    h.advance(SESSION_MS)  # the session restarted when the parked SyncGroup was answered, at t0 + 40
    records = h.take()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    times = {r["event"]: r["ts_ms"] for r in records}
    assert times["member_joined"] == t0
    assert times["sync_completed"] == t0 + 40
    assert times["member_expired"] == t0 + 40 + SESSION_MS
    assert times["group_emptied"] == t0 + 40 + SESSION_MS
    assert records[-1]["event"] == "group_emptied"
    assert [r["ts_ms"] for r in records] == sorted(r["ts_ms"] for r in records)
    assert list(h.hub.history(GROUP) or ()) == records


# -- the documentation --------------------------------------------------------------------------------------------


def _emitted_event_names(sources: Iterable[str]) -> set[str]:
    """Every event name the coordinator's modules pass to an emit call.

    Events are named by the constants of ``broker/events/names.py`` (``names.MEMBER_LEFT``), never by string
    literals: a literal, or any other expression, fails the collection. The one call that hands on a name it was
    given (``self._hub.emit(event, ...)`` inside ``GroupEventLog._emit``) is the forwarder and is skipped.
    """
    found: set[str] = set()
    for source in sources:
        for call in ast.walk(ast.parse(source)):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args):
                continue
            if call.func.attr not in ("emit", "_emit"):
                continue
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id == "event":
                continue
            assert isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name), ast.dump(first)
            assert first.value.id == "names", ast.dump(first)
            found.add(getattr(event_names, first.attr))
    return found


def _coordinator_sources() -> list[str]:
    return [path.read_text() for path in sorted(COORDINATOR_PACKAGE.rglob("*.py"))]


def test_the_event_name_collector_finds_every_kind_of_call() -> None:
    names = _emitted_event_names(_coordinator_sources())
    contract = {
        "group_created",
        "member_joined",
        "member_rejoined",
        "member_left",
        "member_expired",
        "member_fenced",
        "rebalance_started",
        "join_completed",
        "sync_completed",
        "state_changed",
        "group_emptied",
        "group_deleted",
        "offsets_committed",
        "referee_violation",
        "offsets_expired",
    }
    assert names >= contract, contract - names
    assert names <= event_names.EVENTS, names - event_names.EVENTS


def test_the_event_name_collector_rejects_a_literal_name() -> None:
    with pytest.raises(AssertionError):
        _emitted_event_names(['self._emit("member_left", group, {})'])


def test_every_emitted_event_is_documented() -> None:
    names = _emitted_event_names(_coordinator_sources())
    assert EVENTS_DOC.exists(), f"{EVENTS_DOC} does not exist; it must document {sorted(names)}"
    doc = EVENTS_DOC.read_text()
    undocumented = sorted(name for name in names if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", doc))
    assert not undocumented, f"events the coordinator emits but docs/events.md does not describe: {undocumented}"


def test_offsets_deleted_names_what_offset_delete_removed_and_nothing_when_all_was_refused() -> None:
    h = EventHarness(topics={"topic": 4, "other": 2})
    admin = CommitRequest(GROUP, (("other", (PartitionCommit(0, 3), PartitionCommit(1, 4))),))
    assert h.coordinator.commit_offsets(admin) == (("other", ((0, E.none), (1, E.none))),)
    h.take()
    assert h.coordinator.delete_offsets(GROUP, [("other", [1])]).error is E.none
    assert_events(h.take(), [("offsets_deleted", {"offsets": [["other", 1]]})])

    h.stable_group(1)  # one member, subscribed to "topic"
    h.take()
    result = h.coordinator.delete_offsets(GROUP, [("topic", [0])])
    assert result.topics == (("topic", ((0, E.group_subscribed_to_topic),)),)
    assert h.take() == []
