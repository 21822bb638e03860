"""Membership and records on the manual clock (sections 3.4, 4.2, 4.4 and 8.2 of the KIP-932 spec, checklist items
51-54): leaving or being expired from the group does not touch share sessions or records; the share-partition state
outlives every member; ShareFetch does not check membership."""

from __future__ import annotations

from broker.coordinator.modern.share.partition import RecordState
from broker.coordinator.modern.share.state import ShareGroupState
from tests.coordinator.share.harness import (
    ACCEPT,
    LOCK_MS,
    SESSION_MS,
    E,
    ShareHarness,
    acquired,
    offsets,
    share_config,
)


def test_leaving_keeps_the_records_locked_until_the_lock() -> None:
    """Item 51: HB(-1) without closing the share session -> the member's acquired records stay ACQUIRED (by it)
    until their lock expires; its session goes on."""
    h = ShareHarness()
    h.sjoin("m")
    h.sjoin("n")
    h.produce(2)
    h.fetch("m")
    assert h.shb("m", -1).error is E.none
    assert h.spart().records[0].state is RecordState.ACQUIRED and h.spart().records[0].member_id == "m"
    assert h.share.sessions.get("share-group", "m") is not None
    assert acquired(h.fetch("n")) == []
    h.advance(LOCK_MS)
    assert acquired(h.fetch("n")) == [(0, 1, 2)]


def test_leaving_then_closing_the_session_releases_at_once() -> None:
    """Item 51: ... or until the session closes (here ShareFetch -1, as a client's close() sends it)."""
    h = ShareHarness()
    h.sjoin("m")
    h.produce(2)
    h.fetch("m")
    h.shb("m", -1)
    h.fetch("m", epoch=-1)
    assert [r.state for _, r in h.spart().held()] == [RecordState.AVAILABLE] * 2


def test_an_empty_group_keeps_its_share_partition_state() -> None:
    """Item 52: all members leave, a new member joins later -> it resumes at the SPSO: unacknowledged records come
    again with their delivery counts, acknowledged ones never."""
    h = ShareHarness()
    h.sjoin("a")
    h.produce(4)
    h.fetch("a")
    h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,))]})
    h.fetch("a", epoch=-1)
    h.shb("a", -1)
    assert h.sstate() is ShareGroupState.EMPTY
    h.advance(60_000)
    h.sjoin("b")
    assert acquired(h.fetch("b")) == [(2, 3, 2)]
    h.produce(1)
    assert acquired(h.fetch("b")) == [(4, 4, 1)]
    assert h.spart().start_offset == 2


def test_an_expired_group_keeps_its_share_partition_state() -> None:
    """Item 52 through session timeouts: the group empties, the state stays, the SPSO is where it was."""
    h = ShareHarness()
    h.sjoin("a")
    h.produce(3)
    h.fetch("a")
    h.acknowledge("a", {("t", 0): [(0, 0, (ACCEPT,))]}, epoch=-1)
    h.advance(SESSION_MS)
    assert "a" not in h.sgroup().members
    h.sjoin("b")
    assert acquired(h.fetch("b")) == [(1, 2, 2)]


def test_fetch_without_membership_acquires() -> None:
    """Item 53: a member id that is not in the group, even a group that does not exist as a share group, fetches
    and acquires (Kafka checks no membership in ShareFetch)."""
    h = ShareHarness()
    h.sjoin("member")
    h.produce(3)
    stranger = h.fetch("stranger", max_records=1)
    assert stranger.error is E.none and offsets(stranger) == [0, 1, 2]
    assert "stranger" not in h.sgroup().members
    h.coordinator.group_configs.replace("no-such-group", {"share.auto.offset.reset": "earliest"})
    elsewhere = h.fetch("anyone", group_id="no-such-group")
    assert elsewhere.error is E.none and offsets(elsewhere) == [0, 1, 2]
    assert "no-such-group" not in h.coordinator._registry.share_groups
    assert h.share.partitions.get(("no-such-group", h.tid("t"), 0)) is not None


def test_fetch_of_a_partition_not_assigned_to_the_member() -> None:
    """Item 53: nor does it check the assignment: a member fetches a partition assigned to another one."""
    h = ShareHarness(topics={"t": 2})
    h.sjoin("a")
    h.sjoin("b")
    for member in ("a", "b"):
        h.shb(member, h.sgroup().members[member].member_epoch)
    (mine,) = h.sassigned("a")["t"]
    other = 1 - mine
    h.produce(1, partition=other)
    assert offsets(h.fetch("a", [("t", other)]), other) == [0]


def test_expired_member_keeps_its_share_session() -> None:
    """Item 54: a member removed by session timeout keeps its share session and its records; its fetches and
    acknowledgements go on working until it re-joins (here the lock outlasts the group session)."""
    h = ShareHarness(config=share_config(share_record_lock_duration_ms=2 * SESSION_MS))
    h.sjoin("m")
    h.produce(2)
    h.fetch("m")
    h.advance(SESSION_MS)
    assert "m" not in h.sgroup().members
    assert h.spart().records[0].state is RecordState.ACQUIRED
    assert h.shb("m", 1).error is E.unknown_member_id
    h.produce(1)
    answer = h.fetch("m", acks={("t", 0): [(0, 1, (ACCEPT,))]})
    assert answer.error is E.none and answer.partitions[0].acknowledge_error is E.none
    assert acquired(answer) == [(2, 2, 1)]
    rejoined = h.shb("m", 0, ("t",))
    assert rejoined.error is E.none
    assert h.fetch("m").error is E.none  # the same session, its epoch continuing
