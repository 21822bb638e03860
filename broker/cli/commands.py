"""The client commands of ``group-broker``: each one calls the control API and prints what it answered.

Plain aligned columns (like kubectl, drawn by ``format.py``) for the one-shot commands: cheap to start, easy to
grep, never truncated; the live ``watch`` view (broker/cli/watch.py) is the one that imports rich. ``--json`` prints
the API's JSON instead.

Exit codes: 0 done, 1 the API answered an error or could not be reached (``group-broker: <message>`` on stderr),
2 usage errors (from argparse, before anything here runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from broker.cli import cluster
from broker.cli.format import (
    CONSUMER_MEMBER_HEADERS,
    MEMBER_HEADERS,
    TRANSACTION_HEADERS,
    consumer_member_row,
    duration,
    event_row,
    generation_text,
    has_epochs,
    is_consumer_group,
    member_row,
    plural,
    protocol_text,
    table,
    text,
    transaction_row,
)
from broker.cli.offsets import offsets_section, offsets_table
from broker.cli.share import (
    SHARE_MEMBER_HEADERS,
    SHARE_PARTITION_HEADERS,
    is_share_group,
    share_header,
    share_member_row,
    share_partition_rows,
    share_sections,
)
from broker.control.client import ControlClient, ControlError

JSON = dict[str, Any]


def execute(args: argparse.Namespace) -> int:
    handler = HANDLERS[args._handler]
    try:
        return handler(args)
    except ControlError as error:
        print(f"group-broker: {error.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``group-broker groups | head``): no traceback, and none at exit either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def client(args: argparse.Namespace) -> ControlClient:
    """The control API's client; its first request waits out a broker that is starting (``--wait-for-broker``)."""
    return ControlClient(args.admin, grace_s=getattr(args, "wait_for_broker", None) or 0.0)


def emit_json(value: object) -> None:
    print(json.dumps(value, indent=2))


# -- groups and describe ------------------------------------------------------------------------------------


def cmd_groups(args: argparse.Namespace) -> int:
    api = client(args)
    groups = api.groups(args.type)
    if args.json:
        emit_json(groups)
        return 0
    if not groups:
        print("no groups" if args.type is None else f"no {args.type} groups")
        return 0
    coordinator = cluster.coordinators(api)  # None unless several nodes run
    rows = [
        [
            g["group_id"],
            text(g.get("group_type")),
            g["state"],
            generation_text(g),
            protocol_text(g.get("protocol_type"), g.get("protocol")),
            str(g["members"]),
            text(g.get("leader")),
            *([] if coordinator is None else [str(coordinator(g["group_id"]))]),
        ]
        for g in groups
    ]
    # GENERATION: a consumer group's group epoch (docs/control-api.yaml), "(target N)" while Assigning.
    headers = ["GROUP", "TYPE", "STATE", "GENERATION", "PROTOCOL", "MEMBERS", "LEADER"]
    print(table(headers + ([] if coordinator is None else ["COORDINATOR"]), rows))
    return 0


DESCRIBE_EVENTS = 10


def cmd_describe(args: argparse.Namespace) -> int:
    api = client(args)
    group = api.group(args.group)
    try:
        events = api.events(args.group, limit=DESCRIBE_EVENTS)[-DESCRIBE_EVENTS:]
    except ControlError as error:
        if error.status != 404:
            raise
        events = []  # a group the event buffer never saw (e.g. one it dropped): still describe it
    share = is_share_group(group)
    # --records: a share group's record-level view (GET /v1/groups/{group}/share-partitions); other groups have none.
    records = api.share_partitions(args.group) if share and getattr(args, "records", False) else None
    if args.json:
        emit_json({"group": group, "events": events} | ({} if records is None else {"share_records": records}))
        return 0
    if getattr(args, "offsets", False):
        if share:  # a share group commits no offsets: its progress is each share-partition's SPSO
            rows = share_partition_rows(group)
            print(table(SHARE_PARTITION_HEADERS, rows) if rows else f"Share group '{group['group_id']}' has not "
                  "fetched from any partition yet.")  # fmt: skip
        else:
            print(offsets_table(group))  # only Kafka's table, as kafka-consumer-groups.sh --describe prints it
        return 0
    last = share_sections(group, records) if share else offsets_section(group)
    coordinator = cluster.coordinators(api)  # several nodes: which one coordinates the group
    node = None if coordinator is None else coordinator(group["group_id"])
    print(describe_text(group, events, node) + "\n\n" + "\n".join(last))
    return 0


