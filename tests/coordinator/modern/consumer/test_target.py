"""The group epoch, the target assignment and the assignors as a group runs them: checklist items 36-45 and 58-66
of ``docs/spec/consumer-groups.md`` section 13 (sections 4.8, 4.10, 4.11, 4.13, 6).

Items 58-65 are also tested on the assignors alone (test_assignors.py); here they go through heartbeats, so the
member order, the subscription type and the stickiness basis are the coordinator's.
"""

from __future__ import annotations

from broker.coordinator.modern.consumer.state import ConsumerGroupState
from tests.coordinator.modern.consumer.harness import ConsumerHarness


def sizes(h: ConsumerHarness, *members: str) -> list[int]:
    return [sum(len(p) for p in h.assigned(m).values()) for m in members]


def every_partition_once(h: ConsumerHarness, topic: str, count: int, *members: str) -> None:
    owned = [p for m in members for p in h.assigned(m).get(topic, set())]
    assert sorted(owned) == list(range(count))


# -- the group epoch (sections 4.8, 6.1) ----------------------------------------------------------------------


def test_item_36_second_member_bumps_the_epoch_and_the_target() -> None:
    """Item 36: a second member joining with the same subscription -> group epoch +1 and the target recomputed
    (assignment epoch = group epoch)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    assert h.epochs() == (1, 1) and h.target("a") == {"t": {0, 1, 2, 3}}
    result = h.ok(h.cjoin("b"))
    assert h.epochs() == (2, 2) and result.member_epoch == 2
    target_a, target_b = h.target("a")["t"], h.target("b")["t"]
    assert len(target_a) == len(target_b) == 2 and target_a | target_b == {0, 1, 2, 3}


def test_item_37_subscription_change_bumps_the_epoch() -> None:
    """Item 37: SubscribedTopicNames [a] -> [a, b] -> group epoch +1 (and the member gets b's partitions)."""
    h = ConsumerHarness(topics={"a": 2, "b": 2})
    h.ok(h.cjoin("m", names=["a"]))
    result = h.ok(h.hb("m", 1, names=["a", "b"]))
    assert h.epochs() == (2, 2) and result.member_epoch == 2
    assert h.named(result.assignment) == {"a": {0, 1}, "b": {0, 1}}


def test_item_38_same_names_reordered_or_duplicated_do_not_bump() -> None:
    """Item 38: the same names in a different order or with duplicates -> no epoch bump (a set, section 3.2)."""
    h = ConsumerHarness(topics={"a": 2, "b": 2})
    h.ok(h.cjoin("m", names=["a", "b"]))
    for names in (["b", "a"], ["a", "b", "a", "b"]):
        result = h.ok(h.hb("m", 1, names=names))
        assert result.member_epoch == 1 and result.assignment is None
    assert h.epochs() == (1, 1)


def test_item_39_rack_rebalance_timeout_and_assignor_do_not_bump() -> None:
    """Item 39 (4.0-4.2): changing only RackId, RebalanceTimeoutMs or ServerAssignor -> no group epoch bump; the
    values are stored (section 4.8)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    h.ok(h.hb("m", 1, rack_id="rack-1"))
    h.ok(h.hb("m", 1, rebalance_ms=12_345))
    h.ok(h.hb("m", 1, assignor="range"))
    assert h.epochs() == (1, 1)
    member = h.member("m")
    assert (member.rack_id, member.rebalance_timeout_ms, member.server_assignor) == ("rack-1", 12_345, "range")


def test_item_40_member_with_empty_subscription_joins_without_a_bump() -> None:
    """Item 40: a new member joining an existing group with SubscribedTopicNames [] -> no group epoch bump; it gets
    epoch = assignment epoch and an empty assignment."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    result = h.ok(h.cjoin("b", names=[]))
    assert h.epochs() == (1, 1)
    assert result.member_epoch == 1 and result.assignment == ()
    assert h.cstate() is ConsumerGroupState.STABLE


def test_item_41_creating_a_subscribed_topic_bumps_at_the_next_heartbeat() -> None:
    """Item 41: a subscribed topic "x" that does not exist is created -> the next heartbeat of any member bumps the
    group epoch, and the subscriber receives x's partitions (section 4.10)."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b", names=["x"])
    a.join()
    b.join()
    h.settle(a, b)
    assert h.assigned("b") == {}
    epoch = h.epochs()[0]
    h.create_topic("x", 3)
    assert h.epochs()[0] == epoch  # nothing happens until someone heartbeats
    result = h.ok(a.poll())  # a member not subscribed to x notices it
    assert h.epochs() == (epoch + 1, epoch + 1) and result.member_epoch == epoch + 1
    assert h.named(h.ok(b.poll()).assignment) == {"x": {0, 1, 2}}


def test_item_42_partitions_added_to_a_subscribed_topic() -> None:
    """Item 42: partitions added to a subscribed topic -> the next heartbeat bumps the epoch; new partitions are
    assigned."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    epoch = h.epochs()[0]
    h.add_partitions("t", 6)
    a.poll()
    assert h.epochs() == (epoch + 1, epoch + 1)
    h.settle(a, b)
    every_partition_once(h, "t", 6, "a", "b")
    assert sizes(h, "a", "b") == [3, 3]


def test_item_43_deleting_a_subscribed_topic() -> None:
    """Item 43: a subscribed topic is deleted -> the next heartbeat bumps the epoch; its owner is asked to drop its
    partitions (the Assignment leaves them out, they wait as pending revocation)."""
    h = ConsumerHarness(topics={"t": 2, "u": 2})
    h.ok(h.cjoin("m", names=["t", "u"]))
    u_id = h.tid("u")
    h.delete_topic("u")
    result = h.ok(h.hb("m", 1))
    assert h.epochs() == (2, 2)
    assert h.named(result.assignment) == {"t": {0, 1}}
    assert result.member_epoch == 1  # it still owns u's partitions
    assert h.member("m").pending_revocation == {u_id: frozenset({0, 1})}
    result = h.ok(h.hb("m", 1, owned={"t": [0, 1]}))
    assert result.member_epoch == 2 and h.cstate() is ConsumerGroupState.STABLE


def test_item_44_leave_makes_the_group_assigning_until_a_heartbeat() -> None:
    """Item 44: a member leaves (-1) -> state Assigning until any member heartbeats; then the target is recomputed
    (section 4.13: fencing does not compute it)."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    assert h.epochs() == (2, 2)
    b.leave()
    assert h.epochs() == (3, 2) and h.cstate() is ConsumerGroupState.ASSIGNING
    assert h.target("a") != {"t": {0, 1, 2, 3}}
    result = h.ok(a.poll())
    assert h.epochs() == (3, 3) and result.member_epoch == 3
    assert h.target("a") == {"t": {0, 1, 2, 3}} and h.named(result.assignment) == {"t": {0, 1, 2, 3}}
    assert h.cstate() is ConsumerGroupState.STABLE


def test_item_45_epoch_survives_the_last_member() -> None:
    """Item 45: the group epoch after the last member leaves is retained; a new join continues from it (+1)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    assert h.hb("a", -1).member_epoch == -1
    assert h.cstate() is ConsumerGroupState.EMPTY and h.epochs()[0] == 2
    result = h.ok(h.cjoin("b"))
    assert result.member_epoch == 3 and h.epochs() == (3, 3)


# -- the assignors through the group (section 6) ---------------------------------------------------------------


def test_item_58_uniform_six_partitions_three_members() -> None:
    """Item 58: uniform, one topic of 6 partitions, 3 members with identical subscriptions -> 2 partitions each,
    every partition exactly once."""
    h = ConsumerHarness(topics={"t": 6})
    consumers = [h.consumer(m) for m in ("a", "b", "c")]
    for c in consumers:
        c.join()
    h.settle(*consumers)
    assert sizes(h, "a", "b", "c") == [2, 2, 2]
    every_partition_once(h, "t", 6, "a", "b", "c")


def test_item_59_uniform_seven_partitions_three_members() -> None:
    """Item 59: uniform, 7 partitions, 3 members -> sizes {3, 2, 2}."""
    h = ConsumerHarness(topics={"t": 7})
    consumers = [h.consumer(m) for m in ("a", "b", "c")]
    for c in consumers:
        c.join()
    h.settle(*consumers)
    assert sorted(sizes(h, "a", "b", "c")) == [2, 2, 3]
    every_partition_once(h, "t", 7, "a", "b", "c")


def test_item_60_uniform_stickiness_only_the_surplus_moves() -> None:
    """Item 60: a member joins a 2-member group -> each existing member keeps min(previous count, new quota) of its
    previous partitions; only the surplus moves."""
    h = ConsumerHarness(topics={"t": 6})
    a, b, c = h.consumer("a"), h.consumer("b"), h.consumer("c")
    a.join()
    b.join()
    h.settle(a, b)
    before = {m: h.assigned(m)["t"] for m in ("a", "b")}
    assert [len(p) for p in before.values()] == [3, 3]
    c.join()
    h.settle(a, b, c)
    after = {m: h.assigned(m).get("t", set()) for m in ("a", "b", "c")}
    assert after["a"] <= before["a"] and after["b"] <= before["b"]
    assert [len(after[m]) for m in ("a", "b", "c")] == [2, 2, 2]
    assert after["c"] == (before["a"] - after["a"]) | (before["b"] - after["b"])


def test_item_61_uniform_heterogeneous() -> None:
    """Item 61: uniform, A subscribes [x], B [x, y] -> y entirely to B; x balanced so the total counts differ as
    little as possible."""
    h = ConsumerHarness(topics={"x": 4, "y": 2})
    a, b = h.consumer("a", names=["x"]), h.consumer("b", names=["x", "y"])
    a.join()
    b.join()
    h.settle(a, b)
    assert "y" not in h.assigned("a") and h.assigned("b")["y"] == {0, 1}
    assert sizes(h, "a", "b") == [3, 3]
    every_partition_once(h, "x", 4, "a", "b")


def test_item_62_uniform_member_subscribed_only_to_missing_topics() -> None:
    """Item 62: a member subscribed only to topics that do not exist -> empty target, no error."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b", names=["missing", "gone"])
    a.join()
    b.join()
    h.settle(a, b)
    assert h.target("b") == {} and h.assigned("b") == {}
    assert h.assigned("a") == {"t": {0, 1, 2, 3}}


def test_item_63_range_co_partitions() -> None:
    """Item 63: range, topics x and y of 3 partitions each, members m1 and m2 -> m1 {x0,x1,y0,y1}, m2 {x2,y2}."""
    h = ConsumerHarness(topics={"x": 3, "y": 3})
    m1 = h.consumer("m1", names=["x", "y"], assignor="range")
    m2 = h.consumer("m2", names=["x", "y"], assignor="range")
    m1.join()
    m2.join()
    h.settle(m1, m2)
    assert h.assigned("m1") == {"x": {0, 1}, "y": {0, 1}}
    assert h.assigned("m2") == {"x": {2}, "y": {2}}


def test_item_64_range_static_members_first() -> None:
    """Item 64: range orders static members (by instance id) before dynamic members (by member id)."""
    h = ConsumerHarness(topics={"t": 3})
    consumers = [
        h.consumer("a-dynamic", assignor="range"),
        h.consumer("s1", assignor="range", instance_id="zz"),
        h.consumer("s2", assignor="range", instance_id="yy"),
    ]
    for c in consumers:
        c.join()
    h.settle(*consumers)
    assert [h.assigned(m) for m in ("s2", "s1", "a-dynamic")] == [{"t": {0}}, {"t": {1}}, {"t": {2}}]


def test_item_65_range_is_not_sticky() -> None:
    """Item 65: range is not sticky: "a0" joining ahead of "a1", "a2" shifts every range."""
    h = ConsumerHarness(topics={"t": 6})
    a1, a2 = h.consumer("a1", assignor="range"), h.consumer("a2", assignor="range")
    a1.join()
    a2.join()
    h.settle(a1, a2)
    assert [h.assigned(m) for m in ("a1", "a2")] == [{"t": {0, 1, 2}}, {"t": {3, 4, 5}}]
    a0 = h.consumer("a0", assignor="range")
    a0.join()
    h.settle(a0, a1, a2)
    assert [h.assigned(m) for m in ("a0", "a1", "a2")] == [{"t": {0, 1}}, {"t": {2, 3}}, {"t": {4, 5}}]


def test_item_66_the_assignor_most_members_chose() -> None:
    """Item 66: the group uses the assignor chosen by most members; with no choice, the first configured one
    ("uniform")."""
    h = ConsumerHarness(topics={"t": 6})
    a = h.consumer("c", names=["t"])
    a.join()
    assert h.describe_group().assignor_name == "uniform"
    b = h.consumer("b", assignor="range")
    b.join()
    d = h.consumer("a", assignor="uniform")
    d.join()
    e = h.consumer("d", assignor="range")
    e.join()
    h.settle(a, b, d, e)
    assert h.describe_group().assignor_name == "range"
    # range sorts by member id: a {0,1}, b {2,3}, c {4}, d {5}.
    assert [h.assigned(m) for m in ("a", "b", "c", "d")] == [
        {"t": {0, 1}},
        {"t": {2, 3}},
        {"t": {4}},
        {"t": {5}},
    ]
