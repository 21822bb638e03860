"""Checklist items 1-20: coordinator routing and JoinGroup validation (spec sections 6, 7.1-7.3, 20, 21).

Items that cannot apply to a single in-memory broker (no test on purpose):

* 1 (requests while the group's offsets partition is loading -> COORDINATOR_LOAD_IN_PROGRESS etc.): this broker has
  no __consumer_offsets partitions to load; every group is in memory from the moment it is created.
* 2 (JoinGroup for a group owned by another broker -> NOT_COORDINATOR): a single broker is the coordinator of every
  group, so no group is ever owned elsewhere.
* 3 (Heartbeat/Sync/Leave/Describe/Delete/OffsetFetch for a group owned elsewhere -> NOT_COORDINATOR): same reason as 2.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import INT32_MAX, GroupConfig
from broker.coordinator.messages import JoinedMember, JoinResult
from broker.timing.deferred import Deferred
from tests.coordinator.harness import GROUP, PROTOCOLS, E, Harness, subscription

MIN_SESSION_MS = 6_000
MAX_SESSION_MS = 1_800_000
DELAY_MS = 3_000


def answered(pending: Deferred[JoinResult]) -> JoinResult:
    assert pending.done, "JoinGroup is still parked"
    return pending.value


def assert_join_error(result: JoinResult, error: ErrorCode, member_id: str) -> None:
    """The generic JoinGroup error shape (section 6.4)."""
    assert result.error is error
    assert result.member_id == member_id
    assert result.generation_id == -1
    assert result.protocol_type is None
    assert result.protocol_name is None
    assert result.leader == ""
    assert result.skip_assignment is False
    assert result.members == ()


# -- Coordinator / routing ------------------------------------------------------------------------------------------


def test_04_offsets_retention_minutes_int_max_does_not_overflow() -> None:
    """Item 4: offsets.retention.minutes = Integer.MAX_VALUE -> retention ms in 64-bit, no overflow."""
    config = GroupConfig(offsets_retention_minutes=INT32_MAX, initial_rebalance_delay_ms=0)
    assert config.offsets_retention_ms == 2_147_483_647 * 60 * 1000 == 128_849_018_820_000
    # An overflowed (negative) retention would expire a simple group's offsets at the first sweep.
    h = Harness(config=config)
    assert h.commit({("topic", 0): 42}) == {("topic", 0): E.none}
    h.advance(30 * 24 * 3600 * 1000)  # 30 days of retention sweeps
    fetched = h.coordinator.fetch_offsets(GROUP, [("topic", [0])])
    assert fetched.topics[0][1][0].offset == 42
    assert GROUP in h.coordinator.groups


# -- JoinGroup validation -------------------------------------------------------------------------------------------


def test_05_session_timeout_below_minimum_is_rejected() -> None:
    """Item 5: SessionTimeoutMs < group.min.session.timeout.ms -> INVALID_SESSION_TIMEOUT, no group created."""
    h = Harness()
    assert_join_error(answered(h.join(session_ms=MIN_SESSION_MS - 1)), E.invalid_session_timeout, "")
    assert_join_error(
        answered(h.join("some-member", session_ms=MIN_SESSION_MS - 1)), E.invalid_session_timeout, "some-member"
    )
    assert GROUP not in h.coordinator.groups
    # the bound is inclusive
    assert answered(h.join(session_ms=MIN_SESSION_MS)).error is E.member_id_required


def test_06_session_timeout_above_maximum_is_rejected() -> None:
    """Item 6: SessionTimeoutMs > group.max.session.timeout.ms -> INVALID_SESSION_TIMEOUT, no group created."""
    h = Harness()
    assert_join_error(answered(h.join(session_ms=MAX_SESSION_MS + 1)), E.invalid_session_timeout, "")
    assert GROUP not in h.coordinator.groups
    # the bound is inclusive
    assert answered(h.join(session_ms=MAX_SESSION_MS)).error is E.member_id_required


def test_07_empty_group_id_is_invalid() -> None:
    """Item 7: JoinGroup with group id "" -> INVALID_GROUP_ID."""
    h = Harness()
    assert_join_error(answered(h.join(group_id="")), E.invalid_group_id, "")
    assert_join_error(answered(h.join(group_id="", instance_id="inst")), E.invalid_group_id, "")
    assert h.coordinator.groups == {}


def test_08_known_member_id_to_unknown_group_is_unknown_member() -> None:
    """Item 8: non-empty member id + non-existent group (dynamic or static) -> UNKNOWN_MEMBER_ID, no group created."""
    h = Harness()
    assert_join_error(answered(h.join("member-1")), E.unknown_member_id, "member-1")
    assert_join_error(answered(h.join("member-1", instance_id="inst")), E.unknown_member_id, "member-1")
    assert_join_error(answered(h.join("member-1", version=3)), E.unknown_member_id, "member-1")
    assert GROUP not in h.coordinator.groups


def test_09_first_join_of_new_group_completes_after_initial_delay() -> None:
    """Item 9: first JoinGroup (v<4) -> NONE after the initial delay; leader; generation 1; CompletingRebalance."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    join = h.join(version=3)
    assert not join.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(DELAY_MS - 1)
    assert not join.done
    h.advance(1)
    result = answered(join)
    assert result.error is E.none
    assert result.member_id == "client-uuid1"
    assert result.leader == result.member_id
    assert result.generation_id == 1
    assert result.protocol_type == "consumer"
    assert result.protocol_name == "range"
    assert result.members == (JoinedMember(result.member_id, None, PROTOCOLS[0][1]),)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.group().generation_id == 1
    assert h.group().leader_id == result.member_id


