"""A share group's states (section 3.1 of ``docs/spec/share-groups.md``): Empty without members, Stable with at
least one; Dead is never stored (a deleted group is gone). There is no Assigning or Reconciling: a member takes its
target on its own heartbeat."""

from __future__ import annotations

import enum

__all__ = ["ShareGroupState"]


class ShareGroupState(enum.StrEnum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"
