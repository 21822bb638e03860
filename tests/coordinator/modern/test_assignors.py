"""The server-side assignors ``uniform`` and ``range`` (section 6 of ``docs/spec/consumer-groups.md``): one test per
assignor item of the section 13 checklist (58-65; 66, the group choosing its assignor, is the group's), then
properties over generated groups (hypothesis, derandomized), then two large groups that must simply finish.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinator.modern.assignors import ASSIGNORS, RangeAssignor, UniformAssignor
from broker.coordinator.modern.assignors.base import Assignor, AssignorError, GroupSpec, MemberSpec
from broker.coordinator.modern.types import Assignment, TopicId

X = uuid.UUID(int=1)
Y = uuid.UUID(int=2)
Z = uuid.UUID(int=3)
UNIFORM = UniformAssignor()
RANGE = RangeAssignor()


def member(
    member_id: str,
    topics: Iterable[TopicId] = (X,),
    target: Mapping[TopicId, Iterable[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSpec:
    frozen = {topic_id: frozenset(partitions) for topic_id, partitions in (target or {}).items()}
    return MemberSpec(member_id, instance_id, None, frozenset(topics), frozen)


def group(members: Iterable[MemberSpec], counts: Mapping[TopicId, int], homogeneous: bool | None = None) -> GroupSpec:
    members = tuple(members)
    if homogeneous is None:
        homogeneous = len({m.topics for m in members}) <= 1
    return GroupSpec(members, dict(counts), homogeneous)


def size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def pairs(assignment: Assignment) -> set[tuple[TopicId, int]]:
    return {(topic_id, partition) for topic_id, partitions in assignment.items() for partition in partitions}


def assert_each_partition_once(spec: GroupSpec, result: Mapping[str, Assignment]) -> None:
    subscribed = {topic_id for m in spec.members for topic_id in m.topics}
    expected = Counter((t, p) for t in subscribed for p in range(spec.partition_counts[t]))
    got = Counter(pair for assignment in result.values() for pair in pairs(assignment))
    assert got == expected


# ---------------------------------------------------------------------------------------------------------------
# Checklist items 58-65 (section 13)


def test_58_uniform_six_partitions_three_members_two_each() -> None:
    spec = group([member("a"), member("b"), member("c")], {X: 6})
    result = UNIFORM.assign(spec)
    assert [size(result[m]) for m in "abc"] == [2, 2, 2]
    assert_each_partition_once(spec, result)


def test_59_uniform_seven_partitions_three_members_sizes_3_2_2() -> None:
    spec = group([member("a"), member("b"), member("c")], {X: 7})
    result = UNIFORM.assign(spec)
    assert sorted(size(a) for a in result.values()) == [2, 2, 3]
    assert_each_partition_once(spec, result)


def test_60_uniform_member_joining_only_the_surplus_moves() -> None:
    before = {"a": {X: {0, 1, 2}, Y: {3}}, "b": {X: {3, 4, 5}, Y: {0, 1, 2}}}
    spec = group(
        [member("a", (X, Y), before["a"]), member("b", (X, Y), before["b"]), member("c", (X, Y))], {X: 6, Y: 4}
    )
    result = UNIFORM.assign(spec)
    # 10 partitions, 3 members: quotas 4, 3, 3; a held 4 and keeps them all, b held 6 and keeps 3.
    quota = {m: size(result[m]) for m in "abc"}
    assert sorted(quota.values()) == [3, 3, 4]
    for m, previous in before.items():
        previous_pairs = {(t, p) for t, ps in previous.items() for p in ps}
        kept = pairs(result[m]) & previous_pairs
        assert len(kept) == min(len(previous_pairs), quota[m])
    # Only the surplus moved: c's partitions all come from b's excess.
    assert pairs(result["c"]) <= {(X, 3), (X, 4), (X, 5), (Y, 0), (Y, 1), (Y, 2)}
    assert len(pairs(result["c"])) == 3
    assert_each_partition_once(spec, result)


@pytest.mark.parametrize(("x_count", "y_count"), [(3, 3), (6, 2), (2, 6), (5, 0), (7, 2), (1, 1)])
def test_61_uniform_heterogeneous_topics_only_to_subscribers_and_balanced(x_count: int, y_count: int) -> None:
    spec = group([member("A", (X,)), member("B", (X, Y))], {X: x_count, Y: y_count})
    assert not spec.homogeneous
    result = UNIFORM.assign(spec)
    assert Y not in result["A"]
    assert result["B"].get(Y, frozenset()) == frozenset(range(y_count))
    # The best split of x: A takes a, B takes x - a, minimising |a - (x - a + y)|.
    best = min(abs(a - (x_count - a + y_count)) for a in range(x_count + 1))
    assert abs(size(result["A"]) - size(result["B"])) == best
    assert_each_partition_once(spec, result)


def test_61_uniform_heterogeneous_rebalances_a_sticky_but_lopsided_target() -> None:
    # A held all of x while B was away: B's return moves only what balance needs, A keeps the rest.
    spec = group([member("A", (X,), {X: range(6)}), member("B", (X, Y))], {X: 6, Y: 2})
    result = UNIFORM.assign(spec)
    assert size(result["A"]) == size(result["B"]) == 4
    # Step 3 moves the giver's highest-numbered partitions: the start of its range stays.
    assert result == {"A": {X: {0, 1, 2, 3}}, "B": {X: {4, 5}, Y: {0, 1}}}
    assert_each_partition_once(spec, result)


def test_62_uniform_member_subscribed_only_to_missing_topics_gets_an_empty_target() -> None:
    # The group resolves names to existing topic ids (section 6.1): a member whose topics all do not exist has none.
    lonely = member("lonely", (), {Z: {0, 1}})
    for spec in (
        group([member("a"), lonely], {X: 4}),
        group([lonely], {X: 4}),
        group([member("a", ()), member("b", ())], {}, homogeneous=True),
    ):
        for assignor in (UNIFORM, RANGE):
            result = assignor.assign(spec)
            assert result[lonely.member_id if lonely in spec.members else "a"] == {}
            assert list(result) == [m.member_id for m in spec.members]
            assert_each_partition_once(spec, result)


def test_62_a_subscribed_topic_without_partition_count_is_an_assignor_failure() -> None:
    # Section 6.6: the group never builds such a spec; if it does, the heartbeat answers UNKNOWN_SERVER_ERROR.
    spec = group([member("a", (X, Z))], {X: 2})
    for assignor in (UNIFORM, RANGE):
        with pytest.raises(AssignorError):
            assignor.assign(spec)


def test_63_range_co_partitions_two_topics() -> None:
    spec = group([member("m2", (X, Y)), member("m1", (X, Y))], {X: 3, Y: 3})
    assert RANGE.assign(spec) == {"m2": {X: {2}, Y: {2}}, "m1": {X: {0, 1}, Y: {0, 1}}}


def test_64_range_static_members_first_by_instance_id_then_dynamic_by_member_id() -> None:
    members = [
        member("a-dynamic"),
        member("z-static", instance_id="i-1"),
        member("b-dynamic"),
        member("c-static", instance_id="i-2"),
    ]
    result = RANGE.assign(group(members, {X: 4}))
    assert result == {"z-static": {X: {0}}, "c-static": {X: {1}}, "a-dynamic": {X: {2}}, "b-dynamic": {X: {3}}}
    assert list(result) == [m.member_id for m in members]  # output keeps the spec's member order


def test_65_range_is_not_sticky_a_member_sorting_first_shifts_every_range() -> None:
    before = RANGE.assign(group([member("a1"), member("a2")], {X: 5}))
    assert before == {"a1": {X: {0, 1, 2}}, "a2": {X: {3, 4}}}
    members = [member("a1", target=before["a1"]), member("a2", target=before["a2"]), member("a0")]
    after = RANGE.assign(group(members, {X: 5}))
    assert after == {"a0": {X: {0, 1}}, "a1": {X: {2, 3}}, "a2": {X: {4}}}


def test_range_heterogeneous_cuts_each_topic_among_its_own_subscribers() -> None:
    spec = group([member("a", (X,)), member("b", (X, Y)), member("c", (Y,))], {X: 5, Y: 3, Z: 9})
    assert RANGE.assign(spec) == {"a": {X: {0, 1, 2}}, "b": {X: {3, 4}, Y: {0, 1}}, "c": {Y: {2}}}


def test_registry_names_both_assignors_uniform_first() -> None:
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor)
    assert isinstance(ASSIGNORS["range"], RangeAssignor)
    assert all(assignor.name == name for name, assignor in ASSIGNORS.items())


def test_uniform_drops_stale_target_entries() -> None:
    # Partitions past the count, topics no longer subscribed and unknown topics leave the target.
    spec = group([member("a", (X,), {X: {0, 7}, Y: {0}, Z: {1}}), member("b", (X,))], {X: 2, Y: 1})
    result = UNIFORM.assign(spec)
    assert result == {"a": {X: {0}}, "b": {X: {1}}}


def test_uniform_same_spec_same_placement() -> None:
    # Section 6.4 step 3: an extra slot no current target needs goes to the last members in order.
    spec = group([member("a"), member("b"), member("c")], {X: 7})
    assert UNIFORM.assign(spec) == {"a": {X: {0, 1}}, "b": {X: {2, 3}}, "c": {X: {4, 5, 6}}}


# ---------------------------------------------------------------------------------------------------------------
# Properties over generated groups

TOPICS = [uuid.UUID(int=n) for n in range(1, 6)]


@st.composite
def specs(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[GroupSpec, bool]:
    """A group spec and whether its current targets are disjoint (as the group keeps them) or may overlap."""
    counts = {t: draw(st.integers(0, 12)) for t in draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))}
    known = sorted(counts)
    n = draw(st.integers(1, 8))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    if homogeneous:
        shared = frozenset(draw(st.lists(st.sampled_from(known), unique=True)))
        subscriptions = [shared] * n
    else:
        subscriptions = [frozenset(draw(st.lists(st.sampled_from(known), unique=True))) for _ in range(n)]
    disjoint = draw(st.booleans())
    targets: list[dict[TopicId, set[int]]] = [{} for _ in range(n)]
    # Current targets: any partition of any known topic (subscribed or not), some past the count, plus unknown topics.
    for t in [*known, uuid.UUID(int=99)]:
        for p in range(counts.get(t, 3) + 2):
            holders = draw(st.lists(st.integers(-1, n - 1), min_size=1, max_size=1 if disjoint else 2))
            for h in holders:
                if h >= 0:
                    targets[h].setdefault(t, set()).add(p)
    members = tuple(
        MemberSpec(
            f"m{i:02d}-{draw(st.sampled_from('abc'))}",
            draw(st.none() | st.sampled_from(["s1", "s2", "s3"])) if i % 2 else None,
            None,
            subscriptions[i],
            {t: frozenset(ps) for t, ps in targets[i].items()},
        )
        for i in range(n)
    )
    # Member ids and instance ids must be unique, as in a group.
    if len({m.member_id for m in members}) < n:
        members = tuple(MemberSpec(f"u{i}", None, None, m.topics, m.target) for i, m in enumerate(members))
    instance_ids = [m.instance_id for m in members if m.instance_id is not None]
    if len(set(instance_ids)) < len(instance_ids):
        members = tuple(MemberSpec(m.member_id, None, None, m.topics, m.target) for m in members)
    flag = len(set(subscriptions)) == 1 and draw(st.booleans() if homogeneous else st.just(False))
    return GroupSpec(members, counts, flag or (homogeneous and n == 1)), disjoint


def valid_current(spec: GroupSpec) -> list[set[tuple[TopicId, int]]]:
    return [
        {(t, p) for t, ps in m.target.items() if t in m.topics for p in ps if p < spec.partition_counts[t]}
        for m in spec.members
    ]


def check_common(assignor: Assignor, spec: GroupSpec) -> dict[str, Assignment]:
    snapshot = copy.deepcopy(spec)
    result = assignor.assign(spec)
    assert spec == snapshot, "the assignor mutated its input"
    assert list(result) == [m.member_id for m in spec.members]
    assert_each_partition_once(spec, result)
    for m in spec.members:
        assert set(result[m.member_id]) <= m.topics, "a member got a topic it does not subscribe to"
        assert all(result[m.member_id].values()), "empty partition sets are left out"
    # Deterministic, also from a fresh instance.
    assert type(assignor)().assign(copy.deepcopy(spec)) == result
    # Stable: fed its own result as the current targets, it answers the same.
    again = GroupSpec(
        tuple(MemberSpec(m.member_id, m.instance_id, m.rack_id, m.topics, result[m.member_id]) for m in spec.members),
        spec.partition_counts,
        spec.homogeneous,
    )
    assert assignor.assign(again) == result
    return result


def loads(spec: GroupSpec, result: Mapping[str, Assignment]) -> list[int]:
    return [size(result[m.member_id]) for m in spec.members]


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(specs(homogeneous=True))
def test_uniform_homogeneous_balanced_and_sticky(case: tuple[GroupSpec, bool]) -> None:
    spec, disjoint = case
    # Some of these specs are flagged heterogeneous although every member subscribes alike (the flag counts topic
    # names that do not exist): the heterogeneous builder must then give the homogeneous result's guarantees too.
    result = check_common(UNIFORM, spec)
    sizes = loads(spec, result)
    assert max(sizes) - min(sizes) <= 1
    if not disjoint:
        return
    total = sum(sizes)
    quota, extras = divmod(total, len(sizes))
    for m, valid, own in zip(spec.members, valid_current(spec), sizes, strict=True):
        kept = pairs(result[m.member_id]) & valid
        # Section 6.4: a member keeps up to its quota of its current target; only the surplus moves.
        assert len(kept) == min(len(valid), own)
        if own == quota and len(valid) > quota:
            assert sizes.count(quota + 1) == extras, "an extra slot went to a member that gained nothing by it"


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(specs(homogeneous=False))
def test_uniform_heterogeneous_topics_only_to_subscribers_and_locally_balanced(case: tuple[GroupSpec, bool]) -> None:
    spec, _ = case
    result = check_common(UNIFORM, spec)
    load = dict(zip([m.member_id for m in spec.members], loads(spec, result), strict=True))
    # Section 6.4 heterogeneous step 3: no partition could move from its owner to another subscriber of its topic
    # and narrow the gap between them.
    for t in spec.partition_counts:
        subscribers = [m.member_id for m in spec.members if t in m.topics]
        owners = [m for m in subscribers if result[m].get(t)]
        if owners:
            assert max(load[o] for o in owners) - min(load[s] for s in subscribers) <= 1
    # Members with identical subscriptions are balanced among themselves like a homogeneous group.
    subscribed = [m for m in spec.members if m.topics]
    if subscribed and len({m.topics for m in subscribed}) == 1:
        sizes = [load[m.member_id] for m in subscribed]
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(specs())
def test_range_contiguous_ranges_in_sorted_member_order(case: tuple[GroupSpec, bool]) -> None:
    spec, _ = case
    result = check_common(RANGE, spec)
    ordered = sorted(
        spec.members, key=lambda m: (0, m.instance_id, "") if m.instance_id is not None else (1, m.member_id, "")
    )
    for t, count in spec.partition_counts.items():
        subscribers = [m.member_id for m in ordered if t in m.topics]
        if not subscribers:
            continue
        quota, extras = divmod(count, len(subscribers))
        start = 0
        for position, m in enumerate(subscribers):
            width = quota + (position < extras)
            assert result[m].get(t, frozenset()) == frozenset(range(start, start + width))
            start += width


# ---------------------------------------------------------------------------------------------------------------
# Size: these must finish well under 100 ms each (not timed here: the machine is shared).


@pytest.mark.parametrize("homogeneous", [True, False])
@pytest.mark.parametrize(("n_members", "n_topics", "n_partitions"), [(1000, 1, 1000), (100, 10, 100)])
def test_large_groups_assign_and_reassign(n_members: int, n_topics: int, n_partitions: int, homogeneous: bool) -> None:
    topics = [uuid.UUID(int=1000 + t) for t in range(n_topics)]
    counts = dict.fromkeys(topics, n_partitions)
    members = [member(f"member-{i:04d}", topics) for i in range(n_members)]
    spec = GroupSpec(tuple(members), counts, homogeneous)
    for assignor in (UNIFORM, RANGE):
        first = assignor.assign(spec)
        assert_each_partition_once(spec, first)
        # One member leaves, one joins: the next target starts from this one.
        rest = [MemberSpec(m.member_id, None, None, m.topics, first[m.member_id]) for m in members[1:]]
        spec2 = GroupSpec((*rest, member("member-new", topics)), counts, homogeneous)
        second = assignor.assign(spec2)
        assert_each_partition_once(spec2, second)
        sizes = [size(a) for a in second.values()]
        assert max(sizes) - min(sizes) <= 1
