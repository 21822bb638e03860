"""How a chaos run reads the group's events, per group protocol: what recovers, what counts as a rebalance.

- ``classic`` (JoinGroup/SyncGroup): a rebalance is a ``rebalance_started``; the group has recovered at a
  ``sync_completed`` with ``unowned == 0`` (Stable, every partition owned); the epoch shown is the generation.
- ``consumer`` (KIP-848, docs/spec/consumer-groups.md): a rebalance is a ``group_epoch_bumped`` (section 6.1:
  every membership or subscription change bumps the group epoch); the group has recovered at a ``state_changed``
  to Stable (section 3.4: every member reconciled to the target assignment, which the server-side assignors make
  cover every subscribed partition, section 6); a member owns what its last ``member_reconciled`` says it has
  assigned (section 3.5). There is no SyncGroup and no generation: the epochs shown are the group epoch and the
  target's assignment epoch.
- ``share`` (KIP-932, docs/spec/share-groups.md): the consumer protocol's events with ``group_type`` "share"; a
  member joins with ``share_member_joined``, and a share group is Stable whenever it has members (its states are
  Empty and Stable), so a disruption's recovery is not read from the state: the share runner judges the records
  instead (``share_judge``: who held what, and when it came back).

``GroupView`` folds one group's events into its state, members and epochs: the consumer-protocol run waits for
Stable and shows its progress from it, the events being where a consumer group's epochs are (docs/events.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.events import names

JSON = dict[str, Any]


class GroupProtocol:
    """The classic protocol's reading of the events (``ConsumerProtocol`` overrides it)."""

    name = "classic"
    rebalance_event = names.REBALANCE_STARTED
    recovery_words = "sync with unowned 0"

    def is_recovery(self, event: JSON) -> bool:
        """The group is Stable again with every partition owned."""
        return event.get("event") == names.SYNC_COMPLETED and event.get("unowned") == 0

    def epoch(self, event: JSON) -> int | None:
        """The generation (classic) or the group epoch (consumer) an event names."""
        value = event.get("generation_id")
        return value if isinstance(value, int) else None

    def rejoined(self, events: Iterable[JSON], newcomers: set[str]) -> JSON | None:
        """The first recovery at which one of ``newcomers`` (member ids) owns partitions."""
        for event in events:
            if self.is_recovery(event) and any((event.get("assignments") or {}).get(m) for m in newcomers):
                return event
        return None


class ConsumerProtocol(GroupProtocol):
    name = "consumer"
    rebalance_event = names.GROUP_EPOCH_BUMPED
    recovery_words = "never Stable again"

    def is_recovery(self, event: JSON) -> bool:
        return event.get("event") == names.STATE_CHANGED and event.get("to") == "Stable"

    def epoch(self, event: JSON) -> int | None:
        value = event.get("group_epoch")
        return value if isinstance(value, int) else None

    def rejoined(self, events: Iterable[JSON], newcomers: set[str]) -> JSON | None:
        owns: dict[str, bool] = {}
        for event in events:
            if event.get("event") == names.MEMBER_RECONCILED and event.get("member_id") in newcomers:
                owns[event["member_id"]] = any((event.get("assigned") or {}).values())
            elif self.is_recovery(event) and any(owns.values()):
                return event
        return None


class ShareProtocol(ConsumerProtocol):
    name = "share"
    recovery_words = "records never came back"


#: The events by which a member joins: a share group's members join with their own (docs/events.md).
JOINED = (names.MEMBER_JOINED, names.SHARE_MEMBER_JOINED)

PROTOCOLS: dict[str, GroupProtocol] = {
    "classic": GroupProtocol(), "consumer": ConsumerProtocol(), "share": ShareProtocol(),
}  # fmt: skip


def detect_cause(event: JSON) -> str | None:
    """Why the broker let the member go: the event's cause, or for a consumer group's expiry its timer
    (``session`` -> ``session_timeout``, ``rebalance`` -> ``rebalance_timeout``: sections 7.1, 7.3)."""
    cause = event.get("cause")
    if isinstance(cause, str):
        return cause
    timer = event.get("timer")
    return f"{timer}_timeout" if isinstance(timer, str) else None


@dataclass
class GroupView:
    """A group as its events tell it: state, members, and the last generation or epochs seen."""

    state: str | None = None
    members: set[str] = field(default_factory=set)
    generation: int | None = None
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    def apply(self, event: JSON) -> None:
        name = event.get("event")
        member = event.get("member_id")
        if name in JOINED and member:
            self.members.add(member)
        elif name in (names.MEMBER_EXPIRED, names.MEMBER_FENCED) or (
            # a static consumer-protocol member leaving with epoch -2 stays a member (section 7.5)
            name == names.MEMBER_LEFT and event.get("cause") != "static_leave"
        ):
            self.members.discard(member)
            if name == names.MEMBER_FENCED and event.get("new_member_id"):
                self.members.add(event["new_member_id"])
        elif name == names.GROUP_DELETED:
            self.members.clear()
        if name == names.STATE_CHANGED:
            self.state = event.get("to")
        if isinstance(event.get("generation_id"), int):
            self.generation = event["generation_id"]
        if isinstance(event.get("group_epoch"), int):
            self.group_epoch = event["group_epoch"]
        if isinstance(event.get("assignment_epoch"), int):
            self.assignment_epoch = event["assignment_epoch"]

    def summary(self) -> JSON:
        """What the progress line shows, as the control API's group summary names it."""
        return {
            "state": self.state,
            "members": len(self.members),
            "generation_id": self.generation,
            "group_type": "consumer" if self.group_epoch is not None else None,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
        }
