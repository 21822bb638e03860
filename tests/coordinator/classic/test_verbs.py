"""The control API's chaos verbs on the coordinator: kick, fence and force_rebalance.

Each verb is checked for what the members see (answers to their parked and next requests) and for the events it
emits, on the manual clock.
"""

from __future__ import annotations

import pytest

from broker.coordinator.classic.state import GroupState
from broker.coordinator.coordinator import Conflict, UnknownTarget
from broker.timing.keys import heartbeat_key
from tests.coordinator.harness import GROUP, SESSION_MS, E, stable_static_group
from tests.coordinator.test_events import EventHarness, assert_events, assign

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE


def stable_trio(h: EventHarness) -> list[str]:
    """Three dynamic members, Stable at generation 1; leader first."""
    members = h.stable_group(3)
    h.take()
    return members


def completing(h: EventHarness, members: list[str]) -> None:
    """Every member rejoins: the group is in CompletingRebalance at generation 2, nobody synced yet."""
    joins = [h.join(m) for m in members]
    assert all(j.value.error is E.none and j.value.generation_id == 2 for j in joins)
    assert h.state() is COMPLETING
    h.take()


# -- kick ---------------------------------------------------------------------------------------------------------


def test_kick_stable_member_evicts_it_and_rebalances() -> None:
    h = EventHarness()
    leader, follower, other = stable_trio(h)
    t0 = h.clock.now_ms()
    h.advance(4_000)
    assert h.heartbeat(follower, 1) is E.none
    h.advance(1_500)
    h.coordinator.kick(GROUP, follower)
    assert_events(
        h.take(),
        [
            (
                "member_expired",
                {
                    "ts_ms": t0 + 5_500,
                    "member_id": follower,
                    "group_instance_id": None,
                    "client_id": "client",
                    "since_last_heartbeat_ms": 1_500,
                    "session_timeout_ms": SESSION_MS,
                    "cause": "kicked",
                },
            ),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 1}),
            (
                "rebalance_started",
                {"previous_state": "Stable", "members": 2, "cause": "member_kicked", "member_id": follower},
            ),
        ],
    )
    assert not h.group().has_member(follower)
    assert heartbeat_key(GROUP, follower) not in h.purgatory
    assert h.heartbeat(follower, 1) is E.unknown_member_id
    assert h.heartbeat(leader, 1) is E.rebalance_in_progress
    assert h.join(follower).value.error is E.unknown_member_id
    joins = [h.join(leader), h.join(other)]
    assert [j.value.generation_id for j in joins] == [2, 2]
    assert list(h.group().members) == [leader, other]


def test_kick_answers_the_kicked_members_parked_sync_unknown_member_id() -> None:
    h = EventHarness()
    members = stable_trio(h)
    leader, follower, other = members
    completing(h, members)
    follower_sync = h.sync(follower, 2)
    other_sync = h.sync(other, 2)
    assert not follower_sync.done and not other_sync.done
    h.coordinator.kick(GROUP, follower)
    assert follower_sync.value.error is E.unknown_member_id
    assert other_sync.value.error is E.rebalance_in_progress  # the generation is over for everybody
    assert h.state() is PREPARING
    assert_events(
        h.take(),
        [
            ("member_expired", {"member_id": follower, "cause": "kicked"}),
            ("state_changed", {"from": "CompletingRebalance", "to": "PreparingRebalance", "generation_id": 2}),
            ("rebalance_started", {"previous_state": "CompletingRebalance", "cause": "member_kicked"}),
        ],
    )
    # The leader's late SyncGroup is refused rather than stored, and nobody is left parked.
    assert h.sync(leader, 2, {leader: b"", other: b""}).value.error is E.rebalance_in_progress


def test_kick_answers_the_kicked_members_parked_join_unknown_member_id() -> None:
    h = EventHarness()
    leader, follower, _ = stable_trio(h)
    leader_join = h.join(leader)
    follower_join = h.join(follower)
    assert not follower_join.done
    h.take()
    h.coordinator.kick(GROUP, follower)
    assert follower_join.value.error is E.unknown_member_id
    assert follower_join.value.member_id == ""
    assert not leader_join.done  # `other` has not rejoined yet
    assert_events(h.take(), [("member_expired", {"member_id": follower, "cause": "kicked"})])
    assert h.state() is PREPARING


