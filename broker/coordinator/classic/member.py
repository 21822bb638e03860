"""A member of a classic group (Kafka's ``ClassicGroupMember``): who it is, what it supports, what it has parked.

A broker may hold hundreds of thousands of members, so the class keeps ``__slots__`` and nothing that can be
derived: add an attribute only if it cannot be computed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from broker.coordinator.messages import JoinResult, SyncResult
from broker.timing.deferred import Deferred
from broker.timing.keys import HeartbeatKey, heartbeat_key
from broker.timing.purgatory import Deadline

#: A member's protocols in its order of preference: (assignor name, its metadata).
Protocols = tuple[tuple[str, bytes], ...]

T = TypeVar("T", bound=Hashable)

#: Values members repeat (issue 17): the members of a group send the same client id, host, protocol type,
#: timeouts and subscription, each decoded into fresh objects per request (~30-200 B each). A member keeps the
#: first equal object instead. Bounded by count and by the bytes it pins: when full the table starts over (the
#: members keep what they hold; only later sharing is lost), so members that all send distinct metadata (sticky
#: user data) cost it nothing but a few MiB.
_shared: dict[Hashable, Hashable] = {}
_shared_size = 0
_SHARED_MAX = 65_536
_SHARED_MAX_BYTES = 4 * 1024 * 1024


def shared(value: T, size: int = 0) -> T:
    """The first equal value seen (``value`` itself if new); ``size`` is what keeping it would pin, in bytes."""
    global _shared_size
    known = _shared.get(value)
    if known is not None and type(known) is type(value):  # 1 == True: never hand out a value of another type
        return known
    if len(_shared) >= _SHARED_MAX or _shared_size + size > _SHARED_MAX_BYTES:
        _shared.clear()
        _shared_size = 0
    _shared[value] = value
    _shared_size += size
    return value


def shared_protocols(protocols: Protocols) -> Protocols:
    """A member's protocols, one tuple for all members that sent the same ones (issue 17)."""
    return shared(protocols, sum(len(name) + len(metadata) for name, metadata in protocols))


class Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "expiry",
        "group_instance_id",
        "heartbeat_key",
        "heartbeat_timeout_ms",
        "is_new",
        "join_answer",
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
        self.client_id = shared(client_id, len(client_id))
        self.client_host = shared(client_host, len(client_host))
        self.rebalance_timeout_ms = shared(rebalance_timeout_ms)
        self.session_timeout_ms = shared(session_timeout_ms)
        self.protocol_type = shared(protocol_type, len(protocol_type))
        self.protocols = shared_protocols(protocols)
        self.assignment = b""
        # The answers to its parked JoinGroup and SyncGroup (Kafka's awaitingJoinFuture, awaitingSyncFuture).
        self.join_answer: Deferred[JoinResult] | None = None
        self.sync_answer: Deferred[SyncResult] | None = None
        self.is_new = False
        self.heartbeat_key: HeartbeatKey = heartbeat_key(group_id, member_id)
        self.expiry: Deadline | None = None  # the armed deadline under heartbeat_key, once its session started
        # The timeout its session was last given: with the deadline's due time it says when it last showed life,
        # so no time is stored per proof of life (an int object per heartbeat and per member; issue 17).
        self.heartbeat_timeout_ms = 0

    @property
    def last_heartbeat_ms(self) -> int:
        """When its session was last started or extended (0 before it started)."""
        expiry = self.expiry
        return 0 if expiry is None else expiry.due_ms - self.heartbeat_timeout_ms

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
