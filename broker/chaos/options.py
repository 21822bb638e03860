"""The options of ``group-broker chaos run`` (also ``python -m broker.chaos.runner``), and what makes them unusable.

Defaults make a one-minute demo. The same ``add_arguments`` serves both entry points: the command line adds the
options to its ``chaos run`` sub-command, the runner's ``main`` to a parser of its own.

``--group-protocol consumer`` runs KIP-848 consumer groups (docs/spec/consumer-groups.md): only librdkafka
(``--client confluent``) speaks it, and it refuses the classic client settings (section 12.1: session.timeout.ms,
heartbeat.interval.ms, partition.assignment.strategy), so there the session and heartbeat flags set the broker's
consumer-group timers instead (section 7: the broker dictates them), and ``--assignor`` is refused.

``--group-protocol share`` runs a KIP-932 share group (docs/spec/share-groups.md; ``share_run``): librdkafka's
``ShareConsumer`` (confluent only) has no client-side group settings at all (section 12.1), so the session and
heartbeat flags set the broker's share-group timers, ``--share-lock-ms`` its record lock, and ``--assignor``,
``--exactly-once`` and ``--broker-restart-every`` are refused; the kills are SIGKILL or SIGSTOP (``--kill-ratio``).
"""

from __future__ import annotations

import argparse
from typing import Any

from broker.chaos import CLIENTS
from broker.chaos.cluster_options import add_cluster_arguments, cluster_config, cluster_problems
from broker.control.client import URL_ENV

#: The group protocols of the bundled consumer (``broker.chaos.consumer``) and the exactly-once worker.
CONSUMER_GROUP_PROTOCOLS = ("classic", "consumer")
GROUP_PROTOCOLS = (*CONSUMER_GROUP_PROTOCOLS, "share")
#: The share consumer's record lock (the broker's group.share.record.lock.duration.ms and the group's
#: share.record.lock.duration.ms): short, so a SIGSTOPped holder's records come back within a run, and below the
#: default 3 s a SIGSTOP lasts (--restart-after), so they come back while it is stopped.
SHARE_LOCK_MS = 2000
SHARE_ACK_MODES = ("implicit", "explicit")
PARTITIONS = 6
#: A share run's topic has one partition unless told otherwise: the simple assignor gives a partition to
#: ceil(members / partitions) members (docs/spec/share-groups.md 5), so with one partition every member shares it
#: and a stopped or killed member's records go to the others; with partitions >= members each is exclusive.
SHARE_PARTITIONS = 1
#: The one client library that speaks the consumer protocol (librdkafka 2.12+: docs/spec/consumer-groups.md 12).
CONSUMER_PROTOCOL_CLIENT = "confluent"
#: The library of the exactly-once worker (``broker.chaos.eos_worker``).
EXACTLY_ONCE_CLIENT = "confluent"

PROGRAM = "group-broker chaos run"
DESCRIPTION = (
    "Kill consumers of a group on a seeded schedule (SIGKILL or SIGTERM; with --group-protocol share SIGKILL or "
    "SIGSTOP), restart them, and measure how long the broker takes to notice and the group to recover, and whether "
    "any record was lost (share groups: whether every record was delivered and accepted, never under one lock "
    "twice). With "
    "--broker-restart-every, also SIGKILL and restart the broker itself, on its data directory."
)