def describe_text(group: JSON, events: Sequence[JSON], coordinator: int | None = None) -> str:
    consumer = is_consumer_group(group)
    share = is_share_group(group)
    header = [
        ("Group", group["group_id"]),
        ("Type", text(group.get("group_type"))),
        ("State", f"{group['state']} (for {duration(group.get('state_age_ms'))})"),
    ]
    if coordinator is not None:  # several nodes run (group-broker cluster)
        header.append(("Coordinator", f"node {coordinator}" if coordinator >= 0 else "none (offline)"))
    if share:
        header += share_header(group)
    elif consumer:
        # KIP-848: the group epoch, and the epoch of the target assignment the members move toward.
        header += [
            ("Epoch", f"{group.get('group_epoch')}, target assignment {group.get('assignment_epoch')}"),
            ("Assignor", text(group.get("protocol"))),
        ]
    else:
        header += [
            ("Generation", str(group["generation_id"])),
            ("Protocol", protocol_text(group.get("protocol_type"), group.get("protocol"))),
            ("Leader", text(group.get("leader"))),
        ]
    header.append(("Topics", ", ".join(group.get("subscribed_topics") or []) or "-"))
    if group.get("pending_members"):
        header.append(("Pending", ", ".join(group["pending_members"])))
    width = max(12, *(len(name) + 2 for name, _ in header))  # "Coordinator:" (several nodes) widens the column
    lines = [f"{name + ':':<{width}}{value}" for name, value in header]
    members: list[JSON] = group.get("members") or []
    lines.append("")
    if members:
        lines.append(f"Members ({len(members)}):")
        if share:
            lines.append(table(SHARE_MEMBER_HEADERS, [share_member_row(m) for m in members]))
        elif consumer:
            lines.append(table(CONSUMER_MEMBER_HEADERS, [consumer_member_row(m) for m in members]))
        else:
            lines.append(table(MEMBER_HEADERS, [member_row(m) for m in members]))
    else:
        lines.append("Members: none")
    lines.append("")
    if events:
        lines.append(f"Latest events ({len(events)}):")
        lines.append(table(["SEQ", "TIME", "EVENT", "DETAILS"], [event_row(e) for e in events]))
    else:
        lines.append("Latest events: none")
    return "\n".join(lines)


# -- transactions -------------------------------------------------------------------------------------------


def cmd_transactions(args: argparse.Namespace) -> int:
    """Open transactions (Ongoing, PrepareCommit, PrepareAbort); ``--all`` every transactional id the broker holds."""
    transactions = client(args).transactions(None if args.all else "open")
    if args.json:
        emit_json(transactions)
        return 0
    if not transactions:
        print("no transactional ids" if args.all else "no open transactions")
        return 0
    print(table(TRANSACTION_HEADERS, [transaction_row(t) for t in transactions]))
    return 0


# -- chaos verbs --------------------------------------------------------------------------------------------


def cmd_kick(args: argparse.Namespace) -> int:
    answer = client(args).kick(args.group, args.member_id)
    if args.json:
        emit_json(answer)
    else:
        member_id, group_id = answer.get("member_id", args.member_id), answer.get("group_id", args.group)
        print(f"kicked member {member_id} from group {group_id}")
    return 0


def cmd_fence(args: argparse.Namespace) -> int:
    answer = client(args).fence(args.group, args.instance_id)
    if args.json:
        emit_json(answer)
    elif answer.get("new_member_id") is None:  # a consumer group: the static member is removed, not replaced
        print(
            f"removed static member {text(answer.get('member_id'))} (instance "
            f"{answer.get('group_instance_id', args.instance_id)}) from group {answer.get('group_id', args.group)}"
        )
    else:
        print(
            f"fenced instance {answer.get('group_instance_id', args.instance_id)} of group "
            f"{answer.get('group_id', args.group)}: member {text(answer.get('member_id'))} "
            f"replaced by {text(answer.get('new_member_id'))}"
        )
    return 0