def test_09_first_static_join_of_new_group_completes_after_initial_delay() -> None:
    """Item 9 (static): a static first joiner gets no MEMBER_ID_REQUIRED even on v9; NONE after the delay."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    join = h.join(instance_id="inst", version=9)
    assert not join.done
    h.advance(DELAY_MS - 1)
    assert not join.done
    h.advance(1)
    result = answered(join)
    assert result.error is E.none
    assert result.member_id == "inst-uuid1"
    assert result.leader == "inst-uuid1"
    assert result.generation_id == 1
    assert result.members == (JoinedMember("inst-uuid1", "inst", PROTOCOLS[0][1]),)
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_10_second_member_with_other_protocol_type_is_inconsistent() -> None:
    """Item 10: second member with a different protocol type than the group's -> INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness()
    first = h.join_new()
    h.advance(0)
    assert answered(first).error is E.none
    assert h.group().protocol_type == "consumer"
    assert_join_error(answered(h.join(protocol_type="connect", version=3)), E.inconsistent_group_protocol, "")
    assert_join_error(answered(h.join(protocol_type="connect")), E.inconsistent_group_protocol, "")
    assert len(h.group().members) == 1
    assert h.group().pending_members == set()
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_11_empty_protocol_type_is_inconsistent() -> None:
    """Item 11: JoinGroup with protocol type "" (dynamic or static) -> INCONSISTENT_GROUP_PROTOCOL, member id ""."""
    h = Harness()
    assert_join_error(answered(h.join(protocol_type="")), E.inconsistent_group_protocol, "")
    assert_join_error(answered(h.join(protocol_type="", version=3)), E.inconsistent_group_protocol, "")
    assert_join_error(answered(h.join(protocol_type="", instance_id="inst")), E.inconsistent_group_protocol, "")
    assert h.group().members == {}
    assert h.group().pending_members == set()
    assert h.state() is GroupState.EMPTY


def test_12_empty_protocol_list_is_inconsistent() -> None:
    """Item 12: JoinGroup with an empty protocol list -> INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness()
    assert_join_error(answered(h.join(protocols=())), E.inconsistent_group_protocol, "")
    assert_join_error(answered(h.join(protocols=(), version=3)), E.inconsistent_group_protocol, "")
    assert_join_error(answered(h.join(protocols=(), instance_id="inst")), E.inconsistent_group_protocol, "")
    assert h.group().members == {}
    assert h.state() is GroupState.EMPTY


def test_13_second_member_without_common_protocol_is_inconsistent() -> None:
    """Item 13: second member whose protocol names share nothing with the group's -> INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    first = h.join(protocols=(("range", b"r"),), version=3)
    other = h.join(protocols=(("roundrobin", b"rr"),), version=3)
    assert_join_error(answered(other), E.inconsistent_group_protocol, "")
    h.advance(DELAY_MS)
    result = answered(first)
    assert result.error is E.none
    assert result.protocol_name == "range"
    assert list(h.group().members) == [result.member_id]


def test_14_unknown_member_id_on_existing_group() -> None:
    """Item 14: existing group, JoinGroup with a random member id -> UNKNOWN_MEMBER_ID, member id echoed."""
    h = Harness()
    (leader,) = h.stable_group(1)
    assert_join_error(answered(h.join("memberId")), E.unknown_member_id, "memberId")
    assert list(h.group().members) == [leader]
    assert h.state() is GroupState.STABLE
    assert h.group().generation_id == 1


