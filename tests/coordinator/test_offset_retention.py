"""Offset retention and the expiration sweep (spec 13.2, 16; checklist item 149 from the sweep's side).

Setup used by most tests: offsets.retention.minutes = 1 (60 s) and offsets.retention.check.interval.ms = 10 s,
with the coordinator created at T0, so sweeps run at T0 + 10 s, T0 + 20 s, ...

Not applicable: "offsets with pending transactional commits never expire" (no transactions in this broker);
"deleting a topic deletes its offsets" (topic deletion is not a coordinator operation here).
"""

from __future__ import annotations

from broker.coordinator.classic.member import Protocols
from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import CommitRequest, JoinResult, PartitionCommit
from broker.timing.deferred import Deferred
from tests.coordinator.harness import GROUP, PROTOCOLS, E, Harness

RETENTION_MS = 60_000
INTERVAL_MS = 10_000
LONG_SESSION_MS = 1_800_000
LONG_REBALANCE_MS = 1_000_000


def harness() -> Harness:
    return Harness(
        config=GroupConfig(
            initial_rebalance_delay_ms=0,
            offsets_retention_minutes=1,
            offsets_retention_check_interval_ms=INTERVAL_MS,
        )
    )


def at(h: Harness, t0: int, offset_ms: int) -> None:
    """Move the clock to T0 + offset_ms, firing every sweep on the way."""
    target = t0 + offset_ms
    assert target >= h.clock.now_ms()
    h.advance(target - h.clock.now_ms())


def stored(h: Harness, group_id: str = GROUP) -> set[tuple[str, int]]:
    group = h.coordinator.groups.get(group_id)
    return set() if group is None else set(group.offsets)


def long_lived_group(
    h: Harness, size: int = 1, *, protocol_type: str = "consumer", protocols: Protocols = PROTOCOLS
) -> list[str]:
    return h.stable_group(
        size,
        session_ms=LONG_SESSION_MS,
        rebalance_ms=LONG_REBALANCE_MS,
        protocol_type=protocol_type,
        protocols=protocols,
    )


# -- the sweep itself ----------------------------------------------------------------


def test_sweep_runs_every_check_interval() -> None:
    """An Empty group without offsets lives until the next sweep, and sweeps repeat every interval."""
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 1)
    first = h.join("", session_ms=30_000)  # KIP-394 first step: Empty group, no members, no offsets
    assert first.value.error is E.member_id_required
    assert h.state() is GroupState.EMPTY
    at(h, t0, INTERVAL_MS - 1)
    assert GROUP in h.coordinator.groups
    at(h, t0, INTERVAL_MS)
    assert GROUP not in h.coordinator.groups
    # the pending member coming back finds no group
    second = h.join(first.value.member_id, session_ms=30_000)
    assert second.value.error is E.unknown_member_id
    assert GROUP not in h.coordinator.groups
    # a new one is collected by the following sweep, not earlier
    at(h, t0, INTERVAL_MS + 1)
    assert h.join("", group_id="g2").value.error is E.member_id_required
    at(h, t0, 2 * INTERVAL_MS - 1)
    assert "g2" in h.coordinator.groups
    at(h, t0, 2 * INTERVAL_MS)
    assert "g2" not in h.coordinator.groups


def test_default_retention_is_seven_days_swept_every_ten_minutes() -> None:
    h = Harness()
    t0 = h.clock.now_ms()
    assert h.config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    at(h, t0, 604_800_000 - 1)  # the sweep at 1007 * 10 min sees 6 days 23:50 of age
    assert stored(h) == {("t", 0)}
    at(h, t0, 604_800_000)  # 1008 * 10 min: exactly the retention
    assert GROUP not in h.coordinator.groups


# -- simple groups: base = commit timestamp ---------------------------------------------


