"""Committed offsets (section 13 of ``docs/spec/group-coordinator.md``, 14.4 OffsetDelete, and section 8 of
``docs/spec/consumer-groups.md``).

Kafka keeps offsets apart from membership: its ``OffsetMetadataManager`` validates commits against the group,
answers fetches, expires offsets (KIP-211) and deletes them, while ``GroupMetadataManager`` runs the members. This
module is that half, for every group type alike: it asks the group (``group.py``'s ``Group``) only to validate and
to say how its offsets expire, and the group's type (``GroupKeeper``) only what it does besides. The offsets live in
the ``OffsetStore``, keyed by group id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.group import Group, GroupKeeper
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import (
    CommitRequest,
    FetchedOffset,
    GroupOffsets,
    OffsetDeleteResult,
    PartitionErrors,
    TxnCommitRequest,
    every_partition,
)
from broker.coordinator.offset_store import CommittedOffset
from broker.coordinator.offsets.transactional import TransactionalOffsets
from broker.coordinator.registry import GroupRegistry
from broker.timing.keys import OFFSETS_EXPIRATION

E = ErrorCode


class OffsetManager:
    def __init__(self, classic: ClassicGroups, keepers: Mapping[GroupType, GroupKeeper]) -> None:
        self._classic = classic  # the clock, config, purgatory and log; and where a simple group is created
        self._registry: GroupRegistry = classic.registry
        self._store = self._registry.offsets
        self._keepers = keepers
        # transactions.md 5.2: one record order for regular and transactional commits alike.
        self._orders = itertools.count(1)
        self.transactional = TransactionalOffsets(
            self._registry, classic, self._orders.__next__, self._metadata_too_large
        )
        self._schedule_expiration()

    def continue_orders_after(self, highest: int) -> None:
        """After a load: commits go on after the last loaded one's place (transactions.md 5.2's order)."""
        self._orders = itertools.count(highest + 1)
        self.transactional.next_order = self._orders.__next__

    def _metadata_too_large(self, metadata: str) -> bool:
        """Read per call, for OffsetCommit and TxnOffsetCommit alike: a config replaced at run time applies."""
        return _java_string_length(metadata) > self._classic.config.offset_metadata_max_bytes

    # -- OffsetCommit (13.1, consumer groups 8.1) ---------------------------------------------------------

    def commit(self, request: CommitRequest) -> PartitionErrors:
        group = self._registry.get(request.group_id)
        if group is None:
            if request.generation_id < 0:
                self._classic.create(request.group_id)  # a "simple" group, for assign() and admin commits
                error = None
            else:
                error = E.group_id_not_found if request.api_version >= 9 else E.illegal_generation
        else:
            error = group.validate_offset_commit(
                request.member_id, request.group_instance_id, request.generation_id, request.api_version
            )
        if error is not None:
            return rejected_commit(request, error)
        results = self._store_commits(request)
        group_type = self._registry.type_of(request.group_id)
        assert group_type is not None, "a group that took a commit exists"
        self._keepers[group_type].offsets_committed(request, results)
        return results

    def _store_commits(self, request: CommitRequest) -> PartitionErrors:
        now = self._classic.clock.now_ms()
        expire_at = now + request.retention_time_ms if request.retention_time_ms != -1 else None
        group_id = request.group_id
        store = self._store
        results = []
        for topic, partitions in request.topics:
            errors = []
            for commit in partitions:
                metadata = commit.metadata or ""
                if self._metadata_too_large(metadata):
                    errors.append((commit.partition, E.offset_metadata_too_large))
                    continue
                timestamp = commit.commit_timestamp_ms if commit.commit_timestamp_ms != -1 else now
                store.put(
                    group_id,
                    (topic, commit.partition),
                    CommittedOffset(
                        commit.offset, commit.leader_epoch, metadata, timestamp, expire_at, next(self._orders)
                    ),
                )
                errors.append((commit.partition, E.none))
            results.append((topic, tuple(errors)))
        return tuple(results)

    def commit_transactional(self, request: TxnCommitRequest) -> PartitionErrors:
        """TxnOffsetCommit's group checks and staging (transactions.md 5.1 steps 5-6)."""
        return self.transactional.commit(request)

    # -- OffsetFetch (13.3, consumer groups 8.2) ------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        topics: Iterable[tuple[str, Iterable[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> GroupOffsets:
        group = self._registry.live(group_id)
        if group is not None:
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error is not None:
                return GroupOffsets(group_id, error)
        offsets = self._store.of(group_id) if group is not None else {}
        # transactions.md 5.4: with RequireStable, a partition with a pending transactional offset answers
        # UNSTABLE_OFFSET_COMMIT (offset -1, metadata ""), per partition, and the client retries.
        pending = self.transactional.pending_keys(group_id) if require_stable else set()

        def answer(topic: str, partition: int, stored: CommittedOffset | None) -> FetchedOffset:
            if (topic, partition) in pending:
                return FetchedOffset(partition, error=E.unstable_offset_commit)
            return _fetched(partition, stored)

        if topics is None:
            # "All topics" lists only partitions with a committed offset (5.4).
            by_topic: dict[str, list[FetchedOffset]] = {}
            for (topic, partition), stored in offsets.items():
                by_topic.setdefault(topic, []).append(answer(topic, partition, stored))
            return GroupOffsets(group_id, E.none, tuple((t, tuple(ps)) for t, ps in by_topic.items()))
        fetched = []
        for topic, partitions in topics:
            fetched.append((topic, tuple(answer(topic, p, offsets.get((topic, p))) for p in partitions)))
        return GroupOffsets(group_id, E.none, tuple(fetched))

    # -- retention (13.2, consumer groups 8.5) ----------------------------------------------------------------

    def _schedule_expiration(self) -> None:
        interval_ms = self._classic.config.offsets_retention_check_interval_ms
        self._classic.purgatory.schedule(OFFSETS_EXPIRATION, interval_ms, self._expire)

    def _expire(self) -> None:
        """The periodic retention sweep; Empty groups left without offsets are deleted (section 16).

        The next sweep is armed whatever happens, as Kafka's cleanupGroupMetadata timer is scheduled with retry
        (a sweep that throws runs again an interval later). Each group is swept in isolation besides: one group
        that raises is logged and skipped, so it cannot keep the other groups' offsets forever. The sweep only
        touches offsets, so the group's members are left alone.
        """
        try:
            for group in list(self._registry.groups.values()):
                try:
                    self._expire_group(group)
                except Exception:
                    self._keepers[group.group_type].failures += 1
                    self._classic.log.exception("offsets retention sweep failed for a group", group_id=group.group_id)
        finally:
            self._schedule_expiration()

    def _expire_group(self, group: Group) -> None:
        """Kafka's cleanupExpiredOffsets: offsets whose condition says so go, but never one with a pending
        transactional offset (transactions.md 5.5); the group's last ones going is the ``offsets_expired`` event."""
        group_id = group.group_id
        condition = group.offset_expiration()
        store = self._store
        if condition is not None and store.has_any(group_id):
            now = self._classic.clock.now_ms()
            retention_ms = self._classic.config.offsets_retention_ms
            pending = self.transactional.pending_keys(group_id)
            for key, stored in store.items(group_id):
                if condition.keep_subscribed and group.is_subscribed_to(key[0]):
                    continue
                if key not in pending and condition.expired(stored, now, retention_ms):
                    store.remove(group_id, key)
            if not store.has_any(group_id):
                self._keepers[group.group_type].offsets_expired(group_id)
        self._delete_if_bare(group, "empty group without offsets expired")

    def _delete_if_bare(self, group: Group, why: str) -> None:
        """An Empty group without offsets and without open transactions goes (section 16)."""
        group_id = group.group_id
        if (
            group.is_empty()
            and not group.kept_without_offsets
            and not self._store.has_any(group_id)
            and not self.transactional.has_open_transactions(group_id)
        ):
            self._keepers[group.group_type].delete_group(group_id, why)

    # -- OffsetDelete (14.4, KIP-496; consumer groups 8.3) and deleted topics ------------------------------

    def delete(self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]]) -> OffsetDeleteResult:
        if not group_id:
            return OffsetDeleteResult(E.invalid_group_id)
        group = self._registry.live(group_id)
        if group is None:
            return OffsetDeleteResult(E.group_id_not_found)
        error = group.validate_offset_delete()
        if error is not None:
            return OffsetDeleteResult(error)
        results = []
        deleted: list[tuple[str, int]] = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                results.append((topic, tuple((p, E.group_subscribed_to_topic) for p in partitions)))
                continue
            partitions = tuple(partitions)
            for partition in partitions:
                self._store.remove(group_id, (topic, partition))
                deleted.append((topic, partition))
            # transactions.md 5.5: the tombstone also removes the pending transactional offsets.
            self.transactional.remove(group_id, ((topic, p) for p in partitions))
            results.append((topic, tuple((p, E.none) for p in partitions)))
        if deleted:
            self._keepers[group.group_type].offsets_deleted(group_id, deleted)
        return OffsetDeleteResult(E.none, tuple(results))

    def delete_group_offsets(self, group_id: str) -> None:
        """DeleteGroups' tombstones (section 14.3): the committed offsets, and the pending ones of every open
        transaction (transactions.md 5.5: allowed with open transactions, so a later COMMIT marker does not bring
        them back)."""
        self._store.remove_group(group_id)
        self.transactional.remove(group_id)

    def on_topic_deleted(self, topic: str) -> None:
        """GroupCoordinator.onPartitionsDeleted: drop the topic's offsets, pending transactional ones included
        (transactions.md 5.5); Empty groups left bare go too."""
        self.transactional.remove_topic(topic)
        store = self._store
        for group in list(self._registry.groups.values()):
            doomed = [key for key, _ in store.items(group.group_id) if key[0] == topic]
            for key in doomed:
                store.remove(group.group_id, key)
            if doomed:
                self._delete_if_bare(group, f"its last offsets belonged to deleted topic {topic}")

    def clear(self) -> None:
        """The coordinator gave up its groups (section 16): their offsets go with them."""
        for group_id in self._store.group_ids():
            self._store.remove_group(group_id)


def rejected_commit(request: CommitRequest, error: ErrorCode) -> PartitionErrors:
    """The answer to a commit refused as a whole: ``error`` for every partition."""
    return every_partition(((topic, (p.partition for p in partitions)) for topic, partitions in request.topics), error)


def _java_string_length(text: str) -> int:
    """Kafka measures commit metadata with String.length(): UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _fetched(partition: int, stored: CommittedOffset | None) -> FetchedOffset:
    if stored is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, stored.offset, stored.leader_epoch, stored.metadata)
