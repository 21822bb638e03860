"""The consumer groups' assignment referee (``broker/coordinator/modern/referee.py``) through the coordinator.

On the manual clock with an event hub: healthy groups, whatever happens to them, give no ``referee_violation``; a
coordinator made to break section 5.1's invariants (a reconciliation that ignores who holds a partition, an assignor
that forgets one) is reported at the step that broke it, and the broker's answers stay the coordinator's own.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from broker.coordinator.messages import LeavingMember
from broker.coordinator.modern.assignors import ASSIGNORS, GroupSpec
from broker.coordinator.modern.consumer import groups as groups_module
from broker.coordinator.modern.consumer import heartbeat as heartbeat_module
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.referee import ConsumerReferee, Finding
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import Assignment, TopicId
from broker.events.hub import EventHub, Record
from tests.coordinator.modern.consumer.harness import GROUP, SESSION_MS, Consumer, ConsumerHarness


class RefereedHarness(ConsumerHarness):
    """The consumer-group harness with an event hub, so the referee's findings can be read back."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.hub = EventHub(self.clock, ring_size=100_000, buffer_total=100_000)
        self.coordinator = self.build_coordinator(events=self.hub)

    def records(self, group_id: str = GROUP) -> list[Record]:
        return list(self.hub.history(group_id) or ())

    def violations(self, group_id: str = GROUP) -> list[Record]:
        return [r for r in self.records(group_id) if r["event"] == "referee_violation"]


def formed(h: RefereedHarness, count: int, names: tuple[str, ...] = ("t",)) -> list[Consumer]:
    consumers = [h.consumer(f"m{i}", names) for i in range(count)]
    for consumer in consumers:
        consumer.poll()
    h.settle(*consumers)
    return consumers


def test_a_group_forming_and_shrinking_is_judged_without_findings() -> None:
    h = RefereedHarness(topics={"t": 6, "u": 3})
    consumers = formed(h, 3, ("t", "u"))
    assert h.cstate() is ConsumerGroupState.STABLE
    consumers[0].leave()
    h.settle(*consumers[1:])
    h.advance(SESSION_MS + 1)  # nobody heartbeats: both expire
    assert h.cgroup().is_empty()
    assert h.violations() == []
    stable_steps = [r for r in h.records() if r["event"] == "state_changed" and r["to"] == "Stable"]
    assert len(stable_steps) >= 2  # the whole group was judged each time


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_schedules_of_joins_leaves_acks_expiries_and_topic_growth_give_no_findings(seed: int) -> None:
    """Section 5.1's first invariant holds in the coordinator, so the referee must stay quiet (and quickly)."""
    rng = random.Random(seed)
    h = RefereedHarness(topics={"t": 4, "u": 2})
    consumers = [h.consumer(f"m{i}", rng.choice([("t",), ("t", "u"), ("u",)])) for i in range(5)]
    static = h.consumer("s0", ("t", "u"), instance_id="instance-0")
    everyone = [*consumers, static]
    for step in range(300):
        action = rng.random()
        consumer = rng.choice(everyone)
        if action < 0.6:
            consumer.poll()
        elif action < 0.68 and consumer.epoch > 0:
            consumer.leave(-2 if consumer is static else -1)
        elif action < 0.72 and consumer is static and consumer.epoch == -2:
            static.member_id = f"s{step}"  # the next instance: a new member id takes the old one's place
            static.poll()
        elif action < 0.76:
            h.advance(rng.choice([100, 1000, SESSION_MS + 1]))
        elif action < 0.78:
            h.add_partitions("t", (h.catalog.by_name("t").partitions or 0) + 1)  # type: ignore[union-attr]
        if GROUP in h.coordinator.consumer_groups:
            h.check_ownership()
    h.settle(*everyone, rounds=60)  # whoever left joins again
    assert h.violations() == []


