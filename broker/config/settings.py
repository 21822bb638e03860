"""Broker settings: one typed object filled from defaults, an optional TOML file, the environment and flags.

Later sources win: default < TOML file (``--config``) < ``GROUP_BROKER_*`` environment variable < flag.

Each setting is declared once, by its owner, beside the config it fills (issue 25): a ``Setting``
(broker/setting.py) with its name (the flag and the environment variable derive from it; a TOML file may use it or
Kafka's dotted name), default, parser, help, Kafka's name and default and choices. The coordinator declares its own
on ``GroupConfig`` (broker/coordinator/config.py), storage on ``LogDefaults`` and beside it
(broker/storage/topics.py), the transaction coordinator on ``TxnConfig`` (broker/transactions/config.py), the
server (the control listener's among them) in its leaf ``broker/server/settings.py``, the event hub in
``broker/events/hub.py``; this module declares only its own (``config``, ``log_level``, ``log_format``), and
collects them: ``OPTIONS`` is read off the fields of ``Settings``
in their order, a section's fields in its place, so the field a setting fills is where its declaration sits.
``build``, DescribeConfigs (broker/api/configs.py) and the README's settings table (``markdown_table``) are derived
from ``OPTIONS``, so none of them can drift apart.

A dataclass rather than pydantic-settings: this module is on the start-up path (bar: 150 ms to the first answer,
benchmarks/README.md), and pydantic's import alone would cost a large share of it.
"""

from __future__ import annotations

import argparse
import base64
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import broker.events.hub as events
import broker.server.settings as server
import broker.storage.topics as storage
from broker.coordinator.config import GroupConfig
from broker.server.settings import (
    AclConfig,
    ClusterConfig,
    SaslConfig,
    TlsConfig,
    is_wildcard,
    protocol_of,
    uses_tls,
)
from broker.server.settings import Endpoint as Endpoint
from broker.server.settings import host_port as host_port
from broker.server.settings import parse_endpoints as parse_endpoints
from broker.server.settings import reachable_host as reachable_host
from broker.setting import DECLARED, ENV_PREFIX, Setting, parse_bool
from broker.storage.topics import LogDefaults
from broker.transactions.config import TxnConfig

ADMIN_PORT: int = server.ADMIN_PORT.default  # the control API's default port
CONFIG_ENV = ENV_PREFIX + "CONFIG"
# One declared setting, as config/ collects it (``fills`` set to the field it fills).
Option = Setting

# The options config/ declares itself: the file the others may come from, and the broker's log (logs.py).
CONFIG = Setting(
    "config", None, str, "read settings from this TOML file (our names or Kafka's dotted names)", setting=False
)
LOG_LEVEL = Setting("log_level", "info", str, "broker log level", choices=("debug", "info", "warning", "error"))
LOG_FORMAT = Setting(
    "log_format", "auto", str, "console, json, or auto (console on a terminal, JSON lines otherwise)",
    choices=("auto", "console", "json"),
)


class SettingsError(ValueError):
    """A setting that cannot be used, with where it came from."""


