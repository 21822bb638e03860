"""A member of a classic group (Kafka's ``ClassicGroupMember``): who it is, what it supports, what it has parked.

A broker may hold hundreds of thousands of members, so the class keeps ``__slots__`` and nothing that can be
derived: add an attribute only if it cannot be computed.
"""

from __future__ import annotations

from broker.coordinator.messages import JoinResult, SyncResult
from broker.timing.deferred import Deferred
from broker.timing.keys import HeartbeatKey, heartbeat_key
from broker.timing.purgatory import Deadline

#: A member's protocols in its order of preference: (assignor name, its metadata).
Protocols = tuple[tuple[str, bytes], ...]


class Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "expiry",
        "group_instance_id",
        "heartbeat_key",
        "is_new",
        "join_answer",
        "last_heartbeat_ms",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_answer",
    )

    def __init__(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        # The answers to its parked JoinGroup and SyncGroup (Kafka's awaitingJoinFuture, awaitingSyncFuture).
        self.join_answer: Deferred[JoinResult] | None = None
        self.sync_answer: Deferred[SyncResult] | None = None
        self.is_new = False
        self.heartbeat_key: HeartbeatKey = heartbeat_key(group_id, member_id)
        self.expiry: Deadline | None = None  # the armed deadline under heartbeat_key, once its session started
        self.last_heartbeat_ms = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_answer is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_answer is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """A parked request proves the member is alive, unless it has never had an answer."""
        return not self.is_new and (self.join_answer is not None or self.sync_answer is not None)

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(protocol_name)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")
