"""Broker settings: one typed object filled from defaults, an optional TOML file, the environment and flags.

Later sources win: default < TOML file (``--config``) < ``GROUP_BROKER_*`` environment variable < flag.

Each fact about a setting is written once. Its default is the default of the field that holds it: ``Settings``
here, or ``GroupConfig`` (broker/coordinator/config.py) and ``LogDefaults`` (broker/storage/topics.py), which
unit tests build bare with Kafka's defaults. Everything else is its entry in ``OPTIONS``: the name (the flag and
the environment variable derive from it; a TOML file may use it or Kafka's dotted name), the parser, the help,
Kafka's name and default, the choices, and the field it fills. ``build`` and the README's settings table
(``markdown_table``) are derived from ``OPTIONS``, so none of them can drift apart.

A dataclass rather than pydantic-settings: this module is on the start-up path (bar: well under a second, today
about 0.3 s), and pydantic's import alone would cost a large share of it.
"""

from __future__ import annotations

import argparse
import base64
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from broker.config.endpoints import Endpoint as Endpoint
from broker.config.endpoints import host_port as host_port
from broker.config.endpoints import is_wildcard
from broker.config.endpoints import parse_endpoints as parse_endpoints
from broker.config.endpoints import reachable_host as reachable_host
from broker.config.transaction_settings import TXN_SETTINGS
from broker.coordinator.config import INT32_MAX, GroupConfig
from broker.storage.topics import KAFKA_MAX_RECORDS_PER_USER_OP, LogDefaults, parse_topic_spec
from broker.transactions.config import TxnConfig

ENV_PREFIX = "GROUP_BROKER_"
ADMIN_PORT = 9644  # the control API's default port
CONFIG_ENV = ENV_PREFIX + "CONFIG"


class SettingsError(ValueError):
    """A setting that cannot be used, with where it came from."""


