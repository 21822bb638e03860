"""Committed offsets (section 13 of ``docs/spec/group-coordinator.md``, and 14.4 OffsetDelete).

Kafka keeps offsets apart from membership: its ``OffsetMetadataManager`` validates commits against the group,
answers fetches, expires offsets (KIP-211) and deletes them, while ``GroupMetadataManager`` runs the members. This
module is that half. The offsets themselves are stored on the group (``ClassicGroup.offsets``), since a group
without members lives exactly as long as its offsets do.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.group import ClassicGroup, CommittedOffset, MemberError
from broker.coordinator.classic.groups import ClassicGroups
from broker.coordinator.classic.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE
from broker.coordinator.messages import (
    CommitRequest,
    FetchedOffset,
    GroupOffsets,
    OffsetDeleteResult,
    PartitionErrors,
    TxnCommitRequest,
)
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.groups import ConsumerGroups
from broker.coordinator.txn_offsets import TransactionalOffsets
from broker.timing.keys import OFFSETS_EXPIRATION

E = ErrorCode


class OffsetManager:
    def __init__(self, groups: ClassicGroups, consumer_groups: ConsumerGroups) -> None:
        self._groups = groups
        self._consumer = consumer_groups
        # transactions.md 5.2: one record order for regular and transactional commits alike.
        self._orders = itertools.count(1)
        max_bytes = groups.config.offset_metadata_max_bytes
        self.transactional = TransactionalOffsets(
            groups,
            consumer_groups,
            self._orders.__next__,
            lambda metadata: _java_string_length(metadata) > max_bytes,
        )
        self._schedule_expiration()

    # -- OffsetCommit (13.1) ------------------------------------------------------------------------------

    def commit(self, request: CommitRequest) -> PartitionErrors:
        consumer_group = self._consumer.get(request.group_id)
        if consumer_group is not None:
            error = _validate_consumer_commit(consumer_group, request)
            if error is not None:
                return rejected_commit(request, error)
            return self._store(consumer_group.offsets, request)
        error = self._validate_commit(request)
        if error is not None:
            return rejected_commit(request, error)
        group = self._groups.groups[request.group_id]
        results = self._store(group.offsets, request)
        events = self._groups.events
        if events.wants_debug:
            committed = [
                (topic, commit.partition, commit.offset)
                for (topic, commits), (_, errors) in zip(request.topics, results, strict=True)
                for commit, (_, error) in zip(commits, errors, strict=True)
                if error is E.none
            ]
            events.offsets_committed(group, request.member_id, request.generation_id, committed)
        return results

    def _store(self, offsets: dict[tuple[str, int], CommittedOffset], request: CommitRequest) -> PartitionErrors:
        now = self._groups.clock.now_ms()
        expire_at = now + request.retention_time_ms if request.retention_time_ms != -1 else None
        max_bytes = self._groups.config.offset_metadata_max_bytes
        results = []
        for topic, partitions in request.topics:
            errors = []
            for commit in partitions:
                metadata = commit.metadata or ""
                if _java_string_length(metadata) > max_bytes:
                    errors.append((commit.partition, E.offset_metadata_too_large))
                    continue
                timestamp = commit.commit_timestamp_ms if commit.commit_timestamp_ms != -1 else now
                offsets[(topic, commit.partition)] = CommittedOffset(
                    commit.offset, commit.leader_epoch, metadata, timestamp, expire_at, next(self._orders)
                )
                errors.append((commit.partition, E.none))
            results.append((topic, tuple(errors)))
        return tuple(results)

    def _validate_commit(self, request: CommitRequest) -> ErrorCode | None:
        group = self._groups.get(request.group_id)
        generation = request.generation_id
        if group is None:
            if generation < 0:
                self._groups.create(request.group_id)  # a "simple" group, for assign() and admin commits
                return None
            return E.group_id_not_found if request.api_version >= 9 else E.illegal_generation
        if group.is_in(DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_in(EMPTY):
            return None
        if generation < 0 and not request.member_id and request.group_instance_id is None:
            return E.unknown_member_id  # only members may commit into an active group
        try:
            member = group.validate_member(request.member_id, request.group_instance_id)
        except MemberError as failure:
            return failure.error
        if generation != group.generation_id:
            return E.illegal_generation
        if group.is_in(COMPLETING):
            return E.rebalance_in_progress
        if group.state in (STABLE, PREPARING):
            self._groups.extend_session(member, member.session_timeout_ms)  # a commit is a proof of life
        return None

    def commit_transactional(self, request: TxnCommitRequest) -> PartitionErrors:
        """TxnOffsetCommit's group checks and staging (transactions.md 5.1 steps 5-6)."""
        return self.transactional.commit(request)

    # -- OffsetFetch (13.3) -------------------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        topics: Iterable[tuple[str, Iterable[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> GroupOffsets:
        consumer_group = self._consumer.get(group_id)
        offsets: dict[tuple[str, int], CommittedOffset]
        if consumer_group is not None:
            # Section 8.2: OffsetFetch v9 names the member; an admin (null member, epoch < 0) is not checked.
            if member_id is not None or member_epoch >= 0:
                member = consumer_group.members.get(member_id or "")
                if member is None:
                    return GroupOffsets(group_id, E.unknown_member_id)
                if member_epoch != member.member_epoch:
                    return GroupOffsets(group_id, E.stale_member_epoch)
            offsets = consumer_group.offsets
        else:
            group = self._groups.live(group_id)
            offsets = {} if group is None else group.offsets
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

    # -- retention (13.2) ---------------------------------------------------------------------------------

    def _schedule_expiration(self) -> None:
        interval_ms = self._groups.config.offsets_retention_check_interval_ms
        self._groups.purgatory.schedule(OFFSETS_EXPIRATION, interval_ms, self._expire)

    def _expire(self) -> None:
        """The periodic retention sweep; Empty groups left without offsets are deleted (section 16).

        The next sweep is armed whatever happens, as Kafka's cleanupGroupMetadata timer is scheduled with retry
        (a sweep that throws runs again an interval later). Each group is swept in isolation besides: one group
        that raises is logged and skipped, so it cannot keep the other groups' offsets forever. The sweep only
        touches offsets, so the group's members are left alone.
        """
        try:
            for group in list(self._groups.groups.values()):
                try:
                    self._expire_group(group)
                except Exception:
                    self._groups.failures += 1
                    self._groups.log.exception("offsets retention sweep failed for a group", group_id=group.group_id)
            for consumer_group in list(self._consumer.groups.values()):
                try:
                    self._expire_consumer_group(consumer_group)
                except Exception:
                    self._consumer.failures += 1
                    self._groups.log.exception(
                        "offsets retention sweep failed for a group", group_id=consumer_group.group_id
                    )
        finally:
            self._schedule_expiration()

    def _expire_group(self, group: ClassicGroup) -> None:
        now = self._groups.clock.now_ms()
        retention_ms = self._groups.config.offsets_retention_ms
        base = _expiration_base(group)
        pending = self.transactional.pending_keys(group.group_id)
        if base is not None and group.offsets:
            for key, stored in list(group.offsets.items()):
                if base == "subscription" and group.is_subscribed_to(key[0]):
                    continue
                if key in pending:
                    continue  # transactions.md 5.5: an offset with a pending transactional one does not expire
                if stored.expire_timestamp_ms is not None:
                    expired = now >= stored.expire_timestamp_ms
                else:
                    started = group.state_timestamp_ms if base == "state" else stored.commit_timestamp_ms
                    expired = now - started >= retention_ms
                if expired:
                    del group.offsets[key]
            if not group.offsets:
                self._groups.events.offsets_expired(group)
        if group.is_in(EMPTY) and not group.offsets and not self.transactional.has_open_transactions(group.group_id):
            self._groups.delete(group, "empty group without offsets expired")

    # -- OffsetDelete (14.4, KIP-496) and deleted topics --------------------------------------------------

    def delete(self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]]) -> OffsetDeleteResult:
        if not group_id:
            return OffsetDeleteResult(E.invalid_group_id)
        group: ClassicGroup | ConsumerGroup | None = self._consumer.get(group_id)
        if group is None:
            group = self._groups.live(group_id)
            if group is None:
                return OffsetDeleteResult(E.group_id_not_found)
            if not group.is_in(EMPTY) and group.protocol_type != "consumer":
                return OffsetDeleteResult(E.non_empty_group)
        # A consumer group deletes in every state (section 8.3), but never a topic a member subscribes to.
        results = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                results.append((topic, tuple((p, E.group_subscribed_to_topic) for p in partitions)))
                continue
            for partition in partitions:
                group.offsets.pop((topic, partition), None)
            # transactions.md 5.5: the tombstone also removes the pending transactional offsets.
            self.transactional.remove(group_id, ((topic, p) for p in partitions))
            results.append((topic, tuple((p, E.none) for p in partitions)))
        return OffsetDeleteResult(E.none, tuple(results))

    def on_topic_deleted(self, topic: str) -> None:
        """GroupCoordinator.onPartitionsDeleted: drop the topic's offsets, pending transactional ones included
        (transactions.md 5.5); Empty groups left bare go too."""
        self.transactional.remove_topic(topic)
        for group in list(self._groups.groups.values()):
            doomed = [key for key in group.offsets if key[0] == topic]
            for key in doomed:
                del group.offsets[key]
            if (
                doomed
                and group.is_in(EMPTY)
                and not group.offsets
                and not self.transactional.has_open_transactions(group.group_id)
            ):
                self._groups.delete(group, f"its last offsets belonged to deleted topic {topic}")
        for consumer_group in list(self._consumer.groups.values()):
            doomed = [key for key in consumer_group.offsets if key[0] == topic]
            for key in doomed:
                del consumer_group.offsets[key]
            if (
                doomed
                and consumer_group.is_empty()
                and not consumer_group.offsets
                and not self.transactional.has_open_transactions(consumer_group.group_id)
            ):
                self._consumer.delete(consumer_group, f"its last offsets belonged to deleted topic {topic}")

    def _expire_consumer_group(self, group: ConsumerGroup) -> None:
        """Section 8.5: offsets of topics no member subscribes to expire from their commit, whatever the state;
        an Empty group left without offsets is deleted."""
        now = self._groups.clock.now_ms()
        retention_ms = self._groups.config.offsets_retention_ms
        expired_any = False
        pending = self.transactional.pending_keys(group.group_id)
        for key, stored in list(group.offsets.items()):
            if group.is_subscribed_to(key[0]) or key in pending:
                continue
            if stored.expire_timestamp_ms is not None:
                expired = now >= stored.expire_timestamp_ms
            else:
                expired = now - stored.commit_timestamp_ms >= retention_ms
            if expired:
                del group.offsets[key]
                expired_any = True
        if expired_any:
            self._consumer.log.info("offsets expired", group_id=group.group_id)
        if group.is_empty() and not group.offsets and not self.transactional.has_open_transactions(group.group_id):
            self._consumer.delete(group, "empty group without offsets expired")


