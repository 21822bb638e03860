"""Consumer groups seen through the other group APIs: checklist items 98-103 of ``docs/spec/consumer-groups.md``
section 13 (section 9), at the coordinator. What depends on the API version (item 99's MemberType absent in v0,
item 100's v6 error) is the API layer's, from what is checked here (the member type, ``group_type``).
"""

from __future__ import annotations

from broker.coordinator.classic.state import GroupState
from broker.coordinator.messages import (
    ConsumerGroupDescription,
    GroupDescription,
    LeavingMember,
    LeftMember,
    ListedGroup,
)
from tests.coordinator.modern.consumer.harness import GROUP, ConsumerHarness, E


def listed(h: ConsumerHarness, states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> set[str]:
    error, groups = h.coordinator.list_groups(states, types)
    assert error is E.none
    return {g.group_id for g in groups}


def test_item_98_describe_unknown_classic_and_empty_ids() -> None:
    """Item 98: ConsumerGroupDescribe of an unknown id -> GROUP_ID_NOT_FOUND "Group X not found."; of a classic
    group -> GROUP_ID_NOT_FOUND; of "" -> INVALID_GROUP_ID."""
    h = ConsumerHarness()
    assert h.describe_group("nope") == ConsumerGroupDescription("nope", E.group_id_not_found, "Group nope not found.")
    h.stable_group(1, group_id="classic")
    assert h.describe_group("classic") == ConsumerGroupDescription(
        "classic", E.group_id_not_found, "Group classic is not a consumer group."
    )
    assert h.describe_group("") == ConsumerGroupDescription("", E.invalid_group_id)


def test_item_99_described_member_fields() -> None:
    """Item 99: ConsumerGroupDescribe -> MemberType 1 for consumer-protocol members; SubscribedTopicRegex "" when
    none; ClientId and ClientHost (like "/127.0.0.1") from the request."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m", client_id="my-client", rack_id="r1"))
    described = h.describe_group()
    assert (described.error, described.state, described.group_epoch, described.assignment_epoch) == (
        E.none,
        "Stable",
        1,
        1,
    )
    assert described.assignor_name == "uniform"
    (member,) = described.members
    assert member.member_type == 1
    assert member.subscribed_topic_regex == "" and member.subscribed_topic_names == ("t",)
    assert (member.client_id, member.client_host, member.rack_id, member.instance_id) == (
        "my-client",
        "/127.0.0.1",
        "r1",
        None,
    )
    assert member.member_epoch == 1


def test_item_100_describe_groups_of_a_consumer_group() -> None:
    """Item 100: DescribeGroups of a consumer group -> NONE, state "Dead", no members (v0-5); the API layer turns it
    into v6's GROUP_ID_NOT_FOUND from ``group_type`` "consumer"."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    assert h.coordinator.describe(GROUP) == GroupDescription(GROUP, E.none, "Dead", "", "", ())
    assert h.coordinator.group_type(GROUP) == "consumer"


def test_item_101_list_groups_filters() -> None:
    """Item 101: ListGroups TypesFilter ["consumer"] lists only consumer groups; ["CLASSIC"] only classic; ["bogus"]
    nothing; StatesFilter ["reconciling"] matches Reconciling groups."""
    h = ConsumerHarness()
    h.stable_group(1, group_id="classic")
    h.ok(h.cjoin("a", group_id="stable"))
    h.ok(h.cjoin("a", group_id="reconciling"))
    h.ok(h.cjoin("b", group_id="reconciling"))
    assert h.cstate("reconciling").value == "Reconciling"
    assert listed(h) == {"classic", "stable", "reconciling"}
    assert listed(h, types=("consumer",)) == listed(h, types=(" Consumer ",)) == {"stable", "reconciling"}
    assert listed(h, types=("CLASSIC",)) == {"classic"}
    assert listed(h, types=("bogus",)) == set()
    assert listed(h, states=("reconciling",)) == {"reconciling"}
    assert listed(h, states=("STABLE",), types=("consumer",)) == {"stable"}
    assert ListedGroup("stable", "consumer", "Stable", "consumer") in h.coordinator.list_groups()[1]


def test_item_102_join_group_converts_an_empty_consumer_group() -> None:
    """Item 102: JoinGroup to an Empty consumer group -> the group becomes classic, its offsets kept; the classic
    join proceeds normally (offline conversion, section 10.5)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.commit({("t", 0): 10}, member_id="a", generation_id=1)
    h.ok(h.hb("a", -1))
    (member,) = h.stable_group(1)
    assert h.coordinator.group_type(GROUP) == "classic" and GROUP not in h.coordinator.consumer_groups
    assert h.state() is GroupState.STABLE and h.group().generation_id == 1
    assert h.group().offsets[("t", 0)].offset == 10
    assert h.commit({("t", 0): 11}, member_id=member, generation_id=1) == {("t", 0): E.none}


def test_item_103_sync_and_heartbeat_against_a_consumer_group() -> None:
    """Item 103: SyncGroup to an Empty consumer group -> UNKNOWN_MEMBER_ID; the classic Heartbeat from a
    consumer-protocol member id -> UNKNOWN_MEMBER_ID. Neither touches the consumer group."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a", group_id="empty"))
    h.ok(h.hb("a", -1, group_id="empty"))
    sync = h.sync("a", 1, group_id="empty")
    assert sync.done and sync.value.error is E.unknown_member_id
    assert h.coordinator.group_type("empty") == "consumer"
    h.ok(h.cjoin("m"))
    assert h.heartbeat("m", 1) is E.unknown_member_id
    sync = h.sync("m", 1)
    assert sync.done and sync.value.error is E.unknown_member_id
    assert h.ok(h.hb("m", 1)).member_epoch == 1


def test_leave_group_removing_several_members_bumps_the_epoch_once() -> None:
    """Section 10.3 (GMM consumerGroupFenceMembers): LeaveGroup fences all its valid members together, with one
    group epoch bump; a consumer-protocol member may be removed by member id too."""
    h = ConsumerHarness()
    for member_id in ("a", "b", "c"):
        h.ok(h.cjoin(member_id))
    epoch = h.epochs()[0]
    result = h.leave(LeavingMember("a"), LeavingMember("b"), LeavingMember("zz"))
    assert result.members == (
        LeftMember("a", None, E.none),
        LeftMember("b", None, E.none),
        LeftMember("zz", None, E.unknown_member_id),
    )
    assert list(h.cgroup().members) == ["c"]
    assert h.epochs()[0] == epoch + 1