def random_cluster_id() -> str:
    """A cluster id in Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the broker runs with. Each field's default is the setting's (Kafka's, where Kafka has the setting);
    its flag, help and Kafka name are its entry in ``OPTIONS``."""

    host: str = "0.0.0.0"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    listeners: tuple[Endpoint, ...] = ()
    advertised_listeners: tuple[Endpoint, ...] = ()
    node_id: int = 1
    cluster_id: str = ""  # empty: a random one in Kafka's format, drawn by __post_init__
    group: GroupConfig = field(default_factory=GroupConfig)
    txn: TxnConfig = field(default_factory=TxnConfig)  # the transaction coordinator's (transaction_settings.py)
    socket_request_max_bytes: int = 104_857_600
    socket_send_buffer_high_bytes: int = 4 * 1024 * 1024
    socket_send_buffer_low_bytes: int = 1024 * 1024
    max_connections: int = INT32_MAX
    max_connections_per_ip: int = INT32_MAX
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    max_partitions_per_request: int = KAFKA_MAX_RECORDS_PER_USER_OP
    max_partitions_per_topic: int = KAFKA_MAX_RECORDS_PER_USER_OP
    topics: tuple[tuple[str, int], ...] = ()
    auto_create_topics: bool = True
    num_partitions: int = 1
    log: LogDefaults = field(default_factory=LogDefaults)
    log_retention_check_interval_ms: int = 300_000
    storage_max_bytes: int = 1_073_741_824
    log_level: str = "info"
    log_format: str = "auto"
    admin_host: str = "127.0.0.1"
    admin_port: int = ADMIN_PORT
    event_log: str | None = None
    event_log_max_bytes: int = 100 * 1024 * 1024
    event_log_backups: int = 5
    event_buffer_size: int = 1000
    event_buffer_total: int = 10_000
    # The options a flag, the environment or the TOML file set (``resolve``); the rest are defaults. Not a setting:
    # it tells a value asked for from one nobody asked for (issue 18: a taken default admin port gives way).
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        if not self.cluster_id:
            object.__setattr__(self, "cluster_id", random_cluster_id())  # frozen: the one way to fill a field in
        if not 0 <= self.socket_send_buffer_low_bytes <= self.socket_send_buffer_high_bytes:
            raise ValueError(
                f"socket_send_buffer_low_bytes ({self.socket_send_buffer_low_bytes}) must be between 0 and "
                f"socket_send_buffer_high_bytes ({self.socket_send_buffer_high_bytes})"
            )
        if self.listeners:
            ports = [e.port for e in self.listeners if e.port]
            if len(ports) != len(set(ports)):
                raise ValueError("listeners: each listener needs its own port")
        known = {e.name for e in self.bind_endpoints()}
        for endpoint in self.advertised_listeners:
            if endpoint.name not in known:
                raise ValueError(
                    f"advertised.listeners: {endpoint.name} is not a listener (listeners: {', '.join(sorted(known))})"
                )

    def bind_endpoints(self) -> tuple[Endpoint, ...]:
        """Where to listen: ``listeners``, or one PLAINTEXT listener on ``host``:``port``."""
        return self.listeners or (Endpoint("PLAINTEXT", self.host, self.port),)

    def advertised_for(self, listener: Endpoint, bound_port: int) -> tuple[str, int]:
        """What Metadata and FindCoordinator return to a client connected to ``listener``: its entry of
        ``advertised.listeners``, else ``--advertised-host``/``--advertised-port``, else the listener's own
        address (``localhost`` for a wildcard host) and the port it bound."""
        for endpoint in self.advertised_listeners:
            if endpoint.name == listener.name:
                return endpoint.host or self._default_host(listener), endpoint.port or bound_port
        return self.advertised_host or self._default_host(listener), self.advertised_port or bound_port

    def admin_port_movable(self) -> bool:
        """Whether a taken admin port may give way to a free one (issue 18): only the default port, and only when
        no flag, variable or TOML key named it; a port asked for fails when taken."""
        return self.admin_port == ADMIN_PORT and "admin_port" not in self.given

    @staticmethod
    def _default_host(listener: Endpoint) -> str:
        return "localhost" if is_wildcard(listener.host) else listener.host


# --- the declared options --------------------------------------------------------------------------------------


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _host_counts(text: str) -> tuple[tuple[str, int], ...]:
    """Kafka's ``max.connections.per.ip.overrides``: comma-separated ``host:count`` (the last colon splits, so an
    IPv6 address needs no brackets)."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        if not colon or not host or not count.isdigit():
            raise ValueError(f"{item!r} is not HOST:COUNT")
        pairs.append((host.strip("[]"), int(count)))
    return tuple(pairs)


def _topics(text: str) -> tuple[tuple[str, int], ...]:
    return tuple(parse_topic_spec(spec) for spec in text.replace(",", " ").split())


def _names(text: str) -> tuple[str, ...]:
    """Kafka's LIST type: comma-separated, each item trimmed, empty items dropped. Which names are valid is
    GroupConfig's to say, so a bad one refuses start with its message."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


# The sections of Settings an option may fill, by the name of the Settings field that holds each.
_SECTIONS: dict[str, type[GroupConfig] | type[LogDefaults] | type[TxnConfig]] = {
    "group": GroupConfig, "log": LogDefaults, "txn": TxnConfig,
}


def _field_default(path: str) -> Any:
    """The default of the field at ``path`` (``"port"``, ``"group.max_size"``): where each default is written."""
    section, _, name = path.rpartition(".")
    holder = _SECTIONS[section] if section else Settings
    for found in fields(holder):
        if found.name == name:
            if found.default is MISSING:
                raise TypeError(f"an option fills {path}, which has no plain default to show and fall back on")
            return found.default
    raise LookupError(f"an option fills {path}, which is not a field")