def test_kick_in_preparing_rebalance_completes_the_join_when_everyone_else_is_in() -> None:
    h = EventHarness()
    leader, follower, other = stable_trio(h)
    leader_join = h.join(leader)
    other_join = h.join(other)
    assert not leader_join.done
    h.take()
    h.coordinator.kick(GROUP, follower)
    assert leader_join.value.error is E.none and other_join.value.error is E.none
    assert leader_join.value.generation_id == 2
    assert [m.member_id for m in leader_join.value.members] == [leader, other]
    assert h.state() is COMPLETING
    assert_events(
        h.take(),
        [
            ("member_expired", {"member_id": follower, "cause": "kicked"}),
            ("state_changed", {"from": "PreparingRebalance", "to": "CompletingRebalance", "generation_id": 2}),
            ("join_completed", {"generation_id": 2, "members": [leader, other]}),
        ],
    )


def test_kick_the_last_member_empties_the_group() -> None:
    h = EventHarness()
    (member,) = h.stable_group(1)
    h.take()
    h.coordinator.kick(GROUP, member)
    assert h.state() is GroupState.EMPTY
    assert [r["event"] for r in h.take()] == [
        "member_expired",
        "state_changed",
        "rebalance_started",
        "state_changed",
        "join_completed",
        "group_emptied",
    ]


def test_kick_pending_kip394_member() -> None:
    """A member id handed out with MEMBER_ID_REQUIRED but not yet used: it is forgotten, and a join that waited
    only for it completes."""
    h = EventHarness()
    (leader,) = h.stable_group(1)
    first = h.join("")
    assert first.value.error is E.member_id_required
    pending = first.value.member_id
    leader_join = h.join(leader)
    assert not leader_join.done  # the join waits for the pending member to come back
    h.take()

    h.coordinator.kick(GROUP, pending)
    assert not h.group().is_pending_member(pending)
    assert heartbeat_key(GROUP, pending) not in h.purgatory
    assert leader_join.value.error is E.none and leader_join.value.generation_id == 2
    # A pending member never had a member event, so its kick has none either.
    assert_events(h.take(), [("state_changed", {"to": "CompletingRebalance"}), ("join_completed", {})])
    h.sync(leader, 2, {leader: b""})
    assert h.join(pending).value.error is E.unknown_member_id


@pytest.mark.parametrize(
    ("group_id", "member_id"),
    [("no-such-group", "whoever"), (GROUP, "no-such-member"), (GROUP, "")],
)
def test_kick_unknown_target(group_id: str, member_id: str) -> None:
    h = EventHarness()
    h.stable_group(1)
    h.take()
    with pytest.raises(UnknownTarget):
        h.coordinator.kick(group_id, member_id)
    assert h.take() == []
    assert h.state() is STABLE


def test_kick_in_a_deleted_group_is_unknown() -> None:
    h = EventHarness()
    (member,) = h.stable_group(1)
    h.leave(member)
    h.coordinator.delete_groups([GROUP])
    with pytest.raises(UnknownTarget):
        h.coordinator.kick(GROUP, member)


# -- fence --------------------------------------------------------------------------------------------------------


def test_fence_stable_static_member() -> None:
    h = EventHarness()
    leader, follower = stable_static_group(h, "i1", "i2")
    h.commit({("topic", 0): 1}, generation_id=1, member_id=follower, instance_id="i2")
    h.take()
    old, new = h.coordinator.fence(GROUP, "i2")
    assert old == follower and new == "i2-uuid3"
    assert_events(
        h.take(),
        [
            (
                "member_fenced",
                {
                    "member_id": follower,
                    "new_member_id": new,
                    "group_instance_id": "i2",
                    "client_id": "client",
                    "cause": "fenced",
                },
            )
        ],
    )
    assert h.state() is STABLE  # no rebalance until the new id's session runs out
    assert h.group().static_members == {"i1": leader, "i2": new}
    assert h.heartbeat(follower, 1, instance_id="i2") is E.fenced_instance_id
    assert h.sync(follower, 1, instance_id="i2").value.error is E.fenced_instance_id
    assert h.commit({("topic", 0): 2}, generation_id=1, member_id=follower, instance_id="i2") == {
        ("topic", 0): E.fenced_instance_id
    }
    assert h.join(follower, instance_id="i2").value.error is E.fenced_instance_id
    assert h.heartbeat(leader, 1, instance_id="i1") is E.none


