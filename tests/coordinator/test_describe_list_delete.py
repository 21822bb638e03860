"""DescribeGroups, ListGroups, DeleteGroups and OffsetDelete: checklist items 130-143 (spec 14, 16, 21).

Not applicable:
* 137, first half: a null group id (-> INVALID_GROUP_ID) cannot be expressed on the wire for DeleteGroups (the
  GroupsNames array holds non-nullable strings), so the coordinator never receives one; the empty string is a legal
  id and is tested instead.
* 137, second half, and the NOT_COORDINATOR cases: this single broker coordinates every group, so no group is
  "owned elsewhere".
* 130's v6 GROUP_ID_NOT_FOUND and AuthorizedOperations are produced by the API layer from the coordinator's
  not-found description (state ``Dead``, no members); ACLs do not exist (no authorizer).
* 135's "consumer" type matching KIP-848 groups: the broker has no KIP-848 groups, so it matches nothing.
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import (
    DescribedMember,
    FetchedOffset,
    GroupDescription,
    ListedGroup,
    OffsetDeleteResult,
)
from tests.coordinator.harness import GROUP, PROTOCOLS, E, Harness, subscription

SUB = PROTOCOLS[0][1]


def fetch(h: Harness, topic: str, partition: int, group_id: str = GROUP) -> int:
    ((_, (fetched,)),) = h.coordinator.fetch_offsets(group_id, [(topic, [partition])]).topics
    return fetched.offset


def listed(h: Harness, states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> set[ListedGroup]:
    error, groups = h.coordinator.list_groups(states, types)
    assert error is E.none
    assert len(groups) == len(set(groups))
    return set(groups)


def three_groups(h: Harness) -> None:
    """'stable' Stable, 'completing' CompletingRebalance, 'preparing' PreparingRebalance, 'simple' Empty."""
    h.stable_group(1, group_id="stable")
    completing = h.join_new(group_id="completing")
    h.advance(0)
    assert completing.value.error is E.none
    h.stable_group(1, group_id="preparing")
    assert not h.join_new(group_id="preparing").done
    assert h.commit({("t", 0): 1}, group_id="simple") == {("t", 0): E.none}
    assert h.state("completing") is GroupState.COMPLETING_REBALANCE
    assert h.state("preparing") is GroupState.PREPARING_REBALANCE


# -- DescribeGroups ------------------------------------------------------------------------


def test_130_describe_unknown_group() -> None:
    h = Harness()
    assert h.coordinator.describe("nope") == GroupDescription("nope", E.none, "Dead", "", "", ())
    assert "nope" not in h.coordinator.groups
    # the empty string is a legal id, described as Dead
    assert h.coordinator.describe("") == GroupDescription("", E.none, "Dead", "", "", ())


def test_130_describe_dead_group_is_like_unknown() -> None:
    h = Harness()
    h.stable_group(2)
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.coordinator.describe(GROUP) == GroupDescription(GROUP, E.none, "Dead", "", "", ())


def test_131_describe_stable_group() -> None:
    h = Harness()
    static = h.join(instance_id="inst", client_id="static-client")
    dynamic = h.join_new(client_id="dyn-client")
    h.advance(0)
    leader = static.value.member_id
    follower = dynamic.value.member_id
    assert (leader, follower) == ("inst-uuid1", "dyn-client-uuid2")
    assert static.value.leader == leader
    assert h.sync(leader, 1, {leader: b"A", follower: b"B"}, instance_id="inst").value.error is E.none
    assert h.sync(follower, 1).value.assignment == b"B"
    assert h.coordinator.describe(GROUP) == GroupDescription(
        GROUP,
        E.none,
        "Stable",
        "consumer",
        "range",
        (
            DescribedMember(leader, "inst", "static-client", "/127.0.0.1", SUB, b"A"),
            DescribedMember(follower, None, "dyn-client", "/127.0.0.1", SUB, b"B"),
        ),
    )


def test_131_describe_stable_group_reports_metadata_of_the_selected_protocol() -> None:
    h = Harness()
    protocols = (("roundrobin", b"rr-meta"), ("range", b"range-meta"))
    (member,) = h.stable_group(1, protocols=protocols)
    described = h.coordinator.describe(GROUP)
    assert described.protocol_data == "roundrobin"
    assert described.members == (DescribedMember(member, None, "client", "/127.0.0.1", b"rr-meta", member.encode()),)


def test_132_describe_completing_rebalance_group() -> None:
    h = Harness()
    first = h.join_new()
    second = h.join_new()
    h.advance(0)
    ids = (first.value.member_id, second.value.member_id)
    assert h.coordinator.describe(GROUP) == GroupDescription(
        GROUP,
        E.none,
        "CompletingRebalance",
        "consumer",
        "",
        tuple(DescribedMember(m, None, "client", "/127.0.0.1", b"", b"") for m in ids),
    )


def test_132_describe_preparing_rebalance_group_keeps_last_assignment() -> None:
    """NEW coordinator: non-Stable members carry their last stored assignment, never metadata."""
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join("", version=3, client_id="late")  # v3: added at once, parked
    assert not newcomer.done
    newcomer_id = "late-uuid3"
    assert h.group().has_member(newcomer_id)
    assert h.coordinator.describe(GROUP) == GroupDescription(
        GROUP,
        E.none,
        "PreparingRebalance",
        "consumer",
        "",
        (
            DescribedMember(leader, None, "client", "/127.0.0.1", b"", leader.encode()),
            DescribedMember(follower, None, "client", "/127.0.0.1", b"", follower.encode()),
            DescribedMember(newcomer_id, None, "late", "/127.0.0.1", b"", b""),
        ),
    )


def test_132_describe_empty_group_with_protocol_type() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.leave(member).members[0].error is E.none
    assert h.coordinator.describe(GROUP) == GroupDescription(GROUP, E.none, "Empty", "consumer", "", ())


# -- ListGroups ------------------------------------------------------------------------------


def test_133_list_groups_includes_stable_rebalancing_and_simple_groups() -> None:
    h = Harness()
    three_groups(h)
    assert listed(h) == {
        ListedGroup("stable", "consumer", "Stable", "classic"),
        ListedGroup("completing", "consumer", "CompletingRebalance", "classic"),
        ListedGroup("preparing", "consumer", "PreparingRebalance", "classic"),
        ListedGroup("simple", "", "Empty", "classic"),
    }


def test_133_list_groups_skips_dead_groups() -> None:
    h = Harness()
    three_groups(h)
    h.group("stable").transition_to(GroupState.DEAD, h.clock.now_ms())
    assert {g.group_id for g in listed(h)} == {"completing", "preparing", "simple"}


def test_134_list_groups_states_filter() -> None:
    h = Harness()
    three_groups(h)
    assert {g.group_id for g in listed(h, ("Stable",))} == {"stable"}
    assert {g.group_id for g in listed(h, ("stable",))} == {"stable"}
    assert {g.group_id for g in listed(h, ("STABLE", "preparingrebalance"))} == {"stable", "preparing"}
    assert {g.group_id for g in listed(h, ("completingREBALANCE",))} == {"completing"}
    assert {g.group_id for g in listed(h, (" Empty ",))} == {"simple"}
    assert listed(h, ("Invalid",)) == set()
    assert listed(h, ("Dead",)) == set()
    assert {g.group_id for g in listed(h, ("Invalid", "Empty"))} == {"simple"}
    assert len(listed(h, ())) == 4


def test_135_list_groups_types_filter() -> None:
    h = Harness()
    three_groups(h)
    everything = listed(h)
    assert listed(h, types=("classic",)) == everything
    assert listed(h, types=("CLASSIC",)) == everything
    assert listed(h, types=("Classic", "consumer")) == everything
    assert listed(h, types=("consumer",)) == set()
    assert listed(h, types=("share",)) == set()
    assert listed(h, types=("invalid",)) == set()
    assert {g.group_id for g in listed(h, ("stable",), ("classic",))} == {"stable"}
    assert listed(h, ("stable",), ("consumer",)) == set()


# -- DeleteGroups ----------------------------------------------------------------------------


def test_136_delete_non_empty_groups() -> None:
    h = Harness()
    three_groups(h)
    (member,) = [m for m in h.group("stable").members]
    assert h.commit({("t", 0): 5}, group_id="stable", generation_id=1, member_id=member) == {("t", 0): E.none}
    assert h.coordinator.delete_groups(["stable", "completing", "preparing"]) == (
        ("stable", E.non_empty_group),
        ("completing", E.non_empty_group),
        ("preparing", E.non_empty_group),
    )
    assert h.state("stable") is GroupState.STABLE
    assert h.state("completing") is GroupState.COMPLETING_REBALANCE
    assert h.state("preparing") is GroupState.PREPARING_REBALANCE
    assert fetch(h, "t", 0, "stable") == 5


def test_137_delete_groups_empty_string_id_and_duplicates() -> None:
    """137: a null id cannot be sent (see module docstring); "" is a legal id; duplicates are answered once."""
    h = Harness()
    assert h.coordinator.delete_groups([""]) == (("", E.group_id_not_found),)
    assert h.commit({("t", 0): 1}, group_id="") == {("t", 0): E.none}
    assert h.coordinator.delete_groups(["", "", "missing", ""]) == (
        ("", E.none),
        ("missing", E.group_id_not_found),
    )
    assert "" not in h.coordinator.groups


def test_138_delete_empty_group_after_member_left() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.commit({("t", 0): 5, ("t", 1): 6}, generation_id=1, member_id=member) == {
        ("t", 0): E.none,
        ("t", 1): E.none,
    }
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.non_empty_group),)
    assert h.leave(member).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    group = h.group()
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.none),)
    assert group.state is GroupState.DEAD
    assert group.offsets == {}
    assert GROUP not in h.coordinator.groups
    assert h.coordinator.describe(GROUP).state == "Dead"
    assert listed(h) == set()
    assert fetch(h, "t", 0) == -1
    assert fetch(h, "t", 1) == -1
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.group_id_not_found),)
    # a later commit creates a brand-new simple group without the old offsets
    assert h.commit({("t", 0): 9}) == {("t", 0): E.none}
    assert set(h.group().offsets) == {("t", 0)}
    assert h.group().generation_id == 0


def test_138_delete_simple_group() -> None:
    h = Harness()
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    assert h.coordinator.delete_groups([GROUP, "other"]) == ((GROUP, E.none), ("other", E.group_id_not_found))
    assert fetch(h, "t", 0) == -1


def test_138_delete_dead_group_is_group_id_not_found() -> None:
    h = Harness()
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.group_id_not_found),)


# -- OffsetDelete ----------------------------------------------------------------------------


def test_139_offset_delete_unknown_or_dead_group() -> None:
    h = Harness()
    assert h.coordinator.delete_offsets("nope", [("t", [0])]) == OffsetDeleteResult(E.group_id_not_found, ())
    assert "nope" not in h.coordinator.groups
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    h.group().transition_to(GroupState.DEAD, h.clock.now_ms())
    assert h.coordinator.delete_offsets(GROUP, [("t", [0])]) == OffsetDeleteResult(E.group_id_not_found, ())
    assert h.group().offsets[("t", 0)].offset == 1


def test_139_offset_delete_requires_a_group_id() -> None:
    """Spec 6/21: OffsetDelete, unlike DeleteGroups, rejects the empty group id."""
    h = Harness()
    assert h.commit({("t", 0): 1}, group_id="") == {("t", 0): E.none}
    assert h.coordinator.delete_offsets("", [("t", [0])]) == OffsetDeleteResult(E.invalid_group_id, ())
    assert h.group("").offsets[("t", 0)].offset == 1


def test_140_offset_delete_on_active_non_consumer_group() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocol_type="connect")
    assert h.commit({("t", 0): 1}, generation_id=1, member_id=member) == {("t", 0): E.none}
    assert h.coordinator.delete_offsets(GROUP, [("t", [0])]) == OffsetDeleteResult(E.non_empty_group, ())
    assert fetch(h, "t", 0) == 1
    # also while rebalancing
    assert not h.join_new(protocol_type="connect").done
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.coordinator.delete_offsets(GROUP, [("t", [0])]) == OffsetDeleteResult(E.non_empty_group, ())
    assert fetch(h, "t", 0) == 1


def test_141_offset_delete_on_empty_group() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocol_type="connect")
    assert h.commit({("topic", 0): 1, ("topic", 1): 2, ("u", 0): 3}, generation_id=1, member_id=member) == {
        ("topic", 0): E.none,
        ("topic", 1): E.none,
        ("u", 0): E.none,
    }
    assert h.leave(member).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    result = h.coordinator.delete_offsets(GROUP, [("topic", [0, 7]), ("never", [0])])
    assert result == OffsetDeleteResult(E.none, (("topic", ((0, E.none), (7, E.none))), ("never", ((0, E.none),))))
    assert set(h.group().offsets) == {("topic", 1), ("u", 0)}
    assert fetch(h, "topic", 0) == -1
    assert fetch(h, "topic", 1) == 2
    assert h.state() is GroupState.EMPTY  # the group stays, even once it has no offsets


def test_141_offset_delete_on_simple_group() -> None:
    h = Harness()
    assert h.commit({("t", 0): 1, ("t", 1): 2}) == {("t", 0): E.none, ("t", 1): E.none}
    assert h.coordinator.delete_offsets(GROUP, [("t", [1])]) == OffsetDeleteResult(E.none, (("t", ((1, E.none),)),))
    assert set(h.group().offsets) == {("t", 0)}


def test_142_offset_delete_on_stable_consumer_group() -> None:
    h = Harness()
    protocols = (("range", subscription("topic", "second")),)
    (member,) = h.stable_group(1, protocols=protocols)
    assert h.group().subscribed_topics == frozenset({"topic", "second"})
    offsets = {("topic", 0): 1, ("second", 0): 2, ("other", 0): 3, ("other", 1): 4}
    assert h.commit(offsets, generation_id=1, member_id=member) == dict.fromkeys(offsets, E.none)
    result = h.coordinator.delete_offsets(GROUP, [("topic", [0, 1]), ("other", [0]), ("second", [0])])
    assert result == OffsetDeleteResult(
        E.none,
        (
            ("topic", ((0, E.group_subscribed_to_topic), (1, E.group_subscribed_to_topic))),
            ("other", ((0, E.none),)),
            ("second", ((0, E.group_subscribed_to_topic),)),
        ),
    )
    assert set(h.group().offsets) == {("topic", 0), ("second", 0), ("other", 1)}
    assert h.state() is GroupState.STABLE


def test_142_offset_delete_on_rebalancing_consumer_group_uses_last_subscription() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    assert h.commit({("topic", 0): 1, ("other", 0): 2}, generation_id=1, member_id=member) == {
        ("topic", 0): E.none,
        ("other", 0): E.none,
    }
    assert not h.join_new().done
    assert h.state() is GroupState.PREPARING_REBALANCE
    result = h.coordinator.delete_offsets(GROUP, [("topic", [0]), ("other", [0])])
    assert result == OffsetDeleteResult(
        E.none, (("topic", ((0, E.group_subscribed_to_topic),)), ("other", ((0, E.none),)))
    )
    assert set(h.group().offsets) == {("topic", 0)}


def test_143_offset_delete_with_unparsable_subscription_treats_every_topic_as_subscribed() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocols=(("range", b"\x00"),))
    assert h.group().subscribed_topics is None
    assert h.commit({("any", 0): 1}, generation_id=1, member_id=member) == {("any", 0): E.none}
    result = h.coordinator.delete_offsets(GROUP, [("any", [0]), ("never-committed", [3])])
    assert result == OffsetDeleteResult(
        E.none,
        (("any", ((0, E.group_subscribed_to_topic),)), ("never-committed", ((3, E.group_subscribed_to_topic),))),
    )
    assert fetch(h, "any", 0) == 1


def test_143_after_the_group_empties_nothing_is_subscribed() -> None:
    h = Harness()
    (member,) = h.stable_group(1, protocols=(("range", b"\x00"),))
    assert h.commit({("any", 0): 1}, generation_id=1, member_id=member) == {("any", 0): E.none}
    assert h.leave(member).members[0].error is E.none
    assert h.coordinator.delete_offsets(GROUP, [("any", [0])]) == OffsetDeleteResult(E.none, (("any", ((0, E.none),)),))
    assert fetch(h, "any", 0) == -1


def test_fetch_helper_reports_defaults() -> None:
    """Sanity: the fetch helper used above returns -1 for nothing stored (item 123 semantics)."""
    h = Harness()
    assert h.coordinator.fetch_offsets(GROUP, [("t", [0])]).topics == (("t", (FetchedOffset(0),)),)
    assert fetch(h, "t", 0) == -1
