"""Configs set on a group id (Kafka's ``GroupConfig`` and ``GroupConfigManager``; resource type GROUP, 32, of
DescribeConfigs and IncrementalAlterConfigs): the share groups' ones, section 11.2 of ``docs/spec/share-groups.md``.

A group id may carry configs before the group exists (tests set ``share.auto.offset.reset=earliest`` before the first
consumer fetches). An unset config falls back to the broker's setting. Values are checked as Kafka's
``GroupConfig.validate`` does, against the broker's bounds, each failure INVALID_CONFIG with Kafka's message.
Kafka 4.2 also lists the consumer and streams groups' configs (``consumer.session.timeout.ms``, ...); this broker
serves only the share groups' ones and refuses the others as unknown (``docs/spec/share-groups.md``, "Differences").
Overrides are durable (``group.config`` changes, issue 27).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from broker.changes import NULL_CHANGES, Change, ChangeSink
from broker.coordinator.config import GroupConfig
from broker.coordinator.modern.share.partition import duration_ms

__all__ = [
    "AUTO_OFFSET_RESET",
    "GROUP_CONFIG",
    "HEARTBEAT_INTERVAL",
    "ISOLATION_LEVEL",
    "LOCK_DURATION",
    "SESSION_TIMEOUT",
    "GroupConfigs",
    "InvalidGroupConfig",
    "ShownConfig",
]

GROUP_CONFIG = "group.config"  # the durable kind: (group id,) -> {name: value}

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
LOCK_DURATION = "share.record.lock.duration.ms"
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"

_DOCS = {
    AUTO_OFFSET_RESET: "Where a share-partition starts when it has no state yet: latest, earliest or "
    "by_duration:<ISO-8601 duration>.",
    ISOLATION_LEVEL: "read_committed delivers only committed transactional records; read_uncommitted delivers all.",
    LOCK_DURATION: "How long a share consumer holds the records it acquired before they become available again.",
    SESSION_TIMEOUT: "How long a share-group member may go without a heartbeat before it is removed.",
    HEARTBEAT_INTERVAL: "The heartbeat interval the broker gives share-group members.",
}

# The int configs' broker settings (the GroupConfig fields ``defaults`` reads them from).
_INT_SETTINGS = {
    HEARTBEAT_INTERVAL: "share_heartbeat_interval_ms",
    LOCK_DURATION: "share_record_lock_duration_ms",
    SESSION_TIMEOUT: "share_session_timeout_ms",
}
# The string configs' defaults, which no broker setting moves (``defaults`` lists them too).
_FIXED_DEFAULTS = {AUTO_OFFSET_RESET: "latest", ISOLATION_LEVEL: "read_uncommitted"}


class InvalidGroupConfig(ValueError):
    """INVALID_CONFIG, with Kafka's message."""


@dataclass(frozen=True, slots=True)
class ShownConfig:
    name: str
    value: str
    is_default: bool  # the broker's value (DEFAULT_CONFIG) or the group's own (GROUP_CONFIG)
    kind: str  # "string" or "int"
    doc: str


