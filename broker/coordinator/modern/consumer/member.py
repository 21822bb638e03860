"""A member of a consumer group (Kafka's ``ConsumerGroupMember``, section 3.2 of ``docs/spec/consumer-groups.md``).

Mutable, and changed only by the heartbeat handler once a request has passed every check, so a failed request
changes nothing (4.15). Its assignment fields hold immutable values that are replaced, never edited.
"""

from __future__ import annotations

from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, MemberState
from broker.timing.purgatory import Deadline

__all__ = ["ConsumerMember"]


class ConsumerMember:
    __slots__ = (
        "assigned",
        "client_host",
        "client_id",
        "instance_id",
        "member_epoch",
        "member_id",
        "pending_revocation",
        "previous_member_epoch",
        "rack_id",
        "rebalance_timeout_ms",
        "revoking_since_epoch",
        "server_assignor",
        "session",
        "state",
        "subscribed_topic_names",
        "subscribed_topic_regex",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.rebalance_timeout_ms = -1
        self.client_id = ""
        self.client_host = ""
        self.subscribed_topic_names: frozenset[str] = frozenset()
        self.subscribed_topic_regex = ""  # "" is no regex (section 4.9)
        self.server_assignor: str | None = None
        self.member_epoch = 0
        self.previous_member_epoch = -1
        self.state = MemberState.STABLE
        self.assigned: Assignment = EMPTY_ASSIGNMENT
        self.pending_revocation: Assignment = EMPTY_ASSIGNMENT
        # The armed session deadline, moved in place by steady heartbeats (no keyed lookup on the hot path).
        self.session: Deadline | None = None
        # The member epoch its rebalance timer was armed at (section 7.3), or None when none runs.
        self.revoking_since_epoch: int | None = None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def copy_as(self, member_id: str) -> ConsumerMember:
        """A static member's replacement (section 4.7): the same subscription, partitions, state and target under a
        new member id, at epoch 0 with previous epoch 0."""
        twin = ConsumerMember(member_id)
        for name in ConsumerMember.__slots__:
            if name not in ("member_id", "session", "revoking_since_epoch"):
                setattr(twin, name, getattr(self, name))
        twin.member_epoch = 0
        twin.previous_member_epoch = 0
        return twin