def test_fenced_instance_expires_after_the_session_timeout_and_the_group_rebalances() -> None:
    h = EventHarness()
    leader, _ = stable_static_group(h, "i1", "i2")
    h.take()
    t0 = h.clock.now_ms()
    h.advance(2_000)
    _, new = h.coordinator.fence(GROUP, "i2")
    h.take()
    h.advance(3_000)
    assert h.heartbeat(leader, 1, instance_id="i1") is E.none
    h.advance(5_000)
    assert h.heartbeat(leader, 1, instance_id="i1") is E.none
    h.advance(SESSION_MS - 8_000 - 1)
    assert h.group().has_member(new) and h.take() == []
    h.advance(1)
    assert_events(
        h.take(),
        [
            (
                "member_expired",
                {
                    "ts_ms": t0 + 2_000 + SESSION_MS,
                    "member_id": new,
                    "group_instance_id": "i2",
                    "since_last_heartbeat_ms": SESSION_MS,
                    "cause": "session_timeout",
                },
            ),
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance"}),
            ("rebalance_started", {"cause": "member_expired", "member_id": new, "members": 1}),
        ],
    )
    assert h.group().static_members == {"i1": leader}
    assert h.heartbeat(leader, 1, instance_id="i1") is E.rebalance_in_progress
    # The instance can come back under a fresh id.
    comeback = h.join(instance_id="i2")
    assert not comeback.done
    h.join(leader, instance_id="i1")
    assert comeback.value.error is E.none and comeback.value.generation_id == 2


def test_fence_answers_a_parked_join_in_preparing_rebalance() -> None:
    h = EventHarness()
    leader, follower, third = stable_static_group(h, "i1", "i2", "i3")
    h.take()
    h.join(leader, instance_id="i1")
    follower_join = h.join(follower, instance_id="i2")
    assert h.state() is PREPARING and not follower_join.done
    h.take()
    _, new = h.coordinator.fence(GROUP, "i2")
    assert follower_join.value.error is E.fenced_instance_id
    assert follower_join.value.member_id == follower
    assert_events(h.take(), [("member_fenced", {"member_id": follower, "new_member_id": new, "cause": "fenced"})])
    assert h.state() is PREPARING
    # The new id never joins: the rebalance waits for it until its session runs out, then goes on without it.
    h.join(leader, instance_id="i1")
    third_join = h.join(third, instance_id="i3")
    assert not third_join.done
    h.advance(SESSION_MS - 1)
    assert not third_join.done
    h.advance(1)
    assert third_join.value.error is E.none and third_join.value.generation_id == 2
    assert_events(
        h.take(),
        [
            ("member_rejoined", {"member_id": leader}),
            ("member_rejoined", {"member_id": third}),
            ("member_expired", {"member_id": new, "group_instance_id": "i2", "cause": "session_timeout"}),
            ("state_changed", {"from": "PreparingRebalance", "to": "CompletingRebalance", "generation_id": 2}),
            ("join_completed", {"members": [leader, third], "leader": leader}),
        ],
    )


def test_fence_answers_a_parked_sync_fenced_instance_id() -> None:
    h = EventHarness()
    leader, follower = stable_static_group(h, "i1", "i2")
    h.join(leader, instance_id="i1")
    h.join(follower, instance_id="i2")
    assert h.state() is COMPLETING
    follower_sync = h.sync(follower, 2, instance_id="i2")
    assert not follower_sync.done
    h.take()
    old, new = h.coordinator.fence(GROUP, "i2")
    assert follower_sync.value.error is E.fenced_instance_id
    assert_events(
        h.take(),
        [
            ("member_fenced", {"member_id": old, "new_member_id": new}),
            ("state_changed", {"from": "CompletingRebalance", "to": "PreparingRebalance"}),
            ("rebalance_started", {"cause": "member_fenced", "member_id": new}),
        ],
    )


def test_fence_in_completing_rebalance_starts_a_rebalance_like_a_static_replacement() -> None:
    h = EventHarness()
    leader, follower = stable_static_group(h, "i1", "i2")
    h.join(leader, instance_id="i1")
    h.join(follower, instance_id="i2")
    assert h.state() is COMPLETING
    h.take()
    old, new = h.coordinator.fence(GROUP, "i2")
    assert_events(
        h.take(),
        [
            ("member_fenced", {"member_id": old, "new_member_id": new, "cause": "fenced"}),
            ("state_changed", {"from": "CompletingRebalance", "to": "PreparingRebalance"}),
            ("rebalance_started", {"previous_state": "CompletingRebalance"}),
        ],
    )
    # Otherwise the leader's SyncGroup, computed for the old id, leaves the instance without partitions.
    assert h.sync(
        leader, 2, {leader: assign(topic=[0, 1]), old: assign(topic=[2, 3])}, instance_id="i1"
    ).value.error is (E.rebalance_in_progress)


@pytest.mark.parametrize(
    ("group_id", "instance_id"),
    [("no-such-group", "i1"), (GROUP, "no-such-instance")],
)
def test_fence_unknown_target(group_id: str, instance_id: str) -> None:
    h = EventHarness()
    stable_static_group(h, "i1")
    h.take()
    with pytest.raises(UnknownTarget):
        h.coordinator.fence(group_id, instance_id)
    assert h.take() == []


