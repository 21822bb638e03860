"""ShareGroupHeartbeat's hot path (``GroupCoordinator.share_heartbeat_steady``, ``ShareGroups.steady``): it answers
only a beat the full ``heartbeat`` would answer without changing anything but the member's session, and declines
(None, nothing touched) everything else, which then goes the full way."""

from __future__ import annotations

import random
from typing import Any

import pytest

from broker.coordinator.modern.share import durable
from broker.coordinator.modern.share.messages import ShareHeartbeatResult
from tests.coordinator.share.harness import GROUP, INTERVAL_MS, SESSION_MS, E, ShareHarness

CLIENT, HOST = "c", "/127.0.0.1"  # the harness's full heartbeats come from this client


@pytest.fixture
def h() -> ShareHarness:
    return ShareHarness(topics={"t": 1, "u": 2})


def steady(h: ShareHarness, member_id: str, epoch: int, client_id: str = CLIENT, host: str = HOST) -> int | None:
    return h.coordinator.share_heartbeat_steady(GROUP, member_id, epoch, client_id, host)


def snapshot(h: ShareHarness) -> Any:
    """Everything a heartbeat could change, the session timers aside."""
    group = h.share.groups.groups.get(GROUP)
    if group is None:
        return None
    return (
        durable.group_value(group),
        group.metadata_version,
        dict(group.subscription_metadata),
        {m: dict(t) for m, t in group.targets.items()},
        {m: durable.member_value(member) for m, member in group.members.items()},
    )


def test_a_settled_member_is_answered_and_its_session_moves(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.advance(SESSION_MS - 100)
    assert steady(h, "m1", 1) == INTERVAL_MS
    assert h.share_session_due("m1") == h.clock.now_ms() + SESSION_MS
    assert h.sgroup().members["m1"].last_heartbeat_ms == h.clock.now_ms()
    h.advance(SESSION_MS - 1)
    assert "m1" in h.sgroup().members
    h.advance(1)
    assert "m1" not in h.sgroup().members  # the moved deadline still expires the member


def test_the_interval_is_the_groups_own(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.coordinator.group_configs.replace(GROUP, {"share.heartbeat.interval.ms": "700"})
    assert steady(h, "m1", 1) == 700 == h.shb("m1", 1).heartbeat_interval_ms


def test_a_new_session_timeout_rearms_the_session_with_it(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.coordinator.group_configs.replace(GROUP, {"share.session.timeout.ms": str(SESSION_MS + 5_000)})
    assert steady(h, "m1", 1) == INTERVAL_MS
    assert h.share_session_due("m1") == h.clock.now_ms() + SESSION_MS + 5_000
    assert h.sgroup().members["m1"].session_timeout_ms == SESSION_MS + 5_000


def test_nothing_but_the_current_epoch_of_a_known_member_is_answered(h: ShareHarness) -> None:
    h.sjoin("m1")
    before = snapshot(h)
    assert steady(h, "m1", 2) is None  # from the future: FENCED_MEMBER_EPOCH the full way
    assert steady(h, "nobody", 1) is None  # UNKNOWN_MEMBER_ID
    assert h.coordinator.share_heartbeat_steady("other-group", "m1", 1, CLIENT, HOST) is None
    assert steady(h, "m1", 1, client_id="another-client") is None  # the full way stores the new one
    assert steady(h, "m1", 1, host="/10.0.0.9") is None
    assert snapshot(h) == before


def test_a_moved_group_goes_the_full_way_until_the_member_took_the_new_epoch(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.sjoin("m2")  # the group epoch moves to 2: m1 is at 1, its previous epoch still accepted the full way
    assert steady(h, "m1", 1) is None
    full = h.shb("m1", 1)
    assert (full.error, full.member_epoch, full.assignment) == (E.none, 2, None)  # the same partition, new epoch
    assert steady(h, "m1", 1) is None  # its previous epoch: the full path answers it
    assert steady(h, "m1", 2) == INTERVAL_MS


def test_new_partitions_of_a_subscribed_topic_go_the_full_way(h: ShareHarness) -> None:
    h.sjoin("m1", ("u",))
    h.add_partitions("u", 3)
    assert steady(h, "m1", 1) is None
    full = h.shb("m1", 1)
    assert full.member_epoch == 2 and h.named(full.assignment) == {"u": {0, 1, 2}}
    assert steady(h, "m1", 2) == INTERVAL_MS


def test_a_catalog_change_elsewhere_goes_the_full_way_once(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.create_topic("elsewhere", 1)
    assert steady(h, "m1", 1) is None
    assert h.shb("m1", 1).member_epoch == 1  # nothing it subscribes to moved: the same epoch
    assert steady(h, "m1", 1) == INTERVAL_MS


def test_an_inactive_coordinator_declines(h: ShareHarness) -> None:
    h.sjoin("m1")
    h.coordinator.shutdown()
    assert steady(h, "m1", 1) is None


def test_a_failure_inside_is_counted_and_declined(h: ShareHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.sjoin("m1")

    def broken(*args: object) -> int:
        raise RuntimeError("bug")

    monkeypatch.setattr(h.share.groups, "heartbeat_interval_ms", broken)
    failures = h.coordinator.failed_operations
    assert steady(h, "m1", 1) is None
    assert h.coordinator.failed_operations == failures + 1


def test_whenever_it_answers_the_full_heartbeat_answers_the_same_and_changes_nothing() -> None:
    """Random joins, leaves, resubscriptions, expiries, topic changes and group configs: each time the hot path
    answers a member, the full heartbeat right after it gives the same answer (error none, the same epoch and
    interval, no assignment) and leaves the group's state (its durable values, target and metadata) as it was."""
    rng = random.Random(932)
    h = ShareHarness(topics={"t": 1, "u": 2})
    epochs: dict[str, int] = {}
    answered = declined = 0
    for step in range(600):
        op = rng.random()
        members = sorted(epochs)
        if op < 0.1 or not members:
            member = f"m{rng.randrange(8)}"
            if member not in epochs:
                epochs[member] = h.sjoin(member, rng.choice([("t",), ("u",), ("t", "u")])).member_epoch
        elif op < 0.13:
            member = rng.choice(members)
            h.shb(member, -1)
            del epochs[member]
        elif op < 0.16:
            member = rng.choice(members)
            result = h.shb(member, epochs[member], rng.choice([("t",), ("u",), ("t", "u")]))
            epochs[member] = result.member_epoch
        elif op < 0.18:
            h.add_partitions("u", h.catalog.by_name("u").partitions + 1)  # type: ignore[union-attr]
        elif op < 0.2:
            h.create_topic(f"x{step}", 1)
        elif op < 0.22:
            interval = rng.choice([INTERVAL_MS, 700])
            h.coordinator.group_configs.replace(GROUP, {"share.heartbeat.interval.ms": str(interval)})
        else:
            member = rng.choice(members)
            epoch = epochs[member]
            interval = steady(h, member, epoch)
            if interval is None:
                declined += 1
                result = h.shb(member, epoch)
                assert result.error is E.none, result
                epochs[member] = result.member_epoch
            else:
                answered += 1
                before = snapshot(h)
                full = h.shb(member, epoch)
                assert full == ShareHeartbeatResult(E.none, None, member, epoch, interval, None), step
                assert snapshot(h) == before, step
        h.advance(rng.choice([0, 10, 100]))
        for gone in [m for m in epochs if m not in h.sgroup().members]:
            del epochs[gone]  # expired: never here, the sessions are longer than the run, but kept honest
    assert answered > 200 and declined > 30, (answered, declined)
