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

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
