"""Issue 14, defect 7: an operation that raises never leaves a group stuck.

Whatever raises inside a timer action or a request (a bug; here forced by monkeypatching one step), the group
moves on as ``ClassicGroups.fail`` promises, mirroring Kafka's CoordinatorRuntime failing the operation: every
parked JoinGroup and SyncGroup is answered UNKNOWN_SERVER_ERROR, the members and their timers are gone, the group
is Empty in a new generation with its offsets, the failure is logged with the group and the operation, and the
next requests work. Beneath that, the purgatory runs each due action in isolation and a parked answer's listeners
run in isolation, so one failure never stops the others.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.rebalance import Rebalancer
from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import JoinResult, LeavingMember, SyncResult
from broker.timing.clock import ManualClock
from broker.timing.deferred import Deferred
from broker.timing.keys import OFFSETS_EXPIRATION, heartbeat_key, join_key, sync_key
from broker.timing.purgatory import Purgatory
from tests.coordinator.harness import GROUP, REBALANCE_MS, SESSION_MS, E, Harness

DELAY_MS = 3_000


class Boom(RuntimeError):
    """The forced failure."""


def boom(*args: object, **kwargs: object) -> None:
    raise Boom("forced failure")


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with structlog.testing.capture_logs() as captured:
        yield captured


def failure_lines(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["event"].startswith("group operation failed")]


def assert_restarted(h: Harness, generation_before: int, *, group_id: str = GROUP) -> None:
    """The group is Empty in a later generation, and no timer of it or of its former members is armed."""
    group = h.group(group_id)
    assert group.state is GroupState.EMPTY
    assert group.generation_id > generation_before  # the failed step may have begun a generation already
    assert group.members == {} and group.static_members == {} and group.pending_members == set()
    assert group.awaiting_join_count == 0 and not group.supported_protocols and group.leader_id is None
    armed = {key for key in h.purgatory._entries if key != OFFSETS_EXPIRATION}
    assert not {key for key in armed if isinstance(key, tuple) and len(key) > 1 and key[1] == group_id}, armed


def assert_serves_again(h: Harness, *, group_id: str = GROUP) -> None:
    """The failure is over: a fresh member forms a Stable generation."""
    (member,) = h.stable_group(1, group_id=group_id)
    assert h.heartbeat(member, h.group(group_id).generation_id, group_id=group_id) is E.none


def test_a_timer_action_that_raises_answers_the_parked_joins_and_restarts_the_group(
    monkeypatch: pytest.MonkeyPatch, logs: list[MutableMapping[str, Any]]
) -> None:
    """The shape of defect 7: protocol selection raises when the initial delay ends the join phase."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    first, second = h.join("", version=3), h.join("", version=3)
    with monkeypatch.context() as patch:
        patch.setattr(ClassicGroup, "select_protocol", boom)
        h.advance(REBALANCE_MS)  # the delay runs at most the rebalance timeout (KIP-134)
    for join in (first, second):
        assert join.done and join.value.error is E.unknown_server_error
    assert_restarted(h, 0)
    (line,) = failure_lines(logs)
    assert (line["group_id"], line["operation"], line["log_level"]) == (GROUP, "the initial rebalance delay", "error")
    assert isinstance(line["exc_info"], Boom)
    assert h.coordinator.failed_operations == 1
    assert h.purgatory.failures == 0  # the coordinator handled it: nothing reached the purgatory
    assert_serves_again(h)