class GroupConfigs:
    def __init__(self, config: GroupConfig, changes: ChangeSink = NULL_CHANGES) -> None:
        self.config = config
        self.changes = changes
        self.overrides: dict[str, dict[str, str]] = {}

    # -- reading -----------------------------------------------------------------------------------------------

    def defaults(self) -> dict[str, str]:
        config = self.config
        return {
            AUTO_OFFSET_RESET: _FIXED_DEFAULTS[AUTO_OFFSET_RESET],
            HEARTBEAT_INTERVAL: str(config.share_heartbeat_interval_ms),
            ISOLATION_LEVEL: _FIXED_DEFAULTS[ISOLATION_LEVEL],
            LOCK_DURATION: str(config.share_record_lock_duration_ms),
            SESSION_TIMEOUT: str(config.share_session_timeout_ms),
        }

    def value(self, group_id: str, name: str) -> str:
        own = self.overrides.get(group_id)
        if own is not None and name in own:
            return own[name]
        fixed = _FIXED_DEFAULTS.get(name)  # every ShareFetch reads the isolation level: no ``defaults`` built
        return fixed if fixed is not None else self.defaults()[name]

    def int_value(self, group_id: str, name: str) -> int:
        """An int config; an unset one read from the broker's setting without building ``defaults`` (every share
        heartbeat reads two)."""
        own = self.overrides.get(group_id)
        if own is not None and name in own:
            return int(own[name])
        setting = _INT_SETTINGS.get(name)
        return int(self.defaults()[name]) if setting is None else int(getattr(self.config, setting))

    def shown(self, group_id: str) -> list[ShownConfig]:
        own = self.overrides.get(group_id, {})
        return [
            ShownConfig(
                name,
                own.get(name, default),
                name not in own,
                "string" if name in (AUTO_OFFSET_RESET, ISOLATION_LEVEL) else "int",
                _DOCS[name],
            )
            for name, default in sorted(self.defaults().items())
        ]

    # -- changing (IncrementalAlterConfigs, AlterConfigs) -----------------------------------------------------

    def check(self, configs: Mapping[str, str | None]) -> None:
        """GroupConfig.validate: every name known, every value within the broker's bounds."""
        config = self.config
        bounds = {
            LOCK_DURATION: (
                config.share_min_record_lock_duration_ms, config.share_max_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
            ),
            SESSION_TIMEOUT: (
                config.share_min_session_timeout_ms, config.share_max_session_timeout_ms,
                "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
            ),
            HEARTBEAT_INTERVAL: (
                config.share_min_heartbeat_interval_ms, config.share_max_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
            ),
        }  # fmt: skip
        for name, value in configs.items():
            if name not in _DOCS:
                raise InvalidGroupConfig(f"Unknown group config name: {name}")
            if value is None:
                continue
            if name in bounds:
                low, high, low_name, high_name = bounds[name]
                try:
                    number = int(value)
                except ValueError:
                    raise InvalidGroupConfig(
                        f"Invalid value {value} for configuration {name}: Not a number of type INT"
                    ) from None
                if number < low:
                    raise InvalidGroupConfig(f"{name} must be greater than or equal to {low_name}")
                if number > high:
                    raise InvalidGroupConfig(f"{name} must be less than or equal to {high_name}")
            elif name == AUTO_OFFSET_RESET:
                _check_reset(value)
            elif value not in ("read_committed", "read_uncommitted"):
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: String must be one of: "
                    "read_committed, read_uncommitted"
                )

    def replace(self, group_id: str, configs: Mapping[str, str]) -> None:
        """The group's whole set of overrides (after ``check``); an empty one removes them."""
        if configs:
            self.overrides[group_id] = dict(configs)
        else:
            self.overrides.pop(group_id, None)
        if self.changes.enabled:
            if configs:
                self.changes.put(GROUP_CONFIG, (group_id,), dict(sorted(configs.items())))
            else:
                self.changes.delete(GROUP_CONFIG, (group_id,))

    def own(self, group_id: str) -> dict[str, str]:
        return dict(self.overrides.get(group_id, {}))

    # -- durable state (issue 27) -------------------------------------------------------------------------------

    def durable_records(self) -> Iterator[Change]:
        for group_id, configs in self.overrides.items():
            yield Change(GROUP_CONFIG, (group_id,), dict(sorted(configs.items())))

    def load(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == GROUP_CONFIG and change.value is not None:
                self.overrides[str(change.key[0])] = {str(k): str(v) for k, v in change.value.items()}


def _check_reset(value: str) -> None:
    if value in ("latest", "earliest"):
        return
    if value.startswith("by_duration:"):
        try:
            if duration_ms(value.removeprefix("by_duration:")) >= 0:
                return
        except ValueError:
            pass
    raise InvalidGroupConfig(
        f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: "
        "Invalid value for share.auto.offset.reset, should be one of latest, earliest or by_duration:<PnDTnHnMn.nS>"
    )
