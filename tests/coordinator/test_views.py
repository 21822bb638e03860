"""The control API's read views of a group (``broker/coordinator/views.py``), read through the coordinator."""

from __future__ import annotations

from broker.coordinator.views import ConsumerMemberDetail, GroupSummary, MemberDetail
from tests.coordinator.harness import GROUP, PROTOCOLS, REBALANCE_MS, SESSION_MS, E, Harness
from tests.coordinator.modern.consumer.harness import SESSION_MS as CONSUMER_SESSION_MS
from tests.coordinator.modern.consumer.harness import ConsumerHarness
from tests.coordinator.test_events import assign


def test_summaries_leave_out_nothing_but_dead_groups_and_follow_creation_order() -> None:
    h = Harness()
    h.stable_group(2, group_id="b")
    assert h.commit({("t", 0): 1}, group_id="a") == {("t", 0): E.none}
    assert [s.group_id for s in h.coordinator.group_summaries()] == ["b", "a"]
    assert h.coordinator.group_summary("a") == GroupSummary("a", "Empty", None, None, 0, None, 0)
    assert h.coordinator.group_summary("nope") is None and h.coordinator.group_detail("nope") is None
    h.coordinator.shutdown()
    assert h.coordinator.group_summaries() == ()


def test_detail_shows_parked_requests_pending_members_and_decoded_assignments() -> None:
    h = Harness()
    first = h.join_new()
    second = h.join_new()
    h.advance(0)
    leader, follower = first.value.member_id, second.value.member_id
    plan = {leader: assign(topic=[1, 0, 1]), follower: b"not an assignment"}
    assert not h.sync(follower, 1).done  # parked until the leader's assignment arrives
    pending = h.join("").value.member_id  # KIP-394: handed out, awaiting its second JoinGroup
    detail = h.coordinator.group_detail(GROUP)
    assert detail is not None
    assert detail.summary == GroupSummary(GROUP, "CompletingRebalance", "consumer", "range", 1, leader, 2)
    assert detail.pending_members == (pending,)
    assert detail.subscribed_topics == ("topic",)
    assert [(m.member_id, m.awaiting_join, m.awaiting_sync, m.is_leader) for m in detail.members] == [
        (leader, False, False, True),
        (follower, False, True, False),
    ]
    assert all(m.protocols == tuple(name for name, _ in PROTOCOLS) for m in detail.members)
    assert all((m.session_timeout_ms, m.rebalance_timeout_ms) == (SESSION_MS, REBALANCE_MS) for m in detail.members)

    assert h.sync(leader, 1, plan).value.error is E.none
    detail = h.coordinator.group_detail(GROUP)
    assert detail is not None
    assignments = {m.member_id: (m.assignment, m.assignment_bytes) for m in detail.members}
    # partitions per topic, sorted and without repeats; bytes that do not decode show as None
    assert assignments == {leader: ({"topic": [0, 1]}, len(plan[leader])), follower: (None, len(plan[follower]))}
    assert all(not m.awaiting_sync for m in detail.members)


# -- consumer groups (KIP-848) ------------------------------------------------------------------------------------


def test_a_consumer_group_summary_and_detail_show_epochs_and_each_members_reconciliation() -> None:
    """docs/spec/consumer-groups.md sections 3.1-3.4: the group's epochs, and per member its epoch, state, what it
    holds, what it must revoke, its target, its subscription and when its session runs out."""
    h = ConsumerHarness(topics={"t": 4})
    first = h.consumer("m0", instance_id="static-0")
    first.poll()
    h.settle(first)
    h.advance(1_000)
    second = h.consumer("m1")
    second.poll()  # m1 joins: t is split, m0 must revoke two partitions before m1 gets them
    first.poll()  # m0 is told to revoke
    view = h.coordinator
    summary = view.group_summary(GROUP)
    assert summary == GroupSummary(GROUP, "Reconciling", "consumer", "uniform", 2, None, 2, "consumer", 2, 2)
    assert view.group_summaries() == (summary,)
    detail = view.group_detail(GROUP)
    assert detail is not None and detail.summary == summary
    assert (detail.pending_members, detail.subscribed_topics) == ((), ("t",))
    assert detail.state_timestamp_ms == h.clock.now_ms()
    m0, m1 = detail.members
    assert isinstance(m0, ConsumerMemberDetail) and isinstance(m1, ConsumerMemberDetail)
    kept, revoking = h.target("m0")["t"], {0, 1, 2, 3} - h.target("m0")["t"]
    assert (m0.member_id, m0.group_instance_id, m0.member_epoch, m0.previous_member_epoch, m0.state) == (
        "m0", "static-0", 1, 0, "unrevoked_partitions"
    )
    assert (m0.assigned, m0.pending_revocation, m0.target) == (
        {"t": sorted(kept)}, {"t": sorted(revoking)}, {"t": sorted(kept)}
    )
    assert (m1.member_epoch, m1.state, m1.assigned) == (2, "unreleased_partitions", {})
    assert m1.target == {"t": sorted(revoking)}
    assert (m1.subscribed_topic_names, m1.subscribed_topic_regex, m1.server_assignor) == (("t",), "", None)
    assert (m1.client_id, m1.client_host, m1.rack_id, m1.rebalance_timeout_ms) == ("client", "/127.0.0.1", None, 30_000)
    assert m1.session_timeout_ms == CONSUMER_SESSION_MS
    assert m1.session_deadline_ms == h.clock.now_ms() + CONSUMER_SESSION_MS

    first.poll()  # m0 acknowledges: both reach the assignment epoch
    second.poll()
    h.settle(first, second)
    settled = view.group_summary(GROUP)
    assert settled is not None and (settled.state, settled.group_epoch, settled.assignment_epoch) == ("Stable", 2, 2)
    assert h.coordinator.group_detail("nope") is None


def test_a_classic_group_reads_as_before_with_its_type() -> None:
    h = Harness()
    h.stable_group(1)
    summary = h.coordinator.group_summary(GROUP)
    assert summary is not None
    assert (summary.group_type, summary.group_epoch, summary.assignment_epoch) == ("classic", None, None)
    detail = h.coordinator.group_detail(GROUP)
    assert detail is not None and all(isinstance(m, MemberDetail) for m in detail.members)
