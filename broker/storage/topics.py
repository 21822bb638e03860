"""The topic registry: names, ids, partition logs and per-topic configs.

Topics are created at start (``--topic NAME:PARTITIONS``), by CreateTopics, or
on first mention in Metadata and Produce when auto-creation is on, as Kafka does
with auto.create.topics.enable. A topic id is fixed for the topic's life; a
topic deleted and created again gets a new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.setting import Setting, parse_bool

if TYPE_CHECKING:
    from broker.storage.partition_log import PartitionLog, StorageBudget

class CatalogRecord(Protocol):
    """Where the registry tells of a topic made, grown or deleted: ``durable_topics.DurableTopics`` with a data
    directory (issue 27), which imports this module, hence a protocol here."""

    def created(self, topic: Topic) -> None: ...

    def grown(self, topic: Topic, first: int) -> None: ...

    def deleted(self, topic: Topic) -> None: ...


_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_MAX_NAME_LENGTH = 249
# Quoted client input in an error message is cut to this many characters: a STRING holds at most 32,767 bytes,
# and a topic name or config value may be that long by itself.
_SHOWN = 255
# QuorumController.MAX_RECORDS_PER_USER_OP: the most metadata records one user operation may create. The default of
# both partition limits (declared below; the server passes them in).
KAFKA_MAX_RECORDS_PER_USER_OP = 10_000

# Topic-level configs Kafka 4 accepts. The three the broker acts on are read from here (and segment.bytes, with a
# data directory: durable_topics.py);
# the rest are kept and reported so client fixtures that set them keep working.
KNOWN_TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)
_INTEGER_CONFIGS = ("retention.ms", "retention.bytes", "max.message.bytes")


class InvalidConfig(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LogDefaults:
    """Broker-wide defaults of the topic configs the broker acts on, with Kafka's defaults (its log.retention.ms,
    log.retention.bytes and message.max.bytes), each declared here once (``Setting``, broker/setting.py)."""

    retention_ms: int = Setting(
        "log_retention_ms", 604_800_000, int, "topic default for retention.ms (-1: no limit)",
        kafka="log.retention.ms", kafka_default="604800000 (log.retention.hours=168)",
    ).field()
    retention_bytes: int = Setting(
        "log_retention_bytes", -1, int, "topic default for retention.bytes, per partition (-1: no limit)",
        kafka="log.retention.bytes",
    ).field()
    max_message_bytes: int = Setting(
        "message_max_bytes", 1_048_588, int, "topic default for max.message.bytes (largest record batch)",
        kafka="message.max.bytes",
    ).field()


# The storage settings that are fields of ``Settings`` itself (broker/config/settings.py), declared by storage.

MAX_PARTITIONS_PER_REQUEST = Setting(
    "max_partitions_per_request", KAFKA_MAX_RECORDS_PER_USER_OP, int,
    "most metadata records one CreateTopics or CreatePartitions may write, counted as Kafka's controller counts "
    "them (one per topic, per config and per partition); past it, POLICY_VIOLATION and nothing is created "
    "(Kafka's is fixed at 10,000)",
)
MAX_PARTITIONS_PER_TOPIC = Setting(
    "max_partitions_per_topic", KAFKA_MAX_RECORDS_PER_USER_OP, int,
    "most partitions one topic may have through CreateTopics or CreatePartitions; past it that topic gets "
    "POLICY_VIOLATION (Kafka has no such limit; a test broker keeps every partition in memory)",
)


def parse_topic_specs(text: str) -> tuple[tuple[str, int], ...]:
    """``NAME:PARTITIONS`` items, separated by commas or spaces (the variable's form; the flag repeats)."""
    return tuple(parse_topic_spec(spec) for spec in text.replace(",", " ").split())


def _topic_specs_from_toml(value: Any) -> str:
    """A TOML list of specs (``["orders:6", "payments"]``) or a table of counts (``{orders = 6}``)."""
    specs = value if isinstance(value, list) else [f"{name}:{count}" for name, count in value.items()]
    return " ".join(str(spec) for spec in specs)


TOPICS = Setting(
    "topic", (), parse_topic_specs,
    "NAME:PARTITIONS to create at start (a bare NAME gets 1 partition; flag repeatable; variable comma-separated)",
    from_toml_shape=_topic_specs_from_toml,
)
AUTO_CREATE_TOPICS = Setting(
    "auto_create_topics_enable", True, parse_bool, "create unknown topics on Metadata and Produce",
    kafka="auto.create.topics.enable",
)
NUM_PARTITIONS = Setting("num_partitions", 1, int, "partitions of an auto-created topic", kafka="num.partitions")
LOG_RETENTION_CHECK_INTERVAL_MS = Setting(
    "log_retention_check_interval_ms", 300_000, int, "how often retention runs",
    kafka="log.retention.check.interval.ms",
)
STORAGE_MAX_BYTES = Setting(
    "storage_max_bytes", 1_073_741_824, int, "cap on bytes stored in all partition logs (-1: none)"
)

# The data directory's (issue 27, cluster-and-durability.md 8.1): storage owns it; declared here rather than under
# storage/disk/, which memory-only brokers never import (serve's first answer loads this module anyway).
DATA_DIR = Setting(
    "data_dir", None, str,
    "keep offsets, groups, records, producer ids and transactions in this directory across restarts "
    "(none: memory only)",
)
FSYNC = Setting(
    "fsync", "never", str,
    "when to fsync the data directory: never (survives SIGKILL, not power loss: Kafka's default), batch (before "
    "each acknowledgement) or interval (every fsync_interval_ms)",
    choices=("never", "batch", "interval"),
)
FSYNC_INTERVAL_MS = Setting("fsync_interval_ms", 1000, int, "how often `--fsync interval` fsyncs")


def new_topic_id() -> uuid.UUID:
    """A random topic id as Kafka's ``Uuid.randomUuid`` makes them: never one whose URL-safe base64 form starts with
    ``-`` (Kafka's command-line tools would read it as a flag). A version-4 uuid is never the zero id or the
    metadata topic's ...0001, the other two Kafka never hands out."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id.bytes[0] >> 2 != 62:  # 62 is "-" in the URL-safe base64 alphabet
            return topic_id


class Topic:
    __slots__ = ("configs", "configs_changed", "defaults", "logs", "name", "topic_id")

    def __init__(
        self, name: str, partitions: int, budget: StorageBudget, defaults: LogDefaults, configs: Mapping[str, str]
    ) -> None:
        self.name = name
        self.topic_id = new_topic_id()
        self.defaults = defaults
        self.configs = dict(configs)
        self.configs_changed: Callable[[Topic], None] | None = None  # the registry's record of it (issue 27)
        from broker.storage.partition_log import PartitionLog

        self.logs = [PartitionLog(budget) for _ in range(partitions)]

    @property
    def partitions(self) -> int:
        return len(self.logs)

    def log(self, partition: int) -> PartitionLog | None:
        return self.logs[partition] if 0 <= partition < len(self.logs) else None

    def _int_config(self, name: str, default: int) -> int:
        value = self.configs.get(name)
        return default if value is None else int(value)

    @property
    def retention_ms(self) -> int:
        return self._int_config("retention.ms", self.defaults.retention_ms)

    @property
    def retention_bytes(self) -> int:
        return self._int_config("retention.bytes", self.defaults.retention_bytes)

    @property
    def max_message_bytes(self) -> int:
        return self._int_config("max.message.bytes", self.defaults.max_message_bytes)

    @property
    def min_insync_replicas(self) -> int:
        """What acks=all needs in sync on several nodes (Kafka's default 1: no ISR refuses it)."""
        return self._int_config("min.insync.replicas", 1)

    def replace_configs(self, configs: Mapping[str, str]) -> None:
        """AlterConfigs and IncrementalAlterConfigs: the topic's whole set of overrides, already checked. Retention
        and Produce read them on their next use."""
        self.configs = dict(configs)
        if self.configs_changed is not None:
            self.configs_changed(self)


def is_valid_topic_name(name: str) -> bool:
    """Kafka's rule: 1-249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    return 0 < len(name) <= _MAX_NAME_LENGTH and name not in (".", "..") and set(name) <= _LEGAL


def shown(text: str) -> str:
    """``text`` as an error message may quote it: whole up to 255 characters, else its start and its length."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}...({len(text)} characters)"


def topic_name_problem(name: str) -> str | None:
    """Why Kafka refuses ``name`` (Topic.validate's InvalidTopicException message), or None for a legal name.

    Kafka quotes the whole name; here a name too long to quote is cut (``shown``), so the message fits a STRING.
    """
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > _MAX_NAME_LENGTH:
        reason = f"the length of '{shown(name)}' is longer than the max allowed length {_MAX_NAME_LENGTH}"
    elif not set(name) <= _LEGAL:
        reason = f"'{shown(name)}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def check_configs(configs: Mapping[str, str | None]) -> None:
    """Kafka's LogConfig.validate, for the configs this broker knows."""
    for name, value in configs.items():
        if name not in KNOWN_TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {shown(name)}")
        if name in _INTEGER_CONFIGS:
            try:
                number = int(value) if value is not None else None
            except ValueError:
                number = None
            if number is None or (name == "max.message.bytes" and number < 0) or number < -1:
                raise InvalidConfig(f"Invalid value {shown(str(value))} for configuration {name}")


class TopicRegistry:
    def __init__(
        self,
        *,
        auto_create: bool,
        default_partitions: int,
        defaults: LogDefaults,
        budget: StorageBudget,
        max_partitions_per_request: int = KAFKA_MAX_RECORDS_PER_USER_OP,
        max_partitions_per_topic: int = KAFKA_MAX_RECORDS_PER_USER_OP,
    ) -> None:
        # These are the broker's settings (broker/config/settings.py), passed in by the server; the two limits
        # default to the settings' own defaults until the server passes them too.
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self.defaults = defaults
        self.budget = budget
        # Checked by CreateTopics and CreatePartitions (broker/api/topic_admin.py) before anything is allocated.
        self.max_partitions_per_request = max_partitions_per_request
        self.max_partitions_per_topic = max_partitions_per_topic
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # Names by their form with '.' made '_' (Kafka refuses a name equal to an existing one up to them), in
        # creation order: start-up topics are not checked, so one form may have several.
        self._by_unified: dict[str, list[str]] = {}
        self._on_delete: list[Callable[[Topic], None]] = []
        # Bumped by every create, delete and partition growth: consumer groups compare it to tell that their
        # subscription metadata must be recomputed (docs/spec/consumer-groups.md section 4.10).
        self.version = 0
        # Issue 27: the topic catalog as ``topics.topic`` changes and each partition's batches in its segments
        # (``storage/durable_topics.py``); None for memory only.
        self.durable: CatalogRecord | None = None

    def on_delete(self, callback: Callable[[Topic], None]) -> None:
        self._on_delete.append(callback)

    def create(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> Topic:
        """The topic, created if it does not exist yet (start-up and auto-creation are idempotent)."""
        if not is_valid_topic_name(name):
            raise ValueError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise ValueError(f"topic {name!r} needs at least one partition")
        existing = self._by_name.get(name)
        if existing is not None:
            return existing
        topic = Topic(name, partitions, self.budget, self.defaults, configs or {})
        self._register(topic)
        if self.durable is not None:
            self.durable.created(topic)
        return topic

    def _register(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._by_unified.setdefault(_unified(topic.name), []).append(topic.name)
        self.version += 1

    def colliding(self, name: str) -> str | None:
        """The existing topic whose name equals ``name`` up to '.' and '_' (both '_' in metric names), if any."""
        names = self._by_unified.get(_unified(name))
        return names[0] if names else None

    def get_or_auto_create(self, name: str) -> Topic | None:
        topic = self._by_name.get(name)
        if topic is None and self.auto_create and is_valid_topic_name(name):
            topic = self.create(name, self.default_partitions)
        return topic

    def add_partitions(self, topic: Topic, total: int) -> None:
        if total > topic.partitions:
            from broker.storage.partition_log import PartitionLog

            first = topic.partitions
            topic.logs.extend(PartitionLog(self.budget) for _ in range(total - topic.partitions))
            self.version += 1
            if self.durable is not None:
                self.durable.grown(topic, first)

    def delete(self, topic: Topic) -> None:
        del self._by_name[topic.name]
        del self._by_id[topic.topic_id]
        unified = _unified(topic.name)
        names = self._by_unified[unified]
        names.remove(topic.name)
        if not names:
            del self._by_unified[unified]
        for log in topic.logs:
            log.release()
        if self.durable is not None:
            self.durable.deleted(topic)
        self.version += 1
        for callback in self._on_delete:
            callback(topic)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def enforce_retention(self, now_ms: int) -> int:
        """One pass of Kafka's retention check over every partition; returns batches dropped."""
        return sum(
            log.enforce_retention(now_ms, topic.retention_ms, topic.retention_bytes)
            for topic in self._by_name.values()
            for log in topic.logs
        )


def _unified(name: str) -> str:
    return name.replace(".", "_")


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """``NAME`` or ``NAME:PARTITIONS``; a bad one is refused saying which half is wrong and what it may be."""
    name, _, count = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not is_valid_topic_name(name):
        raise ValueError(
            f"bad topic spec {shown(spec)}: {shown(name)} is not a legal topic name (1 to {_MAX_NAME_LENGTH} "
            "of a-z A-Z 0-9 . _ -; NAME:PARTITIONS, e.g. orders:6)"
        )
    if not count:
        return name, 1
    if not count.strip().lstrip("+-").isdigit():
        raise ValueError(f"bad topic spec {shown(spec)}: partitions {count!r} is not an integer (e.g. {name}:6)")
    partitions = int(count)
    if partitions < 1:
        raise ValueError(f"bad topic spec {shown(spec)}: partitions must be >= 1, got {partitions} (e.g. {name}:6)")
    return name, partitions