def test_a_partition_handed_over_before_it_is_revoked_is_a_double_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    real = heartbeat_module.reconcile

    def careless(current: Any, target_epoch: int, target: Assignment, owned: Any, owned_by_other: Any) -> Any:
        return real(current, target_epoch, target, owned, lambda topic_id, partition: False)

    h = RefereedHarness(topics={"t": 4})
    first = formed(h, 1)[0]
    monkeypatch.setattr(heartbeat_module, "reconcile", careless)
    second = h.consumer("m1")
    answer = second.poll()  # the newcomer is given t's partitions that m0 still holds
    assert answer.assignment  # the broker answered what its (broken) coordinator decided: the referee only reports
    found = h.violations()
    assert found, "the referee saw nothing"
    assert {(r["kind"], r["topic"], tuple(r["members"])) for r in found} == {
        ("double_owner", "t", (first.member_id, "m1"))
    }
    assert {r["partition"] for r in found} == {p for ps in (h.named(h.cgroup().target_of("m1")) or {}).values()
                                               for p in ps}
    assert all(r["group_type"] == "consumer" and r["group_epoch"] == 2 for r in found)
    last_reconciled = max(r["seq"] for r in h.records() if r["event"] == "member_reconciled")
    assert min(r["seq"] for r in found) == last_reconciled + 1  # reported right after the step that broke it


def test_a_partition_nobody_holds_once_stable_is_unowned(monkeypatch: pytest.MonkeyPatch) -> None:
    class Forgetful:
        """The uniform assignor, losing partition 0 of every topic."""

        name = "uniform"

        def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
            result = ASSIGNORS["uniform"].assign(spec)
            return {m: {t: ps - {0} for t, ps in a.items()} for m, a in result.items()}

    monkeypatch.setattr(groups_module, "ASSIGNORS", {"uniform": Forgetful(), "range": ASSIGNORS["range"]})
    h = RefereedHarness(topics={"t": 3})
    formed(h, 2)
    assert h.cstate() is ConsumerGroupState.STABLE
    unowned = {(r["kind"], r["topic"], r["partition"], tuple(r["members"])) for r in h.violations()}
    assert unowned == {("unowned", "t", 0, ())}


def test_a_static_replacement_and_an_admin_removal_are_no_findings() -> None:
    h = RefereedHarness(topics={"t": 4})
    old = h.consumer("s-old", instance_id="instance-1")
    other = h.consumer("m1")
    old.poll()
    other.poll()
    h.settle(old, other)
    old.leave(-2)  # keeps its partitions for its successor (section 4.4)
    successor = h.consumer("s-new", instance_id="instance-1")
    h.ok(successor.poll())
    h.settle(successor, other)
    assert h.named(h.member("s-new").assigned)
    answer = h.coordinator.leave(GROUP, [LeavingMember("", "instance-1", "removed by an admin")])
    assert answer.members[0].error.name == "none"
    h.settle(other)
    assert h.violations() == []
    fenced = [r for r in h.records() if r["event"] == "member_fenced"]
    assert [(r["member_id"], r["new_member_id"]) for r in fenced] == [("s-old", "s-new")]


# -- the referee alone ----------------------------------------------------------------------------------------


def _member(member_id: str, assigned: Mapping[TopicId, frozenset[int]], pending: Mapping[TopicId, frozenset[int]]
            ) -> ConsumerMember:
    member = ConsumerMember(member_id)
    member.assigned, member.pending_revocation = dict(assigned), dict(pending)
    return member


def test_the_index_confirms_against_the_members_and_forgets_a_deleted_group() -> None:
    topic = uuid.UUID(int=7)
    group = ConsumerGroup("g", 0)
    referee = ConsumerReferee()
    a = _member("a", {topic: frozenset({0, 1})}, {})
    group.members["a"] = a
    assert referee.member_changed(group, "a") == []
    # a gives partition 1 up behind the referee's back; b takes it: the index is stale, the members say no.
    a.assigned = {topic: frozenset({0})}
    group.members["b"] = _member("b", {topic: frozenset({1})}, {})
    assert referee.member_changed(group, "b") == []
    # c takes partition 0, still a's: found.
    group.members["c"] = _member("c", {}, {topic: frozenset({0})})
    assert referee.member_changed(group, "c") == [Finding("double_owner", topic, 0, ("a", "c"))]
    referee.forget("g")
    del group.members["c"]
    group.members["d"] = _member("d", {topic: frozenset({0})}, {})
    assert referee.member_changed(group, "d") == []  # a new index knows nothing of a: only Stable re-reads all
    assert referee.group_stable(group) == [Finding("double_owner", topic, 0, ("a", "d"))]
