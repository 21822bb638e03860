"""A share coordinator on a manual clock (``docs/spec/share-groups.md``, checklist of section 15 of the KIP-932
spec): ShareGroupHeartbeat, ShareFetch and ShareAcknowledge called directly, partition logs in memory.

Nothing here sleeps: ``h.advance(ms)`` moves time and fires due deadlines (sessions, record locks) in order.
Topics are named in tests and turned into ids here; each partition's log is a ``PartitionLog`` the tests append
producer batches to (``h.produce``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.client import Client
from broker.coordinator.config import GroupConfig
from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.messages import (
    PartitionAcks,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
)
from broker.coordinator.modern.share.partition import AckBatch, SharePartition
from broker.coordinator.modern.share.service import ShareCoordinator
from broker.coordinator.modern.share.state import ShareGroupState
from broker.coordinator.modern.types import TopicId
from broker.storage.partition_log import PartitionLog, StorageBudget
from broker.storage.records import split_batches, validate_client_batch
from broker.timing.deferred import Deferred
from broker.timing.keys import share_session_key
from tests.coordinator.modern.consumer.harness import ConsumerHarness, E
from tests.storage import make_batch

__all__ = [
    "ACCEPT", "GAP", "GROUP", "INTERVAL_MS", "LOCK_MS", "REJECT", "RELEASE", "RENEW", "SESSION_MS", "Acks", "E",
    "ShareHarness", "ack_error", "acquired", "offsets", "share_config",
]  # fmt: skip

GROUP = "share-group"
SESSION_MS = 6_000
INTERVAL_MS = 500
LOCK_MS = 5_000
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

# Acknowledgements of one partition: (first offset, last offset, types) batches.
Acks = Sequence[tuple[int, int, tuple[int, ...]]]


def share_config(**overrides: Any) -> GroupConfig:
    values: dict[str, Any] = {
        "initial_rebalance_delay_ms": 0,
        "share_session_timeout_ms": SESSION_MS,
        "share_min_session_timeout_ms": SESSION_MS,
        "share_heartbeat_interval_ms": INTERVAL_MS,
        "share_min_heartbeat_interval_ms": INTERVAL_MS,
        "share_record_lock_duration_ms": LOCK_MS,
        "share_min_record_lock_duration_ms": 1_000,
    }
    values.update(overrides)
    return GroupConfig(**values)


@dataclass
class ShareHarness(ConsumerHarness):
    config: GroupConfig = field(default_factory=share_config)
    topics: Mapping[str, int] = field(default_factory=lambda: {"t": 1})
    reset: str | None = "earliest"  # share.auto.offset.reset of GROUP (None: the default, latest)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.logs: dict[tuple[TopicId, int], PartitionLog] = {}
        self.budget = StorageBudget(-1)
        self.share.wire_logs(self._log_of)
        self.epochs_of: dict[str, int] = {}  # share session epoch a member sends next
        if self.reset is not None:
            self.coordinator.group_configs.replace(GROUP, {"share.auto.offset.reset": self.reset})

    @property
    def share(self) -> ShareCoordinator:
        return self.coordinator.share

    def _log_of(self, topic_id: TopicId, partition: int) -> PartitionLog | None:
        info = self.catalog.by_id(topic_id)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self.logs.setdefault((topic_id, partition), PartitionLog(self.budget))

    # -- logs ---------------------------------------------------------------------------------------------------

    def log(self, topic: str = "t", partition: int = 0) -> PartitionLog:
        found = self._log_of(self.tid(topic), partition)
        assert found is not None
        return found

    def produce(self, count: int, topic: str = "t", partition: int = 0, **batch: Any) -> int:
        """Append one producer batch of ``count`` records; its base offset. Parked fetches on the log look again."""
        log = self.log(topic, partition)
        ((header, data),) = split_batches(make_batch(count, **batch))
        base = log.append(header, data, validate_client_batch(header, data, 1 << 24))
        self.share.data_appended(log)
        return base

    # -- ShareGroupHeartbeat --------------------------------------------------------------------------------------

    def shb(
        self,
        member_id: str,
        epoch: int,
        names: Iterable[str] | None = None,
        *,
        group_id: str = GROUP,
        rack_id: str | None = None,
    ) -> ShareHeartbeatResult:
        return self.share.heartbeat(
            ShareHeartbeatRequest(
                group_id, member_id, epoch, rack_id, None if names is None else tuple(names), Client("c", "/127.0.0.1")
            )
        )

    def sjoin(self, member_id: str, names: Iterable[str] = ("t",), **fields: Any) -> ShareHeartbeatResult:
        result = self.shb(member_id, 0, names, **fields)
        assert result.error is E.none, result
        return result

    def sgroup(self, group_id: str = GROUP) -> ShareGroup:
        return self.coordinator._registry.share_groups[group_id]

    def sstate(self, group_id: str = GROUP) -> ShareGroupState:
        return self.sgroup(group_id).state

    def sassigned(self, member_id: str, group_id: str = GROUP) -> dict[str, set[int]]:
        named = self.named(self.sgroup(group_id).members[member_id].assigned)
        assert named is not None
        return named

    def share_session_due(self, member_id: str, group_id: str = GROUP) -> int | None:
        return self.purgatory.deadline(share_session_key(group_id, member_id))

    # -- ShareFetch and ShareAcknowledge ---------------------------------------------------------------------------

    def fetch(
        self,
        member_id: str,
        partitions: Iterable[tuple[str, int]] = (("t", 0),),
        *,
        acks: Mapping[tuple[str, int], Acks] | None = None,
        epoch: int | None = None,
        max_records: int = 500,
        max_wait_ms: int = 0,
        batch_size: int = 500,
        group_id: str = GROUP,
        connection: int = 1,
        **options: Any,
    ) -> ShareAnswer:
        """One ShareFetch; the session epoch defaults to the member's next (0 for its first fetch). ``options``: those
        of ``fetch_deferred`` (record_limit, renew, min_bytes, max_bytes, forgotten)."""
        answer = self.fetch_deferred(
            member_id, partitions, acks=acks, epoch=epoch, max_records=max_records, max_wait_ms=max_wait_ms,
            batch_size=batch_size, group_id=group_id, connection=connection, **options,
        )  # fmt: skip
        assert not isinstance(answer, Deferred), "the fetch was parked"
        return answer

    def fetch_deferred(
        self,
        member_id: str,
        partitions: Iterable[tuple[str, int]] = (("t", 0),),
        *,
        acks: Mapping[tuple[str, int], Acks] | None = None,
        epoch: int | None = None,
        max_records: int = 500,
        max_wait_ms: int = 0,
        batch_size: int = 500,
        group_id: str = GROUP,
        connection: int = 1,
        record_limit: bool = False,
        renew: bool = False,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        forgotten: Iterable[tuple[str, int]] = (),
    ) -> ShareAnswer | Deferred[ShareAnswer]:
        """``record_limit``: v2 ShareAcquireMode 1; ``renew``: v2 IsRenewAck (the request is v2 with either)."""
        sent = self.epochs_of.get(member_id, 0) if epoch is None else epoch
        wanted = dict.fromkeys(partitions)
        for key in acks or {}:
            wanted.setdefault(key)
        request = ShareFetchRequest(
            group_id, member_id, sent, max_wait_ms, min_bytes, max_bytes, max_records, batch_size,
            tuple(self._acks(name, p, (acks or {}).get((name, p))) for name, p in wanted),
            tuple((self.tid(name), p) for name, p in forgotten), record_limit, renew,
            2 if record_limit or renew else 1,
        )  # fmt: skip
        answer = self.share.fetch(request, connection)
        if epoch is None:
            self.epochs_of[member_id] = -1 if sent == -1 else sent + 1
        return answer

    def acknowledge(
        self,
        member_id: str,
        acks: Mapping[tuple[str, int], Acks],
        *,
        epoch: int | None = None,
        group_id: str = GROUP,
        renew: bool = False,
    ) -> ShareAnswer:
        sent = self.epochs_of.get(member_id, 0) if epoch is None else epoch
        request = ShareAcknowledgeRequest(
            group_id, member_id, sent, tuple(self._acks(name, p, batches) for (name, p), batches in acks.items()),
            renew, 2 if renew else 1,
        )
        answer = self.share.acknowledge(request)
        if epoch is None and answer.error is E.none:
            self.epochs_of[member_id] = sent + 1
        return answer

    def _acks(self, name: str, partition: int, batches: Acks | None) -> PartitionAcks:
        return PartitionAcks(
            self.tid(name),
            partition,
            tuple(AckBatch(first, last, tuple(types)) for first, last, types in batches or ()),
            bool(batches),
        )

    def spart(self, topic: str = "t", partition: int = 0, group_id: str = GROUP) -> SharePartition:
        found = self.share.partitions.get((group_id, self.tid(topic), partition))
        assert found is not None
        return found


def acquired(answer: ShareAnswer, partition: int = 0) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) ranges the answer acquired on ``partition``."""
    return [r for p in answer.partitions if p.partition == partition for r in p.acquired]


def offsets(answer: ShareAnswer, partition: int | None = None) -> list[int]:
    return sorted(
        o
        for p in answer.partitions
        if partition is None or p.partition == partition
        for first, last, _ in p.acquired
        for o in range(first, last + 1)
    )


def ack_error(answer: ShareAnswer, partition: int = 0) -> Any:
    (entry,) = [p for p in answer.partitions if p.partition == partition]
    return entry.acknowledge_error

