"""What a control verb (kick, fence, rebalance: ours, not Kafka's) answers when it cannot be carried out, for every
group type alike; the control API turns them into 404 and 409."""

from __future__ import annotations


class UnknownTarget(LookupError):
    """A control verb named a group, member or instance the coordinator does not have."""


class Conflict(RuntimeError):
    """A control verb that makes no sense in the group's current state."""
