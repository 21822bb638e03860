"""Acquisition on the manual clock (sections 6.2 and 6.4 of the KIP-932 spec, checklist items 29-33 and 35):
``share.auto.offset.reset``, two members on one partition, MaxRecords against producer batches (batch-optimized and
record-limit), BatchSize, MaxRecords over a request's partitions and the in-flight window limit."""

from __future__ import annotations

from broker.coordinator.modern.share.partition import RecordState
from broker.timing.deferred import Deferred
from tests.coordinator.share.harness import ACCEPT, GROUP, RELEASE, E, ShareHarness, acquired, offsets, share_config
from tests.storage import BASE_TIMESTAMP

HOUR_MS = 3_600_000


# -- item 29: share.auto.offset.reset latest (the default) and earliest ----------------------------------------


def test_latest_by_default_never_delivers_what_was_there() -> None:
    """Item 29: the default (latest) SPSO is the high watermark at the first fetch."""
    h = ShareHarness(reset=None)
    h.produce(3)
    first = h.fetch("m")
    assert first.error is E.none and acquired(first) == []
    assert (h.spart().start_offset, h.spart().end_offset) == (3, 2)
    h.produce(2)
    assert acquired(h.fetch("m")) == [(3, 4, 1)]
    assert acquired(h.fetch("other")) == []  # 0-2 never come


def test_earliest_delivers_from_the_log_start() -> None:
    """Item 29: with earliest the SPSO is the log start offset."""
    h = ShareHarness(reset="earliest")
    h.produce(3)
    h.log().delete_records_before(1)
    assert acquired(h.fetch("m")) == [(1, 2, 1)]
    assert h.spart().start_offset == 1


def test_reset_is_read_once_at_initialisation() -> None:
    """Item 29: the SPSO is fixed by the first fetch; changing the config later does not move it."""
    h = ShareHarness(reset=None)
    h.produce(2)
    h.fetch("m")
    h.coordinator.group_configs.replace(GROUP, {"share.auto.offset.reset": "earliest"})
    assert acquired(h.fetch("m")) == []
    assert h.spart().start_offset == 2


# -- item 30: by_duration ------------------------------------------------------------------------------------------


def test_by_duration_starts_at_the_first_record_inside_the_window() -> None:
    """Item 30: by_duration:PT1H -> SPSO = the first offset whose timestamp is >= now - 1 h."""
    h = ShareHarness(reset="by_duration:PT1H")
    now = h.clock.now_ms()
    assert now == BASE_TIMESTAMP
    h.produce(2, timestamps=[now - 3 * HOUR_MS, now - 2 * HOUR_MS])  # offsets 0, 1: too old
    h.produce(3, timestamps=[now - HOUR_MS - 1, now - HOUR_MS, now - 10])  # offset 3 is exactly now - 1 h
    answer = h.fetch("m")
    assert h.spart().start_offset == 3
    assert acquired(answer) == [(3, 4, 1)]


def test_by_duration_past_every_record_starts_at_the_end() -> None:
    """Item 30: no record inside the window -> the SPSO is the high watermark (nothing delivered)."""
    h = ShareHarness(reset="by_duration:PT10M")
    now = h.clock.now_ms()
    h.produce(2, timestamps=[now - HOUR_MS, now - HOUR_MS + 1])
    assert acquired(h.fetch("m")) == []
    assert h.spart().start_offset == 2


# -- item 31: two members on one partition -------------------------------------------------------------------------


def test_two_members_never_hold_the_same_offset() -> None:
    """Item 31: acquired offsets are exclusive; the records spread over both members."""
    h = ShareHarness()
    for _ in range(6):
        h.produce(2)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for _ in range(3):
        for member in ("a", "b"):
            got = offsets(h.fetch(member, max_records=2))
            assert not set(got) & set(seen["a"] + seen["b"])
            seen[member] += got
    assert sorted(seen["a"] + seen["b"]) == list(range(12))
    assert seen["a"] and seen["b"]
    holders = {o: r.member_id for o, r in h.spart().held()}
    assert all(holders[o] == "a" for o in seen["a"]) and all(holders[o] == "b" for o in seen["b"])


def test_a_second_member_gets_nothing_while_all_is_acquired() -> None:
    """Item 31: nothing acquired by another member is handed out again while its lock runs."""
    h = ShareHarness()
    h.produce(5)
    assert offsets(h.fetch("a")) == [0, 1, 2, 3, 4]
    assert acquired(h.fetch("b")) == []


# -- item 32: MaxRecords against producer batches; record-limit mode ----------------------------------------------


