"""What the partition's log does to a share-partition, on the manual clock (sections 6.4 step 7 and 6.9 of the
KIP-932 spec, checklist items 39-41): read_committed and read_uncommitted groups over transactions and their
markers, and the log start offset moving (DeleteRecords) under in-flight records."""

from __future__ import annotations

from broker.coordinator.modern.share import durable
from broker.coordinator.modern.share.partition import RecordState
from broker.storage.control import Marker, MarkerType
from broker.timing.deferred import Deferred
from tests.coordinator.share.harness import ACCEPT, GROUP, LOCK_MS, RELEASE, E, ShareHarness, acquired, offsets

PRODUCER = 7


def read_committed() -> ShareHarness:
    h = ShareHarness()
    h.coordinator.group_configs.replace(
        GROUP, {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
    )
    return h


def transactional(h: ShareHarness, count: int, producer_id: int = PRODUCER, sequence: int = 0) -> int:
    return h.produce(count, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, transactional=True)


def end_transaction(h: ShareHarness, commit: bool, producer_id: int = PRODUCER) -> int:
    kind = MarkerType.COMMIT if commit else MarkerType.ABORT
    offset = h.log().append_marker(Marker(kind, producer_id, 0, 0), h.clock.now_ms())
    h.share.data_appended(h.log())
    return offset


def state(h: ShareHarness, offset: int) -> RecordState | None:
    record = h.spart().records.get(offset)
    return None if record is None else record.state


# -- item 39: read_committed ----------------------------------------------------------------------------------------


def test_read_committed_waits_for_the_open_transaction() -> None:
    """Item 39: records of an open transaction are not acquired, nor anything behind them (the LSO)."""
    h = read_committed()
    transactional(h, 3)  # 0-2, open
    h.produce(2)  # 3-4, plain, but behind the LSO
    assert h.log().last_stable_offset == 0
    assert acquired(h.fetch("m")) == []
    assert h.spart().next_offset == 0


def test_read_committed_after_commit_delivers_and_skips_the_marker() -> None:
    """Item 39: after COMMIT the transaction's records are delivered; the control record never is (ARCHIVED), and
    the SPSO moves over it once the data before it is acknowledged."""
    h = read_committed()
    transactional(h, 3)
    assert acquired(h.fetch("m")) == []
    assert end_transaction(h, commit=True) == 3
    h.produce(1)  # 4
    answer = h.fetch("m")
    assert acquired(answer) == [(0, 2, 1), (4, 4, 1)]
    assert state(h, 3) is RecordState.ARCHIVED
    h.acknowledge("m", {("t", 0): [(0, 2, (ACCEPT,)), (4, 4, (ACCEPT,))]})
    assert h.spart().start_offset == 5


def test_read_committed_after_abort_archives_and_never_delivers() -> None:
    """Item 39: after ABORT the transaction's records are ARCHIVED, never delivered; the SPSO moves past them."""
    h = read_committed()
    transactional(h, 3)
    end_transaction(h, commit=False)  # marker at 3
    h.produce(2)  # 4-5
    assert acquired(h.fetch("m")) == [(4, 5, 1)]
    assert h.spart().start_offset == 4
    h.advance(LOCK_MS)
    assert offsets(h.fetch("n")) == [4, 5]  # the lock expired: 4-5 come back, 0-3 never do


def test_read_committed_abort_only_is_skipped_in_one_fetch() -> None:
    """Item 39: a partition holding only an aborted transaction and its marker -> nothing acquired, SPSO past it."""
    h = read_committed()
    transactional(h, 2)
    end_transaction(h, commit=False)
    assert acquired(h.fetch("m")) == []
    assert (h.spart().start_offset, h.spart().in_flight()) == (3, 0)


def test_record_limit_archives_an_aborted_batch_whole() -> None:
    """Item 39 with record-limit mode: an aborted batch is archived whole, never cut at MaxRecords (a cut one left
    offsets in the in-flight window with no state, and an acknowledgement of them failed)."""
    h = read_committed()
    transactional(h, 4)  # 0-3
    end_transaction(h, commit=False)  # 4
    h.produce(2)  # 5-6
    assert acquired(h.fetch("m", max_records=1, record_limit=True)) == [(5, 5, 1)]
    assert [state(h, o) for o in range(5)] == [None] * 5  # archived whole, then below the SPSO
    assert h.spart().start_offset == 5
    h.acknowledge("m", {("t", 0): [(5, 5, (ACCEPT,))]})
    assert acquired(h.fetch("m", max_records=1, record_limit=True)) == [(6, 6, 1)]


def test_read_committed_interleaved_producers() -> None:
    """Item 39: an aborted producer's records interleaved with a committed one's: only the committed ones."""
    h = read_committed()
    transactional(h, 2, producer_id=7)  # 0-1
    transactional(h, 2, producer_id=8)  # 2-3
    end_transaction(h, commit=False, producer_id=7)  # 4
    assert acquired(h.fetch("m")) == []  # producer 8 is still open: LSO 2... and 0-1 are aborted
    end_transaction(h, commit=True, producer_id=8)  # 5
    assert offsets(h.fetch("m")) == [2, 3]
    assert [state(h, o) for o in (4, 5)] == [RecordState.ARCHIVED, RecordState.ARCHIVED]


def test_read_committed_commit_wakes_a_parked_fetch() -> None:
    """Item 39 with long polling: the marker moving the LSO completes a parked fetch."""
    h = read_committed()
    transactional(h, 2)
    h.fetch("m")
    parked = h.fetch_deferred("m", max_wait_ms=5_000)
    assert isinstance(parked, Deferred) and not parked.done
    end_transaction(h, commit=True)
    assert parked.done and acquired(parked.value) == [(0, 1, 1)]


# -- item 40: read_uncommitted ---------------------------------------------------------------------------------------


def test_read_uncommitted_delivers_open_transactions() -> None:
    """Item 40: the default isolation (read_uncommitted) delivers transactional records before their end; the
    marker itself is never delivered."""
    h = ShareHarness()
    transactional(h, 3)
    assert acquired(h.fetch("m")) == [(0, 2, 1)]
    end_transaction(h, commit=False)
    h.produce(1)
    assert acquired(h.fetch("m")) == [(4, 4, 1)]
    assert state(h, 3) is RecordState.ARCHIVED


# -- item 41: the log start offset moves ----------------------------------------------------------------------------


def test_delete_records_archives_available_in_flight_records() -> None:
    """Item 41: DeleteRecords past AVAILABLE in-flight records -> they are ARCHIVED and the SPSO is the new log
    start; DescribeShareGroupOffsets follows."""
    h = ShareHarness()
    for _ in range(3):
        h.produce(2)  # batches 0-1, 2-3, 4-5
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(0, 5, (RELEASE,))]})
    h.log().delete_records_before(4)
    answer = h.fetch("n")
    assert answer.error is E.none
    assert h.spart().start_offset == 4
    assert acquired(answer) == [(4, 5, 2)]
    assert sorted(h.spart().records) == [4, 5]
    assert h.spart().archived_total == 4


