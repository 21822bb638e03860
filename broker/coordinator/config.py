"""Group coordinator settings, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from broker.setting import INT32_MAX as INT32_MAX
from broker.setting import Setting, names_from_toml, parse_names


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The coordinator's settings with Kafka's defaults, so a bare ``GroupConfig()`` behaves as Kafka does.

    Each field but the join timeout is declared here, once: its ``Setting`` (broker/setting.py) holds the default,
    the option's name, help and Kafka's name, as Kafka's ``GroupCoordinatorConfig`` defines its own configs.
    broker/config/settings.py collects these declarations (flag, variable, TOML key, README table, DescribeConfigs).
    """

    min_session_timeout_ms: int = Setting(
        "group_min_session_timeout_ms", 6000, int, "lowest session timeout a member may ask for",
        kafka="group.min.session.timeout.ms",
    ).field()
    max_session_timeout_ms: int = Setting(
        "group_max_session_timeout_ms", 1_800_000, int, "highest session timeout a member may ask for",
        kafka="group.max.session.timeout.ms",
    ).field()
    initial_rebalance_delay_ms: int = Setting(
        "group_initial_rebalance_delay_ms", 3000, int,
        "how long the first rebalance of an empty group waits for more members (0 for tests)",
        kafka="group.initial.rebalance.delay.ms",
    ).field()
    max_size: int = Setting(
        "group_max_size", INT32_MAX, int, "most members a group may have", kafka="group.max.size"
    ).field()
    offsets_retention_minutes: int = Setting(
        "offsets_retention_minutes", 10080, int, "how long an empty group's committed offsets are kept",
        kafka="offsets.retention.minutes",
    ).field()
    offsets_retention_check_interval_ms: int = Setting(
        "offsets_retention_check_interval_ms", 600_000, int, "how often expired offsets are removed",
        kafka="offsets.retention.check.interval.ms",
    ).field()
    offset_metadata_max_bytes: int = Setting(
        "offset_metadata_max_bytes", 4096, int, "largest metadata string of a committed offset",
        kafka="offset.metadata.max.bytes",
    ).field()
    # A constant in Kafka's group coordinator (not a setting there), so no option here either.
    new_member_join_timeout_ms: int = 300_000
    # KIP-848 consumer groups (docs/spec/consumer-groups.md section 11; Kafka's GroupCoordinatorConfig). The
    # timeouts are the broker's to dictate: clients cannot override them (section 12), so tests lower them here.
    rebalance_protocols: tuple[str, ...] = Setting(
        "group_coordinator_rebalance_protocols", ("classic", "consumer"), parse_names,
        "group protocols served, comma-separated; without consumer, ConsumerGroupHeartbeat and "
        "ConsumerGroupDescribe answer UNSUPPORTED_VERSION (classic cannot be left out)",
        kafka="group.coordinator.rebalance.protocols", kafka_default="classic,consumer (4.1+: also streams)",
        from_toml_shape=names_from_toml,
    ).field()
    consumer_session_timeout_ms: int = Setting(
        "group_consumer_session_timeout_ms", 45_000, int,
        "session timeout of consumer-protocol members (within its min and max, above the heartbeat interval)",
        kafka="group.consumer.session.timeout.ms",
    ).field()
    consumer_min_session_timeout_ms: int = Setting(
        "group_consumer_min_session_timeout_ms", 45_000, int, "lowest consumer-protocol session timeout",
        kafka="group.consumer.min.session.timeout.ms",
    ).field()
    consumer_max_session_timeout_ms: int = Setting(
        "group_consumer_max_session_timeout_ms", 60_000, int, "highest consumer-protocol session timeout",
        kafka="group.consumer.max.session.timeout.ms",
    ).field()
    consumer_heartbeat_interval_ms: int = Setting(
        "group_consumer_heartbeat_interval_ms", 5_000, int,
        "heartbeat interval the broker gives consumer-protocol members (within its min and max)",
        kafka="group.consumer.heartbeat.interval.ms",
    ).field()
    consumer_min_heartbeat_interval_ms: int = Setting(
        "group_consumer_min_heartbeat_interval_ms", 5_000, int, "lowest consumer-protocol heartbeat interval",
        kafka="group.consumer.min.heartbeat.interval.ms",
    ).field()
    consumer_max_heartbeat_interval_ms: int = Setting(
        "group_consumer_max_heartbeat_interval_ms", 15_000, int, "highest consumer-protocol heartbeat interval",
        kafka="group.consumer.max.heartbeat.interval.ms",
    ).field()
    consumer_max_size: int = Setting(
        "group_consumer_max_size", INT32_MAX, int,
        "most members a consumer group may have (classic-protocol members count)",
        kafka="group.consumer.max.size",
    ).field()
    consumer_assignors: tuple[str, ...] = Setting(
        "group_consumer_assignors", ("uniform", "range"), parse_names,
        "server-side assignors (uniform, range); the first is used when a member names none",
        kafka="group.consumer.assignors", from_toml_shape=names_from_toml,
    ).field()

    # KIP-932 share groups (docs/spec/share-groups.md section 11; Kafka's GroupCoordinatorConfig and
    # ShareGroupConfig). The client sets none of them, so tests lower them here or per group (share.* group configs).
    share_session_timeout_ms: int = Setting(
        "group_share_session_timeout_ms", 45_000, int,
        "session timeout of share-group members (within its min and max, above the heartbeat interval)",
        kafka="group.share.session.timeout.ms",
    ).field()
    share_min_session_timeout_ms: int = Setting(
        "group_share_min_session_timeout_ms", 45_000, int, "lowest share-group session timeout (group configs too)",
        kafka="group.share.min.session.timeout.ms",
    ).field()
    share_max_session_timeout_ms: int = Setting(
        "group_share_max_session_timeout_ms", 60_000, int, "highest share-group session timeout (group configs too)",
        kafka="group.share.max.session.timeout.ms",
    ).field()
    share_heartbeat_interval_ms: int = Setting(
        "group_share_heartbeat_interval_ms", 5_000, int,
        "heartbeat interval the broker gives share-group members (within its min and max)",
        kafka="group.share.heartbeat.interval.ms",
    ).field()
    share_min_heartbeat_interval_ms: int = Setting(
        "group_share_min_heartbeat_interval_ms", 5_000, int, "lowest share-group heartbeat interval",
        kafka="group.share.min.heartbeat.interval.ms",
    ).field()
    share_max_heartbeat_interval_ms: int = Setting(
        "group_share_max_heartbeat_interval_ms", 15_000, int, "highest share-group heartbeat interval",
        kafka="group.share.max.heartbeat.interval.ms",
    ).field()
    share_max_size: int = Setting(
        "group_share_max_size", 200, int, "most members a share group may have (1-1000)",
        kafka="group.share.max.size",
    ).field()
    share_record_lock_duration_ms: int = Setting(
        "group_share_record_lock_duration_ms", 30_000, int,
        "how long a share consumer holds the records it fetched before they are redelivered (within its min and max)",
        kafka="group.share.record.lock.duration.ms",
    ).field()
    share_min_record_lock_duration_ms: int = Setting(
        "group_share_min_record_lock_duration_ms", 15_000, int,
        "lowest record lock duration (share.record.lock.duration.ms group configs too; at least 1000)",
        kafka="group.share.min.record.lock.duration.ms",
    ).field()
    share_max_record_lock_duration_ms: int = Setting(
        "group_share_max_record_lock_duration_ms", 60_000, int, "highest record lock duration (at most 3600000)",
        kafka="group.share.max.record.lock.duration.ms",
    ).field()
    share_delivery_count_limit: int = Setting(
        "group_share_delivery_count_limit", 5, int,
        "deliveries of a share-group record before it is archived instead of redelivered (2-10)",
        kafka="group.share.delivery.count.limit",
    ).field()
    share_partition_max_record_locks: int = Setting(
        "group_share_partition_max_record_locks", 2000, int,
        "most in-flight records of one share-partition (100-10000)",
        kafka="group.share.partition.max.record.locks",
    ).field()
    # Kafka 4.1+ switches share groups on and off with the finalized feature share.version (1 by default in 4.2),
    # not with a config; here it is a start-up setting (docs/spec/share-groups.md 2.7, checklist items 1 and 71).
    share_version: int = Setting(
        "share_version", 1, int,
        "the share.version feature level: 0 leaves share groups out, as a Kafka 4.0 broker does (their seven APIs "
        "unlisted in ApiVersions, a request anyway answered UNSUPPORTED_VERSION)",
        kafka="share.version", bounds=(0, 1),
    ).field()
    share_max_share_sessions: int = Setting(
        "group_share_max_share_sessions", 2000, int, "most share sessions this broker keeps",
        kafka="group.share.max.share.sessions",
    ).field()

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        self._check_consumer_settings()
        self._check_share_settings()

    def _check_consumer_settings(self) -> None:
        """GroupCoordinatorConfig's checks of the consumer-group settings (test item 71: a bad value refuses start)."""
        unknown = set(self.rebalance_protocols) - {"classic", "consumer"}
        if unknown or "classic" not in self.rebalance_protocols:
            raise ValueError("group.coordinator.rebalance.protocols must list classic, and may add consumer")
        if min(self.consumer_min_session_timeout_ms, self.consumer_min_heartbeat_interval_ms) < 1:
            raise ValueError(
                "group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms must be at least 1"
            )
        if self.consumer_min_session_timeout_ms > self.consumer_max_session_timeout_ms:
            raise ValueError("group.consumer.min.session.timeout.ms exceeds group.consumer.max.session.timeout.ms")
        if self.consumer_min_heartbeat_interval_ms > self.consumer_max_heartbeat_interval_ms:
            raise ValueError(
                "group.consumer.min.heartbeat.interval.ms exceeds group.consumer.max.heartbeat.interval.ms"
            )
        if not (
            self.consumer_min_session_timeout_ms
            <= self.consumer_session_timeout_ms
            <= self.consumer_max_session_timeout_ms
        ):
            raise ValueError(
                "group.consumer.session.timeout.ms must lie within its min and max: "
                "group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms"
            )
        if not (
            self.consumer_min_heartbeat_interval_ms
            <= self.consumer_heartbeat_interval_ms
            <= self.consumer_max_heartbeat_interval_ms
        ):
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must lie within its min and max: "
                "group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms"
            )
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be lower than group.consumer.session.timeout.ms"
            )
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        if not self.consumer_assignors or set(self.consumer_assignors) - {"uniform", "range"}:
            raise ValueError("group.consumer.assignors must list assignors among: uniform, range")

    def _check_share_settings(self) -> None:
        """GroupCoordinatorConfig's and ShareGroupConfig's checks of the share-group settings (a bad value refuses
        the start, as Kafka's broker does)."""
        between = (
            ("group.share.session.timeout.ms", self.share_min_session_timeout_ms, self.share_session_timeout_ms,
             self.share_max_session_timeout_ms),
            ("group.share.heartbeat.interval.ms", self.share_min_heartbeat_interval_ms,
             self.share_heartbeat_interval_ms, self.share_max_heartbeat_interval_ms),
            ("group.share.record.lock.duration.ms", self.share_min_record_lock_duration_ms,
             self.share_record_lock_duration_ms, self.share_max_record_lock_duration_ms),
        )  # fmt: skip
        for name, low, value, high in between:
            if low < 1 or not low <= value <= high:
                prefix = name.rsplit(".", 2)[0]
                raise ValueError(f"{name} must lie within {prefix}.min.* and {prefix}.max.* (got {value})")
        if self.share_heartbeat_interval_ms >= self.share_session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be lower than group.share.session.timeout.ms")
        if not (self.share_min_record_lock_duration_ms >= 1000 and self.share_max_record_lock_duration_ms <= 3_600_000):
            raise ValueError("group.share record lock durations must lie within 1000 and 3600000")
        bounded = (
            ("group.share.max.size", self.share_max_size, 1, 1000),
            ("group.share.delivery.count.limit", self.share_delivery_count_limit, 2, 10),
            ("group.share.partition.max.record.locks", self.share_partition_max_record_locks, 100, 10_000),
            ("group.share.max.share.sessions", self.share_max_share_sessions, 1, 2**31 - 1),
        )
        for name, value, low, high in bounded:
            if not low <= value <= high:
                raise ValueError(f"{name} must lie within {low} and {high} (got {value})")

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols

    @property
    def share_groups_enabled(self) -> bool:
        return self.share_version >= 1

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
