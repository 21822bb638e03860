"""The coordinator's view of the topics: ``TopicCatalog`` (broker/coordinator/modern/types.py) over the registry.

The coordinator and storage sit on the same layer and do not import each other, so the server, which owns both,
hands the coordinator this adapter. It copies nothing: every call reads the registry as it is now, and ``version``
is the registry's own counter (bumped on create, delete and partition growth), so a consumer group can tell its
subscription metadata is stale without being called back (docs/spec/consumer-groups.md sections 3.6, 4.10).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.coordinator.modern.types import TopicId, TopicInfo
from broker.storage.topics import Topic, TopicRegistry


class RegistryCatalog:
    """``by_id`` keeps the ``TopicInfo`` it made while the registry's ``version`` stays the same (a share consumer's
    every ShareFetch looks its topic up several times): a create, delete or growth empties it. Only topics found are
    kept, so ids a client makes up cost nothing to remember."""

    __slots__ = ("_infos", "_infos_version", "_registry")

    def __init__(self, registry: TopicRegistry) -> None:
        self._registry = registry
        self._infos: dict[TopicId, TopicInfo] = {}
        self._infos_version = registry.version

    @property
    def version(self) -> int:
        return self._registry.version

    def by_name(self, name: str) -> TopicInfo | None:
        return _info(self._registry.get(name))

    def by_id(self, topic_id: TopicId) -> TopicInfo | None:
        infos = self._infos
        version = self._registry.version
        if version != self._infos_version:
            infos.clear()
            self._infos_version = version
        info = infos.get(topic_id)
        if info is None:
            info = _info(self._registry.by_id(topic_id))
            if info is not None:
                infos[topic_id] = info
        return info

    def names(self) -> Iterable[str]:
        return [topic.name for topic in self._registry.all()]


def _info(topic: Topic | None) -> TopicInfo | None:
    return None if topic is None else TopicInfo(topic.name, topic.topic_id, topic.partitions)
