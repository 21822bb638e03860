"""The share coordinator: what the API layer and the control API ask of share groups (Kafka's
``GroupCoordinatorService`` share methods and ``SharePartitionManager`` together; ``docs/spec/share-groups.md``).

The group side (``groups.py``: heartbeat, describe, membership) and the partition side (``partitions.py``,
``fetch.py``: share-partitions, sessions, ShareFetch and ShareAcknowledge) share one clock, purgatory and event log.
The admin APIs of section 10 are here: describe, alter and delete of a group's share-partition start offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, Change, ChangeSink, of_kind
from broker.coordinator.config import GroupConfig
from broker.coordinator.group_configs import GroupConfigs
from broker.coordinator.modern.share import durable
from broker.coordinator.modern.share.events import ShareEventLog
from broker.coordinator.modern.share.fetch import LogOf, ShareFetcher
from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.groups import ShareGroups
from broker.coordinator.modern.share.messages import (
    PartitionAcks,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    ShareMemberDescription,
    ShareOffset,
)
from broker.coordinator.modern.share.partitions import SharePartitions
from broker.coordinator.modern.share.sessions import ShareSessions
from broker.coordinator.modern.types import TopicCatalog, TopicId
from broker.coordinator.registry import GroupRegistry, WrongGroupType
from broker.events.hub import GroupEvents
from broker.timing.clock import Clock
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Purgatory

__all__ = ["LogEnd", "ShareCoordinator"]

E = ErrorCode
#: A partition's log end offset by topic id, None for an unknown one (DescribeShareGroupOffsets' Lag).
LogEnd = Callable[[TopicId, int], "int | None"]


class ShareCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        group_configs: GroupConfigs,
        clock: Clock,
        purgatory: Purgatory,
        topics: TopicCatalog,
        hub: GroupEvents,
        log: structlog.typing.FilteringBoundLogger,
        registry: GroupRegistry,
        *,
        changes: ChangeSink = NULL_CHANGES,
    ) -> None:
        self.registry = registry
        self.topics = topics
        self.group_configs = group_configs
        self.log = log
        self.events = ShareEventLog(hub, topics)
        self.groups = ShareGroups(
            config, group_configs, clock, purgatory, topics, self.events, log, registry, changes=changes
        )
        self.partitions = SharePartitions(config, group_configs, clock, purgatory, self.events, changes=changes)
        self.sessions = ShareSessions(config.share_max_share_sessions)
        self.fetcher = ShareFetcher(self.partitions, self.sessions, topics, purgatory, self.events)
        self.groups.on_deleted = self._group_deleted
        self.active = True

    @property
    def config(self) -> GroupConfig:
        return self.groups.config

    @config.setter
    def config(self, config: GroupConfig) -> None:
        self.groups.config = config
        self.partitions.config = config
        self.group_configs.config = config
        self.sessions.limit = config.share_max_share_sessions

    def wire_logs(self, log_of: LogOf) -> None:
        """Storage's partition logs, by topic id and partition (the server wires them: no I/O here)."""
        self.fetcher.log_of = log_of

    @property
    def failures(self) -> int:
        return self.groups.failures

    # -- ShareGroupHeartbeat and ShareGroupDescribe (sections 4 and 10.1) ------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        if not self.active:
            return ShareHeartbeatResult(E.coordinator_not_available)
        try:
            return self.groups.heartbeat(request)
        except Exception:
            self.groups.failures += 1
            self.log.exception("ShareGroupHeartbeat failed", group_id=request.group_id, member_id=request.member_id)
            return ShareHeartbeatResult(E.coordinator_not_available)

    def heartbeat_steady(
        self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str
    ) -> int | None:
        """The hot path (``ShareGroups.steady``): the interval to answer a steady beat with, or None for
        ``heartbeat``."""
        if not self.active:
            return None
        try:
            return self.groups.steady(group_id, member_id, epoch, client_id, client_host)
        except Exception:
            self.groups.failures += 1
            self.log.exception("ShareGroupHeartbeat failed", group_id=group_id, member_id=member_id)
            return None

    def describe(self, group_id: str) -> ShareGroupDescription:
        if not self.active:
            return ShareGroupDescription(group_id, E.coordinator_not_available)
        if not group_id:
            return ShareGroupDescription(group_id, E.invalid_group_id)
        try:
            group = self.registry.share(group_id)
        except WrongGroupType as wrong:
            return ShareGroupDescription(group_id, E.group_id_not_found, str(wrong))
        members = tuple(
            ShareMemberDescription(
                m.member_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                tuple(
                    (topic_id, self.events.topic_name(topic_id), tuple(sorted(parts)))
                    for topic_id, parts in sorted(m.assigned.items())
                ),
            )
            for m in group.members.values()
        )
        return ShareGroupDescription(
            group_id, E.none, None, group.state.value, group.group_epoch, group.assignment_epoch, "simple", members
        )

    # -- ShareFetch and ShareAcknowledge (sections 7-9) ---------------------------------------------------------------

    def fetch(self, request: ShareFetchRequest, connection: int) -> ShareAnswer | Deferred[ShareAnswer]:
        if not self.active:
            return ShareAnswer(E.coordinator_not_available)
        return self.fetcher.fetch(request, connection)

    def fetch_steady(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        batch_size: int,
        acks: PartitionAcks | None,
        request: Callable[[], ShareFetchRequest],
        connection: int,
    ) -> ShareAnswer | Deferred[ShareAnswer] | None:
        """``ShareFetcher.fetch_steady``; None (the full ``fetch`` answers) while the coordinator is not active."""
        if not self.active:
            return None
        return self.fetcher.fetch_steady(
            group_id, member_id, epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size, acks, request,
            connection,
        )  # fmt: skip

    def acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAnswer:
        if not self.active:
            return ShareAnswer(E.coordinator_not_available)
        return self.fetcher.acknowledge(request)

    def connection_closed(self, connection: int) -> None:
        """Section 7: the sessions this connection opened end, and their members' records come back at once."""
        self.fetcher.connection_closed(connection)

    def data_appended(self, log: object) -> None:
        """New records (or a moved LSO) in a partition's log: parked share fetches on it look again."""
        self.partitions.wake_log(log)

    def topic_deleted(self, topic_id: object) -> None:
        self.partitions.drop_topic(topic_id)  # type: ignore[arg-type]

    # -- the share-group offsets admin APIs (section 10.2, 10.3) -------------------------------------------------------

    def describe_offsets(
        self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]] | None, log_end: LogEnd
    ) -> tuple[ErrorCode, str | None, list[tuple[str, TopicId | None, list[ShareOffset]]]]:
        """(group error, message, per topic: name, id or None, partitions). Topics None: every initialised one."""
        if not self.active:
            return E.coordinator_not_available, None, []
        if not group_id:
            return E.invalid_group_id, None, []
        if self.registry.get(group_id) is not None and group_id not in self.registry.share_groups:
            return E.group_id_not_found, f"Group {group_id} is not a share group.", []
        if topics is None:
            by_topic: dict[object, list[int]] = {}
            for (_, topic_id, partition), share in self.partitions.of_group(group_id):
                if share.initialised:
                    by_topic.setdefault(topic_id, []).append(partition)
            wanted = [
                (self.events.topic_name(topic_id), sorted(parts))  # type: ignore[arg-type]
                for topic_id, parts in by_topic.items()
            ]
        else:
            wanted = [(name, list(parts)) for name, parts in topics]
        answer: list[tuple[str, TopicId | None, list[ShareOffset]]] = []
        for name, parts in wanted:
            info = self.topics.by_name(name)
            offsets: list[ShareOffset] = []
            for partition in parts:
                found = None if info is None else self.partitions.get((group_id, info.topic_id, partition))
                if info is None or found is None or not found.initialised:
                    offsets.append(ShareOffset(partition, -1))
                    continue
                share = found
                end = log_end(info.topic_id, partition)
                lag = -1 if end is None else max(0, end - share.start_offset - share.finished_above_start())
                offsets.append(ShareOffset(partition, share.start_offset, share.leader_epoch, lag))
            answer.append((name, None if info is None else info.topic_id, offsets))
        return E.none, None, answer

    def alter_offsets(
        self, group_id: str, topics: Iterable[tuple[str, Iterable[tuple[int, int]]]]
    ) -> tuple[ErrorCode, str | None, list[tuple[str, TopicId | None, list[tuple[int, ErrorCode, str | None]]]]]:
        error, message, _ = self._empty_share_group(group_id, create=True)
        if error is not E.none:
            return error, message, []
        answer: list[tuple[str, TopicId | None, list[tuple[int, ErrorCode, str | None]]]] = []
        for name, partitions in topics:
            info = self.topics.by_name(name)
            results: list[tuple[int, ErrorCode, str | None]] = []
            for partition, offset in partitions:
                if info is None or not 0 <= partition < info.partitions:
                    results.append((partition, E.unknown_topic_or_partition, None))
                    continue
                self.partitions.reset((group_id, info.topic_id, partition), offset)
                results.append((partition, E.none, None))
            answer.append((name, None if info is None else info.topic_id, results))
        return E.none, None, answer

    def delete_offsets(
        self, group_id: str, topic_names: Iterable[str]
    ) -> tuple[ErrorCode, str | None, list[tuple[str, TopicId | None, ErrorCode, str | None]]]:
        error, message, _ = self._empty_share_group(group_id, create=False)
        if error is not E.none:
            return error, message, []
        answer: list[tuple[str, TopicId | None, ErrorCode, str | None]] = []
        for name in topic_names:
            info = self.topics.by_name(name)
            if info is None:
                answer.append((name, None, E.unknown_topic_or_partition, None))
                continue
            for key, _ in self.partitions.of_group(group_id):
                if key[1] == info.topic_id:
                    self.partitions.drop(key)
            answer.append((name, info.topic_id, E.none, None))
        return E.none, None, answer

    def _empty_share_group(
        self, group_id: str, *, create: bool
    ) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        if not self.active:
            return E.coordinator_not_available, None, None
        if not group_id:
            return E.invalid_group_id, None, None
        if self.registry.get(group_id) is not None and group_id not in self.registry.share_groups:
            return E.group_id_not_found, f"Group {group_id} is not a share group.", None
        group = self.registry.share_groups.get(group_id)
        if group is None:
            if not create:
                return E.group_id_not_found, f"Group {group_id} not found.", None
            group = self.groups.create(group_id)
        if not group.is_empty():
            return E.non_empty_group, "The group is not empty.", None
        return E.none, None, group

    def _group_deleted(self, group_id: str) -> None:
        """DeleteGroups (section 10.4): the share-partition state goes with the group."""
        for session in self.sessions.of_group(group_id):
            self.fetcher.close(session, "its group was deleted")
        self.partitions.drop_group(group_id)

    # -- lifecycle and durable state ---------------------------------------------------------------------------------

    def shutdown(self) -> None:
        self.active = False
        self.groups.unload_all()

    def durable_records(self) -> Iterator[Change]:
        for group in self.registry.share_groups.values():
            yield Change(durable.GROUP, (group.group_id,), durable.group_value(group))
            for member in group.members.values():
                yield Change(durable.MEMBER, (group.group_id, member.member_id), durable.member_value(member))
        yield from self.partitions.durable_records()

    def load(self, changes: Iterable[Change]) -> None:
        """Kafka's replay: groups with their members (each with a fresh session timer) and the share-partitions."""
        changes = list(of_kind(changes, "share."))
        now = self.groups.clock.now_ms()
        for change in changes:
            if change.kind == durable.GROUP and change.value is not None:
                group = ShareGroup(str(change.key[0]), now)
                group.group_epoch = int(change.value["group_epoch"])
                group.assignment_epoch = int(change.value["assignment_epoch"])
                self.registry.add_share(group)
        for change in changes:
            if change.kind == durable.MEMBER and change.value is not None:
                group_id, member_id = str(change.key[0]), str(change.key[1])
                found = self.registry.share_groups.get(group_id)
                if found is None:
                    continue
                member = durable.rebuild_member(member_id, change.value, now)
                found.add_member(member)
                found.targets[member_id] = member.assigned
                self.groups.arm_session(found, member)
        self.partitions.load(changes)

