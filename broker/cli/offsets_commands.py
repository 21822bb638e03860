"""``group-broker reset-offsets``, ``delete-offsets`` and ``delete-group``: what ``kafka-consumer-groups.sh
--reset-offsets``, ``--delete-offsets`` and ``--delete`` do, with their output, through the broker's Kafka APIs
(``kafka_admin.py``), so the broker validates and records them as it does any client's.

The plan is Kafka's (``broker/control/offset_reset.py``). Without ``--execute`` nothing is committed: the plan is
printed, as Kafka's dry run. Exit 0 when done, 1 when the broker (or Kafka's rule: a group with members is not
reset) refuses, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from broker.cli.kafka_admin import TIMEOUT_S, AdminError, KafkaAdmin, bootstrap_address
from broker.control import grace
from broker.control.offset_reset import (
    GroupNotInactive,
    ResetUsageError,
    Target,
    TopicPartition,
    UnknownTopic,
    check_inactive,
    delete_offsets_table,
    kafka_error,
    parse_topic_arg,
    partitions_to_reset,
    plan_reset,
    plan_table,
    target_from,
)

NO_ACTION_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)


def add_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="the broker's Kafka listener [env GROUP_BROKER_BOOTSTRAP; default: the serve settings]")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="S", help="seconds per request")
    grace.add_argument(parser)  # --wait-for-broker S
    if name == "delete-group":
        parser.add_argument("groups", metavar="GROUP", nargs="+")
        return
    parser.add_argument("group", metavar="GROUP")
    if name == "delete-offsets":
        parser.add_argument("--topic", action="append", required=True, metavar="T[:P,P...]", dest="topics",
                            help="a topic (all its partitions) or some of its partitions; repeatable")
        return
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="T[:P,P...]", dest="topics",
                       help="a topic (all its partitions) or some of its partitions; repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed offsets for")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    target.add_argument("--to-latest", action="store_true", help="the latest offset of each partition")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within earliest..latest)")
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    target.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time, e.g. "
                        "2026-12-02T07:00:00.000 (UTC unless a zone is given)")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this "
                        "duration, e.g. PT1H30M")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the plan, commit nothing (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        # Bad usage is told before the broker is asked anything.
        for argument in getattr(args, "topics", None) or ():
            parse_topic_arg(argument)
        target = _target(args) if args.command == "reset-offsets" else None
        grace_s = grace.grace_seconds(args)
        host, port = bootstrap_address(args.bootstrap)
        with KafkaAdmin(host, port, args.timeout, grace_s) as admin:
            for group in getattr(args, "groups", None) or [args.group]:
                admin.find_coordinator(group)
            if target is not None:
                return _reset(admin, args, target)
            if args.command == "delete-offsets":
                return _delete_offsets(admin, args)
            return _delete_groups(admin, args.groups)
    except (ResetUsageError, grace.GraceError) as error:
        print(f"group-broker {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (AdminError, UnknownTopic) as error:
        print(f"Error: Executing consumer group command failed due to {error}", file=sys.stderr)
        return 1


def _target(args: argparse.Namespace) -> Target:
    return target_from(
        to_earliest=args.to_earliest, to_latest=args.to_latest, to_offset=args.to_offset, shift_by=args.shift_by,
        to_datetime=args.to_datetime, by_duration=args.by_duration, now_ms=int(time.time() * 1000),
    )


def _reset(admin: KafkaAdmin, args: argparse.Namespace, target: Target) -> int:
    group: str = args.group
    if not args.dry_run and not args.execute:
        print(NO_ACTION_WARNING, file=sys.stderr)
    state, _ = admin.group_state(group)
    try:
        check_inactive(group, state)
    except GroupNotInactive as refused:
        print(f"Error: {refused}", file=sys.stderr)
        return 1
    partitions = partitions_to_reset(admin, group, args.topics or (), args.all_topics)
    plan = plan_reset(admin, group, partitions, target)
    for warning in plan.warnings:
        print(warning, file=sys.stderr)
    if args.execute and plan.offsets:
        refused_partitions = admin.commit(group, plan.offsets)
        if refused_partitions:
            for (topic, partition), error in sorted(refused_partitions.items()):
                print(f"Error: Executing consumer group command failed due to {kafka_error(error)} "
                      f"({topic}-{partition})", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(reset_answer(group, state, plan.rows(), bool(args.execute), plan.warnings), indent=2))
    else:
        sys.stdout.write(plan_table([plan]))
    return 0


def reset_answer(group: str, state: str, rows: list[dict[str, Any]], executed: bool, warnings: list[str]) -> Any:
    """The JSON of a reset: the control API's answer (docs/control-api.yaml, ResetPlan)."""
    return {
        "group_id": group,
        "state": state,
        "executed": executed,
        "offsets": [{key: row[key] for key in ("topic", "partition", "new_offset")} for row in rows],
        "warnings": warnings,
    }


def _delete_offsets(admin: KafkaAdmin, args: argparse.Namespace) -> int:
    group: str = args.group
    wanted: list[TopicPartition] = []
    results: dict[TopicPartition, str | None] = {}
    for argument in args.topics:
        topic, partitions = parse_topic_arg(argument)
        if partitions is None:
            try:
                partitions = admin.partitions_of([topic]).get(topic, [])
            except UnknownTopic:
                results[(topic, -1)] = kafka_error("UNKNOWN_TOPIC_OR_PARTITION")
                continue
        wanted.extend((topic, p) for p in partitions)
    top: str | None = None
    if wanted:
        top, answered = admin.delete_offsets(group, list(dict.fromkeys(wanted)))
        results.update({p: None if e is None else kafka_error(e) for p, e in answered.items()})
    if top is None and any(error is not None for error in results.values()):
        top = "GROUP_SUBSCRIBED_TO_TOPIC"  # a partition-level error: Kafka names it so below
    out = sys.stdout
    if top is None:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topics)} group {group}", file=out)
    else:
        print(f"Error: {_delete_offsets_error(group, top)}", file=out)
    out.write(delete_offsets_table(results))
    return 0 if top is None else 1


def _delete_offsets_error(group: str, error: str) -> str:
    """deleteOffsets' top-level messages."""
    return {
        "INVALID_GROUP_ID": f"'{group}' is not valid.",
        "GROUP_ID_NOT_FOUND": f"'{group}' does not exist.",
        "GROUP_AUTHORIZATION_FAILED": f"Access to '{group}' is not authorized.",
        "NON_EMPTY_GROUP": f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
        "GROUP_SUBSCRIBED_TO_TOPIC": "Encounter some partition level error, see the follow-up details:",
        "UNKNOWN_TOPIC_OR_PARTITION": "Encounter some partition level error, see the follow-up details:",
    }.get(error, f"Encounter some unknown error: {error}")


def _delete_groups(admin: KafkaAdmin, groups: list[str]) -> int:
    results = admin.delete_groups(groups)
    failed = {group: error for group, error in results.items() if error is not None}
    deleted = [group for group, error in results.items() if error is None]
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(deleted)}') was successful.")
        return 0
    print("Error: Deletion of some consumer groups failed:")
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {kafka_error(error)}")
    if deleted:
        print("\nThese consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in deleted))
    return 1
