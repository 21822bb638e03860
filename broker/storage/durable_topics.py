"""The topic catalog and the partition logs in a data directory (issue 27, cluster-and-durability.md 3.3).

A topic's name, topic id, partition count and configs are a ``topics.topic`` change (what Kafka's controller keeps
in its metadata log: a topic that came back with a new id would be another topic to KIP-848 members and Fetch v13+);
a moved log start offset is a ``log.start`` change (Kafka's log-start-offset checkpoint); the batches go to each
partition's segments (``disk/segments.py``), written before the Produce is answered.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from broker.changes import Change, ChangeSink
from broker.storage.disk.segments import SegmentLog
from broker.storage.topics import Topic, TopicRegistry

TOPIC = "topics.topic"
LOG_START = "log.start"
#: Kafka's log.segment.bytes, the size a segment rolls at unless the topic's segment.bytes says otherwise.
DEFAULT_SEGMENT_BYTES = 1_073_741_824


def segment_bytes(configs: dict[str, str]) -> int:
    """The topic's ``segment.bytes``, or Kafka's default when it has none (or none this broker can read)."""
    try:
        value = int(configs.get("segment.bytes", DEFAULT_SEGMENT_BYTES))
    except ValueError:
        return DEFAULT_SEGMENT_BYTES
    return value if value > 0 else DEFAULT_SEGMENT_BYTES


class _PartitionDisk:
    __slots__ = ("changes", "key", "segments")

    def __init__(self, segments: SegmentLog, changes: ChangeSink, topic: str, partition: int) -> None:
        self.segments = segments
        self.changes = changes
        self.key = (topic, partition)

    def appended(self, base_offset: int, data: bytes) -> None:
        self.segments.append(base_offset, data)

    def start_moved(self, log_start_offset: int) -> None:
        self.changes.put(LOG_START, self.key, {"offset": log_start_offset})
        self.segments.delete_before(log_start_offset)


class DurableTopics:
    def __init__(
        self,
        registry: TopicRegistry,
        changes: ChangeSink,
        segments: Callable[[str, int, int], SegmentLog],
        logs_root: Path,
    ) -> None:
        self.registry = registry
        self.changes = changes
        self.segments = segments
        self.logs_root = logs_root

    def _value(self, topic: Topic) -> dict[str, object]:
        return {"id": str(topic.topic_id), "partitions": topic.partitions, "configs": dict(topic.configs)}

    def _attach(self, topic: Topic, partition: int, segments: SegmentLog | None = None) -> None:
        if segments is None:
            size = segment_bytes(topic.configs)
            segments = self.segments(topic.name, partition, size)
            if segments.topic_id() != str(topic.topic_id):  # a deleted namesake's directory: not ours
                segments.destroy()
                segments = self.segments(topic.name, partition, size)
            segments.claim(str(topic.topic_id))
        topic.logs[partition].disk = _PartitionDisk(segments, self.changes, topic.name, partition)
        topic.configs_changed = self.configs_changed

    def created(self, topic: Topic) -> None:
        self.changes.put(TOPIC, (topic.name,), self._value(topic))
        for partition in range(topic.partitions):
            self._attach(topic, partition)

    def grown(self, topic: Topic, first: int) -> None:
        self.changes.put(TOPIC, (topic.name,), self._value(topic))
        for partition in range(first, topic.partitions):
            self._attach(topic, partition)

    def configs_changed(self, topic: Topic) -> None:
        self.changes.put(TOPIC, (topic.name,), self._value(topic))
        size = segment_bytes(topic.configs)
        for log in topic.logs:
            if isinstance(log.disk, _PartitionDisk):
                log.disk.segments.segment_bytes = size  # the next roll uses it, as Kafka's does

    def deleted(self, topic: Topic) -> None:
        with self.changes.atomic():
            self.changes.delete(TOPIC, (topic.name,))
            for partition in range(topic.partitions):
                self.changes.delete(LOG_START, (topic.name, partition))
        for log in topic.logs:
            disk = log.disk
            if isinstance(disk, _PartitionDisk):
                disk.segments.destroy()
            log.disk = None

    def durable_records(self) -> Iterator[Change]:
        for topic in self.registry.all():
            yield Change(TOPIC, (topic.name,), self._value(topic))
            for partition, log in enumerate(topic.logs):
                if log.log_start_offset > 0:
                    yield Change(LOG_START, (topic.name, partition), {"offset": log.log_start_offset})

    def load(self, changes: Iterable[Change]) -> None:
        """Every topic with its id, partitions and configs, each partition rebuilt from its segments."""
        starts: dict[tuple[str, int], int] = {}
        topics = []
        for change in changes:
            if change.value is None:
                continue
            if change.kind == LOG_START:
                starts[(str(change.key[0]), int(change.key[1]))] = change.value["offset"]
            elif change.kind == TOPIC:
                topics.append((str(change.key[0]), change.value))
        registry = self.registry
        kept: set[str] = set()
        for name, value in topics:
            topic = Topic(name, value["partitions"], registry.budget, registry.defaults, value["configs"])
            topic.topic_id = uuid.UUID(value["id"])
            registry._register(topic)
            size = segment_bytes(topic.configs)
            for partition, log in enumerate(topic.logs):
                segments = self.segments(name, partition, size)
                kept.add(segments.directory.name)
                if segments.topic_id() not in (None, value["id"]):
                    segments.destroy()
                    segments = self.segments(name, partition, size)
                else:
                    log.recover(segments.batches(), starts.get((name, partition), 0))
                segments.claim(value["id"])
                self._attach(topic, partition, segments)
        if self.logs_root.is_dir():  # directories of topics deleted while the broker was being killed
            for directory in self.logs_root.iterdir():
                if directory.name not in kept:
                    shutil.rmtree(directory, ignore_errors=True)
