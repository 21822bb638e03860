"""A consumer-group coordinator on a manual clock: the classic ``Harness`` with a topic catalog, shorthands for
ConsumerGroupHeartbeat, and a small model of a KIP-848 client (``Consumer``).

Partitions are written by topic *name* in tests (``{"t": {0, 1}}``) and turned into topic ids at the coordinator's
door, since the protocol speaks ids only (section 3.6 of ``docs/spec/consumer-groups.md``). Topic ids are handed out
in creation order (``UUID(int=1)``, ``UUID(int=2)``, ...) so the assignors' placements are reproducible; a topic
deleted and created again gets a new id, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.config import GroupConfig
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import (
    Client,
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    TopicIdPartitions,
)
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import Assignment, MemberState, StaticCatalog, TopicId
from broker.events.hub import GroupEvents
from broker.timing.keys import consumer_rebalance_key, consumer_session_key
from broker.timing.purgatory import Purgatory
from tests.coordinator.harness import GROUP, E, Harness

__all__ = [
    "GROUP",
    "INTERVAL_MS",
    "REBALANCE_MS",
    "SESSION_MS",
    "Consumer",
    "ConsumerHarness",
    "E",
    "Named",
    "consumer_config",
]

# The test-friendly broker settings of section 11 (session 6 s, heartbeat interval 500 ms).
SESSION_MS = 6_000
INTERVAL_MS = 500
REBALANCE_MS = 30_000

Named = dict[str, set[int]]  # partitions by topic name


def consumer_config(**overrides: Any) -> GroupConfig:
    values: dict[str, Any] = {
        "initial_rebalance_delay_ms": 0,
        "consumer_session_timeout_ms": SESSION_MS,
        "consumer_min_session_timeout_ms": SESSION_MS,
        "consumer_heartbeat_interval_ms": INTERVAL_MS,
        "consumer_min_heartbeat_interval_ms": INTERVAL_MS,
    }
    values.update(overrides)
    return GroupConfig(**values)


@dataclass
class ConsumerHarness(Harness):
    config: GroupConfig = field(default_factory=consumer_config)
    topics: Mapping[str, int] = field(default_factory=lambda: {"t": 4})

    def __post_init__(self) -> None:
        # The base harness's coordinator, built with the topic catalog a consumer group needs (section 3.6).
        self._next_topic_id = 0
        self.catalog = StaticCatalog()
        for name, partitions in self.topics.items():
            self.create_topic(name, partitions)
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        self.coordinator = self.build_coordinator()

    def build_coordinator(self, events: GroupEvents | None = None) -> GroupCoordinator:
        """A coordinator on this harness's clock, purgatory and catalog, with numbered member ids; ``events`` for
        harnesses that read the events back."""
        counter = iter(range(1, 1 << 30))
        return GroupCoordinator(
            self.config,
            self.clock,
            self.purgatory,
            new_uuid=lambda: f"00000000-0000-0000-0000-{next(counter):012x}",
            topics=self.catalog,
            events=events,
        )

    # -- topics --------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> TopicId:
        self._next_topic_id += 1
        return self.catalog.create(name, partitions, uuid.UUID(int=self._next_topic_id)).topic_id

    def add_partitions(self, name: str, partitions: int) -> None:
        self.catalog.add_partitions(name, partitions)

    def delete_topic(self, name: str) -> None:
        self.catalog.delete(name)
        self.coordinator.on_topic_deleted(name)

    def tid(self, name: str) -> TopicId:
        info = self.catalog.by_name(name)
        assert info is not None, name
        return info.topic_id

    def wire(self, named: Mapping[str, Iterable[int]]) -> TopicIdPartitions:
        """Partitions by name as a request carries them (topic ids)."""
        return tuple((self.tid(name), tuple(sorted(partitions))) for name, partitions in named.items())

    def named(self, assignment: TopicIdPartitions | Assignment | None) -> Named | None:
        """A response's or a member's partitions by topic name; None stays None, empty topics are left out."""
        if assignment is None:
            return None
        pairs = assignment.items() if isinstance(assignment, Mapping) else assignment
        out: Named = {}
        for topic_id, partitions in pairs:
            info = self.catalog.by_id(topic_id)
            name = info.name if info is not None else str(topic_id)
            if partitions:
                out.setdefault(name, set()).update(partitions)
        return out

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------------------

    def hb(
        self,
        member_id: str,
        epoch: int,
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_ms: int = -1,
        names: Iterable[str] | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        owned: Mapping[str, Iterable[int]] | TopicIdPartitions | None = None,
        version: int = 1,
        client_id: str = "client",
    ) -> ConsumerHeartbeatResult:
        """One ConsumerGroupHeartbeat; every optional field defaults to "unchanged" (null), as on the wire."""
        topic_partitions = self.wire(owned) if isinstance(owned, Mapping) else owned
        return self.coordinator.consumer_heartbeat(
            ConsumerHeartbeatRequest(
                group_id=group_id,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_ms,
                subscribed_topic_names=None if names is None else tuple(names),
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                topic_partitions=topic_partitions,
                api_version=version,
                client=Client(client_id, "/127.0.0.1"),
            )
        )

    def cjoin(
        self,
        member_id: str,
        names: Iterable[str] | None = ("t",),
        *,
        rebalance_ms: int = REBALANCE_MS,
        owned: Mapping[str, Iterable[int]] | TopicIdPartitions | None = None,
        **fields: Any,
    ) -> ConsumerHeartbeatResult:
        """The join request of section 13: epoch 0, RebalanceTimeoutMs, names and TopicPartitions [].

        (``join`` stays the classic JoinGroup of the base harness.)"""
        return self.hb(member_id, 0, rebalance_ms=rebalance_ms, names=names, owned=owned or {}, **fields)

    def ok(self, result: ConsumerHeartbeatResult) -> ConsumerHeartbeatResult:
        assert result.error is E.none, result
        return result

    # -- inspection ----------------------------------------------------------------------------------------

    def cgroup(self, group_id: str = GROUP) -> ConsumerGroup:
        return self.coordinator.consumer_groups[group_id]

    def member(self, member_id: str, group_id: str = GROUP) -> ConsumerMember:
        return self.cgroup(group_id).members[member_id]

    def cstate(self, group_id: str = GROUP) -> ConsumerGroupState:
        return self.cgroup(group_id).state

    def epochs(self, group_id: str = GROUP) -> tuple[int, int]:
        group = self.cgroup(group_id)
        return group.group_epoch, group.assignment_epoch

    def assigned(self, member_id: str, group_id: str = GROUP) -> Named:
        named = self.named(self.member(member_id, group_id).assigned)
        assert named is not None
        return named

    def pending(self, member_id: str, group_id: str = GROUP) -> Named:
        named = self.named(self.member(member_id, group_id).pending_revocation)
        assert named is not None
        return named

    def target(self, member_id: str, group_id: str = GROUP) -> Named:
        named = self.named(self.cgroup(group_id).target_of(member_id))
        assert named is not None
        return named

    def session_due(self, member_id: str, group_id: str = GROUP) -> int | None:
        """When the member's session timer fires (section 7.1), or None when none is armed."""
        return self.purgatory.deadline(consumer_session_key(group_id, member_id))

    def rebalance_due(self, member_id: str, group_id: str = GROUP) -> int | None:
        """When the member's revocation timer fires (section 7.3), or None when none is armed."""
        return self.purgatory.deadline(consumer_rebalance_key(group_id, member_id))

    def check_ownership(self, group_id: str = GROUP) -> None:
        """Section 5.1's first invariant: a partition is in at most one member's assigned or pending revocation, and
        the group's ownership table (3.5) says exactly that; only a revoking member has partitions pending."""
        group = self.cgroup(group_id)
        seen: dict[tuple[TopicId, int], str] = {}
        for member in group.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for partition in partitions:
                        other = seen.setdefault((topic_id, partition), member.member_id)
                        assert other == member.member_id, (topic_id, partition, other, member.member_id)
            if member.pending_revocation:
                assert member.state is MemberState.UNREVOKED_PARTITIONS, member.member_id
        assert group.owners == seen
        # Section 3.4's state, kept incrementally, agrees with the state derived from scratch.
        epoch = group.assignment_epoch
        assert group.unreconciled == {m.member_id for m in group.members.values() if not m.is_reconciled_to(epoch)}

    def describe_group(self, group_id: str = GROUP) -> ConsumerGroupDescription:
        return self.coordinator.describe_consumer_group(group_id)

    def consumer(self, member_id: str, names: Iterable[str] = ("t",), **fields: Any) -> Consumer:
        return Consumer(self, member_id, tuple(names), **fields)

    def settle(self, *consumers: Consumer, group_id: str = GROUP, rounds: int = 20) -> None:
        """Poll every consumer until the group is Stable and nobody has an acknowledgement to send."""
        for _ in range(rounds):
            for consumer in consumers:
                consumer.poll()
            if self.cstate(group_id) is ConsumerGroupState.STABLE and not any(c.ack_due for c in consumers):
                return
        raise AssertionError(f"group did not settle: {self.cstate(group_id)}")


