"""Member resolution and member epochs: checklist items 28-35 of ``docs/spec/consumer-groups.md`` section 13
(rules of sections 4.7, 4.14, 4.15 and 7.1).
"""

from __future__ import annotations

from broker.coordinator.messages import ConsumerHeartbeatResult
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import MemberState
from tests.coordinator.modern.consumer.harness import GROUP, INTERVAL_MS, SESSION_MS, ConsumerHarness, E

ALL = {"t": {0, 1, 2, 3}}


def bump(h: ConsumerHarness, member_id: str, helper: str) -> int:
    """Move the group epoch by one without moving a partition (a helper joins subscribed to a topic that does not
    exist), then let ``member_id`` adopt it; returns the new epoch."""
    h.ok(h.cjoin(helper, names=["absent"]))
    epoch = h.member(member_id).member_epoch
    result = h.ok(h.hb(member_id, epoch))
    assert result.member_epoch == h.cgroup().group_epoch and result.assignment is None
    return result.member_epoch


def member_at_epoch_3(h: ConsumerHarness) -> None:
    """ "m" owning all of t, STABLE at epoch 3 with previous epoch 2."""
    h.ok(h.cjoin("m"))
    bump(h, "m", "x1")
    bump(h, "m", "x2")
    member = h.member("m")
    assert (member.member_epoch, member.previous_member_epoch) == (3, 2)


def fenced(result: ConsumerHeartbeatResult) -> None:
    assert result.error is E.fenced_member_epoch
    assert (result.member_id, result.member_epoch, result.heartbeat_interval_ms, result.assignment) == (
        None,
        0,
        0,
        None,
    )


def test_item_28_unknown_member_id_in_an_existing_group() -> None:
    """Item 28: HB(1) with an unknown member id in an existing group -> UNKNOWN_MEMBER_ID."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    assert h.hb("stranger", 1) == ConsumerHeartbeatResult(
        E.unknown_member_id, f"Member stranger is not a member of group {GROUP}."
    )
    assert list(h.cgroup().members) == ["m"]


def test_item_29_epoch_greater_than_the_stored_one() -> None:
    """Item 29: a member at epoch 2 sends HB(3) -> FENCED_MEMBER_EPOCH; the member is unchanged."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    bump(h, "m", "x1")
    member = h.member("m")
    before = (member.member_epoch, member.previous_member_epoch, member.state, dict(member.assigned), h.epochs())
    fenced(h.hb("m", 3))
    fenced(h.hb("m", 3, owned=ALL))
    assert (
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        dict(member.assigned),
        h.epochs(),
    ) == before


def test_item_30_previous_epoch_with_owned_subset_is_tolerated() -> None:
    """Item 30: a member at epoch 3 (previous 2) sends HB(2) with TopicPartitions within its assignment -> success,
    response epoch 3 (section 5.5: the response carrying the bump was lost)."""
    h = ConsumerHarness()
    member_at_epoch_3(h)
    result = h.ok(h.hb("m", 2, owned={"t": [0, 1]}))
    assert result.member_epoch == 3 and result.assignment is None
    assert h.ok(h.hb("m", 2, owned=ALL)).member_epoch == 3
    assert h.ok(h.hb("m", 2, owned={})).member_epoch == 3


def test_item_31_previous_epoch_without_topic_partitions() -> None:
    """Item 31: a member at epoch 3 (previous 2) sends HB(2) with TopicPartitions null -> FENCED_MEMBER_EPOCH; also
    when it reports a partition it is not assigned."""
    h = ConsumerHarness(topics={"t": 4, "u": 1})
    member_at_epoch_3(h)
    fenced(h.hb("m", 2))
    fenced(h.hb("m", 2, owned={"t": [0], "u": [0]}))
    assert h.member("m").member_epoch == 3


def test_item_32_epoch_older_than_the_previous_one() -> None:
    """Item 32: a member at epoch 3 sends HB(1) -> FENCED_MEMBER_EPOCH, even with a valid ownership report."""
    h = ConsumerHarness()
    member_at_epoch_3(h)
    fenced(h.hb("m", 1))
    fenced(h.hb("m", 1, owned=ALL))


def test_item_33_known_member_rejoins_with_epoch_0() -> None:
    """Item 33 ([4.2], KAFKA-19233): a known member at epoch 3 re-joins with HB(0) under the same member id ->
    success, the full Assignment returned, its record kept. Re-joining while UNREVOKED_PARTITIONS reports owning
    nothing, so its revocation is done: it moves to the assignment epoch with what it keeps, and the partitions it
    gave up go to the member waiting for them."""
    h = ConsumerHarness()
    member_at_epoch_3(h)
    result = h.ok(h.cjoin("m"))
    assert result.member_epoch == 3
    assert h.named(result.assignment) == ALL
    assert h.epochs() == (3, 3)
    assert h.ok(h.hb("m", 3)).member_epoch == 3  # and heartbeats on at that epoch

    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.ok(h.cjoin("b"))
    kept = h.named(h.ok(h.hb("a", 1)).assignment)
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    result = h.ok(h.cjoin("a"))
    assert (result.member_epoch, h.named(result.assignment)) == (2, kept)
    assert h.member("a").state is MemberState.STABLE and h.rebalance_due("a") is None
    assert h.ok(h.hb("b", 2)).assignment is not None and h.cstate() is ConsumerGroupState.STABLE


def test_item_34_a_fenced_heartbeat_does_not_refresh_the_session() -> None:
    """Item 34: after FENCED_MEMBER_EPOCH the session timer is not refreshed: without further heartbeats the member
    is removed one session timeout after its last successful heartbeat (4.15)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    h.ok(h.cjoin("other", names=["absent"]))
    due = h.session_due("m")
    h.advance(SESSION_MS - 100)
    fenced(h.hb("m", 7))
    assert h.session_due("m") == due
    h.advance(99)
    assert "m" in h.cgroup().members
    h.advance(1)
    assert "m" not in h.cgroup().members
    assert h.hb("m", 1).error is E.unknown_member_id


def test_item_35_steady_heartbeat() -> None:
    """Item 35: a steady HB with every optional field null -> success, HeartbeatIntervalMs the configured interval,
    Assignment null, no group epoch change; the session moves."""
    h = ConsumerHarness()
    h.ok(h.cjoin("m"))
    h.advance(1_000)
    result = h.hb("m", 1)
    assert result == ConsumerHeartbeatResult(E.none, None, "m", 1, INTERVAL_MS, None)
    assert h.epochs() == (1, 1)
    assert h.session_due("m") == h.clock.now_ms() + SESSION_MS