def cmd_rebalance(args: argparse.Namespace) -> int:
    answer = client(args).rebalance(args.group)
    if args.json:
        emit_json(answer)
    else:
        print(f"group {answer.get('group_id', args.group)}: {answer.get('state')}, {_round(answer)}, "
              f"{plural(answer.get('members'), 'member')}")
    return 0


def _round(group: Mapping[str, Any]) -> str:
    """``generation 3``, or for a consumer or share group ``epoch 5`` (with its target's epoch when that lags
    behind)."""
    if has_epochs(group):
        return f"epoch {generation_text(group)}"
    return f"generation {group.get('generation_id')}"


# A group that does not exist may be a typo, or one whose consumers are still starting (the README's walkthrough
# waits right after starting them in the background): it gets this long to appear before "no such group".
APPEAR_MS = 10_000


def _wait_for_the_group(api: ControlClient, args: argparse.Namespace) -> int:
    """Check that the group exists (the API answers 404 for an unknown one); if it does not, say so and give it
    ``APPEAR_MS`` (at most ``--timeout-ms``) to appear. The milliseconds left of ``--timeout-ms``."""
    try:
        api.group(args.group)
        return int(args.timeout_ms)
    except ControlError as error:
        if error.status != 404:
            raise
    appear_ms = min(APPEAR_MS, args.timeout_ms)
    print(f"group-broker: no group {args.group!r} yet: giving it {appear_ms} ms to appear", file=sys.stderr)
    started = time.monotonic()
    try:
        api.wait(args.group, timeout_ms=appear_ms)  # no condition: answers as soon as the group exists
    except ControlError as error:
        if error.status == 408:
            raise ControlError(404, f"no such group: {args.group!r} (none appeared within {appear_ms} ms)") from None
        raise
    return max(0, int(args.timeout_ms) - int((time.monotonic() - started) * 1000))


def cmd_wait(args: argparse.Namespace) -> int:
    api = client(args)
    timeout_ms = _wait_for_the_group(api, args)
    try:
        group = api.wait(
            args.group,
            state=args.state,
            members=args.members,
            min_generation=args.min_generation,
            timeout_ms=timeout_ms,
        )
    except ControlError as error:
        if error.status == 408 and isinstance(error.payload.get("group"), dict):
            if args.json:
                emit_json(error.payload["group"])  # how the group was when the wait gave up
            raise ControlError(408, timed_out_text(args, error.payload["group"]), error.payload) from None
        raise
    if args.json:
        emit_json(group)
    else:
        print(f"group {group['group_id']}: {group['state']}, {_round(group)}, "
              f"{plural(len(group.get('members') or []), 'member')}")
    return 0


def timed_out_text(args: argparse.Namespace, group: Mapping[str, Any]) -> str:
    """``timed out after 30000 ms: group demo was PreparingRebalance with 2 members at generation 3, wanted
    Stable`` (issue 26 item 8: a wait that times out says which shape the group was in)."""
    members = group.get("members")
    count = len(members) if isinstance(members, list) else members
    was = f"{group.get('state')} with {plural(count, 'member')} at {_round(group)}"
    wanted = []
    if args.state is not None:
        wanted.append(str(args.state))
    if args.members is not None:
        wanted.append(plural(args.members, "member"))
    if args.min_generation is not None:
        word = "epoch" if has_epochs(group) else "generation"
        wanted.append(f"{word} {args.min_generation} or later")
    wanted_text = f", wanted {', '.join(wanted)}" if wanted else ""
    return f"timed out after {args.timeout_ms} ms: group {group.get('group_id', args.group)} was {was}{wanted_text}"


# -- fault rules --------------------------------------------------------------------------------------------


def fault_fields(args: argparse.Namespace) -> JSON:
    fields: JSON = {
        "api": args.api,
        "group_id": args.group_id,
        "member_id": args.member_id,
        "group_instance_id": args.group_instance_id,
        "client_id": args.client_id,
        "transactional_id": args.transactional_id,
        "count": args.count,
        "probability": args.probability,
        "seed": args.seed,
        "duration_ms": args.duration_ms,
    }
    if args.error is not None:
        error = args.error.strip()
        fields |= {"action": "error", "error": int(error) if error.lstrip("-").isdigit() else error}
    elif args.delay_ms is not None:
        fields |= {"action": "delay", "delay_ms": args.delay_ms}
    elif args.close:
        fields["action"] = "close"
    else:
        fields["action"] = "swallow_heartbeats"
    return {name: value for name, value in fields.items() if value is not None}