def random_cluster_id() -> str:
    """A cluster id in Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the broker runs with. Each field is filled by the setting its owner declared (whose default is Kafka's,
    where Kafka has the setting), or is a section: a config class whose own fields declare theirs."""

    host: str = server.HOST.field()
    port: int = server.PORT.field()
    listeners: tuple[Endpoint, ...] = server.LISTENERS.field()
    advertised_listeners: tuple[Endpoint, ...] = server.ADVERTISED_LISTENERS.field()
    # -- security protocols and TLS (issue 30): the TLS part's settings
    listener_security_protocol_map: tuple[tuple[str, str], ...] = server.LISTENER_SECURITY_PROTOCOL_MAP.field()
    tls: TlsConfig = field(default_factory=TlsConfig)  # the certificate of SSL and SASL_SSL listeners
    advertised_host: str | None = server.ADVERTISED_HOST.field()
    advertised_port: int | None = server.ADVERTISED_PORT.field()
    node_id: int = server.NODE_ID.field()
    cluster_id: str = server.CLUSTER_ID.field()  # empty: a random one in Kafka's format, drawn by __post_init__
    group: GroupConfig = field(default_factory=GroupConfig)  # the group coordinator's own
    socket_request_max_bytes: int = server.SOCKET_REQUEST_MAX_BYTES.field()
    socket_send_buffer_high_bytes: int = server.SOCKET_SEND_BUFFER_HIGH_BYTES.field()
    socket_send_buffer_low_bytes: int = server.SOCKET_SEND_BUFFER_LOW_BYTES.field()
    max_connections: int = server.MAX_CONNECTIONS.field()
    max_connections_per_ip: int = server.MAX_CONNECTIONS_PER_IP.field()
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = server.MAX_CONNECTIONS_PER_IP_OVERRIDES.field()
    max_partitions_per_request: int = storage.MAX_PARTITIONS_PER_REQUEST.field()
    max_partitions_per_topic: int = storage.MAX_PARTITIONS_PER_TOPIC.field()
    topics: tuple[tuple[str, int], ...] = storage.TOPICS.field()
    auto_create_topics: bool = storage.AUTO_CREATE_TOPICS.field()
    num_partitions: int = storage.NUM_PARTITIONS.field()
    log: LogDefaults = field(default_factory=LogDefaults)  # storage's topic defaults
    log_retention_check_interval_ms: int = storage.LOG_RETENTION_CHECK_INTERVAL_MS.field()
    storage_max_bytes: int = storage.STORAGE_MAX_BYTES.field()
    data_dir: str | None = storage.DATA_DIR.field()  # issue 27: durable state; None is memory only
    fsync: str = storage.FSYNC.field()
    fsync_interval_ms: int = storage.FSYNC_INTERVAL_MS.field()
    log_level: str = LOG_LEVEL.field()
    log_format: str = LOG_FORMAT.field()
    admin_host: str = server.ADMIN_HOST.field()
    admin_port: int = server.ADMIN_PORT.field()
    event_log: str | None = events.EVENT_LOG.field()
    event_log_max_bytes: int = events.EVENT_LOG_MAX_BYTES.field()
    event_log_backups: int = events.EVENT_LOG_BACKUPS.field()
    event_buffer_size: int = events.EVENT_BUFFER_SIZE.field()
    event_buffer_total: int = events.EVENT_BUFFER_TOTAL.field()
    txn: TxnConfig = field(default_factory=TxnConfig)  # the transaction coordinator's own
    cluster: ClusterConfig = field(default_factory=ClusterConfig)  # the nodes of this process (issue 29)
    acls: AclConfig = field(default_factory=AclConfig)  # the authorizer (issue 30, ACLs)
    sasl: SaslConfig = field(default_factory=SaslConfig)  # SASL listeners (issue 30)
    # The options a flag, the environment or the TOML file set (``resolve``); the rest are defaults. Not a setting:
    # it tells a value asked for from one nobody asked for (issue 18: a taken default admin port gives way).
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        if not self.cluster_id:
            object.__setattr__(self, "cluster_id", random_cluster_id())  # frozen: the one way to fill a field in
        if not 0 <= self.socket_send_buffer_low_bytes <= self.socket_send_buffer_high_bytes:
            raise ValueError(
                f"socket_send_buffer_low_bytes must be between 0 and socket_send_buffer_high_bytes (low "
                f"{self.socket_send_buffer_low_bytes}, high {self.socket_send_buffer_high_bytes})"
            )
        # Before anything binds (issue 25 item 7).
        server.refuse_unserved(self.bind_endpoints(), self.listener_security_protocol_map)
        self._refuse_a_port_clash()
        if self.listeners:
            ports = [e.port for e in self.listeners if e.port]
            if len(ports) != len(set(ports)):
                raise ValueError("`listeners`: each listener needs its own port")
        known = {e.name for e in self.bind_endpoints()}
        for endpoint in self.advertised_listeners:
            if endpoint.name not in known:
                raise ValueError(
                    f"advertised.listeners: {endpoint.name} is not a listener (listeners: {', '.join(sorted(known))})"
                )
        node_ids = range(self.node_id, self.node_id + self.cluster.nodes)
        for node, endpoints in self.cluster.node_advertised_listeners:
            if node not in node_ids:
                raise ValueError(
                    f"`node_advertised_listeners`: there is no node {node} (the nodes are "
                    f"{', '.join(map(str, node_ids))})"
                )
            for endpoint in endpoints:
                if endpoint.name not in known:
                    raise ValueError(
                        f"`node_advertised_listeners`: node {node}'s {endpoint.name} is not a listener (listeners: "
                        f"{', '.join(sorted(known))})"
                    )

    def _refuse_a_port_clash(self) -> None:
        """The Kafka listener and the control API on one port would fail at the second bind with "Address already
        in use" (issue 26): refused before anything binds, naming both settings. Not the default admin port when
        nobody asked for it: that one gives way to a free port (``admin_port_movable``)."""
        if self.admin_port <= 0 or self.admin_port_movable():
            return
        for endpoint in self.bind_endpoints():
            if endpoint.port == self.admin_port and _hosts_overlap(endpoint.host, self.admin_host):
                which = "`listeners`" if self.listeners else "`port`"
                raise ValueError(
                    f"{which} and `admin_port` are both {self.admin_port}: the Kafka listener and the control API "
                    "need a port each"
                )

    def bind_endpoints(self) -> tuple[Endpoint, ...]:
        """Where to listen: ``listeners``, or one PLAINTEXT listener on ``host``:``port``."""
        return self.listeners or (Endpoint("PLAINTEXT", self.host, self.port),)

    def security_protocol(self, listener: Endpoint) -> str:
        """What a client of ``listener`` speaks: its entry of ``listener_security_protocol_map``, else its name."""
        return protocol_of(listener, self.listener_security_protocol_map)[0]

    def unmapped_listeners(self) -> list[Endpoint]:
        """Listeners served as PLAINTEXT only because their name is no protocol and the map lacks them."""
        return [e for e in self.bind_endpoints() if not protocol_of(e, self.listener_security_protocol_map)[1]]

    def tls_advertised_hosts(self) -> list[str]:
        """Every host a client may be sent to on a TLS listener: each node's advertised host of each SSL or
        SASL_SSL listener, and the host it binds (the generated certificate names them all, spec 8.4 item 1)."""
        hosts: list[str] = []
        for endpoint in self.bind_endpoints():
            if uses_tls(self.security_protocol(endpoint)):
                if not is_wildcard(endpoint.host):
                    hosts.append(endpoint.host)
                hosts += [self.node_advertised(endpoint, 0, i)[0] for i in range(self.cluster.nodes)]
        return list(dict.fromkeys(hosts))

    def advertised_for(self, listener: Endpoint, bound_port: int) -> tuple[str, int]:
        """What Metadata and FindCoordinator return to a client connected to ``listener``: its entry of
        ``advertised.listeners``, else ``--advertised-host``/``--advertised-port``, else the listener's own
        address (``localhost`` for a wildcard host) and the port it bound."""
        for endpoint in self.advertised_listeners:
            if endpoint.name == listener.name:
                return endpoint.host or self._default_host(listener), endpoint.port or bound_port
        return self.advertised_host or self._default_host(listener), self.advertised_port or bound_port

    def node_advertised(self, listener: Endpoint, bound_port: int, index: int) -> tuple[str, int]:
        """What node ``index`` (0-based, bound to ``bound_port``) advertises on ``listener``: its own entry of
        ``node_advertised_listeners`` (Kafka's per-broker advertised.listeners), else ``advertised_for`` with an
        advertised port moved up by ``index`` as the node's listening port is, else the port the node bound."""
        node = self.node_id + index
        for node_id, endpoints in self.cluster.node_advertised_listeners:
            if node_id == node:
                for endpoint in endpoints:
                    if endpoint.name == listener.name:
                        return endpoint.host or self._default_host(listener), endpoint.port or bound_port
        host, port = self.advertised_for(listener, 0)
        return host, bound_port if port == 0 else port + index

    def admin_port_movable(self) -> bool:
        """Whether a taken admin port may give way to a free one (issue 18): only the default port, and only when
        no flag, variable or TOML key named it; a port asked for fails when taken."""
        return self.admin_port == ADMIN_PORT and "admin_port" not in self.given

    @staticmethod
    def _default_host(listener: Endpoint) -> str:
        return "localhost" if is_wildcard(listener.host) else listener.host


