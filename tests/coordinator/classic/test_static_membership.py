"""Static membership (KIP-345) scenarios: checklist items 93-109 of docs/spec/group-coordinator.md
(sections 7.3, 7.9, 12).

Not testable on the coordinator:
* 100 (static rejoin with "" whose persistence fails -> member reverted, mapped error, member id ""): an in-memory
  broker persists nothing, so that write cannot fail.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import JoinedMember, JoinResult, SyncResult
from tests.coordinator.harness import E, Harness, stable_static_group, subscription

LEADER = "leader-instance"
FOLLOWER = "follower-instance"
METADATA = subscription("topic")
SUPERSET: tuple[tuple[str, bytes], ...] = (("range", METADATA), ("roundrobin", METADATA))
RANGE_ONLY: tuple[tuple[str, bytes], ...] = (("range", METADATA),)
ROUNDROBIN_ONLY: tuple[tuple[str, bytes], ...] = (("roundrobin", METADATA),)
REBALANCE_MS = 30_000
LONG_SESSION_MS = 2 * REBALANCE_MS  # static members must survive a whole rebalance timeout without heartbeating


def static_pair(h: Harness, *, session_ms: int = 10_000) -> tuple[str, str]:
    leader, follower = stable_static_group(
        h, LEADER, FOLLOWER, session_ms=session_ms, rebalance_ms=REBALANCE_MS, protocols=SUPERSET
    )
    return leader, follower


def test_93_static_member_joins_first() -> None:
    h = Harness()
    join = h.join(instance_id="instance", version=9)
    assert not join.done  # static members never get MEMBER_ID_REQUIRED
    assert not h.group().pending_members
    h.advance(0)
    result = join.value
    assert result.error is E.none
    assert result.member_id.startswith("instance-")
    assert result.member_id == "instance-uuid1"
    assert result.leader == result.member_id
    assert result.generation_id == 1
    assert result.protocol_type == "consumer" and result.protocol_name == "range"
    assert result.members == (JoinedMember(result.member_id, "instance", METADATA),)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().static_members == {"instance": result.member_id}


def test_94_static_rejoin_with_empty_id_fences_the_parked_join_of_the_old_follower() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    dynamic = h.join_new(protocols=SUPERSET)  # a third member starts a rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE
    old_join = h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET)
    assert not old_join.done
    duplicate = h.join(instance_id=FOLLOWER, protocols=SUPERSET)
    assert old_join.value == JoinResult(E.fenced_instance_id, member_id=follower)
    assert old_join.value.generation_id == -1 and old_join.value.protocol_name is None
    assert not duplicate.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    new_follower = h.group().static_members[FOLLOWER]
    assert new_follower != follower and new_follower.startswith(f"{FOLLOWER}-")
    # the new one proceeds: once the leader rejoins, everyone has joined
    leader_join = h.join(leader, instance_id=LEADER, protocols=SUPERSET)
    assert leader_join.value.error is E.none and leader_join.value.generation_id == 2
    assert duplicate.value.error is E.none
    assert duplicate.value.member_id == new_follower
    assert duplicate.value.generation_id == 2
    assert duplicate.value.leader == leader
    assert dynamic.value.generation_id == 2
    assert {m.member_id for m in leader_join.value.members} == {leader, new_follower, dynamic.value.member_id}


def test_94_static_rejoin_with_empty_id_fences_the_parked_join_of_the_old_leader() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    old_join = h.join(leader, instance_id=LEADER, protocols=SUPERSET)  # the leader's rejoin starts a rebalance
    assert not old_join.done and h.state() is GroupState.PREPARING_REBALANCE
    duplicate = h.join(instance_id=LEADER, protocols=SUPERSET)
    assert old_join.value == JoinResult(E.fenced_instance_id, member_id=leader)
    new_leader = h.group().static_members[LEADER]
    assert h.group().leader_id == new_leader  # leadership moves with the instance
    assert not duplicate.done
    follower_join = h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET)
    assert duplicate.value.error is E.none
    assert duplicate.value.member_id == new_leader == duplicate.value.leader
    assert duplicate.value.generation_id == 2
    assert {(m.member_id, m.group_instance_id) for m in duplicate.value.members} == {
        (new_leader, LEADER),
        (follower, FOLLOWER),
    }
    assert follower_join.value.leader == new_leader and follower_join.value.members == ()


def test_95_each_rejoin_with_empty_member_id_yields_a_new_prefixed_id() -> None:
    h = Harness()
    leader, _follower = static_pair(h)
    seen = {leader}
    last = leader
    for _ in range(5):
        result = h.join(instance_id=LEADER, protocols=SUPERSET).value
        assert result.error is E.none
        assert result.member_id.startswith(f"{LEADER}-")
        assert result.member_id != last
        assert result.member_id not in seen
        seen.add(result.member_id)
        last = result.member_id
        assert h.group().static_members[LEADER] == last
        assert result.generation_id == 1
    assert h.state() is GroupState.STABLE


def test_96_static_follower_rejoins_with_empty_id_in_stable_without_rebalance() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    result = h.join(instance_id=FOLLOWER, protocols=SUPERSET).value
    new_follower = result.member_id
    assert new_follower != follower and new_follower.startswith(f"{FOLLOWER}-")
    assert result == JoinResult(
        E.none,
        member_id=new_follower,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=leader,
        skip_assignment=False,
        members=(),
    )
    group = h.group()
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.join_key not in h.purgatory
    assert set(group.members) == {leader, new_follower}
    # the new id gets the old assignment back
    sync = h.sync(new_follower, 1, instance_id=FOLLOWER)
    assert sync.value == SyncResult(E.none, follower.encode(), "consumer", "range")
    assert h.sync(new_follower, 1).value == SyncResult(E.none, follower.encode(), "consumer", "range")
    # the old id is fenced
    assert h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET).value == JoinResult(
        E.fenced_instance_id, member_id=follower
    )
    assert h.sync(follower, 1, instance_id=FOLLOWER).value == SyncResult(E.fenced_instance_id)
    assert h.state() is GroupState.STABLE


def test_97_static_leader_rejoins_with_empty_id_in_stable_v9_skips_assignment() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    result = h.join(instance_id=LEADER, protocols=SUPERSET, version=9).value
    new_leader = result.member_id
    assert new_leader != leader and new_leader.startswith(f"{LEADER}-")
    assert (result.error, result.generation_id, result.protocol_type, result.protocol_name) == (
        E.none,
        1,
        "consumer",
        "range",
    )
    assert result.leader == new_leader
    assert result.skip_assignment is True
    # the full member list (order is the member map's and does not matter to clients)
    assert sorted(result.members, key=lambda m: m.member_id) == sorted(
        (JoinedMember(new_leader, LEADER, METADATA), JoinedMember(follower, FOLLOWER, METADATA)),
        key=lambda m: m.member_id,
    )
    assert h.state() is GroupState.STABLE and h.group().leader_id == new_leader
    # the old leader id is fenced on Join and Sync; without the instance id it is unknown
    assert h.join(leader, instance_id=LEADER, protocols=SUPERSET).value == JoinResult(
        E.fenced_instance_id, member_id=leader
    )
    assert h.sync(leader, 1, {}, instance_id=LEADER).value == SyncResult(E.fenced_instance_id)
    assert h.sync(leader, 1, {}).value == SyncResult(E.unknown_member_id)
    # the new leader syncs without computing anything and keeps the previous assignments
    assert h.sync(new_leader, 1, {}, instance_id=LEADER).value == SyncResult(
        E.none, leader.encode(), "consumer", "range"
    )
    assert h.sync(follower, 1, instance_id=FOLLOWER).value == SyncResult(E.none, follower.encode(), "consumer", "range")
    assert h.state() is GroupState.STABLE and h.group().generation_id == 1


def test_98_static_leader_rejoins_with_empty_id_in_stable_before_v9() -> None:
    for version in (8, 5):
        h = Harness()
        leader, _follower = static_pair(h)
        result = h.join(instance_id=LEADER, protocols=SUPERSET, version=version).value
        new_leader = result.member_id
        assert new_leader != leader and new_leader.startswith(f"{LEADER}-")
        assert result == JoinResult(
            E.none,
            member_id=new_leader,
            generation_id=1,
            protocol_type="consumer",
            protocol_name="range",
            leader=leader,  # the old id: the new member must not act as leader
            skip_assignment=False,
            members=(),
        ), version
        assert h.group().leader_id == new_leader
        assert h.state() is GroupState.STABLE
        assert h.sync(new_leader, 1, instance_id=LEADER).value == SyncResult(
            E.none, leader.encode(), "consumer", "range"
        )


def test_99_static_rejoin_with_empty_id_changing_selected_protocol_rebalances() -> None:
    h = Harness()
    leader, follower = static_pair(h, session_ms=LONG_SESSION_MS)
    assert h.group().protocol_name == "range"
    join = h.join(instance_id=FOLLOWER, protocols=ROUNDROBIN_ONLY, session_ms=LONG_SESSION_MS)
    assert not join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    new_follower = h.group().static_members[FOLLOWER]
    assert new_follower != follower
    h.advance(REBALANCE_MS - 1)
    assert not join.done
    h.advance(1)  # the old leader never rejoined: the rejoined member takes over
    result = join.value
    assert result.error is E.none
    assert result.member_id == new_follower
    assert result.generation_id == 2
    assert result.protocol_name == "roundrobin"
    assert result.leader == new_follower
    assert {(m.member_id, m.group_instance_id) for m in result.members} == {(leader, LEADER), (new_follower, FOLLOWER)}
    group = h.group()
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.leader_id == new_follower
    assert group.static_members == {LEADER: leader, FOLLOWER: new_follower}


# 100: persistence of the replaced member cannot fail in memory (see the module docstring).


def test_101_static_rejoin_with_new_timeouts_in_stable_updates_them_without_rebalance() -> None:
    h = Harness()
    static_pair(h)
    follower_result = h.join(instance_id=FOLLOWER, protocols=SUPERSET, session_ms=20_000, rebalance_ms=60_000).value
    assert follower_result.error is E.none and follower_result.generation_id == 1
    assert not follower_result.skip_assignment and follower_result.members == ()
    leader_result = h.join(instance_id=LEADER, protocols=SUPERSET, session_ms=20_000, rebalance_ms=60_000).value
    assert leader_result.error is E.none and leader_result.generation_id == 1
    assert leader_result.skip_assignment
    assert leader_result.leader == leader_result.member_id
    assert {m.group_instance_id for m in leader_result.members} == {LEADER, FOLLOWER}
    group = h.group()
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.join_key not in h.purgatory
    for member in group.members.values():
        assert member.session_timeout_ms == 20_000
        assert member.rebalance_timeout_ms == 60_000
    assert group.rebalance_timeout_ms() == 60_000
    # the new session timeout governs from the next heartbeat on
    new_ids = (leader_result.member_id, follower_result.member_id)
    for member_id in new_ids:
        assert h.heartbeat(member_id, 1) is E.none
    h.advance(15_000)  # longer than the old 10 s session
    for member_id in new_ids:
        assert h.heartbeat(member_id, 1) is E.none
    assert set(group.members) == set(new_ids)


def test_102_static_rejoin_with_empty_id_while_completing_rebalance_forces_rebalance() -> None:
    h = Harness()
    joins = [h.join(instance_id=i, protocols=SUPERSET) for i in (LEADER, FOLLOWER)]
    h.advance(0)
    leader, follower = (j.value.member_id for j in joins)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    old_sync = h.sync(follower, 1, instance_id=FOLLOWER, protocol_type="consumer", protocol_name="range")
    assert not old_sync.done
    duplicate = h.join(instance_id=FOLLOWER, protocols=SUPERSET)
    # identical protocols, yet the rebalance is forced; the parked sync of the old id is fenced
    assert old_sync.value == SyncResult(E.fenced_instance_id)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.group().generation_id == 1
    assert not duplicate.done
    new_follower = h.group().static_members[FOLLOWER]
    assert new_follower != follower
    leader_join = h.join(leader, instance_id=LEADER, protocols=SUPERSET)
    assert leader_join.value.error is E.none and duplicate.value.error is E.none
    assert leader_join.value.generation_id == duplicate.value.generation_id == 2
    assert duplicate.value.member_id == new_follower
    assert duplicate.value.leader == leader
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_103_static_leader_rejoin_with_known_id_rebalances_and_follower_protocol_change_too() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    leader_join = h.join(leader, instance_id=LEADER, protocols=SUPERSET)
    assert not leader_join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    follower_join = h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET)
    assert leader_join.value.error is E.none and follower_join.value.error is E.none
    assert leader_join.value.generation_id == follower_join.value.generation_id == 2
    assert leader_join.value.member_id == leader_join.value.leader == leader
    assert {m.group_instance_id for m in leader_join.value.members} == {LEADER, FOLLOWER}
    assert follower_join.value.leader == leader and follower_join.value.members == ()
    assert h.state() is GroupState.COMPLETING_REBALANCE

    changed = h.join(follower, instance_id=FOLLOWER, protocols=RANGE_ONLY)
    assert not changed.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(10_000 - 1)
    assert not changed.done
    h.advance(1)  # the leader never rejoined; its session ends and the follower completes the join alone
    assert changed.value == JoinResult(
        E.none,
        member_id=follower,
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader=follower,
        members=(JoinedMember(follower, FOLLOWER, METADATA),),
    )
    assert set(h.group().members) == {follower}


def test_104_static_follower_rejoin_with_known_id_and_no_change_is_answered_immediately() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    result = h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET).value
    assert result == JoinResult(
        E.none,
        member_id=follower,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=leader,
        members=(),
    )
    assert h.state() is GroupState.STABLE
    assert h.group().join_key not in h.purgatory
    assert h.group().static_members == {LEADER: leader, FOLLOWER: follower}


def test_105_static_member_requests_with_mismatched_member_id_are_fenced() -> None:
    h = Harness()
    leader, follower = static_pair(h)
    # JoinGroup: another instance's member id, in both directions
    assert h.join(follower, instance_id=LEADER, protocols=SUPERSET).value == JoinResult(
        E.fenced_instance_id, member_id=follower
    )
    assert h.join(leader, instance_id=FOLLOWER, protocols=SUPERSET).value == JoinResult(
        E.fenced_instance_id, member_id=leader
    )
    # SyncGroup / Heartbeat with an invalid member id
    assert h.sync("invalid-member", 1, {}, instance_id=LEADER).value == SyncResult(E.fenced_instance_id)
    assert h.heartbeat(leader, 1) is E.none
    assert h.heartbeat("invalid-member", 1, instance_id=LEADER) is E.fenced_instance_id
    # OffsetCommit
    assert h.commit({("topic", 0): 5}, generation_id=1, member_id=leader, instance_id=LEADER) == {("topic", 0): E.none}
    assert h.commit({("topic", 0): 6}, generation_id=1, member_id="invalid-member", instance_id=LEADER) == {
        ("topic", 0): E.fenced_instance_id
    }
    assert h.commit({("topic", 0): 7}, generation_id=1, member_id="", instance_id=LEADER) == {
        ("topic", 0): E.fenced_instance_id
    }
    assert h.state() is GroupState.STABLE
    assert h.group().offsets[("topic", 0)].offset == 5


def test_106_unknown_instance_id_with_non_empty_member_id_is_unknown_member_id() -> None:
    h = Harness()
    leader, _follower = static_pair(h)
    for member_id in (leader, "unknown-member"):
        assert h.join(member_id, instance_id="unknown-instance", protocols=SUPERSET).value == JoinResult(
            E.unknown_member_id, member_id=member_id
        )
        assert h.sync(member_id, 1, instance_id="unknown-instance").value == SyncResult(E.unknown_member_id)
        assert h.heartbeat(member_id, 1, instance_id="unknown-instance") is E.unknown_member_id
        assert h.commit({("topic", 0): 1}, generation_id=1, member_id=member_id, instance_id="unknown-instance") == {
            ("topic", 0): E.unknown_member_id
        }
    assert h.state() is GroupState.STABLE
    assert "unknown-instance" not in h.group().static_members


def test_107_static_leader_rejoin_with_known_id_into_dead_group() -> None:
    h = Harness()
    leader, _follower = static_pair(h)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.join(leader, instance_id=LEADER, protocols=RANGE_ONLY).value == JoinResult(
        E.coordinator_not_available, member_id=leader
    )


def test_107_static_leader_rejoin_with_known_id_into_empty_group() -> None:
    h = Harness()
    leader, _follower = static_pair(h)
    group = h.group()
    group.transition_to(GroupState.PREPARING_REBALANCE, h.clock.now_ms())
    group.transition_to(GroupState.EMPTY, h.clock.now_ms())
    assert h.join(leader, instance_id=LEADER, protocols=RANGE_ONLY).value == JoinResult(
        E.unknown_member_id, member_id=leader
    )
    assert group.state is GroupState.EMPTY


def test_108_static_follower_fails_to_rejoin_before_rebalance_timeout_is_kept() -> None:
    h = Harness()
    leader, follower = static_pair(h, session_ms=LONG_SESSION_MS)
    newcomer = h.join(instance_id="new-instance", protocols=SUPERSET, session_ms=LONG_SESSION_MS)
    assert h.state() is GroupState.PREPARING_REBALANCE
    leader_join = h.join(leader, instance_id=LEADER, protocols=SUPERSET, session_ms=LONG_SESSION_MS)
    h.advance(REBALANCE_MS - 1)
    assert not leader_join.done and not newcomer.done
    h.advance(1)
    new_member = h.group().static_members["new-instance"]
    assert leader_join.value.error is E.none
    assert leader_join.value.generation_id == 2
    assert leader_join.value.member_id == leader_join.value.leader == leader
    assert {(m.member_id, m.group_instance_id) for m in leader_join.value.members} == {
        (leader, LEADER),
        (follower, FOLLOWER),
        (new_member, "new-instance"),
    }
    assert newcomer.value == JoinResult(
        E.none,
        member_id=new_member,
        generation_id=2,
        protocol_type="consumer",
        protocol_name="range",
        leader=leader,
        members=(),
    )
    group = h.group()
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert set(group.members) == {leader, follower, new_member}
    # the non-rejoined static follower still holds the old generation
    assert h.heartbeat(follower, 1, instance_id=FOLLOWER) is E.illegal_generation


def test_109_static_leader_fails_to_rejoin_another_rejoined_member_leads() -> None:
    h = Harness()
    leader, follower = static_pair(h, session_ms=LONG_SESSION_MS)
    newcomer = h.join(instance_id="new-instance", protocols=SUPERSET, session_ms=LONG_SESSION_MS)
    assert h.state() is GroupState.PREPARING_REBALANCE
    follower_join = h.join(follower, instance_id=FOLLOWER, protocols=SUPERSET, session_ms=LONG_SESSION_MS)
    h.advance(REBALANCE_MS)
    new_member = h.group().static_members["new-instance"]
    results = {r.member_id: r for r in (follower_join.value, newcomer.value)}
    assert all(r.error is E.none and r.generation_id == 2 for r in results.values())
    new_leader = h.group().leader_id
    assert new_leader in {follower, new_member}
    assert new_leader != leader
    assert {r.leader for r in results.values()} == {new_leader}
    assert {(m.member_id, m.group_instance_id) for m in results[new_leader].members} == {
        (leader, LEADER),
        (follower, FOLLOWER),
        (new_member, "new-instance"),
    }
    other = (set(results) - {new_leader}).pop()
    assert results[other].members == ()
    group = h.group()
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert leader in group.members  # the old static leader is kept
    assert h.heartbeat(leader, 1, instance_id=LEADER) is E.illegal_generation