def _validate_consumer_commit(group: ConsumerGroup, request: CommitRequest) -> ErrorCode | None:
    """Section 8.1 for a consumer group (Kafka's ConsumerGroup.validateOffsetCommit)."""
    if request.generation_id < 0 and group.is_empty():
        return None  # admin tools, assign()-only consumers
    member = group.members.get(request.member_id)
    if member is None:
        return E.unknown_member_id
    if request.api_version < 9:
        return E.unsupported_version
    if request.generation_id != member.member_epoch:
        return E.stale_member_epoch
    return None


def rejected_commit(request: CommitRequest, error: ErrorCode) -> PartitionErrors:
    """The answer to a commit refused as a whole: ``error`` for every partition."""
    return tuple((topic, tuple((p.partition, error) for p in partitions)) for topic, partitions in request.topics)


def _java_string_length(text: str) -> int:
    """Kafka measures commit metadata with String.length(): UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _fetched(partition: int, stored: CommittedOffset | None) -> FetchedOffset:
    if stored is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, stored.offset, stored.leader_epoch, stored.metadata)


def _expiration_base(group: ClassicGroup) -> str | None:
    """Which clock an offset's retention counts from (13.2, Kafka's offsetExpirationCondition), or None."""
    if not group.protocol_type:
        return "commit"  # a simple group: standalone consumers and admin commits
    if group.is_in(EMPTY):
        return "state"
    if group.protocol_type == "consumer" and group.is_in(STABLE) and group.subscribed_topics is not None:
        return "subscription"
    return None