@dataclass(frozen=True, slots=True)
class Option:
    """One setting. ``name`` is the TOML key; the flag is ``--name-with-dashes``, the variable GROUP_BROKER_NAME.
    Its default is not written here: it is the default of the field the option fills."""

    name: str
    parse: Callable[[str], Any]
    help: str
    kafka: str | None = None  # Kafka's name for the same setting, also accepted as a TOML key
    kafka_default: str | None = None  # as Kafka documents it; None: the same as ours
    choices: tuple[str, ...] = ()
    shown_default: str | None = None  # when the default is computed
    # The field the value goes to, dotted into a section of Settings ("group.max_size"); None: the field of Settings
    # named like the option.
    fills: str | None = None
    setting: bool = True  # False for ``config``: it names the file the settings come from, it is not one
    default: Any = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", _field_default(self.path) if self.setting else None)

    @property
    def path(self) -> str:
        return self.fills or self.name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def from_text(self, text: str) -> Any:
        value = self.parse(text)
        if self.choices and value not in self.choices:
            raise ValueError(f"expected one of {', '.join(self.choices)}, got {text!r}")
        return value

    def from_toml(self, value: Any) -> Any:
        """A TOML value: native types as they are (no silent conversions), strings as the flag would take them."""
        if self.parse is _topics and isinstance(value, list | dict):
            specs = value if isinstance(value, list) else [f"{name}:{count}" for name, count in value.items()]
            return _topics(" ".join(str(spec) for spec in specs))
        if self.parse is _host_counts and isinstance(value, dict):
            return _host_counts(",".join(f"{host}:{count}" for host, count in value.items()))
        if self.parse is parse_endpoints and isinstance(value, list):
            return parse_endpoints(",".join(str(item) for item in value))
        if self.parse is _names and isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise ValueError(f"expected a TOML list of strings, got {value!r}")
            return _names(",".join(value))
        expected: type = {int: int, _bool: bool}.get(self.parse, str)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(f"expected a TOML {expected.__name__}, got {type(value).__name__} {value!r}")
        return self.from_text(value) if isinstance(value, str) else value

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None or self.default == ():
            return "none"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, tuple) and all(isinstance(item, str) for item in self.default):
            return ",".join(self.default)  # a LIST setting, written as Kafka writes it
        return str(self.default)


