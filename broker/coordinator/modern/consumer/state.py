"""A consumer group's states (section 3.4 of ``docs/spec/consumer-groups.md``): consumer groups only, share groups
will have their own."""

from __future__ import annotations

import enum

__all__ = ["ConsumerGroupState"]


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState`` (section 3.4): derived after every change, never stored."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"
