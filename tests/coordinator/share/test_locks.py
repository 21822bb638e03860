"""Acquisition locks and delivery counts on the manual clock (sections 6.3, 6.6 and 8.5 of the KIP-932 spec,
checklist items 34 and 36-38): expiry exactly at the lock duration and never extended by heartbeats or fetches,
the delivery limit through RELEASE and through expiry, and RENEW (v2)."""

from __future__ import annotations

from typing import Any

from broker.coordinator.modern.share.partition import RecordState
from broker.timing.deferred import Deferred
from tests.coordinator.share.harness import (
    ACCEPT,
    GROUP,
    LOCK_MS,
    RELEASE,
    RENEW,
    E,
    ShareHarness,
    acquired,
    offsets,
    share_config,
)


def state(h: ShareHarness, offset: int) -> tuple[RecordState, int, str | None]:
    record = h.spart().records[offset]
    return record.state, record.delivery_count, record.member_id


# -- item 34: lock expiry --------------------------------------------------------------------------------------------


def test_lock_expires_exactly_at_the_duration() -> None:
    """Item 34: unacknowledged records stay ACQUIRED until the lock duration (not before), then AVAILABLE with the
    same delivery count; the next delivery counts +1."""
    h = ShareHarness()
    h.produce(3)
    assert acquired(h.fetch("a")) == [(0, 2, 1)]
    h.advance(LOCK_MS - 1)
    assert state(h, 0) == (RecordState.ACQUIRED, 1, "a")
    assert acquired(h.fetch("b")) == []
    h.advance(1)
    assert [state(h, o) for o in (0, 1, 2)] == [(RecordState.AVAILABLE, 1, None)] * 3
    assert acquired(h.fetch("b")) == [(0, 2, 2)]
    assert h.share.partitions.locks and all(a.member_id == "b" for _, a in h.share.partitions.locks.values())


def test_lock_not_extended_by_heartbeats_or_fetches() -> None:
    """Item 34: heartbeats and fetches of the holder do not move the lock's deadline."""
    h = ShareHarness()
    h.sjoin("a")
    h.produce(2)
    h.fetch("a")
    for _ in range(4):
        h.advance(LOCK_MS // 5)
        assert h.shb("a", 1).error is E.none
        assert acquired(h.fetch("a")) == []  # nothing new, and no renewal of what it holds
    h.advance(LOCK_MS - 4 * (LOCK_MS // 5) - 1)
    assert state(h, 0)[0] is RecordState.ACQUIRED
    h.advance(1)
    assert state(h, 0)[0] is RecordState.AVAILABLE


def test_each_acquisition_has_its_own_lock() -> None:
    """Item 34: records acquired by a later fetch expire a lock duration after that fetch, not the first one."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("a")
    h.advance(2_000)
    h.produce(1)
    assert acquired(h.fetch("a")) == [(1, 1, 1)]
    h.advance(LOCK_MS - 2_000)
    assert state(h, 0)[0] is RecordState.AVAILABLE and state(h, 1)[0] is RecordState.ACQUIRED
    h.advance(2_000)
    assert state(h, 1)[0] is RecordState.AVAILABLE


def test_lock_duration_is_read_at_acquisition_time() -> None:
    """Item 34 / 6.4 step 5: a changed share.record.lock.duration.ms applies to later acquisitions only, and the
    answers report the group's current duration."""
    h = ShareHarness()
    h.produce(1)
    assert h.fetch("a").lock_duration_ms == LOCK_MS
    h.coordinator.group_configs.replace(GROUP, {"share.auto.offset.reset": "earliest",
                                                "share.record.lock.duration.ms": "2000"})  # fmt: skip
    h.produce(1)
    later = h.fetch("a")
    assert later.lock_duration_ms == 2_000 and acquired(later) == [(1, 1, 1)]
    h.advance(2_000)
    assert state(h, 0)[0] is RecordState.ACQUIRED and state(h, 1)[0] is RecordState.AVAILABLE
    h.advance(LOCK_MS - 2_000)
    assert state(h, 0)[0] is RecordState.AVAILABLE


def test_expiry_wakes_a_parked_fetch() -> None:
    """Item 34 with long polling: a fetch parked for longer than the lock receives the expired records."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("a")
    h.fetch("b")
    parked = h.fetch_deferred("b", max_wait_ms=3 * LOCK_MS)
    assert isinstance(parked, Deferred) and not parked.done
    h.advance(LOCK_MS - 1)
    assert not parked.done
    h.advance(1)
    assert parked.done and acquired(parked.value) == [(0, 1, 2)]


def test_a_lock_of_acknowledged_records_is_dropped() -> None:
    """Item 34: once every record of an acquisition is finished its timer goes (nothing fires later)."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("a")
    assert len(h.share.partitions.locks) == 1
    h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,))]})
    assert h.share.partitions.locks == {}
    h.advance(LOCK_MS)
    assert h.spart().start_offset == 2 and h.spart().records == {}