def test_max_records_one_takes_the_whole_producer_batch() -> None:
    """Item 32: batch-optimized acquisition (mode 0) takes the whole 10-record batch for MaxRecords 1."""
    h = ShareHarness()
    h.produce(10)
    h.produce(10)
    answer = h.fetch("m", max_records=1)
    assert acquired(answer) == [(0, 9, 1)]
    assert answer.partitions[0].records  # the stored batch is returned whole
    assert h.spart().next_offset == 10  # the second batch is untouched


def test_record_limit_mode_takes_exactly_max_records() -> None:
    """Item 32: ShareAcquireMode 1 (v2) makes MaxRecords a hard limit; the rest of the batch stays available."""
    h = ShareHarness()
    h.produce(10)
    assert acquired(h.fetch("m", max_records=1, record_limit=True)) == [(0, 0, 1)]
    assert acquired(h.fetch("n", max_records=3, record_limit=True)) == [(1, 3, 1)]
    assert acquired(h.fetch("m", max_records=100, record_limit=True)) == [(4, 9, 1)]


def test_record_limit_mode_also_limits_redeliveries() -> None:
    """Item 32: in record-limit mode, released records come back at most MaxRecords at a time."""
    h = ShareHarness()
    h.produce(4)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(0, 3, (RELEASE,))]})
    assert acquired(h.fetch("n", max_records=2, record_limit=True)) == [(0, 1, 2)]


def test_max_records_is_shared_by_the_request_partitions() -> None:
    """Item 32 / section 8.2: MaxRecords applies to the whole request, and the starting partition rotates."""
    h = ShareHarness(topics={"t": 2})
    for partition in (0, 1):
        for _ in range(4):
            h.produce(1, partition=partition)
    first = h.fetch("m", [("t", 0), ("t", 1)], max_records=3)
    assert (offsets(first, 0), offsets(first, 1)) == ([0, 1, 2], [])
    second = h.fetch("m", max_records=3)  # the rotation starts at partition 1 this time
    assert (offsets(second, 0), offsets(second, 1)) == ([], [0, 1, 2])
    third = h.fetch("m", max_records=3)
    assert (offsets(third, 0), offsets(third, 1)) == ([3], [3])


# -- item 33: BatchSize ----------------------------------------------------------------------------------------------


def test_acquired_records_split_at_batch_size_on_log_batch_boundaries() -> None:
    """Item 33: AcquiredRecords entries of about BatchSize records, cut only where a log batch ends."""
    h = ShareHarness()
    for _ in range(3):
        h.produce(4)  # log batches 0-3, 4-7, 8-11
    assert acquired(h.fetch("m", batch_size=5)) == [(0, 7, 1), (8, 11, 1)]


def test_batch_size_at_or_below_a_log_batch() -> None:
    """Item 33: BatchSize 4 or 1 on 4-record log batches -> one entry a log batch (never cut inside one)."""
    h = ShareHarness()
    for _ in range(3):
        h.produce(4)
    assert acquired(h.fetch("m", batch_size=4)) == [(0, 3, 1), (4, 7, 1), (8, 11, 1)]
    h2 = ShareHarness()
    for _ in range(2):
        h2.produce(4)
    assert acquired(h2.fetch("m", batch_size=1)) == [(0, 3, 1), (4, 7, 1)]
    h3 = ShareHarness()
    for _ in range(3):
        h3.produce(4)
    assert acquired(h3.fetch("m", batch_size=500)) == [(0, 11, 1)]


