"""Delayed fetches: a Fetch that found less than min_bytes waits for data or for max_wait.

Like Kafka's DelayedFetch, a parked fetch watches the partitions it asked for;
an append to one of them re-counts what it could return and completes it once
min_bytes are there. The deadline is a keyed purgatory entry, so it runs on the
same injected clock as every group timer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from broker.storage.partition_log import PartitionLog
from broker.timing.deferred import Deferred
from broker.timing.keys import delayed_fetch_key
from broker.timing.purgatory import Purgatory

T = TypeVar("T")


class FetchPosition(NamedTuple):
    log: PartitionLog
    offset: int
    max_bytes: int  # the partition's partition_max_bytes: no partition counts for more toward min_bytes
    read_committed: bool = False  # transactions.md 4.6: only what lies below the LSO counts


def available_bytes(positions: Sequence[FetchPosition]) -> int:
    """What DelayedFetch.tryComplete accumulates: each partition's bytes past its offset, up to its limit (up to
    the last stable offset for READ_COMMITTED, so a marker that moves the LSO can complete a parked fetch)."""
    total = 0
    for log, offset, max_bytes, read_committed in positions:
        available = log.bytes_from(offset)
        if read_committed:
            lso = log.last_stable_offset
            available = available - log.bytes_from(lso) if lso > offset else 0
        total += min(available, max_bytes)
    return total


class _Waiter(Generic[T]):
    __slots__ = ("build", "key", "min_bytes", "pending", "positions")

    def __init__(
        self,
        key: tuple[str, int],
        positions: Sequence[FetchPosition],
        min_bytes: int,
        build: Callable[[], T],
    ) -> None:
        self.key = key
        self.positions = positions
        self.min_bytes = min_bytes
        self.build = build
        self.pending: Deferred[T] = Deferred()

    def satisfied(self) -> bool:
        return available_bytes(self.positions) >= self.min_bytes


class DelayedFetches:
    def __init__(self, purgatory: Purgatory) -> None:
        self._purgatory = purgatory
        self._watching: dict[int, set[_Waiter[object]]] = {}  # id(PartitionLog) -> parked fetches
        self._ids = itertools.count()
        # Told of every append (and moved LSO) too: the share groups' parked ShareFetches (KIP-932).
        self.listeners: list[Callable[[PartitionLog], None]] = []

    def park(
        self,
        positions: Sequence[FetchPosition],
        min_bytes: int,
        max_wait_ms: int,
        build: Callable[[], T],
    ) -> Deferred[T]:
        """A Deferred answered by ``build()`` once min_bytes can be returned or max_wait has passed."""
        waiter: _Waiter[T] = _Waiter(delayed_fetch_key(next(self._ids)), positions, min_bytes, build)
        for log, *_ in positions:
            self._watching.setdefault(id(log), set()).add(waiter)  # type: ignore[arg-type]
        self._purgatory.schedule(waiter.key, max_wait_ms, lambda: self._complete(waiter))  # type: ignore[arg-type]
        return waiter.pending

    def appended(self, log: PartitionLog) -> None:
        """New data in ``log``: complete the fetches that now have enough."""
        for listener in self.listeners:
            listener(log)
        waiters = self._watching.get(id(log))
        if not waiters:
            return
        for waiter in [w for w in waiters if w.satisfied()]:
            self._complete(waiter)

    def log_removed(self, log: PartitionLog) -> None:
        """The partition is gone (topic deleted): its fetches answer now, with the error."""
        for waiter in list(self._watching.get(id(log), ())):
            self._complete(waiter)

    def leader_moved(self, log: PartitionLog) -> None:
        """The partition's leader (or its epoch) changed: its fetches answer now, each with the error its node
        gives (ReplicaManager.makeLeaders/makeFollowers' completeDelayedFetchOrProduceRequests), rather than at
        their max wait or the next append."""
        for waiter in list(self._watching.get(id(log), ())):
            self._complete(waiter)

    def _complete(self, waiter: _Waiter[object]) -> None:
        if waiter.pending.done:
            return
        self._purgatory.cancel(waiter.key)
        for log, *_ in waiter.positions:
            watchers = self._watching.get(id(log))
            if watchers is not None:
                watchers.discard(waiter)
                if not watchers:
                    del self._watching[id(log)]
        waiter.pending.complete(waiter.build())

    def __len__(self) -> int:
        return len({w.key for ws in self._watching.values() for w in ws})