def _hosts_overlap(one: str, other: str) -> bool:
    """Whether two listening hosts would take the same port: the same host, or a wildcard beside any host."""
    loopback = ("localhost", "127.0.0.1")
    return one == other or is_wildcard(one) or is_wildcard(other) or (one in loopback and other in loopback)


# --- the collected options -------------------------------------------------------------------------------------

# The sections of Settings: fields holding an owner's config class, whose own fields declare the settings.
_Section = (
    type[GroupConfig] | type[LogDefaults] | type[TxnConfig] | type[ClusterConfig] | type[TlsConfig] | type[AclConfig]
    | type[SaslConfig]
)
_SECTIONS: dict[str, _Section] = {
    "group": GroupConfig, "log": LogDefaults, "txn": TxnConfig, "cluster": ClusterConfig, "tls": TlsConfig,
    "acls": AclConfig, "sasl": SaslConfig,
}


def _declared(holder: type[Any], prefix: str = "") -> Iterator[Setting]:
    """The settings declared on ``holder``'s fields, in field order, each told the dotted path it fills."""
    for found in fields(holder):
        if found.name in _SECTIONS and not prefix:
            yield from _declared(_SECTIONS[found.name], found.name + ".")
        elif DECLARED in found.metadata:
            yield replace(found.metadata[DECLARED], fills=prefix + found.name)