def test_entries_split_by_delivery_count() -> None:
    """Item 33 / 8.3: one AcquiredRecords entry has one delivery count: a redelivered record and new ones are
    separate entries, in offset order, never overlapping."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    h.produce(2)
    answer = h.fetch("m", acks={("t", 0): [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,))]})
    assert acquired(answer) == [(1, 1, 2), (2, 3, 1)]


# -- item 35: the in-flight window -----------------------------------------------------------------------------------


def in_flight_limit_harness() -> ShareHarness:
    h = ShareHarness(config=share_config(share_partition_max_record_locks=100))
    for _ in range(150):
        h.produce(1)
    return h


def test_in_flight_window_stops_acquisition() -> None:
    """Item 35: SPEO - SPSO + 1 reaching group.share.partition.max.record.locks -> no new offsets; one unfinished
    record at the SPSO pins the window; acknowledging it resumes acquisition."""
    h = in_flight_limit_harness()
    assert offsets(h.fetch("m")) == list(range(100))
    assert h.spart().in_flight() == 100
    assert acquired(h.fetch("m")) == []
    accepted = h.fetch("m", acks={("t", 0): [(1, 99, (ACCEPT,))]})
    assert accepted.partitions[0].acknowledge_error is E.none
    assert acquired(accepted) == []  # offset 0 pins the SPSO: the window is still 100
    assert (h.spart().start_offset, h.spart().in_flight()) == (0, 100)
    resumed = h.fetch("m", acks={("t", 0): [(0, 0, (ACCEPT,))]})
    assert offsets(resumed) == list(range(100, 150))
    assert h.spart().start_offset == 100


def test_released_records_inside_the_window_are_always_acquirable() -> None:
    """Item 35: re-acquiring released offsets inside the window is allowed even at the limit."""
    h = in_flight_limit_harness()
    h.fetch("m")
    answer = h.fetch("m", acks={("t", 0): [(50, 50, (RELEASE,))]})
    assert acquired(answer) == [(50, 50, 2)]
    assert h.spart().records[50].state is RecordState.ACQUIRED


def test_an_acknowledgement_freeing_the_window_wakes_a_parked_fetch() -> None:
    """Item 35 with long polling: a fetch parked on the full window completes when the SPSO moves."""
    h = in_flight_limit_harness()
    h.fetch("m")
    h.fetch("n")
    parked = h.fetch_deferred("n", max_wait_ms=5_000)
    assert isinstance(parked, Deferred) and not parked.done
    h.acknowledge("m", {("t", 0): [(0, 9, (ACCEPT,))]})
    assert parked.done and offsets(parked.value) == list(range(100, 110))


def test_max_bytes_zero_fetches_nothing() -> None:
    """No checklist item (next to item 32), section 8.3 (SharePartitionManager.processShareFetch: no partitions,
    MaxRecords 0 or MaxBytes 0 -> an empty answer at once): MaxBytes 0 acquires nothing and does not wait; its
    acknowledgements are still applied."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m", max_records=1, record_limit=True)
    answer = h.fetch("m", acks={("t", 0): [(0, 0, (ACCEPT,))]}, max_bytes=0, max_wait_ms=5_000)
    assert answer.error is E.none and acquired(answer) == []
    assert [(p.partition, p.acknowledge_error) for p in answer.partitions] == [(0, E.none)]
    assert h.spart().start_offset == 1 and h.spart().next_offset == 1


def stored_sizes(h: ShareHarness, partition: int = 0) -> list[int]:
    return [len(batch.data) for batch in h.log(partition=partition).batches_from(0)]


def test_max_bytes_bounds_what_is_read_and_acquired() -> None:
    """No checklist item (next to item 32), section 8.3 (DelayedShareFetch reads the log up to MaxBytes, at least one
    batch; only what was read is acquired): MaxBytes below one stored batch still gets that batch; MaxBytes covering two
    batches gets two."""
    h = ShareHarness()
    for _ in range(4):
        h.produce(2)
    size = stored_sizes(h)[0]
    assert acquired(h.fetch("a", max_bytes=1)) == [(0, 1, 1)]  # at least one batch
    assert acquired(h.fetch("b", max_bytes=2 * size)) == [(2, 5, 1)]
    assert acquired(h.fetch("c", max_bytes=2 * size - 1)) == [(6, 7, 1)]


def test_max_bytes_bounds_redeliveries_too() -> None:
    """No checklist item (next to item 32), section 8.3: released records are acquired only inside the bytes read from
    the first AVAILABLE one."""
    h = ShareHarness()
    for _ in range(3):
        h.produce(2)
    size = stored_sizes(h)[0]
    h.fetch("a")
    h.acknowledge("a", {("t", 0): [(0, 5, (RELEASE,))]})
    assert acquired(h.fetch("b", max_bytes=size)) == [(0, 1, 2)]
    assert acquired(h.fetch("b", max_bytes=3 * size)) == [(2, 5, 2)]


def test_max_bytes_is_shared_by_the_partitions() -> None:
    """No checklist item (next to item 32), section 8.3 (PartitionMaxBytesStrategy UNIFORM, ReplicaManager.readFromLog):
    each partition may read MaxBytes / n, the first partition that returns data at least one batch, the others only
    within their share."""
    h = ShareHarness(topics={"t": 2})
    for partition in (0, 1):
        for _ in range(2):
            h.produce(2, partition=partition)
    size = stored_sizes(h)[0]
    answer = h.fetch("m", [("t", 0), ("t", 1)], max_bytes=2 * size)  # a share of 1 batch each
    assert (acquired(answer, 0), acquired(answer, 1)) == ([(0, 1, 1)], [(0, 1, 1)])
    small = h.fetch("m", max_bytes=size)  # half a batch each: the first read (partition 1 now) gets one batch
    assert (acquired(small, 0), acquired(small, 1)) == ([], [(2, 3, 1)])
