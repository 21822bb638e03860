"""The control API's verbs for share groups: kick a member, force a new target. Not Kafka.

As for the other types, each verb takes the path Kafka's own causes take: a kick fences the member as its session
timeout would (``ShareGroups.fence``) and ends its share sessions as a closed connection does, so that what it holds
comes back at once; a share group has no static members, so there is nothing to fence by instance id.
"""

from __future__ import annotations

from broker.coordinator.modern.share.fetch import ShareFetcher
from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.groups import ShareGroups
from broker.coordinator.verb_errors import Conflict, UnknownTarget

__all__ = ["ShareVerbs"]


class ShareVerbs:
    def __init__(self, groups: ShareGroups, fetcher: ShareFetcher) -> None:
        self._groups = groups
        self._fetcher = fetcher

    def _group(self, group_id: str) -> ShareGroup:
        group = self._groups.groups.get(group_id)
        if group is None:
            raise UnknownTarget(f"no group {group_id!r}")
        return group

    def kick(self, group_id: str, member_id: str) -> None:
        """The member is removed (its next heartbeat gets UNKNOWN_MEMBER_ID and librdkafka re-joins with epoch 0) and
        its share session on this broker ends, releasing what it holds (``records_released`` cause
        ``session_closed``)."""
        group = self._group(group_id)
        member = group.members.get(member_id)
        if member is None:
            raise UnknownTarget(f"group {group_id!r} has no member {member_id!r}")
        self._groups.fence(group, member, "kicked", "kicked through the control API")
        session = self._fetcher.sessions.get(group_id, member_id)
        if session is not None:
            self._fetcher.close(session, "its member was kicked through the control API")

    def fence(self, group_id: str, instance_id: str) -> tuple[str, str | None]:
        self._group(group_id)
        raise UnknownTarget(f"group {group_id!r} is a share group: it has no static member {instance_id!r}")

    def force_rebalance(self, group_id: str) -> None:
        group = self._group(group_id)
        if group.is_empty():
            raise Conflict(f"group {group_id!r} is Empty: there are no members to assign")
        self._groups.bump(group, "forced", None)
