"""The control API's read views of a group (``broker/coordinator/views.py``), read through the coordinator."""

from __future__ import annotations

from broker.coordinator.views import GroupSummary
from tests.coordinator.harness import GROUP, PROTOCOLS, REBALANCE_MS, SESSION_MS, E, Harness
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
