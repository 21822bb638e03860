"""Delayed fetches on a manual clock: completion on data, on max_wait, on a removed log, and only once."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from broker.storage.delayed_fetch import DelayedFetches, FetchPosition
from broker.storage.partition_log import PartitionLog, StorageBudget
from broker.storage.records import split_batches
from broker.timing.clock import ManualClock
from broker.timing.purgatory import Purgatory
from tests.storage import make_batch

MAX_WAIT_MS = 500
NO_LIMIT = 2**31 - 1


@dataclass
class Rig:
    clock: ManualClock = field(default_factory=ManualClock)

    def __post_init__(self) -> None:
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        self.fetches = DelayedFetches(self.purgatory)
        budget = StorageBudget(-1)
        self.logs = [PartitionLog(budget), PartitionLog(budget)]
        self.builds = 0
        self.answers: list[bytes] = []

    def append(self, log: PartitionLog, size: int) -> int:
        """Appends one batch of about ``size`` bytes, tells the fetches, returns its exact size."""
        batch = make_batch(1, value=b"d" * max(size - 80, 1))
        ((header, data),) = split_batches(batch)
        log.append(header, data)
        self.fetches.appended(log)
        return len(batch)

    def park(
        self,
        positions: list[tuple[PartitionLog, int]],
        min_bytes: int,
        max_wait_ms: int = MAX_WAIT_MS,
        partition_max_bytes: int = NO_LIMIT,
    ) -> None:
        def build() -> bytes:
            self.builds += 1
            return b"".join(log.read(offset, 1 << 20, at_least_one=True) for log, offset in positions)

        limited = [FetchPosition(log, offset, partition_max_bytes) for log, offset in positions]
        pending = self.fetches.park(limited, min_bytes, max_wait_ms, build)
        pending.add_done_callback(self.answers.append)
        self.pending = pending


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_completes_once_min_bytes_are_there(rig: Rig) -> None:
    first, second = rig.logs
    rig.park([(first, 0), (second, 0)], min_bytes=300)
    assert not rig.pending.done and len(rig.fetches) == 1 and len(rig.purgatory) == 1
    size = rig.append(first, 200)
    assert size < 300
    assert not rig.pending.done and rig.builds == 0
    rig.append(second, 200)  # the sum over both partitions counts
    assert rig.pending.done
    assert rig.answers == [first.read(0, 1 << 20, at_least_one=True) + second.read(0, 1 << 20, at_least_one=True)]
    assert len(rig.fetches) == 0
    assert len(rig.purgatory) == 0  # the max_wait deadline is cancelled


def test_only_bytes_from_the_fetch_offset_count(rig: Rig) -> None:
    log = rig.logs[0]
    rig.append(log, 1000)
    rig.park([(log, 1)], min_bytes=500)  # at the high watermark: the 1000 bytes before it do not count
    rig.append(log, 100)
    assert not rig.pending.done
    rig.append(log, 450)
    assert rig.pending.done
    assert rig.answers[0] == log.read(1, 1 << 20, at_least_one=True)


def test_an_append_elsewhere_does_not_complete_it(rig: Rig) -> None:
    watched, other = rig.logs
    rig.park([(watched, 0)], min_bytes=1)
    rig.append(other, 1000)
    assert not rig.pending.done


def test_completes_on_max_wait(rig: Rig) -> None:
    log = rig.logs[0]
    rig.park([(log, 0)], min_bytes=10_000)
    rig.append(log, 200)
    rig.clock.advance(MAX_WAIT_MS - 1)
    assert not rig.pending.done
    rig.clock.advance(1)
    assert rig.pending.done
    assert rig.answers == [log.read(0, 1 << 20, at_least_one=True)]  # what there was, though below min_bytes
    assert len(rig.fetches) == 0


def test_completes_empty_on_max_wait(rig: Rig) -> None:
    rig.park([(rig.logs[0], 0)], min_bytes=1, max_wait_ms=200)
    rig.clock.advance(199)
    assert not rig.pending.done
    rig.clock.advance(1)
    assert rig.answers == [b""]


def test_completes_when_the_log_is_removed(rig: Rig) -> None:
    removed, kept = rig.logs
    rig.park([(removed, 0), (kept, 0)], min_bytes=10_000)
    rig.fetches.log_removed(removed)
    assert rig.pending.done and rig.builds == 1
    assert len(rig.fetches) == 0  # no longer watched through the other log either
    assert len(rig.purgatory) == 0


def test_log_removed_leaves_fetches_on_other_logs_alone(rig: Rig) -> None:
    removed, kept = rig.logs
    rig.park([(kept, 0)], min_bytes=1)
    rig.fetches.log_removed(removed)
    assert not rig.pending.done
    assert len(rig.fetches) == 1


def test_completes_only_once(rig: Rig) -> None:
    log = rig.logs[0]
    rig.park([(log, 0)], min_bytes=100)
    rig.clock.advance(MAX_WAIT_MS)
    assert rig.builds == 1
    rig.append(log, 500)
    rig.fetches.log_removed(log)
    rig.clock.advance(10 * MAX_WAIT_MS)
    assert rig.builds == 1
    assert rig.answers == [b""]


def test_data_first_then_timeout_does_not_answer_again(rig: Rig) -> None:
    log = rig.logs[0]
    rig.park([(log, 0)], min_bytes=1)
    rig.append(log, 100)
    assert rig.builds == 1
    rig.clock.advance(10 * MAX_WAIT_MS)
    rig.fetches.log_removed(log)
    assert rig.builds == 1
    assert len(rig.answers) == 1


def test_each_fetch_has_its_own_threshold_and_deadline(rig: Rig) -> None:
    log = rig.logs[0]
    rig.park([(log, 0)], min_bytes=100, max_wait_ms=1000)
    small = rig.pending
    rig.park([(log, 0)], min_bytes=5000, max_wait_ms=300)
    large = rig.pending
    assert len(rig.fetches) == 2
    rig.append(log, 200)
    assert small.done and not large.done
    rig.clock.advance(299)
    assert not large.done
    rig.clock.advance(1)
    assert large.done
    assert rig.builds == 2


def test_a_partition_counts_no_more_than_its_partition_max_bytes(rig: Rig) -> None:
    """DelayedFetch accumulates min(bytes available, partition_max_bytes) per partition."""
    first, second = rig.logs
    rig.park([(first, 0), (second, 0)], min_bytes=300, partition_max_bytes=200)
    rig.append(first, 1000)
    assert not rig.pending.done  # 1000 bytes there, but the partition counts for 200
    rig.append(second, 150)
    assert rig.pending.done