JSON = dict[str, Any]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``chaos run`` (sensible defaults for a one-minute demo)."""
    parser.description = parser.description or DESCRIPTION
    workload = parser.add_argument_group("workload")
    workload.add_argument("--client", choices=CLIENTS, default="confluent", help="client library (default confluent)")
    workload.add_argument("--consumers", type=int, default=3, metavar="N", help="consumer processes (default 3)")
    workload.add_argument(
        "--partitions", type=int, default=None, metavar="N",
        help=f"topic partitions (default {PARTITIONS}; with --group-protocol share {SHARE_PARTITIONS}: a queue every "
        "member shares)",
    )  # fmt: skip
    workload.add_argument("--topic", default=None, help="topic (default: chaos-<run id>, created if missing)")
    workload.add_argument("--group", default=None, help="consumer group (default: chaos-<run id>)")
    workload.add_argument("--rate", type=float, default=100.0, metavar="R", help="records per second (default 100)")
    workload.add_argument(
        "--assignor", choices=("range", "roundrobin", "cooperative-sticky"), default=None,
        help="partition assignor (default: the client's own)",
    )  # fmt: skip
    workload.add_argument(
        "--group-protocol", choices=GROUP_PROTOCOLS, default="classic",
        help="classic (JoinGroup/SyncGroup), consumer (KIP-848, ConsumerGroupHeartbeat; confluent only) or share "
        "(KIP-932 share group of confluent ShareConsumers; kills are SIGKILL or SIGSTOP) (default classic)",
    )  # fmt: skip
    workload.add_argument(
        "--share-lock-ms", type=int, default=None, metavar="MS",
        help=f"with --group-protocol share: the record lock duration (default {SHARE_LOCK_MS}; at least 1000)",
    )  # fmt: skip
    workload.add_argument(
        "--share-ack", choices=SHARE_ACK_MODES, default=None,
        help="with --group-protocol share: share.acknowledgement.mode of the consumers, implicit (the next poll or "
        "commit accepts a batch) or explicit (each record ACCEPTed) (default implicit)",
    )  # fmt: skip
    workload.add_argument(
        "--exactly-once", action="store_true",
        help="transactional consume-transform-produce workers (confluent only) instead of consumers; at the end the "
        "output topic, read read_committed, must hold every input exactly once",
    )  # fmt: skip
    workload.add_argument(
        "--session-timeout-ms", type=int, default=6000, metavar="MS",
        help="default 6000; with --group-protocol consumer or share, the broker's consumer-group or share-group "
        "session timeout",
    )  # fmt: skip
    workload.add_argument(
        "--heartbeat-interval-ms", type=int, default=1000, metavar="MS",
        help="default 1000; with --group-protocol consumer or share, the interval the broker gives its members",
    )  # fmt: skip

    schedule = parser.add_argument_group("schedule")
    schedule.add_argument("--duration", type=float, default=50.0, metavar="S", help="seconds of chaos (default 50)")
    schedule.add_argument("--interval", type=float, default=8.0, metavar="S", help="seconds between kills (default 8)")
    schedule.add_argument(
        "--kill-ratio", type=float, default=0.75, metavar="P",
        help="share of kills that are SIGKILL; the rest are SIGTERM, a graceful close (with --group-protocol share: "
        "SIGSTOP, then SIGCONT after --restart-after) (default 0.75)",
    )  # fmt: skip
    schedule.add_argument(
        "--restart-after", type=float, default=3.0, metavar="S", help="restart a killed consumer after S s (default 3)"
    )
    schedule.add_argument("--seed", type=int, default=None, help="RNG seed for the schedule (default: random)")
    schedule.add_argument(
        "--broker-restart-every", type=float, default=None, metavar="S",
        help="also SIGKILL the broker the run starts every S s and start it again on the same ports and data "
        "directory (<workdir>/broker-data); the report says how long it was down, what it loaded, each consumer's "
        "time to its first acknowledged commit after it, and that no acknowledged record or commit was lost "
        "(not with --bootstrap; default: no broker restarts)",
    )  # fmt: skip
    add_cluster_arguments(schedule)
    schedule.add_argument(
        "--drain-timeout", type=float, default=60.0, metavar="S",
        help="after the chaos, wait at most S s for every produced record to be consumed (default 60)",
    )  # fmt: skip

    where = parser.add_argument_group("broker")
    where.add_argument(
        "--nodes", type=int, default=None, metavar="N",
        help="start the broker with N nodes (serve --nodes N: node i on its port + i), for --stop-node-every and "
        "--move-coordinator-every (not with --bootstrap; default 1)",
    )  # fmt: skip
    where.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT",
        help="use this running broker (default: start one for the run, and stop it after)",
    )  # fmt: skip
    where.add_argument(
        "--admin", default=None, metavar="URL",
        help=f"its control API, with --bootstrap [env {URL_ENV}; default: asked of the broker at --bootstrap]",
    )  # fmt: skip
    where.add_argument(
        "--event-log", default=None, metavar="PATH",
        help="the broker the run starts appends its events here, the run's kills among them (chaos_action): "
        "the input of `group-broker analyze` (not with --bootstrap: a running broker has its own --event-log)",
    )  # fmt: skip

    output = parser.add_argument_group("output")
    output.add_argument("--json", default=None, metavar="PATH", help="write the whole report as JSON here")
    output.add_argument(
        "--workdir", default=None, metavar="DIR",
        help="keep the consumers' record files and every process's log here (default: a temporary directory, "
        "deleted at the end unless the run failed or has notes)",
    )  # fmt: skip


def argument_problems(args: argparse.Namespace) -> list[str]:
    """What makes these options unable to make a run (empty when they can)."""
    problems = []
    if args.consumers < 1:
        problems.append("--consumers must be at least 1")
    if args.partitions is not None and args.partitions < 1:
        problems.append("--partitions must be at least 1")
    if not args.rate > 0:
        problems.append("--rate must be positive")
    if not args.duration > 0:
        problems.append("--duration must be positive")
    if not args.interval > 0:
        problems.append("--interval must be positive")
    if not 0 <= args.kill_ratio <= 1:
        problems.append("--kill-ratio must be between 0 and 1")
    if args.restart_after < 0:
        problems.append("--restart-after must not be negative")
    if args.drain_timeout < 0:
        problems.append("--drain-timeout must not be negative")
    if args.session_timeout_ms < 1:
        problems.append("--session-timeout-ms must be positive")
    if not 0 < args.heartbeat_interval_ms < args.session_timeout_ms:
        problems.append("--heartbeat-interval-ms must be positive and below --session-timeout-ms")
    if args.event_log is not None and args.bootstrap is not None:
        problems.append(
            "--event-log is for the broker the run starts: with --bootstrap, the running broker writes its own "
            "event log (start it with --event-log PATH); the run's kills go into it all the same"
        )
    if args.event_log is not None and not args.event_log.strip():
        problems.append("--event-log must be a path")
    restart_every = args.broker_restart_every
    if restart_every is not None:
        if not restart_every > 0:
            problems.append("--broker-restart-every must be positive")
        if args.bootstrap is not None:
            problems.append(
                "--broker-restart-every restarts the broker the run starts: a running broker (--bootstrap) is not "
                "the runner's to kill; leave out --bootstrap"
            )
    if args.admin is not None and args.bootstrap is None:
        problems.append("--admin needs --bootstrap (without it the runner starts its own broker)")
    if args.client == "aiokafka" and args.assignor == "cooperative-sticky":
        problems.append("aiokafka has no cooperative rebalance protocol: no --assignor cooperative-sticky")
    if args.group_protocol == "consumer":
        if args.client != CONSUMER_PROTOCOL_CLIENT:
            problems.append(
                f"--group-protocol consumer needs --client {CONSUMER_PROTOCOL_CLIENT}: {args.client} speaks only the "
                "classic protocol (JoinGroup/SyncGroup), not ConsumerGroupHeartbeat"
            )
        if args.assignor is not None:
            problems.append(
                "--assignor is a classic-protocol client setting: with --group-protocol consumer the broker assigns "
                "(its group.consumer.assignors)"
            )
    problems += share_problems(args)
    problems += cluster_problems(args)
    if args.exactly_once and args.client != EXACTLY_ONCE_CLIENT:
        problems.append(
            f"--exactly-once needs --client {EXACTLY_ONCE_CLIENT}: its transactional worker is confluent-kafka's"
        )
    for name in ("topic", "group"):
        value = getattr(args, name)
        if value is not None and (not value or any(c.isspace() for c in value) or ":" in value):
            problems.append(f"--{name} must be a non-empty name without spaces or ':'")
    return problems


def share_problems(args: argparse.Namespace) -> list[str]:
    """What ``--group-protocol share`` does not go with, and the share options without it."""
    if args.group_protocol != "share":
        return [
            f"{flag} is for --group-protocol share" for flag, value in
            (("--share-lock-ms", args.share_lock_ms), ("--share-ack", args.share_ack)) if value is not None
        ]  # fmt: skip
    problems = []
    if args.client != CONSUMER_PROTOCOL_CLIENT:
        problems.append(
            f"--group-protocol share needs --client {CONSUMER_PROTOCOL_CLIENT}: its share consumer is librdkafka's "
            f"ShareConsumer; {args.client} has none"
        )
    if args.assignor is not None:
        problems.append(
            "--assignor is a classic-protocol client setting: a share group's partitions are assigned by the broker "
            "(the simple assignor, KIP-932)"
        )
    if args.exactly_once:
        problems.append(
            "--exactly-once is for consumer groups: a share group has no offsets to commit in a transaction"
        )
    if args.broker_restart_every is not None:
        problems.append(
            "--broker-restart-every is not for --group-protocol share: the runner's check of records across broker "
            "restarts reads committed offsets, which a share group does not have"
        )
    if args.share_lock_ms is not None and args.share_lock_ms < 1000:
        problems.append("--share-lock-ms must be at least 1000 (Kafka's lowest group.share.record.lock.duration.ms)")
    return problems


def config_report(args: argparse.Namespace, topic: str, group: str, seed: int) -> JSON:
    """The report's ``config``: the options the run used, the names and seed it picked where they were left out."""
    return {
        "client": args.client,
        "consumers": args.consumers,
        "partitions": args.partitions,
        "topic": topic,
        "group": group,
        "rate": args.rate,
        "assignor": args.assignor,
        "group_protocol": args.group_protocol,
        "exactly_once": args.exactly_once,
        **share_config(args),
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "duration_s": args.duration,
        "interval_s": args.interval,
        "kill_ratio": args.kill_ratio,
        "restart_after_s": args.restart_after,
        "drain_timeout_s": args.drain_timeout,
        "broker_restart_every_s": args.broker_restart_every,
        **cluster_config(args),
        "seed": seed,
    }


def share_config(args: argparse.Namespace) -> JSON:
    """The report's ``config`` entries of a share run (none otherwise)."""
    if args.group_protocol != "share":
        return {}
    return {"share_lock_ms": share_lock_ms(args), "share_ack": args.share_ack or SHARE_ACK_MODES[0]}


def resolve_defaults(args: argparse.Namespace) -> None:
    """The defaults that depend on the group protocol (``--partitions``), once the options are known to be usable."""
    if args.partitions is None:
        args.partitions = SHARE_PARTITIONS if args.group_protocol == "share" else PARTITIONS


def share_lock_ms(args: argparse.Namespace) -> int:
    return int(args.share_lock_ms if args.share_lock_ms is not None else SHARE_LOCK_MS)
