"""The vocabulary of the modern groups: topic ids, assignments, member states, and the topic catalog (a consumer
group's own states are ``consumer/state.py``).

Partitions are addressed by topic id everywhere in the protocol (section 3.6), so an assignment is a mapping from
topic id to a frozen set of partition numbers. Assignments are values: a member's assignment is replaced, never
changed in place, so two members may share one object.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

TopicId = uuid.UUID
Assignment = Mapping[TopicId, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}


def assignment_of(pairs: Iterable[tuple[TopicId, Iterable[int]]]) -> dict[TopicId, frozenset[int]]:
    """An assignment from (topic id, partitions) pairs; a topic listed twice has its partitions merged and a
    topic with no partitions is left out, so equal sets of partitions give equal assignments."""
    merged: dict[TopicId, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(partitions) for topic_id, partitions in merged.items() if partitions}


def partition_count(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


class MemberState(enum.IntEnum):
    """Kafka's ``modern/MemberState`` (section 3.3), with its persisted values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: TopicId
    partitions: int


class TopicCatalog(Protocol):
    """What the coordinator may know of topics: storage implements it, the coordinator never imports storage.

    ``version`` changes whenever a topic is created or deleted or gains partitions, so a group can tell that its
    subscription metadata must be recomputed (section 4.10) without being called back.
    """

    @property
    def version(self) -> int: ...

    def by_name(self, name: str) -> TopicInfo | None: ...

    def by_id(self, topic_id: TopicId) -> TopicInfo | None: ...

    def names(self) -> Iterable[str]: ...


class StaticCatalog:
    """A fixed, in-memory catalog: for tests on the manual clock and for a coordinator with no storage."""

    def __init__(self, topics: Mapping[str, int] | None = None) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[TopicId, TopicInfo] = {}
        self.version = 0
        for name, partitions in (topics or {}).items():
            self.create(name, partitions)

    def create(self, name: str, partitions: int, topic_id: TopicId | None = None) -> TopicInfo:
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions)
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        self.version += 1
        return info

    def add_partitions(self, name: str, partitions: int) -> None:
        old = self._by_name[name]
        info = TopicInfo(name, old.topic_id, partitions)
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        self.version += 1

    def delete(self, name: str) -> None:
        info = self._by_name.pop(name)
        del self._by_id[info.topic_id]
        self.version += 1

    def by_name(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: TopicId) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> Iterable[str]:
        return self._by_name.keys()
