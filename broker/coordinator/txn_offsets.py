"""Transactional offsets: TxnOffsetCommit's pending offsets and their completion (``docs/spec/transactions.md``
section 5).

Kafka's ``OffsetMetadataManager`` keeps, next to the committed offsets, ``pendingTransactionalOffsets`` per producer
id and ``openTransactionsByGroup``. A TxnOffsetCommit stages offsets there (5.2); the transaction's end marker on the
group's offsets partition makes them committed or drops them (5.3, ``replayEndTransactionMarker``). Pending offsets
are invisible to OffsetFetch except through RequireStable (5.4), hold back retention (5.5) and are removed with the
committed ones by DeleteGroups, OffsetDelete and topic deletion (5.5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.group import CommittedOffset, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.state import DEAD, EMPTY
from broker.coordinator.messages import PartitionErrors, TxnCommitRequest
from broker.coordinator.modern.consumer.groups import ConsumerGroups

E = ErrorCode
Key = tuple[str, int]  # (topic, partition)


class TransactionalOffsets:
    def __init__(
        self,
        groups: ClassicGroups,
        consumer_groups: ConsumerGroups,
        next_order: Callable[[], int],
        metadata_too_large: Callable[[str], bool],
    ) -> None:
        self._groups = groups
        self._consumer = consumer_groups
        self._next_order = next_order
        self._too_large = metadata_too_large
        # 5.2: pendingTransactionalOffsets[pid][group][(topic, partition)]; the epoch is not part of the key.
        self._pending: dict[int, dict[str, dict[Key, CommittedOffset]]] = {}
        self._open_by_group: dict[str, set[int]] = {}

    # -- TxnOffsetCommit (5.1 steps 5-6) ------------------------------------------------------------------

    def commit(self, request: TxnCommitRequest) -> PartitionErrors:
        error = self._validate(request)
        if error is not None:
            return tuple((topic, tuple((p.partition, error) for p in ps)) for topic, ps in request.topics)
        now = self._groups.clock.now_ms()
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
                staged[(topic, commit.partition)] = CommittedOffset(
                    commit.offset, commit.leader_epoch, metadata, now, None, self._next_order()
                )
                errors.append((commit.partition, E.none))
            results.append((topic, tuple(errors)))
        if staged:
            self._open_by_group.setdefault(request.group_id, set()).add(request.producer_id)
        else:
            self._forget(request.producer_id, request.group_id)
        return tuple(results)

    def _validate(self, request: TxnCommitRequest) -> ErrorCode | None:
        """validateTransactionalOffsetCommit (5.1 step 5): no REBALANCE_IN_PROGRESS in any state, and the
        session is not refreshed."""
        generation = request.generation_id
        consumer_group = self._consumer.get(request.group_id)
        if consumer_group is not None:
            # ConsumerGroup.validateOffsetCommit, transactional: STALE_MEMBER_EPOCH is answered as
            # ILLEGAL_GENERATION and there is no OffsetCommit-v9 version check (consumer-groups spec 8.1).
            if generation < 0 and consumer_group.is_empty():
                return None
            member = consumer_group.members.get(request.member_id)
            if member is None:
                return E.unknown_member_id
            return E.illegal_generation if generation != member.member_epoch else None
        group = self._groups.get(request.group_id)
        if group is None:
            if generation < 0:
                self._groups.create(request.group_id)  # a simple group (C§13.1), kept even if the txn aborts
                return None
            return E.illegal_generation
        if group.is_in(DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_in(EMPTY):
            return None
        if generation >= 0 or request.member_id or request.group_instance_id is not None:
            try:
                group.validate_member(request.member_id, request.group_instance_id)
            except MemberError as failure:
                return failure.error
            if generation != group.generation_id:
                return E.illegal_generation
        return None  # an anonymous (v0-2) commit into a non-empty group is accepted (5.6)

    # -- completion (5.3) ---------------------------------------------------------------------------------

    def complete(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        by_group = self._pending.get(producer_id)
        for group_id in group_ids:
            staged = by_group.pop(group_id, None) if by_group is not None else None
            self._forget(producer_id, group_id)
            if not commit or not staged:
                continue
            offsets = self.committed_offsets(group_id)
            if offsets is None:
                continue  # the group went (its pending offsets went with it, 5.5)
            for key, pending in staged.items():
                current = offsets.get(key)
                # A regular OffsetCommit written after the TxnOffsetCommit wins; one written before is overwritten.
                if current is None or current.record_order < pending.record_order:
                    offsets[key] = pending

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

    def committed_offsets(self, group_id: str) -> dict[Key, CommittedOffset] | None:
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            return consumer_group.offsets
        group = self._groups.live(group_id)
        return None if group is None else group.offsets

    # -- what the other offset operations ask (5.4, 5.5) --------------------------------------------------

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

    def remove_topic(self, topic: str) -> None:
        for by_group in self._pending.values():
            for staged in by_group.values():
                for key in [k for k in staged if k[0] == topic]:
                    del staged[key]
