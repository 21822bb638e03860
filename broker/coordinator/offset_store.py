"""Committed offsets, kept apart from the groups (Kafka's ``OffsetMetadataManager.offsets``).

One map per group id, whatever the group's type: a group converted from one type to the other (section 9.4 of
``docs/spec/consumer-groups.md``) keeps its offsets without a copy, and expiry and topic deletion are written once.
The groups read their offsets here (``offsets``, read-only); only ``offsets/manager.py`` writes them.

Every write is also a durable change (issue 27, ``broker/changes.py``): ``offsets.commit`` (group, topic,
partition) with the whole committed offset, or its tombstone, as Kafka's OffsetCommit record (key version 1) and its
null value. Because every path (OffsetCommit, a transaction's COMMIT, OffsetDelete, DeleteGroups, expiry, topic
deletion) goes through ``put`` and ``remove`` here, none of them can forget to write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from broker.changes import NULL_CHANGES, Change, ChangeSink

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


COMMIT = "offsets.commit"


def offset_value(offset: CommittedOffset) -> dict[str, Any]:
    """The durable value of one committed offset: Kafka's OffsetCommitValue, and where it stands among commits."""
    return {
        "offset": offset.offset,
        "leader_epoch": offset.leader_epoch,
        "metadata": offset.metadata,
        "commit_ms": offset.commit_timestamp_ms,
        "expire_ms": offset.expire_timestamp_ms,
        "order": offset.record_order,
    }


def offset_from(value: dict[str, Any]) -> CommittedOffset:
    return CommittedOffset(
        value["offset"], value["leader_epoch"], value["metadata"], value["commit_ms"], value["expire_ms"],
        value["order"],
    )


class OffsetStore:
    def __init__(self, changes: ChangeSink = NULL_CHANGES) -> None:
        self._by_group: dict[str, dict[Key, CommittedOffset]] = {}
        self.changes = changes

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
        if self.changes.enabled:
            self.changes.put(COMMIT, (group_id, *key), offset_value(offset))

    def remove(self, group_id: str, key: Key) -> bool:
        """Drop one offset; True when there was one."""
        offsets = self._by_group.get(group_id)
        if offsets is None or offsets.pop(key, None) is None:
            return False
        if not offsets:
            del self._by_group[group_id]
        if self.changes.enabled:
            self.changes.delete(COMMIT, (group_id, *key))
        return True

    def remove_group(self, group_id: str) -> None:
        """Every offset of the group (DeleteGroups' tombstones, section 14.3)."""
        offsets = self._by_group.pop(group_id, None)
        if offsets and self.changes.enabled:
            with self.changes.atomic():
                for key in offsets:
                    self.changes.delete(COMMIT, (group_id, *key))

    # -- durable state (issue 27) ---------------------------------------------------------------------------

    def durable_records(self) -> Iterator[Change]:
        for group_id, offsets in self._by_group.items():
            for key, offset in offsets.items():
                yield Change(COMMIT, (group_id, *key), offset_value(offset))

    def load(self, changes: Iterable[Change]) -> int:
        """The committed offsets of a data directory; the highest record order loaded (commits go on after it)."""
        highest = 0
        for change in changes:
            if change.kind == COMMIT and change.value is not None:
                group_id, topic, partition = change.key
                offset = offset_from(change.value)
                self._by_group.setdefault(str(group_id), {})[(str(topic), int(partition))] = offset
                highest = max(highest, offset.record_order)
        return highest

    def items(self, group_id: str) -> list[tuple[Key, CommittedOffset]]:
        """A snapshot: safe to remove from while iterating it."""
        return list(self._by_group.get(group_id, {}).items())

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._by_group))