def test_a_join_deadline_that_raises_answers_the_rejoined_member(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit({("topic", 0): 7}, generation_id=1, member_id=leader) == {("topic", 0): E.none}  # kept
    rejoin = h.join(leader)
    assert h.state() is GroupState.PREPARING_REBALANCE and not rejoin.done
    with monkeypatch.context() as patch:
        patch.setattr(ClassicGroup, "init_next_generation", boom)
        h.advance(REBALANCE_MS)
    assert rejoin.done and rejoin.value.error is E.unknown_server_error
    assert_restarted(h, 1)
    assert h.heartbeat(follower, 1) is E.unknown_member_id  # its client rejoins as a new member
    assert h.coordinator.fetch_offsets(GROUP, [("topic", [0])]).topics[0][1][0].offset == 7
    assert_serves_again(h)


def test_a_sync_deadline_that_raises_answers_the_parked_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    joins = [h.join_new(), h.join_new()]
    h.advance(0)
    results = [j.value for j in joins]
    follower = next(r.member_id for r in results if r.member_id != r.leader)
    parked = h.sync(follower, 1)  # the leader never syncs
    assert not parked.done
    with monkeypatch.context() as patch:
        patch.setattr(Rebalancer, "prepare", boom)
        h.advance(REBALANCE_MS)
    assert parked.done and parked.value == SyncResult(E.unknown_server_error)
    assert_restarted(h, 1)
    assert_serves_again(h)


def test_a_session_expiry_that_raises_restarts_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    _, follower = h.stable_group(2)
    with monkeypatch.context() as patch:
        patch.setattr(Rebalancer, "after_departure", boom)
        h.advance(SESSION_MS)
    assert_restarted(h, 1)
    assert heartbeat_key(GROUP, follower) not in h.purgatory
    assert h.coordinator.failed_operations == 1  # the second member's expiry was cancelled by the restart
    assert_serves_again(h)


def test_a_joingroup_that_raises_is_answered_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch, logs: list[MutableMapping[str, Any]]
) -> None:
    h = Harness()
    _, follower = h.stable_group(2)
    with monkeypatch.context() as patch:
        patch.setattr(Rebalancer, "prepare", boom)
        answer = h.join(follower, protocols=(("roundrobin", b""), ("range", b"")))
    assert answer.done and answer.value == JoinResult(E.unknown_server_error, follower)
    assert_restarted(h, 1)
    assert [line["operation"] for line in failure_lines(logs)] == ["a JoinGroup"]
    assert_serves_again(h)


def test_a_leavegroup_that_raises_is_answered_unknown_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """LeaveGroup reaches the end of the join phase (it may select the next protocol): the same guarantee."""
    h = Harness()
    leader, follower = h.stable_group(2)
    rejoin = h.join(follower, protocols=(("roundrobin", b""), ("range", b"")))
    with monkeypatch.context() as patch:
        patch.setattr(ClassicGroup, "select_protocol", boom)
        left = h.leave(LeavingMember(leader))
    assert left.error is E.unknown_server_error
    assert rejoin.done and rejoin.value.error is E.unknown_server_error
    assert_restarted(h, 1)
    assert_serves_again(h)


def test_a_syncgroup_that_raises_answers_every_parked_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    joins = [h.join_new(), h.join_new()]
    h.advance(0)
    leader = joins[0].value.leader
    follower = next(j.value.member_id for j in joins if j.value.member_id != leader)
    parked = h.sync(follower, 1)
    with monkeypatch.context() as patch:
        patch.setattr(Rebalancer, "propagate_assignment", boom)
        answer = h.sync(leader, 1, {leader: b"a", follower: b"b"})
    assert answer.done and answer.value == SyncResult(E.unknown_server_error)
    assert parked.done and parked.value == SyncResult(E.unknown_server_error)
    assert_restarted(h, 1)
    assert_serves_again(h)


def test_a_control_verb_that_raises_restarts_the_group_and_still_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    with monkeypatch.context() as patch:
        patch.setattr(Rebalancer, "after_departure", boom)
        with pytest.raises(Boom):
            h.coordinator.kick(GROUP, leader)
    assert_restarted(h, 1)
    assert_serves_again(h)