def test_a_dynamic_member_cannot_be_fenced() -> None:
    h = EventHarness()
    (member,) = h.stable_group(1, client_id="dynamic")
    h.take()
    for name in (member, "dynamic", ""):
        with pytest.raises(UnknownTarget):
            h.coordinator.fence(GROUP, name)
    assert h.take() == []
    assert h.heartbeat(member, 1) is E.none


# -- force_rebalance ------------------------------------------------------------------------------------------------


def test_force_rebalance_from_stable() -> None:
    h = EventHarness()
    leader, follower, other = stable_trio(h)
    h.coordinator.force_rebalance(GROUP)
    assert h.state() is PREPARING
    assert_events(
        h.take(),
        [
            ("state_changed", {"from": "Stable", "to": "PreparingRebalance", "generation_id": 1}),
            (
                "rebalance_started",
                {"generation_id": 1, "previous_state": "Stable", "members": 3, "cause": "forced", "member_id": None},
            ),
        ],
    )
    for member in (leader, follower, other):
        assert h.heartbeat(member, 1) is E.rebalance_in_progress
    joins = [h.join(m) for m in (leader, follower, other)]
    assert [j.value.generation_id for j in joins] == [2, 2, 2]


def test_force_rebalance_from_completing_rebalance() -> None:
    h = EventHarness()
    members = stable_trio(h)
    leader, follower, _ = members
    completing(h, members)
    follower_sync = h.sync(follower, 2)
    h.coordinator.force_rebalance(GROUP)
    assert follower_sync.value.error is E.rebalance_in_progress
    assert h.state() is PREPARING
    assert_events(
        h.take(),
        [
            ("state_changed", {"from": "CompletingRebalance", "to": "PreparingRebalance", "generation_id": 2}),
            ("rebalance_started", {"previous_state": "CompletingRebalance", "cause": "forced", "member_id": None}),
        ],
    )
    for member in members:
        assert h.heartbeat(member, 2) is E.rebalance_in_progress
    assert h.sync(leader, 2, {m: b"" for m in members}).value.error is E.rebalance_in_progress


def test_force_rebalance_of_an_empty_group_conflicts() -> None:
    h = EventHarness()
    assert h.commit({("topic", 0): 3}) == {("topic", 0): E.none}
    assert h.state() is GroupState.EMPTY
    h.take()
    with pytest.raises(Conflict):
        h.coordinator.force_rebalance(GROUP)
    assert h.state() is GroupState.EMPTY
    assert h.take() == []


def test_force_rebalance_while_rebalancing_conflicts() -> None:
    h = EventHarness()
    leader, *_ = stable_trio(h)
    h.join(leader)
    assert h.state() is PREPARING
    h.take()
    with pytest.raises(Conflict):
        h.coordinator.force_rebalance(GROUP)
    assert h.take() == []

    starting = EventHarness()  # the initial-delay rebalance of a brand-new group counts too
    starting.join_new()
    assert starting.state() is PREPARING
    with pytest.raises(Conflict):
        starting.coordinator.force_rebalance(GROUP)


def test_force_rebalance_of_an_unknown_or_dead_group() -> None:
    h = EventHarness()
    with pytest.raises(UnknownTarget):
        h.coordinator.force_rebalance("no-such-group")
    (member,) = h.stable_group(1)
    h.leave(member)
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    with pytest.raises(UnknownTarget):
        h.coordinator.force_rebalance(GROUP)

    unloaded = EventHarness()
    unloaded.stable_group(1)
    unloaded.coordinator.shutdown()
    for verb in (
        lambda: unloaded.coordinator.force_rebalance(GROUP),
        lambda: unloaded.coordinator.kick(GROUP, "client-uuid1"),
        lambda: unloaded.coordinator.fence(GROUP, "i1"),
    ):
        with pytest.raises(UnknownTarget):
            verb()


def test_forced_rebalance_rebalance_ms_counts_from_the_force() -> None:
    h = EventHarness()
    first = h.join_new()
    h.advance(0)
    member = first.value.member_id
    h.sync(member, 1, {member: assign(topic=[0, 1, 2, 3])})
    h.advance(5_000)
    assert h.heartbeat(member, 1) is E.none
    h.take()
    h.coordinator.force_rebalance(GROUP)
    h.advance(700)
    h.join(member)
    h.advance(300)
    h.sync(member, 2, {member: assign(topic=[0, 1, 2, 3])})
    (sync_completed,) = [r for r in h.take() if r["event"] == "sync_completed"]
    assert sync_completed["rebalance_ms"] == 1_000
    assert sync_completed["moved"] == []
