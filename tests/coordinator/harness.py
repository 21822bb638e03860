"""A coordinator on a manual clock, with shorthands for the scenario tests.

Nothing here sleeps: ``h.advance(ms)`` moves time and fires due deadlines in order.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.classic.state import GroupState
from broker.coordinator.config import GroupConfig
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import (
    Client,
    CommitRequest,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    PartitionCommit,
    SyncRequest,
    SyncResult,
)
from broker.timing.clock import ManualClock
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Purgatory

E = ErrorCode
GROUP = "group"
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocol subscription v0 bytes for the given topics."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", subscription("topic")),)


@dataclass
class Harness:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    clock: ManualClock = field(default_factory=ManualClock)

    def __post_init__(self) -> None:
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        counter = itertools.count(1)
        self.coordinator = GroupCoordinator(
            self.config, self.clock, self.purgatory, new_uuid=lambda: f"uuid{next(counter)}"
        )

    # -- time --------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    # -- inspection ----------------------------------------------------------------

    def group(self, group_id: str = GROUP) -> ClassicGroup:
        return self.coordinator.groups[group_id]

    def state(self, group_id: str = GROUP) -> GroupState:
        return self.group(group_id).state

    # -- requests ------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocol_type: str = "consumer",
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        version: int = 9,
        client_id: str = "client",
        reason: str | None = None,
    ) -> Deferred[JoinResult]:
        return self.coordinator.join(
            JoinRequest(
                group_id=group_id,
                member_id=member_id,
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                protocol_type=protocol_type,
                protocols=protocols,
                group_instance_id=instance_id,
                reason=reason,
                api_version=version,
                client=Client(client_id, "/127.0.0.1"),
            )
        )

    def join_new(self, *, version: int = 9, **kwargs: object) -> Deferred[JoinResult]:
        """A dynamic member's first join; on v4+ does the KIP-394 two-step and returns the second request."""
        first = self.join("", version=version, **kwargs)  # type: ignore[arg-type]
        if first.done and first.value.error is E.member_id_required:
            return self.join(first.value.member_id, version=version, **kwargs)  # type: ignore[arg-type]
        return first

    def sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Deferred[SyncResult]:
        return self.coordinator.sync(
            SyncRequest(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                assignments=tuple((assignments or {}).items()),
                group_instance_id=instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
            )
        )

    def heartbeat(
        self, member_id: str, generation_id: int, *, group_id: str = GROUP, instance_id: str | None = None
    ) -> ErrorCode:
        return self.coordinator.heartbeat(group_id, generation_id, member_id, instance_id)

    def leave(self, *members: LeavingMember | str, group_id: str = GROUP) -> LeaveResult:
        identities = [m if isinstance(m, LeavingMember) else LeavingMember(m) for m in members]
        return self.coordinator.leave(group_id, identities)

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group_id: str = GROUP,
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        metadata: str | None = "",
        retention_ms: int = -1,
        version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[PartitionCommit]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(PartitionCommit(partition, offset, -1, metadata))
        result = self.coordinator.commit_offsets(
            CommitRequest(
                group_id=group_id,
                topics=tuple((t, tuple(ps)) for t, ps in topics.items()),
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=instance_id,
                retention_time_ms=retention_ms,
                api_version=version,
            )
        )
        return {(topic, p): error for topic, parts in result for p, error in parts}

    # -- composite steps -----------------------------------------------------------

    def stable_group(self, size: int, *, group_id: str = GROUP, **join_kwargs: object) -> list[str]:
        """Form a Stable group of ``size`` dynamic members; returns member ids, leader first."""
        joins = [self.join_new(group_id=group_id, **join_kwargs) for _ in range(size)]  # type: ignore[arg-type]
        self.advance(self.config.initial_rebalance_delay_ms)
        results = [j.value for j in joins]
        assert all(r.error is E.none for r in results), results
        leader = results[0].leader
        generation = results[0].generation_id
        ids = [r.member_id for r in results]
        plan = {i: i.encode() for i in ids}
        syncs = [self.sync(m, generation, plan if m == leader else None, group_id=group_id) for m in ids]
        assert all(s.done and s.value.error is E.none for s in syncs)
        assert self.state(group_id) is GroupState.STABLE
        return [leader] + [m for m in ids if m != leader]


def stable_static_group(
    h: Harness,
    *instance_ids: str,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
    group_id: str = GROUP,
) -> list[str]:
    """Form a Stable group of static members; returns their member ids in ``instance_ids`` order.

    The first instance is the leader; it assigns every member its own member id as bytes.
    """
    joins = [
        h.join(
            instance_id=instance_id,
            session_ms=session_ms,
            rebalance_ms=rebalance_ms,
            protocols=protocols,
            group_id=group_id,
        )
        for instance_id in instance_ids
    ]
    h.advance(h.config.initial_rebalance_delay_ms)
    results = [j.value for j in joins]
    assert all(r.error is E.none for r in results), results
    ids = [r.member_id for r in results]
    assert results[0].leader == ids[0]
    generation = results[0].generation_id
    syncs = [
        h.sync(m, generation, {i: i.encode() for i in ids} if m == ids[0] else None, group_id=group_id, instance_id=i)
        for m, i in zip(ids, instance_ids, strict=True)
    ]
    assert all(s.done and s.value.error is E.none for s in syncs)
    assert h.state(group_id) is GroupState.STABLE
    return ids