def cmd_fault_add(args: argparse.Namespace) -> int:
    rule = client(args).add_fault(**fault_fields(args))
    if args.json:
        emit_json(rule)
    else:
        print(f"added fault rule {rule.get('id')}: {rule_action(rule)} when {rule_match(rule)}")
    return 0


def cmd_fault_list(args: argparse.Namespace) -> int:
    rules = client(args).faults()
    if args.json:
        emit_json(rules)
        return 0
    if not rules:
        print("no fault rules")
        return 0
    rows = [
        [str(r.get("id")), "yes" if r.get("active") else "no", str(r.get("hits", 0)), rule_action(r), rule_match(r),
         rule_limits(r)]
        for r in rules
    ]
    print(table(["ID", "ACTIVE", "HITS", "ACTION", "MATCH", "LIMITS"], rows))
    return 0


def cmd_fault_delete(args: argparse.Namespace) -> int:
    client(args).delete_fault(args.rule_id)
    if args.json:
        emit_json({"deleted": args.rule_id})
    else:
        print(f"deleted fault rule {args.rule_id}")
    return 0


def cmd_fault_clear(args: argparse.Namespace) -> int:
    deleted = client(args).clear_faults()
    if args.json:
        emit_json({"deleted": deleted})
    else:
        print(f"deleted {plural(deleted, 'fault rule')}")
    return 0


_MATCH_FIELDS = (("api", "api"), ("group_id", "group"), ("member_id", "member"), ("group_instance_id", "instance"),
                 ("client_id", "client_id"), ("transactional_id", "transactional_id"))


def rule_match(rule: Mapping[str, Any]) -> str:
    parts = [f"{label}={rule[key]}" for key, label in _MATCH_FIELDS if rule.get(key) is not None]
    return " ".join(parts) or "any request"


def rule_action(rule: Mapping[str, Any]) -> str:
    action = rule.get("action")
    if action == "error":
        return f"error {rule.get('error')}"
    if action == "delay":
        return f"delay {rule.get('delay_ms')}ms"
    return str(action).replace("_", " ")


def rule_limits(rule: Mapping[str, Any]) -> str:
    parts = []
    if rule.get("count") is not None:
        parts.append(f"count={rule['count']}")
    if rule.get("probability") is not None:
        parts.append(f"probability={rule['probability']}")
    if rule.get("seed") is not None:
        parts.append(f"seed={rule['seed']}")
    if rule.get("duration_ms") is not None:
        parts.append(f"duration={duration(rule['duration_ms'])}")
    return " ".join(parts) or "-"


# -- watch and chaos run ------------------------------------------------------------------------------------


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        import rich  # noqa: F401
    except ImportError:
        raise ControlError(0, "watch needs the 'rich' package: pip install rich") from None
    from broker.cli import watch  # here, not at the top: only watch pays for its imports

    return watch.run(args)


def cmd_run(args: argparse.Namespace) -> int:
    result = args._runner(args)
    return int(result or 0)


def cmd_run_unavailable(args: argparse.Namespace) -> int:
    print(f"group-broker: chaos run is unavailable: {args._unavailable}", file=sys.stderr)
    return 1


# -- cluster (issue 29) ---------------------------------------------------------------------------------------


def cmd_cluster(args: argparse.Namespace) -> int:
    """``cluster`` and its verbs (broker/cli/cluster.py)."""
    return cluster.run(args, client(args), emit_json)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    **dict.fromkeys(cluster.HANDLERS, cmd_cluster),
    "groups": cmd_groups,
    "describe": cmd_describe,
    "transactions": cmd_transactions,
    "watch": cmd_watch,
    "kick": cmd_kick,
    "fence": cmd_fence,
    "rebalance": cmd_rebalance,
    "wait": cmd_wait,
    "fault_add": cmd_fault_add,
    "fault_list": cmd_fault_list,
    "fault_delete": cmd_fault_delete,
    "fault_clear": cmd_fault_clear,
    "run": cmd_run,
    "run_unavailable": cmd_run_unavailable,
}