def test_simple_group_offsets_expire_by_commit_time_then_group_is_deleted() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 5_000)
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    at(h, t0, 25_000)
    assert h.commit({("t", 1): 2}) == {("t", 1): E.none}
    at(h, t0, 69_999)
    assert stored(h) == {("t", 0), ("t", 1)}
    at(h, t0, 70_000)  # ("t", 0) is 65 s old, ("t", 1) 45 s
    assert stored(h) == {("t", 1)}
    assert h.state() is GroupState.EMPTY
    at(h, t0, 89_999)  # ("t", 1) was 55 s old at the 80 s sweep
    assert stored(h) == {("t", 1)}
    at(h, t0, 90_000)
    assert GROUP not in h.coordinator.groups
    assert h.coordinator.list_groups() == (E.none, ())
    assert h.coordinator.fetch_offsets(GROUP, [("t", [1])]).topics[0][1][0].offset == -1


def test_simple_group_retention_boundary_is_inclusive() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, INTERVAL_MS)  # the sweep at 10 s has already run
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    at(h, t0, 69_999)
    assert stored(h) == {("t", 0)}
    at(h, t0, 70_000)  # now - commit == retention: expired
    assert GROUP not in h.coordinator.groups


def test_simple_group_recommit_restarts_the_retention() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 5_000)
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    at(h, t0, 50_000)
    assert h.commit({("t", 0): 2}) == {("t", 0): E.none}
    at(h, t0, 109_999)
    assert stored(h) == {("t", 0)}
    assert h.group().offsets[("t", 0)].offset == 2
    at(h, t0, 110_000)
    assert GROUP not in h.coordinator.groups


def test_simple_group_v1_commit_timestamp_is_the_base() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 30_000)
    request = CommitRequest(GROUP, (("t", (PartitionCommit(0, 1, commit_timestamp_ms=t0 - 40_000),)),), api_version=1)
    assert h.coordinator.commit_offsets(request) == (("t", ((0, E.none),)),)
    at(h, t0, 39_999)
    assert stored(h) == {("t", 0)}
    at(h, t0, 40_000)  # 80 s after the client-given timestamp
    assert GROUP not in h.coordinator.groups


# -- Empty groups with a protocol type: base = time the group became Empty --------------


def test_empty_group_offsets_expire_from_the_state_timestamp() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    at(h, t0, 1_000)
    assert h.commit({("topic", 0): 5}, generation_id=1, member_id=member) == {("topic", 0): E.none}
    at(h, t0, 100_000)  # subscribed topic of a Stable group: kept far beyond the retention
    assert stored(h) == {("topic", 0)}
    assert h.leave(member).members[0].error is E.none
    assert h.state() is GroupState.EMPTY
    assert h.group().state_timestamp_ms == t0 + 100_000
    at(h, t0, 159_999)
    assert stored(h) == {("topic", 0)}
    assert h.state() is GroupState.EMPTY
    at(h, t0, 160_000)  # 60 s after the group became Empty
    assert GROUP not in h.coordinator.groups


def test_empty_group_base_is_the_state_timestamp_even_for_later_commits() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.leave(member).members[0].error is E.none
    assert h.group().state_timestamp_ms == t0
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    at(h, t0, 55_000)
    assert h.commit({("t", 1): 2}) == {("t", 1): E.none}
    at(h, t0, 59_999)
    assert stored(h) == {("t", 0), ("t", 1)}
    at(h, t0, 60_000)  # both go, though ("t", 1) is only 5 s old
    assert GROUP not in h.coordinator.groups


def test_empty_group_that_becomes_stable_again_stops_the_state_clock() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.leave(member).members[0].error is E.none
    assert h.commit({("topic", 0): 1, ("t", 0): 1}) == {("topic", 0): E.none, ("t", 0): E.none}
    at(h, t0, 50_000)
    (member,) = long_lived_group(h)  # back to Stable (generation 3) before the retention ran out
    assert h.group().generation_id == 3
    at(h, t0, 59_999)
    assert stored(h) == {("topic", 0), ("t", 0)}
    at(h, t0, 60_000)  # Stable consumer group: the unsubscribed "t" expires by commit time (T0)...
    assert stored(h) == {("topic", 0)}
    at(h, t0, 500_000)  # ...the subscribed "topic" never does
    assert stored(h) == {("topic", 0)}
    assert h.state() is GroupState.STABLE
    assert h.group().has_member(member)


