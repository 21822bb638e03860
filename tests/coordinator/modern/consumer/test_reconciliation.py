"""Reconciliation, one member one step at a time: checklist items 46-57 of ``docs/spec/consumer-groups.md`` section 13
(section 5, and the Assignment rules of 4.14), with the worked examples 5.2 and 5.4.

The worked examples say "suppose the assignor produces ...": both deterministic assignors place partitions
differently, so those two tests run the group with a scripted assignor that returns the example's targets
(``ScriptedAssignor``): what is tested is the coordinator's reconciliation, not the placement.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from broker.coordinator.modern.assignors import ASSIGNORS
from broker.coordinator.modern.assignors.base import GroupSpec
from broker.coordinator.modern.consumer import groups as groups_module
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import Assignment, MemberState
from tests.coordinator.modern.consumer.harness import REBALANCE_MS, Consumer, ConsumerHarness, E, Named

STABLE, RECONCILING = ConsumerGroupState.STABLE, ConsumerGroupState.RECONCILING


class ScriptedAssignor:
    """Targets given per set of member ids (the spec's "suppose the assignor produces")."""

    name = "uniform"

    def __init__(self, h: ConsumerHarness, plans: Mapping[frozenset[str], Mapping[str, Named]]) -> None:
        self.h = h
        self.plans = plans

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        plan = self.plans[frozenset(member.member_id for member in spec.members)]
        return {
            member.member_id: {
                self.h.tid(topic): frozenset(partitions) for topic, partitions in plan[member.member_id].items()
            }
            for member in spec.members
        }


def scripted(
    monkeypatch: pytest.MonkeyPatch, h: ConsumerHarness, plans: Mapping[frozenset[str], Mapping[str, Named]]
) -> None:
    monkeypatch.setattr(groups_module, "ASSIGNORS", {**ASSIGNORS, "uniform": ScriptedAssignor(h, plans)})


EXAMPLE_PLANS: dict[frozenset[str], dict[str, Named]] = {
    frozenset("A"): {"A": {"t": {0, 1, 2, 3}, "u": {0, 1}}},
    frozenset("AB"): {"A": {"t": {0, 1}, "u": {0}}, "B": {"t": {2, 3}, "u": {1}}},
    frozenset("ABC"): {"A": {"t": {0}, "u": {0}}, "B": {"t": {2, 3}}, "C": {"t": {1}, "u": {1}}},
    # Worked example 5.4: a fourth member takes u0 from A while A is still revoking t1.
    frozenset("ABCD"): {"A": {"t": {0}}, "B": {"t": {2, 3}}, "C": {"t": {1}, "u": {1}}, "D": {"u": {0}}},
}


def example_at_epoch_7(monkeypatch: pytest.MonkeyPatch) -> tuple[ConsumerHarness, Consumer, Consumer]:
    """The starting point of 5.2: A owns {t0,t1,u0}, B {t2,t3,u1}, both STABLE at epoch 7 = the group epoch.

    Epochs 3 to 7 come from A changing its subscription back and forth (a name that does not exist)."""
    h = ConsumerHarness(topics={"t": 4, "u": 2})
    scripted(monkeypatch, h, EXAMPLE_PLANS)
    a, b = h.consumer("A", names=["t", "u"]), h.consumer("B", names=["t", "u"])
    a.join()
    b.join()
    h.settle(a, b)
    for i in range(5):
        a.subscribe(["t", "u"] if i % 2 else ["t", "u", "absent"])
        h.settle(a, b)
    assert h.epochs() == (7, 7)
    assert (a.epoch, b.epoch) == (7, 7)
    assert (h.assigned("A"), h.assigned("B")) == ({"t": {0, 1}, "u": {0}}, {"t": {2, 3}, "u": {1}})
    assert h.cstate() is STABLE
    return h, a, b


def test_item_46_single_member_gets_everything_at_once() -> None:
    """Item 46: a single member, a topic of 4 partitions -> the join response carries all 4; state Stable."""
    h = ConsumerHarness()
    result = h.ok(h.cjoin("m"))
    assert h.named(result.assignment) == {"t": {0, 1, 2, 3}} and result.member_epoch == 1
    assert h.cstate() is STABLE and h.member("m").state is MemberState.STABLE


def test_item_47_worked_example_5_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 47: worked example 5.2 step by step (responses, epochs and states exactly as in the table); afterwards
    every member's epoch equals the assignment epoch."""
    h, _, _ = example_at_epoch_7(monkeypatch)
    # 1. C joins: epoch 8 computed; t1 (A) and u1 (B) unreleased.
    result = h.ok(h.cjoin("C", names=["t", "u"]))
    assert (result.member_epoch, result.assignment) == (8, ())
    assert h.epochs() == (8, 8) and h.member("C").state is MemberState.UNRELEASED_PARTITIONS
    assert h.cstate() is RECONCILING
    # 2. A, nothing else: revokes t1, stays at 7, rebalance timer armed.
    result = h.ok(h.hb("A", 7))
    assert (result.member_epoch, h.named(result.assignment)) == (7, {"t": {0}, "u": {0}})
    assert h.member("A").state is MemberState.UNREVOKED_PARTITIONS and h.pending("A") == {"t": {1}}
    assert h.rebalance_due("A") == h.clock.now_ms() + REBALANCE_MS
    # 3. B likewise for u1.
    result = h.ok(h.hb("B", 7))
    assert (result.member_epoch, h.named(result.assignment)) == (7, {"t": {2, 3}})
    assert h.member("B").state is MemberState.UNREVOKED_PARTITIONS and h.pending("B") == {"u": {1}}
    # 4. C: still waiting.
    assert h.ok(h.hb("C", 8)).assignment is None
    assert h.member("C").state is MemberState.UNRELEASED_PARTITIONS
    # 5. A acknowledges: epoch 8 without an assignment; t1 free; timer cancelled.
    result = h.ok(h.hb("A", 7, owned={"t": [0], "u": [0]}))
    assert (result.member_epoch, result.assignment) == (8, None)
    assert h.member("A").state is MemberState.STABLE and h.rebalance_due("A") is None
    # 6. C gets t1; u1 is still B's.
    result = h.ok(h.hb("C", 8))
    assert (result.member_epoch, h.named(result.assignment)) == (8, {"t": {1}})
    assert h.member("C").state is MemberState.UNRELEASED_PARTITIONS
    # 7. B acknowledges.
    result = h.ok(h.hb("B", 7, owned={"t": [2, 3]}))
    assert (result.member_epoch, result.assignment) == (8, None)
    assert h.cstate() is RECONCILING
    # 8. C gets u1; the group is Stable.
    result = h.ok(h.hb("C", 8))
    assert (result.member_epoch, h.named(result.assignment)) == (8, {"t": {1}, "u": {1}})
    assert h.cstate() is STABLE
    assert {m.member_epoch for m in h.cgroup().members.values()} == {8}
    h.check_ownership()


def test_worked_example_5_4_target_changes_while_revoking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worked example 5.4 ([4.2], KAFKA-19974): A revokes t1 for epoch 8; epoch 9 also takes u0 from it. A reports
    {t0,u0}: it stays UNREVOKED at epoch 7 with u0 pending, Assignment {t0}; reporting {t0} makes it STABLE at 9."""
    h, _, _ = example_at_epoch_7(monkeypatch)
    h.ok(h.cjoin("C", names=["t", "u"]))
    h.ok(h.hb("A", 7))
    assert h.pending("A") == {"t": {1}}
    result = h.ok(h.cjoin("D", names=["t", "u"]))
    assert h.epochs() == (9, 9) and result.member_epoch == 9 and result.assignment == ()
    first_due = h.rebalance_due("A")
    assert first_due is not None
    h.advance(10)
    result = h.ok(h.hb("A", 7, owned={"t": [0], "u": [0]}))
    assert (result.member_epoch, h.named(result.assignment)) == (7, {"t": {0}})
    assert h.member("A").state is MemberState.UNREVOKED_PARTITIONS and h.pending("A") == {"u": {0}}
    assert h.rebalance_due("A") == first_due + 10  # rewritten while revoking: the timer restarts
    result = h.ok(h.hb("A", 7, owned={"t": [0]}))
    assert (result.member_epoch, result.assignment) == (9, None)
    assert h.member("A").state is MemberState.STABLE
    h.check_ownership()


def two_members_revoking() -> tuple[ConsumerHarness, Named, Named]:
    """ "a" owned all of t; "b" joined: a is told to revoke. Returns a's target and what it must give up."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b"))
    assert h.epochs() == (2, 2)
    result = h.ok(h.hb("a", 1))
    kept = h.named(result.assignment)
    assert kept is not None
    revoked = {"t": {0, 1, 2, 3} - kept["t"]}
    assert len(kept["t"]) == 2 and h.pending("a") == revoked
    return h, kept, revoked


def test_item_48_revocation_answer_omits_the_revoked_partitions() -> None:
    """Item 48: a member told to revoke: the Assignment omits the revoked partitions; the member epoch stays."""
    h, kept, revoked = two_members_revoking()
    assert h.member("a").member_epoch == 1 and h.assigned("a") == kept == h.target("a")
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert not kept["t"] & revoked["t"]


def test_item_49_revoking_member_heartbeats_without_topic_partitions() -> None:
    """Item 49: a member in UNREVOKED_PARTITIONS heartbeats without TopicPartitions -> stays; Assignment null."""
    h, _, revoked = two_members_revoking()
    result = h.ok(h.hb("a", 1))
    assert (result.member_epoch, result.assignment) == (1, None)
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS and h.pending("a") == revoked


def test_item_50_revoking_member_still_reports_a_revoked_partition() -> None:
    """Item 50: a member in UNREVOKED_PARTITIONS reports ownership still containing a revoked partition -> stays."""
    h, kept, revoked = two_members_revoking()
    still = {"t": kept["t"] | {min(revoked["t"])}}
    result = h.ok(h.hb("a", 1, owned=still))
    assert (result.member_epoch, result.assignment) == (1, None)
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert h.ok(h.hb("b", 2)).assignment is None  # b still waits


def test_item_51_acknowledged_revocation_advances_and_frees() -> None:
    """Item 51: reporting ownership without the revoked partitions -> the epoch advances to the assignment epoch and
    the partitions become available to the others."""
    h, kept, revoked = two_members_revoking()
    result = h.ok(h.hb("a", 1, owned=kept))
    assert (result.member_epoch, result.assignment) == (2, None)
    assert h.member("a").state is MemberState.STABLE
    result = h.ok(h.hb("b", 2))
    assert h.named(result.assignment) == revoked
    assert h.cstate() is STABLE


def test_item_52_no_partition_has_two_owners() -> None:
    """Item 52: a new owner never receives a partition while its previous owner has it assigned or pending
    revocation: checked after every heartbeat while members come and go."""
    h = ConsumerHarness(topics={"t": 6, "u": 3})
    consumers = [h.consumer(m, names=["t", "u"]) for m in ("a", "b", "c", "d")]
    answered: dict[str, Named] = {}

    def poll(c: Consumer) -> None:
        result = c.poll()
        h.check_ownership()
        if result.assignment is not None:
            mine = h.named(result.assignment) or {}
            for other, theirs in answered.items():
                if other != c.member_id and other in h.cgroup().members:
                    for topic, partitions in mine.items():
                        assert not partitions & theirs.get(topic, set()), (c.member_id, other)
            answered[c.member_id] = mine

    for joined in range(1, len(consumers) + 1):
        for _ in range(4):
            for c in consumers[:joined]:
                poll(c)
    consumers[1].leave()
    answered.pop("b")
    for _ in range(4):
        for c in consumers:
            if c.member_id != "b":
                poll(c)
    assert h.cstate() is STABLE


def test_item_53_unreleased_partitions_arrive_one_by_one() -> None:
    """Item 53: a member waiting on unreleased partitions receives each one on the first heartbeat after it is
    released (partial Assignments)."""
    h = ConsumerHarness(topics={"t": 6})
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    result = h.ok(h.cjoin("c"))
    assert result.assignment == () and h.member("c").state is MemberState.UNRELEASED_PARTITIONS
    from_a = h.ok(h.hb("a", 2)).assignment
    from_b = h.ok(h.hb("b", 2)).assignment
    assert from_a is not None and from_b is not None
    given_a, given_b = h.pending("a")["t"], h.pending("b")["t"]
    assert len(given_a) == len(given_b) == 1
    h.ok(h.hb("a", 2, owned=from_a))
    result = h.ok(h.hb("c", 3))
    assert h.named(result.assignment) == {"t": given_a}
    assert h.member("c").state is MemberState.UNRELEASED_PARTITIONS
    assert h.ok(h.hb("c", 3)).assignment is None  # nothing new until b lets go
    h.ok(h.hb("b", 2, owned=from_b))
    result = h.ok(h.hb("c", 3))
    assert h.named(result.assignment) == {"t": given_a | given_b}
    assert h.member("c").state is MemberState.STABLE and h.cstate() is STABLE


def test_item_54_unchanged_target_moves_the_epoch_only() -> None:
    """Item 54: a member whose target did not change moves to the new epoch with Assignment null (5.3)."""
    h = ConsumerHarness(topics={"t": 4, "u": 2})
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b", names=["u"]))
    assert h.epochs() == (2, 2)
    result = h.ok(h.hb("a", 1))
    assert (result.member_epoch, result.assignment) == (2, None)
    assert h.member("a").previous_member_epoch == 1


def test_item_55_reporting_partitions_never_assigned_is_accepted() -> None:
    """Item 55: a member reporting TopicPartitions it was never assigned (not pending revocation) on a normal
    heartbeat -> accepted: ownership only serves to detect revocation."""
    h = ConsumerHarness()
    a, b = h.consumer("a"), h.consumer("b")
    a.join()
    b.join()
    h.settle(a, b)
    result = h.ok(h.hb("a", 2, owned={"t": [0, 1, 2, 3]}))
    assert (result.member_epoch, result.assignment) == (2, None)
    assert h.assigned("a") == a.owned and h.assigned("b") == b.owned
    assert h.cstate() is STABLE


def test_item_56_full_request_carries_the_assignment() -> None:
    """Item 56: a "full" request (RebalanceTimeoutMs, names and TopicPartitions non-null, epoch > 0) gets the
    Assignment even when it did not change; leaving out any of the three gives null (4.14)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    full = h.hb("m", 1, rebalance_ms=REBALANCE_MS, names=["t"], owned={"t": [0, 1, 2, 3]})
    assert h.named(h.ok(full).assignment) == {"t": {0, 1, 2, 3}}
    by_regex = h.hb("m", 1, rebalance_ms=REBALANCE_MS, regex="", owned={"t": [0, 1, 2, 3]})
    assert h.named(h.ok(by_regex).assignment) == {"t": {0, 1, 2, 3}}
    assert h.ok(h.hb("m", 1, names=["t"], owned={"t": [0, 1, 2, 3]})).assignment is None
    assert h.ok(h.hb("m", 1, rebalance_ms=REBALANCE_MS, owned={"t": [0, 1, 2, 3]})).assignment is None
    assert h.ok(h.hb("m", 1, rebalance_ms=REBALANCE_MS, names=["t"])).assignment is None
    assert h.epochs() == (1, 1)


def test_item_57_describe_during_reconciliation() -> None:
    """Item 57: ConsumerGroupDescribe during reconciliation: state Reconciling; Assignment shows the assigned (not
    pending-revocation) partitions; TargetAssignment shows the target."""
    h, kept, _ = two_members_revoking()
    described = h.describe_group()
    assert described.error is E.none and described.state == "Reconciling"
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    by_id = {m.member_id: m for m in described.members}
    a, b = by_id["a"], by_id["b"]
    assert a.member_epoch == 1 and b.member_epoch == 2
    assert [(d.topic_name, set(d.partitions)) for d in a.assignment] == [("t", kept["t"])]
    assert [(d.topic_name, set(d.partitions)) for d in a.target_assignment] == [("t", kept["t"])]
    assert b.assignment == ()
    assert [(d.topic_name, set(d.partitions), d.topic_id) for d in b.target_assignment] == [
        ("t", {0, 1, 2, 3} - kept["t"], h.tid("t"))
    ]
