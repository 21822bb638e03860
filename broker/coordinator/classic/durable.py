"""Classic groups as durable changes (issue 27; cluster-and-durability.md 2.3 and 3.1).

Kafka writes a classic group's GroupMetadata record (key version 2) when the leader's SyncGroup completes a
generation, before any member gets its assignment; when the group becomes Empty; when a static member is replaced
in a Stable group; and its tombstone when the group is deleted. A rebalance in flight is never written: after a
restart only the last stored generation exists. ``classic.group`` (group id) holds that record's content.

Loading is ``GroupMetadataManager.replay`` then ``onLoaded``: a group whose record has members comes back Stable with
the same generation, protocol, leader, member ids and instance ids, and every member's session starts afresh
with its full session timeout; one without members comes back Empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from broker.changes import Change, unb64
from broker.coordinator.classic.group import ClassicGroup, record_value
from broker.coordinator.classic.member import Member
from broker.coordinator.classic.state import EMPTY, STABLE

KIND = "classic.group"

#: The record's content (kept on the group while it rebalances: ``ClassicGroup.record``).
group_value = record_value


def group_records(groups: Iterable[ClassicGroup], stored: Callable[[str], bool]) -> Iterator[Change]:
    """The records of the groups that are Stable or Empty: what their last record says. A group in a rebalance has
    moved on from its record, which only the next generation's SyncGroup or Empty rewrites."""
    for group in groups:
        # Every Stable group was stored by the SyncGroup that made it so; an Empty one only if it was ever more
        # than a simple group of committed offsets (which a load recreates from the offsets).
        if group.state is STABLE or (group.state is EMPTY and stored(group.group_id)):
            yield Change(KIND, (group.group_id,), group_value(group))


def rebuild(group: ClassicGroup, value: dict[str, Any]) -> list[Member]:
    """Fill a fresh Empty group from its record; the members whose sessions the caller must start."""
    group.generation_id = value["generation"]
    group.protocol_type = value["protocol_type"]
    group.protocol_name = value["protocol"]
    members = []
    for stored in value["members"]:
        subscription = unb64(stored["subscription"]) or b""
        member = Member(
            group.group_id,
            stored["id"],
            stored["instance_id"],
            stored["client_id"],
            stored["client_host"],
            stored["rebalance_timeout_ms"],
            stored["session_timeout_ms"],
            value["protocol_type"] or "",
            ((value["protocol"] or "", subscription),),
        )
        member.assignment = unb64(stored["assignment"]) or b""
        group.add_member(member, None)
        members.append(member)
    group.leader_id = value["leader"]
    if members:
        group.update_subscribed_topics()
        group.previous_state, group.state = EMPTY, STABLE  # replay: Stable as stored, not a transition
    if value["state_ms"] is not None:
        group.state_timestamp_ms = value["state_ms"]
    return members
