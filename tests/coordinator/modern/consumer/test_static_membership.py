"""Static membership in consumer groups: checklist items 73-81 and 113 of ``docs/spec/consumer-groups.md`` section 13
(sections 4.4, 4.7, 7.5, and LeaveGroup of 10.3).
"""

from __future__ import annotations

from broker.coordinator.messages import ConsumerHeartbeatResult, LeavingMember, LeftMember
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from tests.coordinator.modern.consumer.harness import GROUP, SESSION_MS, ConsumerHarness, E

ALL = {"t": {0, 1, 2, 3}}


def static_and_dynamic() -> ConsumerHarness:
    """Static "s1" (instance "I") and dynamic "d", settled: two partitions each."""
    h = ConsumerHarness()
    s1, d = h.consumer("s1", instance_id="I"), h.consumer("d")
    s1.join()
    d.join()
    h.settle(s1, d)
    assert h.epochs() == (2, 2)
    return h


def test_item_73_instance_id_is_described() -> None:
    """Item 73: a static member joins with instance I -> ConsumerGroupDescribe shows InstanceId I."""
    h = ConsumerHarness()
    h.ok(h.cjoin("s1", instance_id="I"))
    (member,) = h.describe_group().members
    assert (member.member_id, member.instance_id) == ("s1", "I")
    assert h.cgroup().static_members == {"I": "s1"}


def test_item_74_instance_id_in_use() -> None:
    """Item 74: a second process joining with the same instance I while the first is active ->
    UNRELEASED_INSTANCE_ID; the first process re-joining without having left, too (4.7)."""
    h = static_and_dynamic()
    for member_id in ("s2", "s1"):
        assert h.cjoin(member_id, instance_id="I") == ConsumerHeartbeatResult(
            E.unreleased_instance_id,
            f"Static member {member_id} with instance id I cannot join the group because the instance id is owned "
            "by s1 member.",
        )
    assert set(h.cgroup().members) == {"s1", "d"} and h.epochs() == (2, 2)


def test_item_75_temporary_leave() -> None:
    """Item 75: HB(-2) from a static member -> response epoch -2; no group epoch bump; Describe shows MemberEpoch
    -2 and its partitions still assigned; its partitions stay owned (3.5)."""
    h = static_and_dynamic()
    assigned = h.assigned("s1")
    assert h.hb("s1", -2, instance_id="I") == ConsumerHeartbeatResult(E.none, None, "s1", -2, 0, None)
    assert h.epochs() == (2, 2)
    described = {m.member_id: m for m in h.describe_group().members}["s1"]
    assert described.member_epoch == -2
    assert {d.topic_name: set(d.partitions) for d in described.assignment} == assigned
    assert h.cstate() is ConsumerGroupState.RECONCILING  # s1 is not reconciled to epoch 2 (Kafka likewise)
    h.check_ownership()
    assert set(h.cgroup().owners.values()) == {"s1", "d"}


def test_item_76_replacement_inherits_the_partitions() -> None:
    """Item 76: a new process with instance I and a new member id joins after the -2 leave -> it gets the old
    member's partitions at once, epoch = assignment epoch, no group epoch bump; the old member is gone."""
    h = static_and_dynamic()
    assigned = h.assigned("s1")
    h.ok(h.hb("s1", -2, instance_id="I"))
    result = h.ok(h.cjoin("s2", instance_id="I"))
    assert result.member_epoch == 2 and h.named(result.assignment) == assigned
    assert h.epochs() == (2, 2) and h.cstate() is ConsumerGroupState.STABLE
    assert set(h.cgroup().members) == {"s2", "d"} and h.cgroup().static_members == {"I": "s2"}
    assert h.target("s2") == assigned
    assert h.session_due("s1") is None
    h.check_ownership()


def test_item_77_replacement_with_another_subscription() -> None:
    """Item 77: the same, with a different subscription -> group epoch bump and a new target."""
    h = ConsumerHarness(topics={"t": 4, "u": 2})
    s1, d = h.consumer("s1", instance_id="I"), h.consumer("d")
    s1.join()
    d.join()
    h.settle(s1, d)
    h.ok(h.hb("s1", -2, instance_id="I"))
    result = h.ok(h.cjoin("s2", names=["t", "u"], instance_id="I"))
    assert h.epochs() == (3, 3) and result.member_epoch == 3
    assert h.target("s2")["u"] == {0, 1}
    assert h.member("s2").subscribed_topic_names == {"t", "u"}


