"""Transactional offsets: TxnOffsetCommit's pending offsets and their completion (``docs/spec/transactions.md``
section 5).

Kafka's ``OffsetMetadataManager`` keeps, next to the committed offsets, ``pendingTransactionalOffsets`` per producer
id and ``openTransactionsByGroup``. A TxnOffsetCommit stages offsets there (5.2); the transaction's end marker on the
group's offsets partition makes them committed or drops them (5.3, ``replayEndTransactionMarker``). Pending offsets
are invisible to OffsetFetch except through RequireStable (5.4), hold back retention (5.5) and are removed with the
committed ones by DeleteGroups, OffsetDelete and topic deletion (5.5).

Durable (issue 27): each staged offset is an ``offsets.pending`` change (group, producer id, topic, partition), as
Kafka's transactional OffsetCommit records are; the marker's effect is written as what it does: the pending
tombstones and, for a COMMIT, the ``offsets.commit`` upserts it makes visible. A data directory loads them pending
(cluster-and-durability.md 3.2): invisible until the transaction coordinator completes or aborts the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from kio.schema.errors import ErrorCode

from broker.changes import Change
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.messages import PartitionErrors, TxnCommitRequest, every_partition
from broker.coordinator.offset_store import CommittedOffset, Key, offset_from, offset_value
from broker.coordinator.registry import GroupRegistry

E = ErrorCode
PENDING = "offsets.pending"


class TransactionalOffsets:
    def __init__(
        self,
        registry: GroupRegistry,
        classic: ClassicGroups,
        next_order: Callable[[], int],
        metadata_too_large: Callable[[str], bool],
    ) -> None:
        self._registry = registry
        self._store = registry.offsets
        self._classic = classic  # a commit without a generation into an unknown group creates a simple one
        self.next_order = next_order
        self._too_large = metadata_too_large
        # 5.2: pendingTransactionalOffsets[pid][group][(topic, partition)]; the epoch is not part of the key.
        self._pending: dict[int, dict[str, dict[Key, CommittedOffset]]] = {}
        self._open_by_group: dict[str, set[int]] = {}

    # -- durable state (issue 27) -------------------------------------------------------------------------

    def _put(self, group_id: str, producer_id: int, key: Key, offset: CommittedOffset) -> None:
        changes = self._store.changes
        if changes.enabled:
            changes.put(PENDING, (group_id, producer_id, *key), offset_value(offset))

    def _drop(self, group_id: str, producer_id: int, keys: Iterable[Key]) -> None:
        changes = self._store.changes
        if changes.enabled:
            for key in keys:
                changes.delete(PENDING, (group_id, producer_id, *key))

    def durable_records(self) -> Iterator[Change]:
        for producer_id, by_group in self._pending.items():
            for group_id, staged in by_group.items():
                for key, offset in staged.items():
                    yield Change(PENDING, (group_id, producer_id, *key), offset_value(offset))

    def load(self, changes: Iterable[Change]) -> int:
        """Pending offsets come back pending; the highest record order loaded."""
        highest = 0
        for change in changes:
            if change.kind != PENDING or change.value is None:
                continue
            group_id, producer_id, topic, partition = change.key
            offset = offset_from(change.value)
            by_group = self._pending.setdefault(int(producer_id), {})
            by_group.setdefault(str(group_id), {})[(str(topic), int(partition))] = offset
            self._open_by_group.setdefault(str(group_id), set()).add(int(producer_id))
            highest = max(highest, offset.record_order)
        return highest

    # -- TxnOffsetCommit (5.1 steps 5-6) ------------------------------------------------------------------

    def commit(self, request: TxnCommitRequest) -> PartitionErrors:
        error = self._validate(request)
        if error is not None:
            return every_partition(((topic, (p.partition for p in ps)) for topic, ps in request.topics), error)
        now = self._classic.clock.now_ms()
        staged = self._pending.setdefault(request.producer_id, {}).setdefault(request.group_id, {})
        results = []
        for topic, partitions in request.topics:
            errors = []
            for commit in partitions:
                metadata = commit.metadata or ""
                if self._too_large(metadata):
                    errors.append((commit.partition, E.offset_metadata_too_large))
                    continue
                # A later commit of the same transaction overwrites the same key (5.2).
                offset = CommittedOffset(commit.offset, commit.leader_epoch, metadata, now, None, self.next_order())
                staged[(topic, commit.partition)] = offset
                self._put(request.group_id, request.producer_id, (topic, commit.partition), offset)
                errors.append((commit.partition, E.none))
            results.append((topic, tuple(errors)))
        if staged:
            self._open_by_group.setdefault(request.group_id, set()).add(request.producer_id)
        else:
            self._forget(request.producer_id, request.group_id)
        return tuple(results)

    def _validate(self, request: TxnCommitRequest) -> ErrorCode | None:
        """validateTransactionalOffsetCommit (5.1 step 5): the group validates; an unknown group takes a commit
        without a generation as a new simple group (C§13.1, kept even if the transaction aborts)."""
        generation = request.generation_id
        group = self._registry.get(request.group_id)
        if group is None:
            if generation < 0:
                self._classic.create(request.group_id)
                return None
            return E.illegal_generation
        return group.validate_txn_offset_commit(request.member_id, request.group_instance_id, generation)

    # -- completion (5.3) ---------------------------------------------------------------------------------

    def complete(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        by_group = self._pending.get(producer_id)
        for group_id in group_ids:
            staged = by_group.pop(group_id, None) if by_group is not None else None
            self._forget(producer_id, group_id)
            if staged:
                self._drop(group_id, producer_id, staged)
            if not commit or not staged:
                continue
            if self._registry.live(group_id) is None:
                continue  # the group went (its pending offsets went with it, 5.5)
            store = self._store
            for key, pending in staged.items():
                current = store.get(group_id, key)
                # A regular OffsetCommit written after the TxnOffsetCommit wins; one written before is overwritten.
                if current is None or current.record_order < pending.record_order:
                    store.put(group_id, key, pending)

    def _forget(self, producer_id: int, group_id: str) -> None:
        by_group = self._pending.get(producer_id)
        if by_group is not None and not by_group.get(group_id, True):
            del by_group[group_id]
        if by_group is not None and not by_group:
            del self._pending[producer_id]
        open_pids = self._open_by_group.get(group_id)
        if open_pids is not None and (by_group is None or group_id not in by_group):
            open_pids.discard(producer_id)
            if not open_pids:
                del self._open_by_group[group_id]

    # -- what the other offset operations ask (5.4, 5.5) --------------------------------------------------

    def group_ids(self) -> list[str]:
        return list(self._open_by_group)

    def has_open_transactions(self, group_id: str) -> bool:
        return bool(self._open_by_group.get(group_id))

    def is_pending(self, group_id: str, key: Key) -> bool:
        """hasPendingTransactionalOffsets: some open transaction staged an offset for this partition."""
        for producer_id in self._open_by_group.get(group_id, ()):
            if key in self._pending.get(producer_id, {}).get(group_id, {}):
                return True
        return False

    def pending_keys(self, group_id: str) -> set[Key]:
        keys: set[Key] = set()
        for producer_id in self._open_by_group.get(group_id, ()):
            keys.update(self._pending.get(producer_id, {}).get(group_id, {}))
        return keys

    def remove(self, group_id: str, keys: Iterable[Key] | None = None) -> None:
        """A tombstone for these partitions (all when None) removes the pending entries of every open transaction
        (5.5: deleteAllOffsets, OffsetDelete, topic deletion), so a later COMMIT marker cannot bring them back.
        The transactions stay open for the group: their markers still come."""
        wanted = None if keys is None else set(keys)
        for producer_id in self._open_by_group.get(group_id, ()):
            staged = self._pending.get(producer_id, {}).get(group_id)
            if staged is None:
                continue
            for key in list(staged):
                if wanted is None or key in wanted:
                    del staged[key]
                    self._drop(group_id, producer_id, (key,))

    def remove_topic(self, topic: str) -> None:
        for producer_id, by_group in self._pending.items():
            for group_id, staged in by_group.items():
                for key in [k for k in staged if k[0] == topic]:
                    del staged[key]
                    self._drop(group_id, producer_id, (key,))
