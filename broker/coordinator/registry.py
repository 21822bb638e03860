"""Every group of one coordinator, whatever its type, in one map (Kafka's ``GroupMetadataManager.groups``).

Group ids are one namespace: a classic, a consumer and a share group never share an id. ``ClassicGroups`` and
``ConsumerGroups`` create into and delete from this registry; the typed indexes ``classic_groups`` and
``consumer_groups`` are the same groups by type, kept for the hot paths (one dict get, no type test) and for the
type's own handlers, in creation order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.coordinator.group_type import GroupType
from broker.coordinator.offset_store import OffsetStore

if TYPE_CHECKING:
    from broker.coordinator.classic.group import ClassicGroup
    from broker.coordinator.group import Group
    from broker.coordinator.modern.consumer.group import ConsumerGroup
    from broker.coordinator.modern.share.group import ShareGroup

__all__ = ["GroupRegistry", "WrongGroupType"]


class WrongGroupType(LookupError):
    """A typed getter found a group of another type (Kafka's GroupIdNotFoundException "Group X is not a consumer
    group"): a caller that must answer on the wire checks ``type_of`` first and answers as Kafka does."""


class GroupRegistry:
    def __init__(self, store: OffsetStore | None = None) -> None:
        self.offsets = store if store is not None else OffsetStore()
        self.groups: dict[str, Group] = {}
        self.classic_groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.share_groups: dict[str, ShareGroup] = {}
        self._by_type: dict[GroupType, dict[str, Group]] = {
            GroupType.CLASSIC: self.classic_groups,  # type: ignore[dict-item]
            GroupType.CONSUMER: self.consumer_groups,  # type: ignore[dict-item]
            GroupType.SHARE: self.share_groups,  # type: ignore[dict-item]
        }

    def of_type(self, group_type: GroupType) -> Mapping[str, Group]:
        """The groups of one type, in creation order."""
        return self._by_type[group_type]

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def live(self, group_id: str) -> Group | None:
        """The group, unless it is unknown or Dead."""
        group = self.groups.get(group_id)
        return None if group is None or group.is_dead() else group

    def type_of(self, group_id: str) -> GroupType | None:
        group = self.groups.get(group_id)
        return None if group is None else group.group_type

    def classic(self, group_id: str) -> ClassicGroup:
        group = self.classic_groups.get(group_id)
        if group is None:
            raise WrongGroupType(self._not_a(group_id, GroupType.CLASSIC))
        return group

    def consumer(self, group_id: str) -> ConsumerGroup:
        group = self.consumer_groups.get(group_id)
        if group is None:
            raise WrongGroupType(self._not_a(group_id, GroupType.CONSUMER))
        return group

    def share(self, group_id: str) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is None:
            raise WrongGroupType(self._not_a(group_id, GroupType.SHARE))
        return group

    def _not_a(self, group_id: str, wanted: GroupType) -> str:
        if self.live(group_id) is not None:
            return f"Group {group_id} is not a {wanted} group."
        return f"Group {group_id} not found."

    def add_classic(self, group: ClassicGroup) -> None:
        self._add(group)
        self.classic_groups[group.group_id] = group

    def add_consumer(self, group: ConsumerGroup) -> None:
        self._add(group)
        self.consumer_groups[group.group_id] = group

    def add_share(self, group: ShareGroup) -> None:
        self._add(group)
        self.share_groups[group.group_id] = group

    def _add(self, group: Group) -> None:
        if group.group_id in self.groups:
            raise ValueError(f"group {group.group_id!r} already exists as a {self.groups[group.group_id].group_type}")
        self.groups[group.group_id] = group

    def remove(self, group: Group) -> None:
        """Forget the group; its offsets stay in the store (a conversion keeps them, DeleteGroups removes them)."""
        del self.groups[group.group_id]
        del self._by_type[group.group_type][group.group_id]

    def remove_all(self, group_type: GroupType) -> None:
        by_type = self._by_type[group_type]
        for group_id in by_type:
            del self.groups[group_id]
        by_type.clear()
