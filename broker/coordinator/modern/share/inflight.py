"""A share-partition's in-flight state as runs of offsets (Kafka's ``InFlightBatch``, section 6 of
``docs/spec/share-groups.md``).

Kafka's ``SharePartition`` keeps one ``InFlightBatch`` per acquired batch (first and last offset, state, delivery
count, member, acquisition lock) and splits it into per-offset ``InFlightState`` only when an acknowledgement or a
release covers part of it. Ours is one ``Run`` per stretch of offsets sharing state, delivery count, holder and
lock, kept in offset order in a list; an operation on ``[first, last]`` first ``cut``s the runs at its ends, then
changes whole runs. A fetch that acquires whole stored batches and an in-order ACCEPT of them cost per run, not per
record.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter

__all__ = ["Acquisition", "RecordState", "RecordsView", "Run", "cut", "index_from", "split"]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` with its persisted ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(slots=True, eq=False)
class Acquisition:
    """The records one fetch acquired for one member, under one lock (a RENEW moves records to a new one).
    ``ranges`` are the (first, last) offsets ever given this lock, ascending; what it still holds are the runs in
    them whose ``lock`` is this one (Kafka's ``AcquisitionLockTimerTask`` per batch)."""

    number: int
    member_id: str
    ranges: list[tuple[int, int]]
    deadline_ms: int


@dataclass(slots=True, eq=False)
class Run:
    """Offsets ``first`` to ``last`` in one state, delivery count, holder and lock (Kafka's ``InFlightBatch``, or
    one ``InFlightState`` once split). The view of one record (``SharePartition.records[offset]``) is its run."""

    first: int
    last: int
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock: Acquisition | None = None


_FIRST = attrgetter("first")


def index_from(runs: list[Run], offset: int) -> int:
    """The index of the first run ending at or after ``offset`` (``len(runs)`` if none)."""
    index = bisect_right(runs, offset, key=_FIRST) - 1
    if index < 0 or runs[index].last < offset:
        index += 1
    return index


def split(runs: list[Run], offset: int) -> None:
    """Make ``offset`` the start of a run if a run straddles it (Kafka's split of an ``InFlightBatch``)."""
    index = bisect_right(runs, offset, key=_FIRST) - 1
    if index >= 0:
        run = runs[index]
        if run.first < offset <= run.last:
            runs.insert(index + 1, Run(offset, run.last, run.state, run.delivery_count, run.member_id, run.lock))
            run.last = offset - 1


def cut(runs: list[Run], first: int, last: int) -> tuple[int, int]:
    """Split the runs at ``first`` and ``last + 1``: ``runs[i:j]`` then hold exactly the kept offsets of
    ``[first, last]``."""
    split(runs, first)
    split(runs, last + 1)
    return index_from(runs, first), index_from(runs, last + 1)


class RecordsView(Mapping[int, Run]):
    """The in-flight offsets, each mapped to its run (read-only: what a test or a view asks of one offset)."""

    __slots__ = ("_runs",)

    def __init__(self, runs: list[Run]) -> None:
        self._runs = runs

    def __getitem__(self, offset: int) -> Run:
        runs = self._runs
        index = bisect_right(runs, offset, key=_FIRST) - 1
        if index >= 0 and runs[index].last >= offset:
            return runs[index]
        raise KeyError(offset)

    def __iter__(self) -> Iterator[int]:
        for run in self._runs:
            yield from range(run.first, run.last + 1)

    def __len__(self) -> int:
        return sum(run.last - run.first + 1 for run in self._runs)