OPTIONS: tuple[Option, ...] = (CONFIG, *_declared(Settings))

_BY_KEY: dict[str, Option] = {key: o for o in OPTIONS for key in (o.name, o.kafka) if key is not None}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option as a flag. Defaults are left out of the namespace (SUPPRESS) so ``resolve`` can tell a flag
    that was given from one that was not, and let the environment and the TOML file fill the rest."""
    for option in OPTIONS:
        extra: dict[str, Any] = {"action": "append", "metavar": "NAME:PARTITIONS"} if option.name == "topic" else {}
        if option.choices:
            extra["choices"] = option.choices
        if option.parse is parse_bool:  # a bare flag says true: --acls-enabled, --allow-everyone-if-no-acl-found
            extra.update(nargs="?", const="true")
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
            return option.from_text(text)  # what is allowed, and "did you mean" for a near-miss choice (issue 26)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = getattr(option.parse, "__name__", "value")
    return convert


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Flags given, then the environment, then the TOML file, then the defaults."""
    env = os.environ if environ is None else environ
    given = vars(args)
    config_path = given.get("config") or env.get(CONFIG_ENV)
    file_keys: dict[str, str] = {}
    from_file = load_toml(config_path, file_keys) if config_path else {}
    values: dict[str, Any] = {}
    named = {o.name for o in OPTIONS if o.name in given or o.env in env or o.name in from_file}
    # Where each value came from, as the user wrote it: an error names that, not Kafka's dotted key (issue 26).
    origins: dict[str, str] = {}
    for option in OPTIONS:
        if option.name in given:
            value = given[option.name]
            values[option.name] = tuple(p for spec in value for p in spec) if option.name == "topic" else value
            origins[option.name] = option.flag
        elif option.env in env:
            try:
                values[option.name] = option.from_text(env[option.env])
            except ValueError as error:
                raise SettingsError(f"{option.env}={env[option.env]!r}: {error}") from None
            origins[option.name] = option.env
        elif option.name in from_file:
            values[option.name] = from_file[option.name]
            origins[option.name] = f"{file_keys.get(option.name, option.name)} in {config_path}"
        else:
            values[option.name] = option.default
    try:
        return build(values, frozenset(named))
    except SettingsError as error:
        raise SettingsError(as_typed(str(error), values, origins)) from None


def as_typed(message: str, values: Mapping[str, Any], origins: Mapping[str, str]) -> str:
    """``message`` with each setting it names (Kafka's dotted name, our name, or a name in backquotes) written as
    the user gave it: ``--group-max-size (-1) must be at least 1``; a default is said to be one."""
    import re

    spelled: dict[str, Option] = {}
    for option in OPTIONS:
        for key in (option.kafka, option.name):
            if key is not None and ("." in key or "_" in key):
                spelled.setdefault(key, option)
    pattern = re.compile(
        r"`(?P<quoted>[a-z_.]+)`|(?<![\w.-])(?P<bare>" + "|".join(
            re.escape(key) for key in sorted(spelled, key=len, reverse=True)
        ) + r")(?![\w-]|\.\w)"
    )

    def label(match: re.Match[str]) -> str:
        key = match["quoted"] or match["bare"]
        option = spelled.get(key) or _BY_KEY.get(key)
        if option is None:
            return match[0]
        where = origins.get(option.name, option.flag)
        if match["quoted"]:
            return where
        value = values.get(option.name, option.default)
        shown = _value_text(value) + ("" if option.name in origins else ", the default")
        return f"{where} ({shown})"

    return pattern.sub(label, message)


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def load_toml(path: str, keys: dict[str, str] | None = None) -> dict[str, Any]:
    """A TOML file's settings by option name. Keys are our names or Kafka's; Kafka's dotted names may be quoted
    (``"group.max.size" = 5``) or written bare, which TOML reads as nested tables and we flatten back. ``keys``,
    when given, is filled with each option's key as the file wrote it (for messages)."""
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
        if keys is not None:
            keys[option.name] = key
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