@dataclass
class Consumer:
    """A KIP-848 client as section 12.3 draws it: a full join, steady heartbeats with every field null, and an
    acknowledgement (the complete owned set) right after each new assignment. Fenced or unknown: it drops its
    partitions and re-joins under the same member id (12.5)."""

    h: ConsumerHarness
    member_id: str
    names: tuple[str, ...] = ("t",)
    regex: str | None = None
    instance_id: str | None = None
    assignor: str | None = None
    rebalance_ms: int = REBALANCE_MS
    group_id: str = GROUP
    epoch: int = 0
    owned: Named = field(default_factory=dict)
    ack_due: bool = False
    last: ConsumerHeartbeatResult | None = None

    def join(self) -> ConsumerHeartbeatResult:
        self.epoch, self.owned, self.ack_due = 0, {}, False
        return self._apply(
            self.h.cjoin(
                self.member_id,
                self.names,
                regex=self.regex,
                instance_id=self.instance_id,
                assignor=self.assignor,
                rebalance_ms=self.rebalance_ms,
                group_id=self.group_id,
            )
        )

    def poll(self) -> ConsumerHeartbeatResult:
        """The next heartbeat: a join when not in the group, an acknowledgement when one is due, else steady."""
        if self.epoch <= 0:
            return self.join()
        owned = self.owned if self.ack_due else None
        self.ack_due = False
        return self._apply(self.h.hb(self.member_id, self.epoch, owned=owned, group_id=self.group_id))

    def subscribe(self, names: Iterable[str]) -> ConsumerHeartbeatResult:
        """A subscription change (section 12.3): the new names, everything else null."""
        self.names = tuple(names)
        return self._apply(self.h.hb(self.member_id, self.epoch, names=self.names, group_id=self.group_id))

    def leave(self, epoch: int = -1) -> ConsumerHeartbeatResult:
        result = self.h.hb(self.member_id, epoch, instance_id=self.instance_id, group_id=self.group_id)
        self.epoch, self.owned, self.ack_due = epoch, {}, False
        self.last = result
        return result

    def _apply(self, result: ConsumerHeartbeatResult) -> ConsumerHeartbeatResult:
        self.last = result
        if result.error in (E.unknown_member_id, E.fenced_member_epoch):
            self.epoch, self.owned, self.ack_due = 0, {}, False  # lost: re-join next time
            return result
        assert result.error is E.none, result
        self.epoch = result.member_epoch
        named = self.h.named(result.assignment)
        if named is not None and named != self.owned:
            self.owned = named
            self.ack_due = True
        return result