def test_15_dead_group_new_member_gets_coordinator_not_available() -> None:
    """Item 15: group in Dead state, JoinGroup with member id "" -> COORDINATOR_NOT_AVAILABLE, member id ""."""
    h = Harness()
    h.stable_group(1)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert_join_error(answered(h.join()), E.coordinator_not_available, "")
    assert_join_error(answered(h.join(version=3)), E.coordinator_not_available, "")
    assert_join_error(answered(h.join(instance_id="inst")), E.coordinator_not_available, "")
    assert h.state() is GroupState.DEAD
    assert len(h.group().members) == 1


def test_16_dead_group_existing_member_gets_coordinator_not_available() -> None:
    """Item 16: group in Dead state, existing member id -> COORDINATOR_NOT_AVAILABLE, member id echoed."""
    h = Harness()
    (leader,) = h.stable_group(1)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert_join_error(answered(h.join(leader)), E.coordinator_not_available, leader)
    assert_join_error(answered(h.join("not-a-member")), E.coordinator_not_available, "not-a-member")
    assert h.state() is GroupState.DEAD


def test_17_known_member_joining_empty_group_is_unknown() -> None:
    """Item 17: the member left, the group is Empty; JoinGroup with its old id -> UNKNOWN_MEMBER_ID, generation -1."""
    h = Harness()
    (leader,) = h.stable_group(1)
    assert h.leave(leader).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    assert h.group().generation_id == 2
    assert_join_error(answered(h.join(leader)), E.unknown_member_id, leader)
    assert h.state() is GroupState.EMPTY
    assert h.group().members == {}


def test_18_two_step_join_with_bad_protocols_keeps_member_pending() -> None:
    """Item 18: v4+ first join -> MEMBER_ID_REQUIRED; retry with empty protocols -> INCONSISTENT_GROUP_PROTOCOL and
    the id stays pending; retry with valid protocols -> NONE."""
    h = Harness()
    first = answered(h.join(version=4))
    assert first.error is E.member_id_required
    assert first.member_id == "client-uuid1"
    assert first.generation_id == -1
    assert first.leader == ""
    assert first.members == ()
    member_id = first.member_id
    assert h.group().pending_members == {member_id}
    assert h.state() is GroupState.EMPTY

    assert_join_error(answered(h.join(member_id, protocols=(), version=4)), E.inconsistent_group_protocol, member_id)
    assert h.group().pending_members == {member_id}
    assert h.group().members == {}
    assert h.state() is GroupState.EMPTY

    third = h.join(member_id, version=4)
    h.advance(0)
    result = answered(third)
    assert result.error is E.none
    assert result.member_id == member_id
    assert result.leader == member_id
    assert result.generation_id == 1
    assert h.group().pending_members == set()
    assert list(h.group().members) == [member_id]


def test_19_pending_member_rejoining_with_instance_id_is_internal_error() -> None:
    """Item 19: a pending (MEMBER_ID_REQUIRED) id sent with a group.instance.id -> UNKNOWN_SERVER_ERROR."""
    h = Harness()
    pending_id = answered(h.join(version=5)).member_id
    result = answered(h.join(pending_id, instance_id="inst", version=5))
    assert result.error is E.unknown_server_error
    assert result.member_id == pending_id
    assert result.protocol_type is None
    assert h.group().members == {}
    assert h.group().static_members == {}


def test_20_error_responses_have_null_protocol_type_success_carries_it() -> None:
    """Item 20: JoinGroup errors carry ProtocolType null; successes (leader and follower) carry the group's type."""
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=DELAY_MS))
    error = answered(h.join("fake-id", instance_id="leader"))
    assert error.error is E.unknown_member_id
    assert error.protocol_type is None
    assert error.protocol_name is None

    superset = (("range", subscription("topic")), ("roundrobin", subscription("topic")))
    leader_join = h.join(instance_id="leader", protocols=superset)
    follower_join = h.join(instance_id="follower", protocols=superset)
    h.advance(2 * DELAY_MS)
    leader, follower = answered(leader_join), answered(follower_join)
    assert leader.error is E.none and follower.error is E.none
    assert leader.protocol_type == "consumer"
    assert follower.protocol_type == "consumer"
    assert leader.protocol_name == follower.protocol_name == "range"
    assert leader.leader == follower.leader == leader.member_id
    assert {m.group_instance_id for m in leader.members} == {"leader", "follower"}
    assert follower.members == ()

    # a later error on the existing group again has no protocol type
    mismatch = answered(h.join(follower.member_id, instance_id="follower", protocol_type="connect"))
    assert mismatch.error is E.inconsistent_group_protocol
    assert mismatch.protocol_type is None