def test_delete_records_past_everything_in_flight() -> None:
    """Item 41: the log start past the SPEO -> SPSO = SPEO + 1 = the log start; acquisition goes on from there."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(0, 1, (RELEASE,))]})
    h.produce(3)  # 2-4
    h.log().delete_records_before(3)
    assert acquired(h.fetch("m")) == [(3, 4, 1)]
    assert h.spart().start_offset == 3


def test_delete_records_under_acquired_records() -> None:
    """Item 41 / 6.9 (SharePartition.updateCacheAndOffsets): the SPSO becomes the log start even with ACQUIRED
    records below it; those stay locked, and are archived, not redelivered, when their lock expires; an
    acknowledgement of them is below the SPSO and ignored."""
    h = ShareHarness()
    h.produce(2)  # 0-1
    h.produce(2)  # 2-3
    h.produce(2)  # 4-5
    assert offsets(h.fetch("a", max_records=1)) == [0, 1]
    assert offsets(h.fetch("b", max_records=1)) == [2, 3]
    h.acknowledge("a", {("t", 0): [(0, 1, (RELEASE,))]})
    h.log().delete_records_before(4)
    answer = h.fetch("c")
    assert acquired(answer) == [(4, 5, 1)]
    assert h.spart().start_offset == 4
    assert state(h, 2) is RecordState.ACQUIRED  # b still holds 2-3, below the SPSO
    # What would be persisted (Kafka's share-group state) starts at the SPSO: the locked records below are not in it.
    assert [run[:2] for run in durable.partition_value(h.spart())["records"]] == [[4, 5]]
    ignored = h.acknowledge("b", {("t", 0): [(2, 2, (ACCEPT,))]})
    assert ignored.partitions[0].error is E.none
    h.advance(LOCK_MS)
    assert state(h, 2) is None and state(h, 3) is None  # archived and gone, never AVAILABLE
    assert acquired(h.fetch("c")) == [(4, 5, 2)]
    assert h.spart().start_offset == 4
