"""Group coordinator settings, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The coordinator's settings with Kafka's defaults, so a bare ``GroupConfig()`` behaves as Kafka does.

    These defaults are the broker's: the flags, Kafka's names and the help of all but the last field are declared
    in broker/config/settings.py (``OPTIONS``), which reads the defaults from here.
    """

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT32_MAX
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # A constant in Kafka's group coordinator (not a setting there), so no option here either.
    new_member_join_timeout_ms: int = 300_000
    # KIP-848 consumer groups (GroupCoordinatorConfig, docs/spec/consumer-groups.md section 11).
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_max_size: int = INT32_MAX
    consumer_assignors: tuple[str, ...] = ("uniform", "range")

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        self._check_consumer_settings()

    def _check_consumer_settings(self) -> None:
        """GroupCoordinatorConfig's checks of the consumer-group settings (test item 71: a bad value refuses start)."""
        unknown = set(self.rebalance_protocols) - {"classic", "consumer"}
        if unknown or "classic" not in self.rebalance_protocols:
            raise ValueError("group.coordinator.rebalance.protocols must list classic, and may add consumer")
        if min(self.consumer_min_session_timeout_ms, self.consumer_min_heartbeat_interval_ms) < 1:
            raise ValueError("group.consumer.min.session.timeout.ms and min.heartbeat.interval.ms must be at least 1")
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
            raise ValueError("group.consumer.session.timeout.ms must lie within its min and max")
        if not (
            self.consumer_min_heartbeat_interval_ms
            <= self.consumer_heartbeat_interval_ms
            <= self.consumer_max_heartbeat_interval_ms
        ):
            raise ValueError("group.consumer.heartbeat.interval.ms must lie within its min and max")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be lower than group.consumer.session.timeout.ms"
            )
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        if not self.consumer_assignors or set(self.consumer_assignors) - {"uniform", "range"}:
            raise ValueError("group.consumer.assignors must list assignors among: uniform, range")

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