OPTIONS: tuple[Option, ...] = (
    Option(
        "config", str, "read settings from this TOML file (our names or Kafka's dotted names)", setting=False
    ),
    Option("host", str, "address to listen on (when --listeners is not set)"),
    Option("port", int, "port to listen on (0 picks a free one; when --listeners is not set)"),
    Option(
        "listeners", parse_endpoints, "NAME://HOST:PORT,...: one listener each, overrides --host/--port",
        kafka="listeners", kafka_default="PLAINTEXT://:9092", shown_default="PLAINTEXT://HOST:PORT",
    ),
    Option(
        "advertised_listeners", parse_endpoints,
        "NAME://HOST:PORT,...: what Metadata and FindCoordinator return to clients of each listener",
        kafka="advertised.listeners", kafka_default="listeners", shown_default="the listeners",
    ),
    Option(
        "advertised_host", str, "host to advertise for listeners without an advertised.listeners entry",
        shown_default="listen host, or localhost",
    ),
    Option("advertised_port", int, "port to advertise likewise", shown_default="the bound port"),
    Option("node_id", int, "this broker's node id", kafka="node.id", kafka_default="-1 (must be set)"),
    Option(
        "cluster_id", str, "cluster id reported in Metadata (Kafka's comes from `kafka-storage.sh format`)",
        shown_default="random, Kafka's format",
    ),
    Option(
        "group_min_session_timeout_ms", int, "lowest session timeout a member may ask for",
        kafka="group.min.session.timeout.ms", fills="group.min_session_timeout_ms",
    ),
    Option(
        "group_max_session_timeout_ms", int, "highest session timeout a member may ask for",
        kafka="group.max.session.timeout.ms", fills="group.max_session_timeout_ms",
    ),
    Option(
        "group_initial_rebalance_delay_ms", int,
        "how long the first rebalance of an empty group waits for more members (0 for tests)",
        kafka="group.initial.rebalance.delay.ms", fills="group.initial_rebalance_delay_ms",
    ),
    Option(
        "group_max_size", int, "most members a group may have", kafka="group.max.size", fills="group.max_size"
    ),
    Option(
        "offsets_retention_minutes", int, "how long an empty group's committed offsets are kept",
        kafka="offsets.retention.minutes", fills="group.offsets_retention_minutes",
    ),
    Option(
        "offsets_retention_check_interval_ms", int, "how often expired offsets are removed",
        kafka="offsets.retention.check.interval.ms", fills="group.offsets_retention_check_interval_ms",
    ),
    Option(
        "offset_metadata_max_bytes", int, "largest metadata string of a committed offset",
        kafka="offset.metadata.max.bytes", fills="group.offset_metadata_max_bytes",
    ),
    # KIP-848 consumer groups (docs/spec/consumer-groups.md section 11; Kafka's GroupCoordinatorConfig). The
    # timeouts are the broker's to dictate: clients cannot override them (section 12), so tests lower them here.
    Option(
        "group_coordinator_rebalance_protocols", _names,
        "group protocols served, comma-separated; without consumer, ConsumerGroupHeartbeat and "
        "ConsumerGroupDescribe answer UNSUPPORTED_VERSION (classic cannot be left out)",
        kafka="group.coordinator.rebalance.protocols", kafka_default="classic,consumer (4.1+: also streams)",
        fills="group.rebalance_protocols",
    ),
    Option(
        "group_consumer_session_timeout_ms", int,
        "session timeout of consumer-protocol members (within its min and max, above the heartbeat interval)",
        kafka="group.consumer.session.timeout.ms", fills="group.consumer_session_timeout_ms",
    ),
    Option(
        "group_consumer_min_session_timeout_ms", int, "lowest consumer-protocol session timeout",
        kafka="group.consumer.min.session.timeout.ms", fills="group.consumer_min_session_timeout_ms",
    ),
    Option(
        "group_consumer_max_session_timeout_ms", int, "highest consumer-protocol session timeout",
        kafka="group.consumer.max.session.timeout.ms", fills="group.consumer_max_session_timeout_ms",
    ),
    Option(
        "group_consumer_heartbeat_interval_ms", int,
        "heartbeat interval the broker gives consumer-protocol members (within its min and max)",
        kafka="group.consumer.heartbeat.interval.ms", fills="group.consumer_heartbeat_interval_ms",
    ),
    Option(
        "group_consumer_min_heartbeat_interval_ms", int, "lowest consumer-protocol heartbeat interval",
        kafka="group.consumer.min.heartbeat.interval.ms", fills="group.consumer_min_heartbeat_interval_ms",
    ),
    Option(
        "group_consumer_max_heartbeat_interval_ms", int, "highest consumer-protocol heartbeat interval",
        kafka="group.consumer.max.heartbeat.interval.ms", fills="group.consumer_max_heartbeat_interval_ms",
    ),
    Option(
        "group_consumer_max_size", int, "most members a consumer group may have (classic-protocol members count)",
        kafka="group.consumer.max.size", fills="group.consumer_max_size",
    ),
    Option(
        "group_consumer_assignors", _names,
        "server-side assignors (uniform, range); the first is used when a member names none",
        kafka="group.consumer.assignors", fills="group.consumer_assignors",
    ),
    Option(
        "socket_request_max_bytes", int, "largest request; a larger one closes the connection",
        kafka="socket.request.max.bytes",
    ),
    Option(
        "socket_send_buffer_high_bytes", int,
        "stop reading a connection and answering its queued requests while more than this many bytes of answers "
        "wait to be sent to it (Kafka has no such setting: it mutes a connection until its answer is sent)",
    ),
    Option(
        "socket_send_buffer_low_bytes", int,
        "resume once the answers waiting to be sent drain to this many bytes (Kafka has no such setting either)",
    ),
    Option(
        "max_connections", int,
        "most client connections at once, all listeners together; at the limit the broker stops accepting until "
        "one closes (the next connection waits, unread)",
        kafka="max.connections",
    ),
    Option(
        "max_connections_per_ip", int,
        "most client connections at once from one address; a connection over it is closed at once",
        kafka="max.connections.per.ip",
    ),
    Option(
        "max_connections_per_ip_overrides", _host_counts, "HOST:COUNT,...: a per-address limit for these addresses",
        kafka="max.connections.per.ip.overrides",
    ),
    Option(
        "max_partitions_per_request", int,
        "most metadata records one CreateTopics or CreatePartitions may write, counted as Kafka's controller counts "
        "them (one per topic, per config and per partition); past it, POLICY_VIOLATION and nothing is created "
        "(Kafka's is fixed at 10,000)",
    ),
    Option(
        "max_partitions_per_topic", int,
        "most partitions one topic may have through CreateTopics or CreatePartitions; past it that topic gets "
        "POLICY_VIOLATION (Kafka has no such limit; a test broker keeps every partition in memory)",
    ),
    Option(
        "topic", _topics, "NAME:PARTITIONS to create at start (a bare NAME gets 1 partition; flag repeatable; "
        "variable comma-separated)", fills="topics",
    ),
    Option(
        "auto_create_topics_enable", _bool, "create unknown topics on Metadata and Produce",
        kafka="auto.create.topics.enable", fills="auto_create_topics",
    ),
    Option("num_partitions", int, "partitions of an auto-created topic", kafka="num.partitions"),
    Option(
        "log_retention_ms", int, "topic default for retention.ms (-1: no limit)",
        kafka="log.retention.ms", kafka_default="604800000 (log.retention.hours=168)", fills="log.retention_ms",
    ),
    Option(
        "log_retention_bytes", int, "topic default for retention.bytes, per partition (-1: no limit)",
        kafka="log.retention.bytes", fills="log.retention_bytes",
    ),
    Option(
        "log_retention_check_interval_ms", int, "how often retention runs", kafka="log.retention.check.interval.ms"
    ),
    Option(
        "message_max_bytes", int, "topic default for max.message.bytes (largest record batch)",
        kafka="message.max.bytes", fills="log.max_message_bytes",
    ),
    Option("storage_max_bytes", int, "cap on bytes stored in all partition logs (-1: none)"),
    Option("log_level", str, "broker log level", choices=("debug", "info", "warning", "error")),
    Option(
        "log_format", str, "console, json, or auto (console on a terminal, JSON lines otherwise)",
        choices=("auto", "console", "json"),
    ),
    Option("admin_host", str, "address of the HTTP control API (0.0.0.0 exposes it: it can kick members)"),
    Option(
        "admin_port", int,
        "port of the HTTP control API (0 picks a free one, -1 turns it off; the default, when taken and not asked "
        "for, gives way to a free one)",
    ),
    Option("event_log", str, "append group events to this JSON-lines file (schema: docs/events.md)"),
    Option("event_log_max_bytes", int, "rotate the event log when it reaches this size"),
    Option("event_log_backups", int, "rotated event logs to keep (PATH.1 is the newest)"),
    Option("event_buffer_size", int, "events kept in memory per group for the control API"),
    Option("event_buffer_total", int, "events kept in memory for all groups together (oldest go first)"),
    *(Option(name, int, text, kafka=kafka, fills=f"txn.{name}") for name, text, kafka in TXN_SETTINGS),
)