def test_an_acknowledgement_drops_only_its_own_partitions_finished_locks() -> None:
    """The locks are kept by share-partition too (``SharePartitions._locks_of``): acknowledging one partition's
    records drops that partition's lock and leaves the other partition's, which still expires on time."""
    h = ShareHarness(topics={"t": 2})
    h.produce(2, partition=0)
    h.produce(2, partition=1)
    h.fetch("a", [("t", 0), ("t", 1)])
    assert len(h.share.partitions.locks) == 2  # one acquisition a partition
    h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,))]})
    (left,) = h.share.partitions.locks.values()
    assert left[0][2] == 1
    h.advance(LOCK_MS)
    assert h.share.partitions.locks == {} and h.share.partitions._locks_of == {}
    assert state_of(h, 1, 0) == (RecordState.AVAILABLE, 1, None)


def state_of(h: ShareHarness, partition: int, offset: int) -> tuple[RecordState, int, str | None]:
    record = h.spart("t", partition).records[offset]
    return record.state, record.delivery_count, record.member_id


# -- items 36 and 37: the delivery limit -------------------------------------------------------------------------


def test_release_every_time_delivers_five_times_then_archives() -> None:
    """Item 36: counts 1,2,3,4,5 with limit 5, then ARCHIVED; the records after it keep flowing."""
    h = ShareHarness()
    h.produce(1)
    counts = [c for _, _, c in acquired(h.fetch("m"))]
    for _ in range(4):
        answer = h.fetch("m", acks={("t", 0): [(0, 0, (RELEASE,))]})
        assert answer.partitions[0].acknowledge_error is E.none
        counts += [c for _, _, c in acquired(answer)]
    assert counts == [1, 2, 3, 4, 5]
    h.produce(2)
    last = h.fetch("m", acks={("t", 0): [(0, 0, (RELEASE,))]})
    assert acquired(last) == [(1, 2, 1)]  # 0 is archived, the next records are delivered
    assert h.spart().start_offset == 1 and 0 not in h.spart().records
    assert h.spart().archived_total == 1


def test_delivery_limit_is_configurable() -> None:
    """Item 36 with group.share.delivery.count.limit 2."""
    h = ShareHarness(config=share_config(share_delivery_count_limit=2))
    h.produce(1)
    h.fetch("m")
    assert acquired(h.fetch("m", acks={("t", 0): [(0, 0, (RELEASE,))]})) == [(0, 0, 2)]
    assert acquired(h.fetch("m", acks={("t", 0): [(0, 0, (RELEASE,))]})) == []
    assert h.spart().start_offset == 1


def test_expiry_at_the_limit_archives() -> None:
    """Item 37: a record whose lock expires at the delivery limit is ARCHIVED, not made available again."""
    h = ShareHarness()
    h.produce(1)
    h.produce(1)
    counts = []
    for _ in range(5):
        counts += [c for o0, _, c in acquired(h.fetch("m", max_records=1, record_limit=True)) if o0 == 0]
        h.advance(LOCK_MS)
    assert counts == [1, 2, 3, 4, 5]
    assert 0 not in h.spart().records and h.spart().start_offset >= 1
    assert acquired(h.fetch("m", max_records=1, record_limit=True)) == [(1, 1, 1)]


def test_session_release_at_the_limit_archives() -> None:
    """Item 37's sibling (6.8): a session's end at the limit archives too."""
    h = ShareHarness(config=share_config(share_delivery_count_limit=2))
    h.produce(1)
    h.fetch("m", connection=1)
    h.advance(LOCK_MS)
    assert acquired(h.fetch("m", connection=1)) == [(0, 0, 2)]
    h.share.connection_closed(1)
    assert h.spart().start_offset == 1 and h.spart().records == {}


# -- item 38: RENEW (v2) -------------------------------------------------------------------------------------------


