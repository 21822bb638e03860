"""The kinds of group one coordinator keeps (Kafka's ``Group.GroupType``): nothing but the enum, so that the CLI and
the server's event tally may import it on their fast paths. SHARE is KIP-932's share groups."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GroupType"]


class GroupType(StrEnum):
    """The wire and JSON name of each type is its value (ListGroups v5 GroupType, the control API's group_type)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