def test_item_78_static_member_that_never_returns() -> None:
    """Item 78: a static member that left with -2 and never returns is removed when its session timer (started at
    its last normal heartbeat) expires; its partitions are reassigned."""
    h = static_and_dynamic()
    last_heartbeat = h.clock.now_ms()
    h.advance(2_000)
    h.ok(h.hb("s1", -2, instance_id="I"))
    assert h.session_due("s1") == last_heartbeat + SESSION_MS  # the leave did not move it
    h.advance(SESSION_MS - 2_000 - 500)
    h.ok(h.hb("d", 2))
    h.advance(500)
    assert "s1" not in h.cgroup().members and not h.cgroup().static_members
    assert h.epochs() == (3, 2)
    result = h.ok(h.hb("d", 2))
    assert result.member_epoch == 3 and h.named(result.assignment) == ALL


def test_item_79_fenced_instance_and_unknown_instance() -> None:
    """Item 79: the old member id heartbeating with instance I after being replaced -> FENCED_INSTANCE_ID; HB(5)
    with an unknown instance id -> UNKNOWN_MEMBER_ID."""
    h = static_and_dynamic()
    h.ok(h.hb("s1", -2, instance_id="I"))
    h.ok(h.cjoin("s2", instance_id="I"))
    assert h.hb("s1", 2, instance_id="I") == ConsumerHeartbeatResult(
        E.fenced_instance_id, "Static member s1 with instance id I is fenced by existing member s2."
    )
    assert h.hb("s1", -1, instance_id="I").error is E.fenced_instance_id
    assert h.hb("s3", 5, instance_id="J") == ConsumerHeartbeatResult(E.unknown_member_id, "Instance id J is unknown.")
    assert set(h.cgroup().members) == {"s2", "d"}


def test_item_80_static_member_leaves_for_good() -> None:
    """Item 80: a static member sending HB(-1) is fenced permanently (group epoch +1); its instance id is free."""
    h = static_and_dynamic()
    assert h.hb("s1", -1, instance_id="I") == ConsumerHeartbeatResult(E.none, None, "s1", -1, 0, None)
    assert set(h.cgroup().members) == {"d"} and not h.cgroup().static_members
    assert h.epochs() == (3, 2)
    result = h.ok(h.cjoin("s2", instance_id="I"))
    assert h.epochs() == (4, 4) and result.member_epoch == 4


def test_item_81_static_member_heartbeats_without_instance_id() -> None:
    """Item 81: a static member heartbeating without InstanceId (librdkafka's partial heartbeats) is accepted by
    member id; the stored instance id is kept."""
    h = static_and_dynamic()
    result = h.ok(h.hb("s1", 2))
    assert result.member_epoch == 2
    assert h.member("s1").instance_id == "I" and h.cgroup().static_members == {"I": "s1"}


def test_member_rejoining_under_another_instance_id_frees_the_old_one() -> None:
    """Section 3.1: the instance map follows the member's instance id; the one it left is free for a new member."""
    h = static_and_dynamic()
    h.ok(h.hb("s1", -2, instance_id="I"))
    h.ok(h.cjoin("s1", instance_id="J"))
    assert h.cgroup().static_members == {"J": "s1"}
    result = h.ok(h.cjoin("s2", instance_id="I"))
    assert result.member_epoch == h.epochs()[0] and h.cgroup().static_members == {"J": "s1", "I": "s2"}
    h.ok(h.hb("s1", -1, instance_id="J"))
    assert h.cgroup().static_members == {"I": "s2"}


def test_item_113_leave_group_removes_a_static_member_by_instance_id() -> None:
    """Item 113: LeaveGroup (admin, by instance id, member id "") removes a consumer-protocol static member from a
    consumer group; group epoch +1. An unknown instance -> UNKNOWN_MEMBER_ID for that member."""
    h = static_and_dynamic()
    result = h.leave(LeavingMember("", "I"), LeavingMember("", "nope"))
    assert result.error is E.none
    assert result.members == (LeftMember("", "I", E.none), LeftMember("", "nope", E.unknown_member_id))
    assert set(h.cgroup().members) == {"d"} and h.epochs() == (3, 2)
    assert h.session_due("s1") is None
    assert h.hb("s1", 2).error is E.unknown_member_id
    assert GROUP in h.coordinator.consumer_groups
