"""Broker settings: command-line flags, each with an environment variable of the same meaning."""

from __future__ import annotations

import argparse
import base64
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.coordinator.config import INT32_MAX, GroupConfig
from broker.topics import LogDefaults, parse_topic_spec

ENV_PREFIX = "GROUP_BROKER_"


def random_cluster_id() -> str:
    """A cluster id in Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 1
    cluster_id: str = field(default_factory=random_cluster_id)
    group: GroupConfig = field(default_factory=GroupConfig)
    socket_request_max_bytes: int = 104_857_600
    topics: tuple[tuple[str, int], ...] = ()
    auto_create_topics: bool = True
    num_partitions: int = 1
    log: LogDefaults = field(default_factory=LogDefaults)
    log_retention_check_interval_ms: int = 300_000
    storage_max_bytes: int = 1_073_741_824
    log_level: str = "info"
    log_format: str = "auto"
    admin_host: str = "127.0.0.1"
    admin_port: int = 9644
    event_log: str | None = None
    event_log_max_bytes: int = 100 * 1024 * 1024
    event_log_backups: int = 5
    event_buffer_size: int = 1000
    event_buffer_total: int = 10_000

    def advertised(self, bound_port: int) -> tuple[str, int]:
        """What Metadata and FindCoordinator return: explicit, else the listener's own address."""
        host = self.advertised_host or ("localhost" if self.host in ("0.0.0.0", "::", "") else self.host)
        return host, self.advertised_port or bound_port


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# flag, type, default, help. The environment variable is GROUP_BROKER_ + the flag in upper snake case.
_OPTIONS: list[tuple[str, object, object, str]] = [
    ("--host", str, "0.0.0.0", "address to listen on"),
    ("--port", int, 9092, "port to listen on (0 picks a free one)"),
    ("--advertised-host", str, None, "host Metadata and FindCoordinator return (default: listen host, or localhost)"),
    ("--advertised-port", int, None, "port returned by Metadata and FindCoordinator (default: the bound port)"),
    ("--node-id", int, 1, "this broker's node id"),
    ("--cluster-id", str, None, "cluster id reported in Metadata (default: random, Kafka's format)"),
    ("--group-min-session-timeout-ms", int, 6000, "group.min.session.timeout.ms"),
    ("--group-max-session-timeout-ms", int, 1_800_000, "group.max.session.timeout.ms"),
    ("--group-initial-rebalance-delay-ms", int, 3000, "group.initial.rebalance.delay.ms (set 0 for fast tests)"),
    ("--group-max-size", int, INT32_MAX, "group.max.size"),
    ("--offsets-retention-minutes", int, 10080, "offsets.retention.minutes"),
    ("--offsets-retention-check-interval-ms", int, 600_000, "offsets.retention.check.interval.ms"),
    ("--offset-metadata-max-bytes", int, 4096, "offset.metadata.max.bytes"),
    ("--socket-request-max-bytes", int, 104_857_600, "socket.request.max.bytes"),
    ("--auto-create-topics-enable", _bool, True, "auto.create.topics.enable"),
    ("--num-partitions", int, 1, "num.partitions for auto-created topics"),
    ("--log-retention-ms", int, 604_800_000, "log.retention.ms: topic default for retention.ms (-1: no limit)"),
    ("--log-retention-bytes", int, -1, "log.retention.bytes: topic default for retention.bytes per partition"),
    ("--log-retention-check-interval-ms", int, 300_000, "log.retention.check.interval.ms"),
    ("--message-max-bytes", int, 1_048_588, "message.max.bytes: topic default for max.message.bytes"),
    ("--storage-max-bytes", int, 1_073_741_824, "cap on bytes stored in all partition logs (-1: none)"),
    ("--log-level", str, "info", "debug, info, warning or error"),
    ("--log-format", str, "auto", "console, json, or auto (console on a terminal, JSON lines otherwise)"),
    ("--admin-host", str, "127.0.0.1", "address of the HTTP control API (0.0.0.0 exposes it: it can kick members)"),
    ("--admin-port", int, 9644, "port of the HTTP control API (0 picks a free one, -1 turns it off)"),
    ("--event-log", str, None, "append group events to this JSON-lines file (schema: docs/events.md)"),
    ("--event-log-max-bytes", int, 100 * 1024 * 1024, "rotate the event log when it reaches this size"),
    ("--event-log-backups", int, 5, "rotated event logs to keep (PATH.1 is the newest)"),
    ("--event-buffer-size", int, 1000, "events kept in memory per group for the control API"),
    ("--event-buffer-total", int, 10_000, "events kept in memory for all groups together (oldest go first)"),
]


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_arguments(parser: argparse.ArgumentParser, environ: dict[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for flag, kind, default, help_text in _OPTIONS:
        variable = env_name(flag)
        value = env.get(variable)
        parser.add_argument(
            flag,
            type=kind,  # type: ignore[arg-type]
            default=kind(value) if value is not None else default,  # type: ignore[operator]
            help=f"{help_text} [env {variable}; default {default}]",
        )
    topics_env = env.get(env_name("--topic"), "")
    parser.add_argument(
        "--topic",
        action="append",
        default=[t for t in topics_env.replace(",", " ").split() if t],
        metavar="NAME:PARTITIONS",
        help=f"create a topic at start; repeatable [env {env_name('--topic')}, comma-separated]",
    )


def from_arguments(args: argparse.Namespace) -> Settings:
    return Settings(
        host=args.host,
        port=args.port,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        node_id=args.node_id,
        cluster_id=args.cluster_id or random_cluster_id(),
        group=GroupConfig(
            min_session_timeout_ms=args.group_min_session_timeout_ms,
            max_session_timeout_ms=args.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
            max_size=args.group_max_size,
            offsets_retention_minutes=args.offsets_retention_minutes,
            offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=args.offset_metadata_max_bytes,
        ),
        socket_request_max_bytes=args.socket_request_max_bytes,
        topics=tuple(parse_topic_spec(spec) for spec in args.topic),
        auto_create_topics=args.auto_create_topics_enable,
        num_partitions=args.num_partitions,
        log=LogDefaults(
            retention_ms=args.log_retention_ms,
            retention_bytes=args.log_retention_bytes,
            max_message_bytes=args.message_max_bytes,
        ),
        log_retention_check_interval_ms=args.log_retention_check_interval_ms,
        storage_max_bytes=args.storage_max_bytes,
        log_level=args.log_level,
        log_format=args.log_format,
        admin_host=args.admin_host,
        admin_port=args.admin_port,
        event_log=args.event_log,
        event_log_max_bytes=args.event_log_max_bytes,
        event_log_backups=args.event_log_backups,
        event_buffer_size=args.event_buffer_size,
        event_buffer_total=args.event_buffer_total,
    )


def parse(argv: Sequence[str], environ: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, environ)
    return from_arguments(parser.parse_args(argv))
