"""Unit rules of the classic group (Kafka's ClassicGroupTest): checklist items 144-149 (spec 4, 5, 13.2).

Item 148's "pending member cannot be a full member" is modelled by ``add_member`` taking the id out of
``pending_members``; the group has no separate add-pending-sync method, so "pending-sync only holds known
members" is checked through removal and join completion.
"""

from __future__ import annotations

import pytest

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.member import Member, Protocols
from broker.coordinator.classic.state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition
from broker.coordinator.config import GroupConfig
from broker.coordinator.consumer_protocol import decode_subscription
from tests.coordinator.harness import GROUP, PROTOCOLS, E, Harness, subscription

NOW = 1_000
S = GroupState
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD

# the shortest legal path from a new (Empty) group to each state
_PATH: dict[GroupState, list[GroupState]] = {
    EMPTY: [],
    PREPARING: [PREPARING],
    COMPLETING: [PREPARING, COMPLETING],
    STABLE: [PREPARING, COMPLETING, STABLE],
    DEAD: [DEAD],
}


def group_in(state: GroupState) -> ClassicGroup:
    group = ClassicGroup(GROUP, NOW)
    for step in _PATH[state]:
        group.transition_to(step, NOW)
    assert group.state is state
    return group


def member(
    member_id: str,
    protocols: Protocols = (("range", b"r"), ("roundrobin", b"rr")),
    *,
    instance_id: str | None = None,
    protocol_type: str = "consumer",
) -> Member:
    return Member(GROUP, member_id, instance_id, "client", "/127.0.0.1", 30_000, 10_000, protocol_type, protocols)


# -- 144 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [(STABLE, True), (COMPLETING, True), (EMPTY, True), (PREPARING, False), (DEAD, False)],
)
def test_144_can_rebalance(state: GroupState, expected: bool) -> None:
    assert group_in(state).can_rebalance is expected


# -- 145 ------------------------------------------------------------------------------------

LEGAL = [
    (STABLE, PREPARING),
    (STABLE, DEAD),
    (COMPLETING, PREPARING),
    (COMPLETING, DEAD),
    (COMPLETING, STABLE),
    (PREPARING, DEAD),
    (PREPARING, EMPTY),
    (PREPARING, COMPLETING),
    (EMPTY, PREPARING),
    (EMPTY, DEAD),
    (DEAD, DEAD),
]
ILLEGAL = [
    (EMPTY, STABLE),
    (EMPTY, COMPLETING),
    (EMPTY, EMPTY),
    (STABLE, STABLE),
    (STABLE, COMPLETING),
    (STABLE, EMPTY),
    (PREPARING, PREPARING),
    (PREPARING, STABLE),
    (COMPLETING, COMPLETING),
    (COMPLETING, EMPTY),
    (DEAD, STABLE),
    (DEAD, PREPARING),
    (DEAD, COMPLETING),
    (DEAD, EMPTY),
]


def test_145_transition_table_is_complete() -> None:
    assert {(a, b) for a, b in LEGAL} | {(a, b) for a, b in ILLEGAL} == {(a, b) for a in S for b in S}


def test_145_valid_previous_states_table_is_kafkas() -> None:
    """The table the transition checks (ClassicGroupState.validPreviousStates) allows exactly LEGAL."""
    assert set(VALID_PREVIOUS_STATES) == set(S)
    assert {(source, target) for target, sources in VALID_PREVIOUS_STATES.items() for source in sources} == set(LEGAL)
    # canRebalance: a rebalance may start exactly where PreparingRebalance may follow
    assert {state for state in S if group_in(state).can_rebalance} == VALID_PREVIOUS_STATES[PREPARING]


@pytest.mark.parametrize(("source", "target"), LEGAL)
def test_145_legal_transition(source: GroupState, target: GroupState) -> None:
    group = group_in(source)
    group.transition_to(target, NOW + 5)
    assert group.state is target
    assert group.previous_state is source
    assert group.state_timestamp_ms == NOW + 5


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_145_illegal_transition(source: GroupState, target: GroupState) -> None:
    group = group_in(source)
    before = (group.state, group.previous_state, group.state_timestamp_ms)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(target, NOW + 5)
    assert (group.state, group.previous_state, group.state_timestamp_ms) == before


def test_145_new_group_starts_empty_with_dead_previous_state() -> None:
    group = ClassicGroup(GROUP, NOW)
    assert (group.state, group.previous_state, group.state_timestamp_ms, group.generation_id) == (EMPTY, DEAD, NOW, 0)
    assert (group.protocol_type, group.protocol_name, group.leader_id) == (None, None, None)


# -- 146 ------------------------------------------------------------------------------------