_BY_KEY: dict[str, Option] = {key: o for o in OPTIONS for key in (o.name, o.kafka) if key is not None}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option as a flag. Defaults are left out of the namespace (SUPPRESS) so ``resolve`` can tell a flag
    that was given from one that was not, and let the environment and the TOML file fill the rest."""
    for option in OPTIONS:
        extra: dict[str, Any] = {"action": "append", "metavar": "NAME:PARTITIONS"} if option.name == "topic" else {}
        if option.choices:
            extra["choices"] = option.choices
        parser.add_argument(
            option.flag,
            dest=option.name,
            type=_argparse_type(option),
            default=argparse.SUPPRESS,
            help=f"{option.help} [env {option.env}; default {option.default_text()}]",
            **extra,
        )


def _argparse_type(option: Option) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return option.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = getattr(option.parse, "__name__", "value")
    return convert


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Flags given, then the environment, then the TOML file, then the defaults."""
    env = os.environ if environ is None else environ
    given = vars(args)
    config_path = given.get("config") or env.get(CONFIG_ENV)
    from_file = load_toml(config_path) if config_path else {}
    values: dict[str, Any] = {}
    named = {o.name for o in OPTIONS if o.name in given or o.env in env or o.name in from_file}
    for option in OPTIONS:
        if option.name in given:
            value = given[option.name]
            values[option.name] = tuple(p for spec in value for p in spec) if option.name == "topic" else value
        elif option.env in env:
            try:
                values[option.name] = option.from_text(env[option.env])
            except ValueError as error:
                raise SettingsError(f"{option.env}={env[option.env]!r}: {error}") from None
        elif option.name in from_file:
            values[option.name] = from_file[option.name]
        else:
            values[option.name] = option.default
    return build(values, frozenset(named))


