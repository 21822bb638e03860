"""A coordinator move (issue 29; cluster-and-durability.md 2.1-2.6, checklist 23-25): Kafka's unload on the old node
(GroupMetadataManager.onUnloaded, every timer of the partition cancelled) and load on the new one (onLoaded), for
the groups hashed to the moved ``__consumer_offsets`` partitions, on the manual clock.

The nodes share one coordinator: a group that is what its records say keeps everything (generation, member ids,
epochs, assignments) and its members get fresh sessions; a classic group in a rebalance comes back as its last
GroupMetadata record says, its parked JoinGroups and SyncGroups answered NOT_COORDINATOR.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from broker.cluster.hashing import partition_for
from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.state import GroupState
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import LeavingMember
from broker.coordinator.modern.types import MemberState
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, Harness
from tests.coordinator.modern.consumer.harness import SESSION_MS as CONSUMER_SESSION_MS
from tests.coordinator.modern.consumer.harness import ConsumerHarness
from tests.coordinator.share.harness import GROUP as SHARE_GROUP
from tests.coordinator.share.harness import SESSION_MS as SHARE_SESSION_MS
from tests.coordinator.share.harness import ShareHarness

PARTITIONS = 50
OTHER = "other"  # a group id hashed elsewhere
assert partition_for(GROUP, PARTITIONS) != partition_for(OTHER, PARTITIONS)


def move(h: Harness, group_id: str = GROUP, load_delay_ms: int = 0) -> None:
    h.coordinator.coordinators_moved({partition_for(group_id, PARTITIONS)}, PARTITIONS, load_delay_ms)


def session_due(h: Harness, member_id: str, group_id: str = GROUP) -> int | None:
    return h.purgatory.deadline(heartbeat_key(group_id, member_id))


def test_stable_classic_group_keeps_everything_and_gets_fresh_sessions() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    group = h.group()
    generation, assignments = group.generation_id, {m: group.members[m].assignment for m in group.members}
    h.advance(SESSION_MS - 1_000)  # nearly expired: a move gives the whole session again (onLoaded)
    move(h)
    now = h.clock.now_ms()
    assert session_due(h, leader) == session_due(h, follower) == now + SESSION_MS
    h.advance(SESSION_MS - 1)
    assert h.state() is GroupState.STABLE and list(group.members) == [leader, follower]
    assert h.heartbeat(leader, generation) is E.none and h.heartbeat(follower, generation) is E.none
    assert group.generation_id == generation and group.leader_id == leader
    assert {m: group.members[m].assignment for m in group.members} == assignments
    assert h.sync(follower, generation).value.assignment == assignments[follower]  # no rebalance needed


def test_preparing_rebalance_parked_joins_answer_not_coordinator_and_the_group_is_its_last_generation() -> None:
    """2.4 table, checklist 23: the parked JoinGroups get NOT_COORDINATOR with their member ids; the rebalance in
    flight is forgotten (only the last stored generation exists), the newcomer with it."""
    h = Harness()
    leader, follower = h.stable_group(2)
    group = h.group()
    generation = group.generation_id
    rejoin = h.join(leader)  # the leader's rejoin starts a rebalance
    newcomer = h.join("", version=3, client_id="late")  # parked at once (no KIP-394 step)
    pending = h.join("", version=9).value.member_id  # a KIP-394 id waiting for its second JoinGroup
    assert h.state() is GroupState.PREPARING_REBALANCE and not rejoin.done and not newcomer.done
    move(h)
    assert rejoin.done and rejoin.value.error is E.not_coordinator and rejoin.value.member_id == leader
    assert newcomer.done and newcomer.value.error is E.not_coordinator and newcomer.value.member_id
    assert h.state() is GroupState.STABLE and group.generation_id == generation
    assert list(group.members) == [leader, follower] and group.leader_id == leader
    assert group.join_key not in h.purgatory and session_due(h, pending) is None and not group.pending_members
    assert session_due(h, leader) == h.clock.now_ms() + SESSION_MS
    # The members carry on in their generation at the new node; the rejoin there is answered as in Stable.
    assert h.heartbeat(follower, generation) is E.none
    assert h.sync(follower, generation).value.assignment == follower.encode()
    assert h.join(newcomer.value.member_id, version=3).value.error is E.unknown_member_id


def test_a_member_that_left_during_the_rebalance_is_back_until_its_session_ends() -> None:
    """Kafka writes no record when a member leaves a Stable group: the reload brings it back, and it is expired
    after a session without heartbeats, as on Kafka's new coordinator."""
    h = Harness()
    leader, follower = h.stable_group(2)
    generation = h.group().generation_id
    assert h.leave(follower).error is E.none
    assert h.state() is GroupState.PREPARING_REBALANCE and follower not in h.group().members
    move(h)
    assert h.state() is GroupState.STABLE and list(h.group().members) == [leader, follower]
    assert h.group().generation_id == generation
    for _ in range(SESSION_MS // 1_000):
        h.advance(1_000)
        assert h.heartbeat(leader, generation) in (E.none, E.rebalance_in_progress)
    assert follower not in h.group().members and h.state() is GroupState.PREPARING_REBALANCE


def test_completing_rebalance_parked_syncs_answer_not_coordinator() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    generation = h.group().generation_id
    joins = [h.join(leader), h.join(follower)]
    assert all(j.done and j.value.error is E.none for j in joins)
    assert h.state() is GroupState.COMPLETING_REBALANCE and h.group().generation_id == generation + 1
    parked = h.sync(follower, generation + 1)
    assert not parked.done
    move(h)
    assert parked.done and parked.value.error is E.not_coordinator
    group = h.group()
    assert h.state() is GroupState.STABLE and group.generation_id == generation and not group.not_yet_synced
    assert group.sync_key not in h.purgatory
    assert group.members[follower].assignment == follower.encode()
    assert h.heartbeat(leader, generation) is E.none
    assert h.heartbeat(leader, generation + 1) is E.illegal_generation


def test_first_rebalance_without_a_record_keeps_only_the_offsets() -> None:
    """A group never stored does not exist after a replay; one with committed offsets comes back Empty."""
    h = Harness()
    parked = h.join("", version=3)
    assert not parked.done or parked.value.error is E.none
    assert h.commit({("topic", 0): 5}, group_id=OTHER) == {("topic", 0): E.none}  # a simple group first
    other_join = h.join("", version=3, group_id=OTHER)  # parked, in OTHER's rebalance
    move(h)
    move(h, OTHER)
    assert GROUP not in h.coordinator.groups
    assert other_join.done and other_join.value.error is E.not_coordinator
    other = h.group(OTHER)
    assert other.state is GroupState.EMPTY and other.generation_id == 0 and not other.members
    assert h.coordinator.fetch_offsets(OTHER, [("topic", (0,))]).topics[0][1][0].offset == 5


def test_a_move_touches_only_the_groups_of_the_moved_partitions() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    other_leader, _ = h.stable_group(2, group_id=OTHER)
    other_rejoin = h.join(other_leader, group_id=OTHER)
    rejoin = h.join(leader)
    move(h)
    assert rejoin.done and rejoin.value.error is E.not_coordinator
    assert not other_rejoin.done and h.state(OTHER) is GroupState.PREPARING_REBALANCE


def test_no_session_runs_while_the_partition_loads() -> None:
    """2.1: unload cancels every timer; the load (here after a 3 s load delay, 2.6) starts full sessions."""
    h = Harness()
    leader, follower = h.stable_group(2)
    move(h, load_delay_ms=3_000)
    assert session_due(h, leader) is None and session_due(h, follower) is None
    h.advance(2_999)
    assert session_due(h, leader) is None
    h.advance(1)
    assert session_due(h, leader) == session_due(h, follower) == h.clock.now_ms() + SESSION_MS
    h.advance(SESSION_MS - 1)
    assert h.state() is GroupState.STABLE and len(h.group().members) == 2
    h.advance(1)
    assert not h.group().members  # nobody heartbeat: both expired, a session after the load


def test_a_second_move_during_the_load_replaces_the_pending_load() -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    move(h, load_delay_ms=3_000)
    h.advance(2_000)
    move(h, load_delay_ms=3_000)
    h.advance(1_000)
    assert session_due(h, leader) is None  # the first load was cancelled by the second unload
    h.advance(2_000)
    assert session_due(h, leader) == h.clock.now_ms() + SESSION_MS


def test_a_rebalance_after_the_move_stores_a_new_generation() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    generation = h.group().generation_id
    h.join(leader)
    move(h)
    joins = [h.join(leader), h.join(follower)]
    assert all(j.done and j.value.generation_id == generation + 1 for j in joins)
    plan = {leader: b"l", follower: b"f"}
    syncs = [h.sync(leader, generation + 1, plan), h.sync(follower, generation + 1)]
    assert [s.value.assignment for s in syncs] == [b"l", b"f"]
    assert h.state() is GroupState.STABLE and h.group().record is None and h.group().recorded
    # A leave after that goes back to this generation, not the one before the move.
    h.leave(LeavingMember(follower))
    move(h)
    assert h.group().generation_id == generation + 1 and h.group().members[follower].assignment == b"f"


def test_consumer_group_keeps_epochs_and_assignments_with_fresh_timers() -> None:
    """2.3: members keep ids, epochs and assignments; a fresh session each, a fresh rebalance timer for a member
    revoking partitions (K§7.7); nothing is answered."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a", rebalance_ms=20_000))
    h.ok(h.cjoin("b"))
    h.ok(h.hb("a", 1))
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    epochs = h.epochs()
    before = {m: (h.member(m).member_epoch, h.assigned(m), h.pending(m)) for m in ("a", "b")}
    h.advance(CONSUMER_SESSION_MS - 500)
    move(h)
    now = h.clock.now_ms()
    assert h.session_due("a") == h.session_due("b") == now + CONSUMER_SESSION_MS
    assert h.rebalance_due("a") == now + 20_000 and h.rebalance_due("b") is None
    assert h.epochs() == epochs
    assert {m: (h.member(m).member_epoch, h.assigned(m), h.pending(m)) for m in ("a", "b")} == before
    h.advance(CONSUMER_SESSION_MS - 1)
    assert set(h.cgroup().members) == {"a", "b"}
    assert h.ok(h.hb("b", before["b"][0])).member_epoch == before["b"][0]


def test_consumer_group_timers_wait_for_the_load() -> None:
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    move(h, load_delay_ms=2_000)
    assert h.session_due("a") is None
    h.advance(2_000)
    assert h.session_due("a") == h.clock.now_ms() + CONSUMER_SESSION_MS


def test_share_group_members_get_fresh_sessions() -> None:
    h = ShareHarness()
    h.sjoin("s1")
    epoch = h.sgroup().group_epoch
    h.advance(SHARE_SESSION_MS - 500)
    move(h, SHARE_GROUP)
    assert h.share_session_due("s1") == h.clock.now_ms() + SHARE_SESSION_MS
    h.advance(SHARE_SESSION_MS - 1)
    assert "s1" in h.sgroup().members and h.sgroup().group_epoch == epoch
    assert h.sassigned("s1") == {"t": {0}}


def test_a_group_over_its_max_size_rebalances_when_loaded() -> None:
    """onLoaded: a group larger than group.max.size (the setting was lowered) prepares a rebalance at once."""
    h = Harness()
    _, follower, _ = h.stable_group(3)
    h.coordinator.config = replace(h.config, max_size=2)
    move(h)
    assert h.state() is GroupState.PREPARING_REBALANCE
    generation = h.group().generation_id
    assert h.heartbeat(follower, generation) is E.rebalance_in_progress



class Recorded:
    """The coordinator's events, kept (a ``GroupEvents``)."""

    wants_debug = False

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        self.events.append((event, group_id, fields))


def test_the_reload_is_announced_from_the_state_the_group_was_in() -> None:
    h = Harness()
    recorded = Recorded()
    h.coordinator = GroupCoordinator(h.config, h.clock, h.purgatory, events=recorded)
    leader, _ = h.stable_group(2)
    generation = h.group().generation_id
    h.join(leader)
    recorded.events.clear()
    move(h)
    changes = [fields for event, _, fields in recorded.events if event == "state_changed"]
    assert changes == [{"from": "PreparingRebalance", "to": "Stable", "generation_id": generation}]


def test_a_group_whose_unload_raises_starts_over_and_the_others_still_move(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    other_leader, _ = h.stable_group(2, group_id=OTHER)
    rejoins = [h.join(leader), h.join(other_leader, group_id=OTHER)]
    moves = h.coordinator._moves
    real = moves._unload_classic

    def unload(group: ClassicGroup) -> None:
        if group.group_id == GROUP:
            raise RuntimeError("a coordinator bug")
        real(group)

    monkeypatch.setattr(moves, "_unload_classic", unload)
    h.coordinator.coordinators_moved(
        {partition_for(GROUP, PARTITIONS), partition_for(OTHER, PARTITIONS)}, PARTITIONS
    )
    assert rejoins[0].value.error is E.unknown_server_error and h.state() is GroupState.EMPTY  # ClassicGroups.fail
    assert rejoins[1].value.error is E.not_coordinator and h.state(OTHER) is GroupState.STABLE
    assert h.coordinator.failed_operations == 1