def test_146_select_protocol_by_votes() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("m1", (("range", b""), ("roundrobin", b""))), None)
    assert group.select_protocol() == "range"
    group.add_member(member("m2", (("roundrobin", b""), ("range", b""))), None)
    tie = group.select_protocol()
    assert tie in {"range", "roundrobin"}  # no majority: any deterministic choice
    assert group.select_protocol() == tie
    group.add_member(member("m3", (("roundrobin", b""), ("range", b""))), None)
    assert group.select_protocol() == "roundrobin"


def test_146_select_protocol_raises_without_members() -> None:
    with pytest.raises(ValueError):
        ClassicGroup(GROUP, NOW).select_protocol()


def test_146_vote_goes_to_first_protocol_every_member_supports() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("m1", (("range", b""), ("roundrobin", b""))), None)
    group.add_member(member("m2", (("roundrobin", b""), ("blah", b""))), None)
    assert group.candidate_protocols() == {"roundrobin"}
    assert group.select_protocol() == "roundrobin"
    # m1 prefers range but votes roundrobin, the only candidate
    group.add_member(member("m3", (("blah", b""), ("range", b""), ("roundrobin", b""))), None)
    assert group.select_protocol() == "roundrobin"


def test_146_supports_protocols() -> None:
    group = ClassicGroup(GROUP, NOW)
    # Empty group: any non-empty type with at least one protocol
    assert group.supports_protocols("consumer", {"range"})
    assert group.supports_protocols("connect", {"x"})
    assert not group.supports_protocols("", {"range"})
    assert not group.supports_protocols("consumer", set())
    group.add_member(member("m1", (("range", b""), ("roundrobin", b""))), None)
    group.transition_to(PREPARING, NOW)
    assert group.supports_protocols("consumer", {"roundrobin", "foo"})
    assert not group.supports_protocols("consumer", {"foo", "bar"})
    assert not group.supports_protocols("connect", {"range"})
    group.add_member(member("m2", (("roundrobin", b""),)), None)
    assert not group.supports_protocols("consumer", {"range"})
    assert group.supports_protocols("consumer", {"roundrobin"})


# -- 147 ------------------------------------------------------------------------------------


def test_147_init_next_generation_on_empty_group() -> None:
    group = group_in(PREPARING)
    group.protocol_name = "range"
    group.not_yet_synced.add("ghost")
    group.init_next_generation(NOW + 7)
    assert group.generation_id == 1
    assert group.state is EMPTY
    assert group.state_timestamp_ms == NOW + 7
    assert group.protocol_name is None
    assert group.subscribed_topics == frozenset()
    assert group.not_yet_synced == set()


def test_147_init_next_generation_with_members() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("m1", (("range", subscription("a", "b")),)), None)
    group.add_member(member("m2", (("range", subscription("b", "c")),)), None)
    group.transition_to(PREPARING, NOW)
    group.init_next_generation(NOW + 1)
    assert (group.generation_id, group.state, group.protocol_name) == (1, COMPLETING, "range")
    assert group.subscribed_topics == frozenset({"a", "b", "c"})
    group.transition_to(PREPARING, NOW + 2)
    group.init_next_generation(NOW + 3)
    assert group.generation_id == 2


def test_147_subscribed_topics_unknown_for_non_consumer_or_unparsable() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("m1", (("range", subscription("a")),), protocol_type="connect"), None)
    group.transition_to(PREPARING, NOW)
    group.init_next_generation(NOW)
    assert group.subscribed_topics is None
    other = ClassicGroup("g2", NOW)
    other.add_member(member("m1", (("range", b"\x00\x01"),)), None)
    other.transition_to(PREPARING, NOW)
    other.init_next_generation(NOW)
    assert other.subscribed_topics is None
    assert decode_subscription(subscription("x", "y")).topics == ("x", "y")


# -- 148 ------------------------------------------------------------------------------------


def test_148_adding_a_member_with_a_known_instance_id_fails() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("a", instance_id="inst"), None)
    with pytest.raises(ValueError):
        group.add_member(member("b", instance_id="inst"), None)
    assert list(group.members) == ["a"]
    assert group.static_members == {"inst": "a"}


def test_148_pending_member_becomes_full_member_only_once() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.pending_members.add("p")
    assert group.is_pending_member("p")
    assert not group.has_all_members_joined()  # a pending member blocks join completion
    group.add_member(member("p"), None)
    assert not group.is_pending_member("p")
    assert group.has_member("p")
    group.pending_members.add("q")
    assert group.remove_member("q") is None  # not a member: removal is a no-op...
    assert group.is_pending_member("q")
    group.add_member(member("q"), None)
    assert group.remove_member("q") is not None
    assert not group.is_pending_member("q")