# -- Stable consumer groups: only unsubscribed topics, by commit time ---------------------


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.group().subscribed_topics == frozenset({"topic"})
    at(h, t0, 1_000)
    assert h.commit({("topic", 0): 1, ("other", 0): 2}, generation_id=1, member_id=member) == {
        ("topic", 0): E.none,
        ("other", 0): E.none,
    }
    at(h, t0, 30_000)
    assert h.commit({("other", 1): 3}, generation_id=1, member_id=member) == {("other", 1): E.none}
    at(h, t0, 69_999)
    assert stored(h) == {("topic", 0), ("other", 0), ("other", 1)}
    at(h, t0, 70_000)
    assert stored(h) == {("topic", 0), ("other", 1)}
    at(h, t0, 89_999)
    assert stored(h) == {("topic", 0), ("other", 1)}
    at(h, t0, 90_000)
    assert stored(h) == {("topic", 0)}
    at(h, t0, 1_000_000)
    assert stored(h) == {("topic", 0)}
    assert h.state() is GroupState.STABLE


def test_stable_consumer_group_with_unknown_subscription_expires_nothing() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h, protocols=(("range", b"\xff\xff"),))
    assert h.group().subscribed_topics is None
    assert h.commit({("other", 0): 2}, generation_id=1, member_id=member) == {("other", 0): E.none}
    at(h, t0, 500_000)
    assert stored(h) == {("other", 0)}


def test_stable_non_consumer_group_expires_nothing() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h, protocol_type="connect")
    assert h.commit({("other", 0): 2}, generation_id=1, member_id=member) == {("other", 0): E.none}
    assert h.commit({("x", 0): 2}, generation_id=1, member_id=member, retention_ms=1_000, version=2) == {
        ("x", 0): E.none
    }
    at(h, t0, 500_000)
    assert stored(h) == {("other", 0), ("x", 0)}


def test_rebalancing_consumer_group_expires_nothing() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    leader, follower = long_lived_group(h, 2)
    assert h.commit({("other", 0): 2}, generation_id=1, member_id=leader) == {("other", 0): E.none}
    # follower rejoins with a changed subscription: PreparingRebalance, waiting for the leader
    changed = (("range", b"\x00\x00\x00\x00\x00\x00"),)
    rejoin = h.join(follower, session_ms=LONG_SESSION_MS, rebalance_ms=LONG_REBALANCE_MS, protocols=changed)
    assert not rejoin.done
    assert h.state() is GroupState.PREPARING_REBALANCE
    at(h, t0, 200_000)
    assert stored(h) == {("other", 0)}
    leader_join: Deferred[JoinResult] = h.join(
        leader, session_ms=LONG_SESSION_MS, rebalance_ms=LONG_REBALANCE_MS, protocols=changed
    )
    assert leader_join.value.error is E.none
    assert h.state() is GroupState.COMPLETING_REBALANCE
    at(h, t0, 400_000)
    assert stored(h) == {("other", 0)}
    assert h.state() is GroupState.COMPLETING_REBALANCE


# -- explicit expire timestamps (OffsetCommit v2-4 RetentionTimeMs) --------------------------


def test_explicit_retention_shorter_than_the_configured_one() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 1_000)
    assert h.commit({("t", 0): 1}, retention_ms=5_000, version=2) == {("t", 0): E.none}
    assert h.commit({("t", 1): 1}) == {("t", 1): E.none}
    assert h.group().offsets[("t", 0)].expire_timestamp_ms == t0 + 6_000
    at(h, t0, 9_999)
    assert stored(h) == {("t", 0), ("t", 1)}
    at(h, t0, 10_000)  # first sweep after the expire timestamp
    assert stored(h) == {("t", 1)}


