"""The share-partition's runs of in-flight offsets (``inflight.py``, Kafka's ``InFlightBatch``): the helpers that cut
them, the per-offset view over them, and what must hold of them after any mix of fetches, acknowledgements, lock
expiries, session ends and DeleteRecords (on the manual clock, seeded)."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from broker.coordinator.modern.share.inflight import Acquisition, RecordState, Run, cut, index_from, split
from broker.coordinator.modern.share.partition import SharePartition
from tests.coordinator.share.harness import ACCEPT, LOCK_MS, RELEASE, ShareHarness, acquired

ACQUIRED, AVAILABLE = RecordState.ACQUIRED, RecordState.AVAILABLE


def test_cut_splits_only_at_the_ends() -> None:
    lock = Acquisition(1, "m", [(0, 9)], 100)
    runs = [Run(0, 9, ACQUIRED, 1, "m", lock), Run(10, 14, AVAILABLE, 1)]
    assert cut(runs, 3, 11) == (1, 3)
    assert [(r.first, r.last, r.state) for r in runs] == [
        (0, 2, ACQUIRED), (3, 9, ACQUIRED), (10, 11, AVAILABLE), (12, 14, AVAILABLE)
    ]  # fmt: skip
    assert runs[1].lock is lock and runs[1].member_id == "m" and runs[3].delivery_count == 1
    split(runs, 3)  # already a boundary: nothing changes
    assert len(runs) == 4
    assert index_from(runs, 12) == 3 and index_from(runs, 15) == 4


def test_records_view_maps_each_offset_to_its_run() -> None:
    share = SharePartition("g", "t", 0)
    share.runs[:] = [Run(5, 6, RecordState.ARCHIVED), Run(8, 9, AVAILABLE, 2)]  # a hole at 7 (below an SPSO)
    records = share.records
    assert list(records) == [5, 6, 8, 9] and len(records) == 4
    assert records[9].delivery_count == 2 and records.get(7) is None and 6 in records
    with pytest.raises(KeyError):
        records[10]


def _check(share: SharePartition) -> None:
    """What every operation keeps: runs in order, not overlapping, one state each; above the SPSO every offset up to
    SPEO in exactly one run; below it only ACQUIRED runs (a moved log start), none straddling it; only ACQUIRED runs
    have a holder and a lock, and a lock's runs lie in its ranges; the AVAILABLE count is the runs'."""
    runs, start = share.runs, share.start_offset
    for before, after in pairwise(runs):
        assert before.last < after.first
    above = [r for r in runs if r.first >= start]
    assert all(r.first <= r.last for r in runs)
    if above:
        assert above[0].first == start and above[-1].last == share.next_offset - 1
        assert all(a.last + 1 == b.first for a, b in pairwise(above))
    else:
        assert start == share.next_offset
    for run in runs:
        assert run.last < start or run.first >= start
        if run.last < start:
            assert run.state is ACQUIRED
        held = run.state is ACQUIRED
        assert (run.member_id is not None, run.lock is not None) == (held, held)
        if run.lock is not None:
            assert any(first <= run.first and run.last <= last for first, last in run.lock.ranges)
    assert share.available == sum(r.last - r.first + 1 for r in runs if r.state is AVAILABLE)


@pytest.mark.parametrize("seed", range(12))
def test_runs_stay_well_formed(seed: int) -> None:
    rnd = random.Random(seed)
    h = ShareHarness()
    h.produce(5)
    h.fetch("a", max_records=1)  # the share-partition exists from the first fetch on
    members = ("a", "b", "c")
    held: dict[str, list[tuple[int, int, int]]] = {m: [] for m in members}
    for _ in range(120):
        op, member = rnd.random(), rnd.choice(members)
        if op < 0.2:
            h.produce(rnd.randint(1, 6))
        elif op < 0.5:
            answer = h.fetch(member, max_records=rnd.choice((1, 3, 7, 500)), record_limit=rnd.random() < 0.5)
            held[member] = acquired(answer)
        elif op < 0.8 and held[member]:
            batches = []
            for first, last, _ in held[member]:
                if rnd.random() < 0.5:
                    types = (rnd.choice((ACCEPT, ACCEPT, RELEASE, 3, 0)),)
                else:
                    types = tuple(rnd.choice((ACCEPT, RELEASE, 3)) for _ in range(last - first + 1))
                batches.append((first, last, types))
            h.acknowledge(member, {("t", 0): batches})
            held[member] = []
        elif op < 0.9:
            h.advance(rnd.choice((LOCK_MS // 2, LOCK_MS)))
        elif op < 0.95:
            log = h.log()
            log.delete_records_before(rnd.randint(log.log_start_offset, log.high_watermark))
        else:
            h.fetch(member, epoch=-1)  # the session ends: what it holds goes back
            held[member] = []
        _check(h.spart())
