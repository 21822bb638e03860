"""The topics this broker reports in Metadata.

Until the data plane exists this is a registry of names and partition counts:
configured at start (``--topic NAME:PARTITIONS``) or created on first mention
when auto-creation is on, as Kafka does with auto.create.topics.enable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(slots=True, frozen=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def is_valid_topic_name(name: str) -> bool:
    """Kafka's rule: 1-249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    return 0 < len(name) <= 249 and name not in (".", "..") and set(name) <= _LEGAL


class TopicRegistry:
    def __init__(self, *, auto_create: bool = True, default_partitions: int = 1) -> None:
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    def create(self, name: str, partitions: int) -> Topic:
        if not is_valid_topic_name(name):
            raise ValueError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise ValueError(f"topic {name!r} needs at least one partition")
        existing = self._by_name.get(name)
        if existing is not None:
            return existing
        topic = Topic(name, partitions)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        return topic

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """``NAME`` or ``NAME:PARTITIONS``."""
    name, _, count = spec.partition(":")
    partitions = int(count) if count else 1
    if not is_valid_topic_name(name) or partitions < 1:
        raise ValueError(f"bad topic spec {spec!r}: expected NAME:PARTITIONS")
    return name, partitions