def load_toml(path: str) -> dict[str, Any]:
    """A TOML file's settings by option name. Keys are our names or Kafka's; Kafka's dotted names may be quoted
    (``"group.max.size" = 5``) or written bare, which TOML reads as nested tables and we flatten back."""
    import tomllib  # only with a config file: off the start-up path otherwise (issue 17)
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as error:
        raise SettingsError(f"config file {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"config file {path}: not valid TOML: {error}") from None
    values: dict[str, Any] = {}
    for key, value in _flatten(document):
        option = _BY_KEY.get(key)
        if option is None or not option.setting:
            raise SettingsError(f"config file {path}: unknown setting {key!r}{_suggestion(key)}")
        if option.name in values:
            raise SettingsError(f"config file {path}: {key!r} sets {option.name} a second time")
        try:
            values[option.name] = option.from_toml(value)
        except ValueError as error:
            raise SettingsError(f"config file {path}: {key}: {error}") from None
    return values


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in _BY_KEY:
            yield from _flatten(value, name + ".")
        else:
            yield name, value


def _suggestion(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key.replace(".", "_").replace("-", "_"), [o.name for o in OPTIONS], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def build(values: Mapping[str, Any], named: frozenset[str] = frozenset()) -> Settings:
    """Settings from option values (every option present), each put in the field it fills; cross-field checks
    become SettingsError. ``named``: the options that were set rather than defaulted (``Settings.given``)."""
    top: dict[str, Any] = {"given": named}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for option in OPTIONS:
        if option.setting:
            section, _, name = option.path.rpartition(".")
            (sections[section] if section else top)[name] = values[option.name]
    try:
        for name, given in sections.items():
            top[name] = _SECTIONS[name](**given)
        return Settings(**top)
    except ValueError as error:
        raise SettingsError(str(error)) from None


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(argv), environ)


def markdown_table() -> str:
    """The README's settings table (the variable and TOML key derive from the flag, as the README says)."""
    rows = ["| flag | default | Kafka's name = Kafka's default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        kafka = "-" if option.kafka is None else f"`{option.kafka}` = {option.kafka_default or option.default_text()}"
        rows.append(f"| `{option.flag}` | {option.default_text()} | {kafka} | {option.help} |")
    return "\n".join(rows)
