"""The ``simple`` share assignor through ShareGroupHeartbeat on the manual clock (section 5 of the KIP-932 spec,
checklist items 18-22): partitions shared when members outnumber them, balance when they do not, what a leaving
member frees, and topics that appear after the subscription."""

from __future__ import annotations

from itertools import combinations

from tests.coordinator.share.harness import E, ShareHarness


def settle(h: ShareHarness, members: list[str]) -> dict[str, dict[str, set[int]]]:
    """Every member heartbeats (at its current epoch) until none changes: each one's assignment by topic name."""
    for _ in range(3):
        for member_id in members:
            epoch = h.sgroup().members[member_id].member_epoch
            assert h.shb(member_id, epoch).error is E.none
    return {m: h.sassigned(m) for m in members}


def partitions_of(assigned: dict[str, set[int]], topic: str = "t") -> set[int]:
    return assigned.get(topic, set())


def test_one_partition_three_members_all_share_it() -> None:
    """Item 18: with one partition and three members, each member's assignment holds the partition."""
    h = ShareHarness(topics={"t": 1})
    for member_id in ("m1", "m2", "m3"):
        joined = h.sjoin(member_id)
        assert h.named(joined.assignment) == {"t": {0}}
    assert settle(h, ["m1", "m2", "m3"]) == {m: {"t": {0}} for m in ("m1", "m2", "m3")}


def test_six_partitions_three_members_two_each_disjoint() -> None:
    """Item 19 (first half): 6 partitions over 3 members -> 2 each, no partition given twice."""
    h = ShareHarness(topics={"t": 6})
    members = ["m1", "m2", "m3"]
    for member_id in members:
        h.sjoin(member_id)
    assigned = settle(h, members)
    sizes = [len(partitions_of(a)) for a in assigned.values()]
    assert sizes == [2, 2, 2]
    for a, b in combinations(assigned.values(), 2):
        assert not partitions_of(a) & partitions_of(b)
    assert set().union(*(partitions_of(a) for a in assigned.values())) == set(range(6))


def test_six_partitions_four_members_sizes_2_2_1_1() -> None:
    """Item 19 (second half): 6 partitions over 4 members -> sizes {2,2,1,1}, disjoint, all covered."""
    h = ShareHarness(topics={"t": 6})
    members = ["m1", "m2", "m3", "m4"]
    for member_id in members:
        h.sjoin(member_id)
    assigned = settle(h, members)
    assert sorted(len(partitions_of(a)) for a in assigned.values()) == [1, 1, 2, 2]
    for a, b in combinations(assigned.values(), 2):
        assert not partitions_of(a) & partitions_of(b)
    assert set().union(*(partitions_of(a) for a in assigned.values())) == set(range(6))


def test_two_partitions_three_members_each_partition_shared_by_two() -> None:
    """Item 20: desiredSharing ceil(3/2) = 2: each partition goes to two members, each member has at least one."""
    h = ShareHarness(topics={"t": 2})
    members = ["m1", "m2", "m3"]
    for member_id in members:
        h.sjoin(member_id)
    assigned = settle(h, members)
    assert all(len(partitions_of(a)) >= 1 for a in assigned.values())
    for partition in (0, 1):
        holders = [m for m, a in assigned.items() if partition in partitions_of(a)]
        assert len(holders) == 2, (partition, assigned)
    assert sum(len(partitions_of(a)) for a in assigned.values()) == 4


def test_a_leaving_member_frees_its_partitions_to_the_others() -> None:
    """Item 21: the others keep what they had and absorb what the leaver held, balanced (3 and 3)."""
    h = ShareHarness(topics={"t": 6})
    members = ["m1", "m2", "m3"]
    for member_id in members:
        h.sjoin(member_id)
    before = settle(h, members)
    freed = partitions_of(before["m3"])
    epoch = h.sgroup().members["m3"].member_epoch
    assert h.shb("m3", -1).error is E.none
    after = settle(h, ["m1", "m2"])
    for member_id in ("m1", "m2"):
        assert partitions_of(before[member_id]) <= partitions_of(after[member_id])  # stickiness
        assert len(partitions_of(after[member_id])) == 3  # balance
    assert partitions_of(after["m1"]) | partitions_of(after["m2"]) == set(range(6))
    assert freed <= partitions_of(after["m1"]) | partitions_of(after["m2"])
    assert h.sgroup().group_epoch == epoch + 1


def test_a_member_expired_by_session_timeout_frees_its_partitions() -> None:
    """Item 21 through the session timeout (4.4) rather than a leave: the same redistribution."""
    h = ShareHarness(topics={"t": 4})
    h.sjoin("m1")
    h.sjoin("m2")
    before = settle(h, ["m1", "m2"])
    assert [len(partitions_of(a)) for a in before.values()] == [2, 2]
    for _ in range(12):  # m1 beats every 500 ms, m2 never again
        h.advance(500)
        h.shb("m1", h.sgroup().members["m1"].member_epoch)
    assert "m2" not in h.sgroup().members
    assert partitions_of(settle(h, ["m1"])["m1"]) == {0, 1, 2, 3}


def test_unknown_topic_empty_then_assigned_after_creation() -> None:
    """Item 22: a subscription to a topic that does not exist is an empty assignment without an error; once the
    topic is created, the member's next heartbeat carries its partitions."""
    h = ShareHarness(topics={"t": 1})
    joined = h.shb("m1", 0, ("later",))
    assert joined.error is E.none and joined.member_epoch == 1
    assert joined.assignment == ()  # present (a join is a full answer) and empty: marker 1 + empty array
    assert h.sassigned("m1") == {}
    quiet = h.shb("m1", 1)
    assert quiet.error is E.none and quiet.assignment is None
    h.create_topic("later", 3)
    found = h.shb("m1", 1)
    assert found.error is E.none
    assert h.named(found.assignment) == {"later": {0, 1, 2}}
    assert found.member_epoch == 2  # the metadata change bumped the group epoch


def test_heterogeneous_subscriptions_only_get_their_topics() -> None:
    """Item 22's neighbour in section 5: each member is assigned only partitions of topics it subscribes to."""
    h = ShareHarness(topics={"t": 2, "u": 2})
    h.shb("a", 0, ("t",))
    h.shb("b", 0, ("t", "u"))
    assigned = settle(h, ["a", "b"])
    assert set(assigned["a"]) <= {"t"}
    assert assigned["b"].get("u") == {0, 1}  # b is u's only subscriber
    covered = partitions_of(assigned["a"]) | partitions_of(assigned["b"])
    assert covered == {0, 1}