def test_a_failure_in_one_group_leaves_the_others_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    other = h.stable_group(1, group_id="other")
    leader, follower = h.stable_group(2)
    before = (h.group("other").state, h.group("other").generation_id, list(h.group("other").members))
    original = ClassicGroup.init_next_generation

    def only_ours(group: ClassicGroup, now_ms: int) -> None:
        if group.group_id == GROUP and group.members:
            raise Boom("forced failure")
        original(group, now_ms)

    with monkeypatch.context() as patch:
        patch.setattr(ClassicGroup, "init_next_generation", only_ours)
        h.coordinator.force_rebalance(GROUP)
        h.join(leader)
        assert h.join(follower).value.error is E.unknown_server_error  # the last rejoin ends the join phase
    assert_restarted(h, 1)
    assert (h.group("other").state, h.group("other").generation_id, list(h.group("other").members)) == before
    assert h.heartbeat(other[0], 1, group_id="other") is E.none


def test_an_offsets_sweep_that_raises_for_one_group_still_sweeps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    config = GroupConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=30_000)
    h = Harness(config=config)
    assert h.commit({("topic", 0): 1}, group_id="a") == {("topic", 0): E.none}
    assert h.commit({("topic", 0): 1}, group_id="b") == {("topic", 0): E.none}
    original = ClassicGroup.is_in

    def broken_a(group: ClassicGroup, state: GroupState) -> bool:
        if group.group_id == "a":
            raise Boom("forced failure")
        return original(group, state)

    with monkeypatch.context() as patch:
        patch.setattr(ClassicGroup, "is_in", broken_a)
        h.advance(60_000)  # two sweeps; the second finds b's offsets a minute old
    assert "b" not in h.coordinator.groups  # swept and deleted
    assert "a" in h.coordinator.groups  # skipped, not lost
    assert h.coordinator.failed_operations == 2
    assert OFFSETS_EXPIRATION in h.purgatory  # the sweeps go on
    h.advance(30_000)
    assert "a" not in h.coordinator.groups


# -- the layers beneath: the purgatory and a parked answer's listeners ----------------------------------------------


def test_the_purgatory_runs_each_due_action_in_isolation(logs: list[MutableMapping[str, Any]]) -> None:
    clock = ManualClock(0)
    purgatory = Purgatory(clock)
    clock.attach(purgatory)
    fired: list[str] = []
    purgatory.schedule(("first",), 10, lambda: fired.append("first"))
    purgatory.schedule(("raises",), 10, boom)
    purgatory.schedule(("third",), 10, lambda: fired.append("third"))
    purgatory.schedule(("later",), 20, lambda: fired.append("later"))
    clock.advance(30)
    assert fired == ["first", "third", "later"]
    assert purgatory.failures == 1 and len(purgatory) == 0
    (line,) = [line for line in logs if line["event"] == "timer action failed"]
    assert line["key"] == "('raises',)" and line["log_level"] == "error"


def test_a_listener_that_raises_does_not_stop_the_others(logs: list[MutableMapping[str, Any]]) -> None:
    answer: Deferred[int] = Deferred()
    seen: list[int] = []
    mapped = answer.map(lambda value: value + 1)
    answer.add_done_callback(seen.append)
    answer.add_done_callback(boom)
    answer.add_done_callback(seen.append)
    assert answer.complete(41)
    assert seen == [41, 41]
    assert mapped.done and mapped.value == 42
    assert [line["event"] for line in logs] == ["callback of a parked answer failed"]


def test_the_join_deadline_still_fires_after_a_raising_listener() -> None:
    """A connection that cannot write its answer (a listener raising) does not abort the join phase: every
    other member is still answered and the group goes on to CompletingRebalance."""
    h = Harness()
    first, second = h.join("", version=3), h.join("", version=3)
    first.add_done_callback(boom)
    answers: list[JoinResult] = []
    second.add_done_callback(answers.append)
    h.advance(0)
    assert first.done and second.done and [a.error for a in answers] == [E.none]
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert sync_key(GROUP) in h.purgatory and join_key(GROUP) not in h.purgatory