def test_explicit_retention_longer_than_the_configured_one() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 1_000)
    assert h.commit({("t", 0): 1}, retention_ms=200_000, version=3) == {("t", 0): E.none}
    at(h, t0, 200_999)  # the configured 60 s retention does not apply
    assert stored(h) == {("t", 0)}
    at(h, t0, 210_000)  # expire timestamp 201 s, swept at 210 s
    assert GROUP not in h.coordinator.groups


def test_explicit_expire_timestamp_boundary_is_inclusive() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    at(h, t0, 1_000)
    assert h.commit({("t", 0): 1}, retention_ms=19_000, version=4) == {("t", 0): E.none}
    at(h, t0, 19_999)
    assert stored(h) == {("t", 0)}
    at(h, t0, 20_000)  # now == expire timestamp
    assert GROUP not in h.coordinator.groups


def test_explicit_retention_in_an_empty_group_overrides_the_state_base() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.leave(member).members[0].error is E.none
    assert h.commit({("t", 0): 1}, retention_ms=100_000, version=2) == {("t", 0): E.none}
    assert h.commit({("t", 1): 1}) == {("t", 1): E.none}
    at(h, t0, 60_000)
    assert stored(h) == {("t", 0)}
    at(h, t0, 99_999)
    assert stored(h) == {("t", 0)}
    at(h, t0, 100_000)
    assert GROUP not in h.coordinator.groups


def test_explicit_retention_in_a_stable_group_never_expires_subscribed_topics() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.commit(
        {("topic", 0): 1, ("other", 0): 2}, generation_id=1, member_id=member, retention_ms=5_000, version=2
    ) == {("topic", 0): E.none, ("other", 0): E.none}
    at(h, t0, 10_000)
    assert stored(h) == {("topic", 0)}
    at(h, t0, 500_000)
    assert stored(h) == {("topic", 0)}


# -- group deletion by the sweep --------------------------------------------------------------


def test_empty_group_without_offsets_is_deleted_by_the_next_sweep() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    at(h, t0, 12_000)
    assert h.leave(member).members[0].error is E.none
    at(h, t0, 19_999)
    assert h.state() is GroupState.EMPTY
    assert [g.group_id for g in h.coordinator.list_groups()[1]] == [GROUP]
    at(h, t0, 20_000)
    assert GROUP not in h.coordinator.groups
    assert h.coordinator.list_groups() == (E.none, ())
    described = h.coordinator.describe(GROUP)
    assert (described.error, described.state, described.members) == (E.none, "Dead", ())
    assert h.coordinator.delete_groups([GROUP]) == ((GROUP, E.group_id_not_found),)


def test_non_empty_groups_without_offsets_are_not_deleted() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    long_lived_group(h)
    other = h.join_new(group_id="rebalancing", session_ms=LONG_SESSION_MS, rebalance_ms=LONG_REBALANCE_MS)
    at(h, t0, 0)
    assert other.value.error is E.none
    assert h.state("rebalancing") is GroupState.COMPLETING_REBALANCE
    at(h, t0, 300_000)
    assert h.state() is GroupState.STABLE
    assert h.state("rebalancing") is GroupState.COMPLETING_REBALANCE


def test_group_recreated_after_expiry_starts_fresh() -> None:
    h = harness()
    t0 = h.clock.now_ms()
    (member,) = long_lived_group(h)
    assert h.leave(member).members[0].error is E.none
    assert h.group().generation_id == 2
    at(h, t0, INTERVAL_MS)
    assert GROUP not in h.coordinator.groups
    assert h.commit({("t", 0): 1}) == {("t", 0): E.none}
    group = h.group()
    assert (group.generation_id, group.protocol_type, group.state) == (0, None, GroupState.EMPTY)