def test_148_not_yet_synced_follow_membership_and_generation() -> None:
    h = Harness()
    first = h.join_new()
    second = h.join_new()
    h.advance(0)
    ids = {first.value.member_id, second.value.member_id}
    group = h.group()
    assert group.not_yet_synced == ids
    # a removed member leaves the pending-sync set
    assert h.leave(second.value.member_id).members[0].error is E.none
    # the leave started a new rebalance, which clears the set
    assert group.state is PREPARING
    assert group.not_yet_synced == set()
    rejoin = h.join(first.value.member_id)
    assert rejoin.value.error is E.none
    assert group.not_yet_synced == {first.value.member_id}
    assert group.not_yet_synced <= set(group.members)


def test_148_remove_member_drops_it_from_pending_sync() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("a"), None)
    group.add_member(member("b"), None)
    group.transition_to(PREPARING, NOW)
    group.init_next_generation(NOW)
    group.not_yet_synced.update({"a", "b"})
    group.remove_member("b")
    assert group.not_yet_synced == {"a"}
    group.transition_to(PREPARING, NOW)
    group.init_next_generation(NOW)
    assert group.not_yet_synced == set()


def test_148_leader_reelected_on_removal() -> None:
    group = ClassicGroup(GROUP, NOW)
    group.add_member(member("a"), None)
    group.add_member(member("b"), None)
    assert group.leader_id == "a"
    group.remove_member("a")
    assert group.leader_id == "b"
    group.remove_member("b")
    assert group.leader_id is None


# -- 149 ------------------------------------------------------------------------------------


def retention_harness() -> Harness:
    return Harness(
        config=GroupConfig(
            initial_rebalance_delay_ms=0, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000
        )
    )


def test_149_expiration_condition_per_group_kind() -> None:
    """Empty -> state timestamp; Stable consumer with known subscription -> commit time (unsubscribed only);
    simple -> commit time; anything else -> never."""
    h = retention_harness()
    t0 = h.clock.now_ms()
    long = {"session_ms": 1_800_000, "rebalance_ms": 1_000_000}
    # simple group, committed at t0
    assert h.commit({("x", 0): 1}, group_id="simple") == {("x", 0): E.none}
    # Empty consumer group: became Empty at t0, offset committed at t0 + 30 s
    (gone,) = h.stable_group(1, group_id="empty", **long)
    assert h.leave(gone, group_id="empty").members[0].error is E.none
    assert h.commit({("x", 1): 1}, group_id="empty") == {("x", 1): E.none}  # keeps the group past early sweeps
    # Stable consumer group with a known subscription ("topic")
    (stable,) = h.stable_group(1, group_id="stable", **long)
    # Stable consumer group with an unknown subscription
    (blind,) = h.stable_group(1, group_id="blind", protocols=(("range", b"?"),), **long)
    # Stable group of another protocol type
    (conn,) = h.stable_group(1, group_id="connect", protocol_type="connect", **long)
    for group_id, member_id in (("stable", stable), ("blind", blind), ("connect", conn)):
        assert h.commit({("topic", 0): 1, ("x", 0): 1}, group_id=group_id, generation_id=1, member_id=member_id) == {
            ("topic", 0): E.none,
            ("x", 0): E.none,
        }
    h.advance(30_000)
    assert h.commit({("x", 0): 1}, group_id="empty") == {("x", 0): E.none}
    h.advance(29_999)
    assert set(h.group("simple").offsets) == {("x", 0)}
    assert set(h.group("empty").offsets) == {("x", 0), ("x", 1)}
    assert h.group("empty").protocol_type == "consumer"
    h.advance(1)  # sweep at t0 + 60 s
    assert h.clock.now_ms() == t0 + 60_000
    assert "simple" not in h.coordinator.groups  # commit time base, then deleted (Empty, no offsets)
    assert "empty" not in h.coordinator.groups  # state time base: the 30 s old offset went too
    assert set(h.group("stable").offsets) == {("topic", 0)}  # only the unsubscribed topic expired
    assert set(h.group("blind").offsets) == {("topic", 0), ("x", 0)}
    assert set(h.group("connect").offsets) == {("topic", 0), ("x", 0)}
    assert h.state("stable") is STABLE


def test_149_subscription_membership() -> None:
    group = ClassicGroup(GROUP, NOW)
    assert not group.is_subscribed_to("topic")  # Empty: subscribed to nothing
    group.add_member(member("m", PROTOCOLS), None)
    group.transition_to(PREPARING, NOW)
    group.init_next_generation(NOW)
    assert group.is_subscribed_to("topic")
    assert not group.is_subscribed_to("other")
    group.subscribed_topics = None
    assert group.is_subscribed_to("other")  # unknown subscription of a consumer group: everything
