"""Every share-partition of the broker, their acquisition locks, events and durable state (Kafka's
``SharePartitionManager`` around ``SharePartition``, sections 6 and 3.4 of ``docs/spec/share-groups.md``).

A share-partition is created by the first ShareFetch that names it for a group (membership is not checked, section
8.2) and outlives members and sessions: only DeleteGroups, DeleteShareGroupOffsets, AlterShareGroupOffsets and the
topic's deletion drop it. Each acquisition's lock is one purgatory deadline (``share_lock_key``) read at acquisition
time from the group's ``share.record.lock.duration.ms``; when it fires, what it still holds is released. Whatever
makes records acquirable again (a release, an expiry, an acknowledgement that frees the in-flight window, new data)
wakes the parked ShareFetches of that partition (``wake``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, Change, ChangeSink
from broker.coordinator.config import GroupConfig
from broker.coordinator.group_configs import AUTO_OFFSET_RESET, ISOLATION_LEVEL, LOCK_DURATION, GroupConfigs
from broker.coordinator.modern.share import durable
from broker.coordinator.modern.share.events import ShareEventLog
from broker.coordinator.modern.share.partition import (
    AckBatch,
    Acquisition,
    LoggedBatch,
    ShareLog,
    SharePartition,
)
from broker.coordinator.modern.share.partition import (
    Change as ShareChange,
)
from broker.coordinator.modern.types import TopicId
from broker.timing.clock import Clock
from broker.timing.keys import share_lock_key
from broker.timing.purgatory import Purgatory

__all__ = ["PartitionKey", "SharePartitions", "Waiter"]

PartitionKey = tuple[str, TopicId, int]  # (group id, topic id, partition)


class Waiter(Protocol):
    def wake(self) -> None: ...


class SharePartitions:
    def __init__(
        self,
        config: GroupConfig,
        group_configs: GroupConfigs,
        clock: Clock,
        purgatory: Purgatory,
        events: ShareEventLog,
        *,
        changes: ChangeSink = NULL_CHANGES,
    ) -> None:
        self.config = config
        self.group_configs = group_configs
        self.clock = clock
        self.purgatory = purgatory
        self.events = events
        self.changes = changes
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self.waiting: dict[PartitionKey, set[Waiter]] = {}
        self.waiting_logs: dict[int, set[PartitionKey]] = {}  # id(log) -> the keys waiting on it
        self._log_of_key: dict[PartitionKey, int] = {}
        self.locks: dict[int, tuple[PartitionKey, Acquisition]] = {}
        # The same locks by share-partition (their numbers, in acquisition order): an acknowledgement looks only at
        # its partition's locks, not at every lock of the broker.
        self._locks_of: dict[PartitionKey, dict[int, Acquisition]] = {}
        self._numbers = itertools.count(1)
        self.on_change: Callable[[], None] = lambda: None  # the control API's watchers (none by default)

    # -- finding -----------------------------------------------------------------------------------------------

    def get(self, key: PartitionKey) -> SharePartition | None:
        return self.partitions.get(key)

    def of_group(self, group_id: str) -> Iterator[tuple[PartitionKey, SharePartition]]:
        return ((k, p) for k, p in list(self.partitions.items()) if k[0] == group_id)

    def ensure(self, key: PartitionKey, log: ShareLog) -> SharePartition:
        share = self.partitions.get(key)
        if share is None:
            share = self.partitions[key] = SharePartition(*key)
        if not share.initialised:
            reset = self.group_configs.value(key[0], AUTO_OFFSET_RESET)
            share.initialise(log, reset, self.clock.now_ms())
            self._store(key, share)
        return share

    def lock_duration_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, LOCK_DURATION)

    def read_committed(self, group_id: str) -> bool:
        return self.group_configs.value(group_id, ISOLATION_LEVEL) == "read_committed"

    # -- acquisition ---------------------------------------------------------------------------------------------

    def acquire(
        self,
        key: PartitionKey,
        log: ShareLog,
        member_id: str,
        max_records: int,
        batch_size: int,
        *,
        record_limit: bool,
        max_bytes: int = 2**31 - 1,
        at_least_one: bool = True,
    ) -> tuple[list[tuple[int, int, int]], list[LoggedBatch], int]:
        """The acquired ranges, the stored batches holding them and the bytes the acquisition read."""
        share = self.ensure(key, log)
        group_id = key[0]
        lock_ms = self.lock_duration_ms(group_id)
        number = next(self._numbers)
        acquisition = Acquisition(number, member_id, [], self.clock.now_ms() + lock_ms)
        change, batches = share.acquire(
            log,
            member_id,
            max_records,
            batch_size,
            record_limit=record_limit,
            read_committed=self.read_committed(group_id),
            max_locks=self.config.share_partition_max_record_locks,
            acquisition=acquisition,
            max_bytes=max_bytes,
            at_least_one=at_least_one,
        )
        if acquisition.ranges:
            self._lock(key, acquisition, lock_ms)
            self.events.records_acquired(group_id, key[1], key[2], member_id, change.acquired, lock_ms)
        return change.acquired, batches, change.bytes_read

    def _lock(self, key: PartitionKey, acquisition: Acquisition, lock_ms: int) -> None:
        self.locks[acquisition.number] = (key, acquisition)
        self._locks_of.setdefault(key, {})[acquisition.number] = acquisition
        self.purgatory.schedule(share_lock_key(acquisition.number), lock_ms, lambda: self._expired(acquisition.number))

    def _expired(self, number: int) -> None:
        found = self.locks.pop(number, None)
        if found is None:
            return
        key, acquisition = found
        self._forget(key, number)
        share = self.partitions.get(key)
        if share is None:
            return
        change = share.expire(acquisition, self.config.share_delivery_count_limit)
        self._report(key, acquisition.member_id, "lock_expired", change)

    def _unlock(self, acquisitions: set[Acquisition]) -> None:
        for acquisition in acquisitions:
            found = self.locks.pop(acquisition.number, None)
            if found is not None:
                self._forget(found[0], acquisition.number)
                self.purgatory.cancel(share_lock_key(acquisition.number))

    def _forget(self, key: PartitionKey, number: int) -> None:
        of_key = self._locks_of.get(key)
        if of_key is not None:
            of_key.pop(number, None)
            if not of_key:
                del self._locks_of[key]

    def _locks_on(self, key: PartitionKey) -> set[Acquisition]:
        return set(self._locks_of.get(key, {}).values())

    def _drop_finished_locks(self, key: PartitionKey, share: SharePartition) -> None:
        """Locks whose records were all acknowledged or released: their timers go. Whether a lock still holds
        anything is a bisection per range it was given (``SharePartition.holds``), not a step per offset."""
        of_key = self._locks_of.get(key)
        if of_key is None:
            return
        for number, acquisition in list(of_key.items()):
            if not share.holds(acquisition):
                del self.locks[number]
                del of_key[number]
                self.purgatory.cancel(share_lock_key(number))
        if not of_key:
            del self._locks_of[key]

    # -- acknowledgements and releases ------------------------------------------------------------------------

    def acknowledge(
        self, key: PartitionKey, log: ShareLog | None, member_id: str, batches: tuple[AckBatch, ...]
    ) -> tuple[ErrorCode, str | None]:
        share = self.partitions.get(key)
        if share is None or not share.initialised:
            # SharePartitionManager.acknowledge: no share-partition of the group here (none was ever fetched).
            # Nothing is created: an acknowledgement must not fix the SPSO before the first fetch does.
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        error, message, change = share.acknowledge(member_id, batches, self.config.share_delivery_count_limit)
        if error is not ErrorCode.none:
            return error, message
        if change.renewed:
            lock_ms = self.lock_duration_ms(key[0])
            renewal = Acquisition(next(self._numbers), member_id, [], self.clock.now_ms() + lock_ms)
            share.renew(change.renewed, renewal)
            self._lock(key, renewal, lock_ms)
        if change.accepted or change.rejected:
            self.events.records_acknowledged(
                key[0], key[1], key[2], member_id, change.accepted, change.rejected, change.rejected_records
            )
        self._report(key, member_id, "release", change)
        self._drop_finished_locks(key, share)
        return ErrorCode.none, None

    def release_member(self, key: PartitionKey, member_id: str) -> None:
        """A share session ended (section 6.8): what the member holds of the partition goes back."""
        share = self.partitions.get(key)
        if share is None:
            return
        change, locks = share.release_member(member_id, self.config.share_delivery_count_limit)
        self._unlock(locks)
        self._drop_finished_locks(key, share)
        self._report(key, member_id, "session_closed", change)

    def _report(self, key: PartitionKey, member_id: str | None, cause: str, change: ShareChange) -> None:
        group_id, topic_id, partition = key
        if change.released:
            self.events.records_released(group_id, topic_id, partition, member_id, cause, change.released)
        if change.archived:
            self.events.records_archived(group_id, topic_id, partition, member_id, "delivery_limit", change.archived)
        share = self.partitions.get(key)
        if share is not None and (change.released or change.archived or change.accepted or change.rejected):
            self._store(key, share)
        self.wake(key)

    # -- waiters --------------------------------------------------------------------------------------------------

    def wait(self, key: PartitionKey, waiter: Waiter, log: object | None) -> None:
        self.waiting.setdefault(key, set()).add(waiter)
        if log is not None:
            self.waiting_logs.setdefault(id(log), set()).add(key)
            self._log_of_key[key] = id(log)

    def unwait(self, key: PartitionKey, waiter: Waiter) -> None:
        waiters = self.waiting.get(key)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self.waiting[key]
                log_id = self._log_of_key.pop(key, None)
                keys = self.waiting_logs.get(log_id) if log_id is not None else None
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.waiting_logs[log_id]  # type: ignore[arg-type]

    def wake(self, key: PartitionKey) -> None:
        waiters = self.waiting.get(key)
        if waiters:  # usually none: every acknowledgement reports, and a busy partition has nobody parked
            for waiter in list(waiters):
                waiter.wake()

    def wake_log(self, log: object) -> None:
        """New data (or a moved LSO) in a partition's log: every group's parked fetches on it look again."""
        for key in list(self.waiting_logs.get(id(log), ())):
            self.wake(key)

    # -- admin ------------------------------------------------------------------------------------------------------

    def drop(self, key: PartitionKey) -> None:
        share = self.partitions.pop(key, None)
        if share is None:
            return
        self._unlock(self._locks_on(key))
        if self.changes.enabled:
            self.changes.delete(durable.PARTITION, (key[0], str(key[1]), key[2]))

    def drop_group(self, group_id: str) -> None:
        for key, _ in self.of_group(group_id):
            self.drop(key)

    def drop_topic(self, topic_id: TopicId) -> None:
        for key in [k for k in self.partitions if k[1] == topic_id]:
            self.drop(key)

    def reset(self, key: PartitionKey, offset: int) -> None:
        """AlterShareGroupOffsets (section 10.3)."""
        share = self.partitions.get(key)
        if share is None:
            share = self.partitions[key] = SharePartition(*key)
        self._unlock(self._locks_on(key))
        share.reset_to(offset)
        self._store(key, share)

    # -- durable state (issue 27) ------------------------------------------------------------------------------------

    def _store(self, key: PartitionKey, share: SharePartition) -> None:
        if self.changes.enabled:
            self.changes.put(durable.PARTITION, (key[0], str(key[1]), key[2]), durable.partition_value(share))

    def durable_records(self) -> Iterator[Change]:
        for key, share in self.partitions.items():
            if share.initialised:
                yield Change(durable.PARTITION, (key[0], str(key[1]), key[2]), durable.partition_value(share))

    def load(self, changes: list[Change]) -> None:
        import uuid

        for change in changes:
            if change.kind != durable.PARTITION or change.value is None:
                continue
            group_id, topic_id, partition = change.key
            key = (str(group_id), uuid.UUID(str(topic_id)), int(partition))
            share = self.partitions[key] = SharePartition(*key)
            durable.rebuild_partition(share, change.value)
