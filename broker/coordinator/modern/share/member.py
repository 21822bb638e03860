"""A share-group member (Kafka's ``ShareGroupMember``, section 3.2 of ``docs/spec/share-groups.md``): no instance
id, no rebalance timeout, no revocation; its state is always STABLE."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment
from broker.timing.purgatory import Deadline

__all__ = ["ShareMember"]


@dataclass(slots=True, eq=False)
class ShareMember:
    member_id: str
    joined_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # sorted
    assigned: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)
    last_heartbeat_ms: int = 0
    # The session's deadline and the timeout it was armed with: a heartbeat moves it without a keyed lookup
    # (``ShareGroups.arm_session``); not part of the durable value.
    session: Deadline | None = None
    session_timeout_ms: int = 0
