"""Committed offsets, kept apart from the groups (Kafka's ``OffsetMetadataManager.offsets``).

One map per group id, whatever the group's type: a group converted from one type to the other (section 9.4 of
``docs/spec/consumer-groups.md``) keeps its offsets without a copy, and expiry and topic deletion are written once.
The groups read their offsets here (``offsets``, read-only); only ``offsets/manager.py`` writes them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["CommittedOffset", "Key", "OffsetStore"]

Key = tuple[str, int]  # (topic, partition)

_NONE: Mapping[Key, CommittedOffset] = MappingProxyType({})


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    # transactions.md 5.2: where the commit stands among all commits (Kafka: its record's offset in
    # __consumer_offsets), so a transaction's COMMIT never overwrites a regular commit written after it.
    record_order: int = field(default=0, compare=False)


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[Key, CommittedOffset]] = {}

    def of(self, group_id: str) -> Mapping[Key, CommittedOffset]:
        """The group's committed offsets, read-only (empty when it has none)."""
        offsets = self._by_group.get(group_id)
        return _NONE if offsets is None else MappingProxyType(offsets)

    def has_any(self, group_id: str) -> bool:
        return bool(self._by_group.get(group_id))

    def get(self, group_id: str, key: Key) -> CommittedOffset | None:
        offsets = self._by_group.get(group_id)
        return None if offsets is None else offsets.get(key)

    def put(self, group_id: str, key: Key, offset: CommittedOffset) -> None:
        self._by_group.setdefault(group_id, {})[key] = offset

    def remove(self, group_id: str, key: Key) -> bool:
        """Drop one offset; True when there was one."""
        offsets = self._by_group.get(group_id)
        if offsets is None or offsets.pop(key, None) is None:
            return False
        if not offsets:
            del self._by_group[group_id]
        return True

    def remove_group(self, group_id: str) -> None:
        """Every offset of the group (DeleteGroups' tombstones, section 14.3)."""
        self._by_group.pop(group_id, None)

    def items(self, group_id: str) -> list[tuple[Key, CommittedOffset]]:
        """A snapshot: safe to remove from while iterating it."""
        return list(self._by_group.get(group_id, {}).items())

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._by_group))
