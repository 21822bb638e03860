"""The control API's verbs on consumer groups (``broker/coordinator/modern/verbs.py``), through the coordinator facade
on the manual clock. The HTTP side is ``tests/control/test_consumer_groups_api.py``; section numbers refer to
``docs/spec/consumer-groups.md``."""

from __future__ import annotations

import pytest

from broker.coordinator.coordinator import Conflict, UnknownTarget
from broker.coordinator.modern.consumer import verbs as verbs_module
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from tests.coordinator.modern.consumer.harness import GROUP, ConsumerHarness, E


def test_kick_fences_the_member_and_frees_its_partitions_at_once() -> None:
    """Section 4.13's fencing, as a LeaveGroup naming the member (10.3): even one with partitions to revoke."""
    h = ConsumerHarness(topics={"t": 4})
    first = h.consumer("m0")
    first.poll()
    h.settle(first)
    second = h.consumer("m1")
    second.poll()
    first.poll()  # m0 must revoke half of t: UNREVOKED_PARTITIONS, rebalance timer running
    assert h.pending("m0") and h.rebalance_due("m0") is not None
    epoch = h.cgroup().group_epoch
    h.coordinator.kick(GROUP, "m0")
    assert list(h.cgroup().members) == ["m1"]
    assert h.cgroup().group_epoch == epoch + 1 and h.cstate() is ConsumerGroupState.ASSIGNING
    assert h.session_due("m0") is None and h.rebalance_due("m0") is None  # its timers went with it
    h.check_ownership()
    assert h.hb("m0", first.epoch).error is E.unknown_member_id
    h.settle(second)
    assert h.assigned("m1") == {"t": {0, 1, 2, 3}}
    with pytest.raises(UnknownTarget, match="no member 'm0'"):
        h.coordinator.kick(GROUP, "m0")
    with pytest.raises(UnknownTarget, match="no group 'other'"):
        h.coordinator.kick("other", "m1")


def test_fence_removes_the_static_member_by_instance_id() -> None:
    """Kafka's removeMembersFromConsumerGroup (section 7.5): the member goes, its instance id is free."""
    h = ConsumerHarness(topics={"t": 2})
    static = h.consumer("s0", instance_id="instance-1")
    dynamic = h.consumer("m1")
    static.poll()
    dynamic.poll()
    h.settle(static, dynamic)
    assert h.coordinator.fence(GROUP, "instance-1") == ("s0", None)
    assert "instance-1" not in h.cgroup().static_members and list(h.cgroup().members) == ["m1"]
    # A new process with that instance id joins at once: no UNRELEASED_INSTANCE_ID.
    assert h.ok(h.cjoin("s1", instance_id="instance-1")).member_epoch > 0
    with pytest.raises(UnknownTarget, match="instance id 'instance-9'"):
        h.coordinator.fence(GROUP, "instance-9")


def test_a_forced_rebalance_looks_at_the_topics_again_and_bumps_the_epoch() -> None:
    """Section 6.1: a bump makes the next heartbeat compute a target; here it also picks up partitions added since."""
    h = ConsumerHarness(topics={"t": 2})
    member = h.consumer("m0")
    member.poll()
    h.settle(member)
    h.add_partitions("t", 3)
    epoch = h.cgroup().group_epoch
    h.coordinator.force_rebalance(GROUP)
    assert h.epochs() == (epoch + 1, epoch) and h.cstate() is ConsumerGroupState.ASSIGNING
    assert h.cgroup().subscription_metadata["t"][1] == 3
    with pytest.raises(Conflict, match="already Assigning"):
        h.coordinator.force_rebalance(GROUP)
    h.settle(member)
    assert h.epochs() == (epoch + 1, epoch + 1) and h.assigned("m0") == {"t": {0, 1, 2}}
    member.leave()
    with pytest.raises(Conflict, match="Empty"):
        h.coordinator.force_rebalance(GROUP)


def test_a_verb_that_fails_inside_is_counted_and_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    h = ConsumerHarness(topics={"t": 2})
    member = h.consumer("m0")
    member.poll()

    def broken(self: object, group_id: str) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(verbs_module.ConsumerVerbs, "force_rebalance", broken)
    before = h.coordinator.failed_operations
    with pytest.raises(RuntimeError, match="boom"):
        h.coordinator.force_rebalance(GROUP)
    assert h.coordinator.failed_operations == before + 1
    assert h.cstate() is ConsumerGroupState.STABLE  # nothing of the group was touched