def test_renew_restarts_the_lock() -> None:
    """Item 38: a v2 ShareFetch with IsRenewAck and type RENEW restarts the record's lock at the current duration;
    nothing is fetched and the session epoch still moves."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    h.advance(LOCK_MS - 1_000)
    h.produce(1)
    renewed = h.fetch("m", acks={("t", 0): [(0, 0, (RENEW,))]}, max_records=0, min_bytes=0, max_bytes=0, renew=True)
    assert renewed.error is E.none and renewed.partitions[0].acknowledge_error is E.none
    assert acquired(renewed) == []  # renew requests do not fetch
    h.advance(1_000)
    assert state(h, 0) == (RecordState.ACQUIRED, 1, "m") and state(h, 1)[0] is RecordState.AVAILABLE
    h.advance(LOCK_MS - 1_001)
    assert state(h, 0)[0] is RecordState.ACQUIRED
    h.advance(1)
    assert state(h, 0) == (RecordState.AVAILABLE, 1, None)
    assert h.share.sessions.get(GROUP, "m").epoch == 2  # type: ignore[union-attr]


def test_renew_through_share_acknowledge_and_mixed_types() -> None:
    """Item 38: ShareAcknowledge v2 with IsRenewAck renews; ACCEPT may be mixed into the same request."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m")
    h.advance(LOCK_MS - 1)
    answer = h.acknowledge("m", {("t", 0): [(0, 2, (ACCEPT, RENEW, RENEW))]}, renew=True)
    assert answer.error is E.none and answer.partitions[0].error is E.none
    h.advance(1)
    assert h.spart().start_offset == 1
    assert state(h, 1)[0] is RecordState.ACQUIRED and state(h, 2)[0] is RecordState.ACQUIRED
    h.advance(LOCK_MS)
    assert state(h, 1)[0] is RecordState.AVAILABLE


def test_renew_without_is_renew_ack_is_invalid_request() -> None:
    """Item 38: type 4 without IsRenewAck (or in v1) -> INVALID_REQUEST for that partition, nothing renewed."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("m")
    h.advance(LOCK_MS - 1)
    answer = h.fetch("m", acks={("t", 0): [(0, 0, (RENEW,))]}, max_records=0)
    assert answer.error is E.none and answer.partitions[0].acknowledge_error is E.invalid_request
    acked = h.acknowledge("m", {("t", 0): [(0, 0, (RENEW,))]})
    assert acked.partitions[0].error is E.invalid_request
    h.advance(1)
    assert state(h, 0)[0] is RecordState.AVAILABLE


def test_renew_fetch_must_not_fetch() -> None:
    """Item 38: a v2 renew ShareFetch with MaxRecords > 0 (or MaxWaitMs, MinBytes, MaxBytes > 0, or a partition
    without acknowledgements) -> top-level INVALID_REQUEST, nothing applied, the session epoch unchanged."""
    h = ShareHarness(topics={"t": 2})
    h.produce(1)
    h.fetch("m", [("t", 0), ("t", 1)])
    renew = {("t", 0): [(0, 0, (RENEW,))]}
    zero: dict[str, Any] = {"min_bytes": 0, "max_bytes": 0, "max_records": 0}
    bad: dict[str, Any]
    for bad in ({"max_records": 1}, {"min_bytes": 1}, {"max_bytes": 1}, {"max_wait_ms": 10}):
        answer = h.fetch("m", acks=renew, renew=True, epoch=1, **(zero | bad))
        assert (answer.error, answer.partitions) == (E.invalid_request, []), bad
    unacknowledged = h.fetch("m", [("t", 1)], acks=renew, renew=True, epoch=1, **zero)
    assert unacknowledged.error is E.invalid_request
    assert h.share.sessions.get(GROUP, "m").epoch == 1  # type: ignore[union-attr]
    assert h.fetch("m", acks=renew, renew=True, epoch=1, **zero).error is E.none


def test_renew_of_a_record_not_acquired_is_invalid_record_state() -> None:
    """Item 38 / 6.5: RENEW follows the acknowledgement rules: only the holder's ACQUIRED records."""
    h = ShareHarness()
    h.produce(2)
    assert offsets(h.fetch("a", max_records=1, record_limit=True)) == [0]
    h.fetch("b", max_records=1, record_limit=True)
    zero: dict[str, Any] = {"min_bytes": 0, "max_bytes": 0, "max_records": 0}
    other = h.fetch("a", acks={("t", 0): [(1, 1, (RENEW,))]}, renew=True, **zero)
    assert other.partitions[0].acknowledge_error is E.invalid_record_state
