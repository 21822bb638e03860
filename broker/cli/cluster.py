"""``group-broker cluster``: the nodes of ``serve --nodes N`` and the verbs on them (issue 29; docs/control-api.yaml,
the ``cluster`` tag): show them, stop and start a node, move a group's or a transactional id's coordinator, move a
partition's leader, set the coordinator load delay.

Every verb is one call of the control API's ``/v1/cluster`` routes; ``--json`` prints its answer as it came. The
nodes and their coordinator partitions are also what ``groups`` and ``describe`` name as a group's coordinator when
several nodes run (``coordinators``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from broker.cli.format import plural, table
from broker.cluster.hashing import OFFSETS_TOPIC, TRANSACTION_TOPIC, partition_for
from broker.control.client import ControlClient, ControlError

JSON = dict[str, Any]
INTERNAL = (OFFSETS_TOPIC, TRANSACTION_TOPIC)
Command = Callable[..., argparse.ArgumentParser]


def add_arguments(cluster: argparse.ArgumentParser, command: Command) -> None:
    """``cluster``'s verbs; ``command(group, name, handler, help)`` makes a sub-command with the control flags
    (--admin, --bootstrap, --json), as main.py's other control commands."""
    verbs = cluster.add_subparsers(dest="cluster_verb", metavar="VERB")
    stop = command(
        verbs, "stop", "cluster_stop",
        "stop a node: killed (its connections dropped at once, then its leaderships move) or --graceful",
    )
    stop.add_argument("node", type=int, metavar="NODE", help="the node id")
    stop.add_argument(
        "--graceful", action="store_true",
        help="move its leaderships first (parked joins hear NOT_COORDINATOR), then close its connections",
    )
    start = command(verbs, "start", "cluster_start", "start a stopped node again (it leads nothing until a move)")
    start.add_argument("node", type=int, metavar="NODE", help="the node id")
    move = command(
        verbs, "move-coordinator", "cluster_move_coordinator",
        "move the coordinator of a group (or a transactional id) to a node, with every key hashed to its partition",
    )
    key = move.add_mutually_exclusive_group(required=True)
    key.add_argument("--group", metavar="GROUP", help="the group whose coordinator moves")
    key.add_argument("--transactional-id", metavar="ID", help="the transactional id whose coordinator moves")
    move.add_argument("--to", type=int, required=True, metavar="NODE", help="the node that coordinates it next")
    leader = command(
        verbs, "move-leader", "cluster_move_leader",
        "move a partition's leader to a node, or back to its preferred replica (its leader epoch rises)",
    )
    leader.add_argument("topic", metavar="TOPIC")
    leader.add_argument("partition", type=int, metavar="PARTITION")
    where = leader.add_mutually_exclusive_group(required=True)
    where.add_argument("--to", type=int, metavar="NODE", help="the new leader")
    where.add_argument("--preferred", action="store_true", help="the preferred (first) replica")
    delay = command(
        verbs, "load-delay", "cluster_load_delay",
        "how long a node that gains a coordinator partition answers COORDINATOR_LOAD_IN_PROGRESS (0: off)",
    )
    delay.add_argument("ms", type=int, metavar="MS", help="milliseconds, 0 to 3600000")


# -- show -----------------------------------------------------------------------------------------------------


def show(api: ControlClient, as_json: bool) -> str | JSON:
    cluster = api.cluster()
    return cluster if as_json else cluster_text(cluster)


def cluster_text(cluster: Mapping[str, Any]) -> str:
    internal: Mapping[str, list[JSON]] = cluster.get("internal") or {}
    led: dict[int, dict[str, list[int]]] = {}
    for topic in INTERNAL:
        for row in internal.get(topic, []):
            led.setdefault(int(row["leader"]), {}).setdefault(topic, []).append(int(row["partition"]))
    rows = []
    for node in cluster["nodes"]:
        node_id = int(node["node_id"])
        mine = led.get(node_id, {})
        rows.append([
            str(node_id) + (" *" if node_id == cluster.get("controller") else ""),
            f"{node['host']}:{node['port']}",
            "up" if node["up"] else "stopped",
            str(len(mine.get(OFFSETS_TOPIC, []))),
            str(len(mine.get(TRANSACTION_TOPIC, []))),
        ])  # fmt: skip
    lines = [
        f"Cluster {cluster['cluster_id']}: {plural(len(cluster['nodes']), 'node')}, controller "
        f"{cluster['controller']} (*), coordinator load delay {cluster.get('load_delay_ms', 0)} ms",
        "",
        table(["NODE", "ADDRESS", "STATE", "GROUP PARTITIONS", "TXN PARTITIONS"], rows),
    ]
    for topic in INTERNAL:
        rows_of = internal.get(topic, [])
        if not rows_of:
            continue
        lines += ["", f"{topic} ({plural(len(rows_of), 'partition')}), leaders:"]
        for node_id in sorted(led):
            partitions = led[node_id].get(topic)
            if partitions:
                who = "offline" if node_id < 0 else f"node {node_id}"
                lines.append(f"  {who:<8} {runs(partitions)}")
        unusual = [f"{row['partition']} {row['state']}" for row in rows_of if row["state"] != "active"]
        if unusual:
            lines.append("  not active: " + ", ".join(unusual))
    return "\n".join(lines)


def runs(numbers: Iterable[int]) -> str:
    """``0-2,5,7-9``: sorted numbers as runs (a stride-3 spread stays a list, a takeover's runs get short)."""
    ordered = sorted(numbers)
    if not ordered:
        return "-"
    parts: list[str] = []
    start = previous = ordered[0]
    for number in ordered[1:]:
        if number != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = number
        previous = number
    parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


# -- verbs ------------------------------------------------------------------------------------------------------


def stopped_text(answer: Mapping[str, Any], mode: str) -> str:
    leaders: list[list[Any]] = answer.get("moved_leaders") or []
    coordinators: list[list[Any]] = answer.get("moved_coordinators") or []
    lines = [
        f"stopped node {answer['node_id']} ({mode}): {plural(len(leaders), 'partition leader')} and "
        f"{plural(len(coordinators), 'coordinator partition')} moved"
    ]
    lines += [f"  {topic}-{partition} -> {moved_to(leader)}" for topic, partition, leader in leaders]
    by_node: dict[tuple[str, int], list[int]] = {}
    for topic, partition, leader in coordinators:
        by_node.setdefault((topic, leader), []).append(partition)
    lines += [f"  {topic} {runs(parts)} -> {moved_to(leader)}" for (topic, leader), parts in sorted(by_node.items())]
    return "\n".join(lines)


def moved_to(leader: int) -> str:
    return "offline (no running replica)" if leader < 0 else f"node {leader}"


def started_text(answer: Mapping[str, Any]) -> str:
    leaders: list[list[Any]] = answer.get("moved_leaders") or []
    if not leaders:
        return f"started node {answer['node_id']}: it leads nothing until a move (cluster move-leader --preferred)"
    back = ", ".join(f"{topic}-{partition}" for topic, partition, _leader in leaders)
    return f"started node {answer['node_id']}: it leads again the partitions that were offline: {back}"


def coordinator_moved_text(answer: Mapping[str, Any], what: str) -> str:
    return (
        f"{what}: coordinator is node {answer['node']} ({answer['topic']} partition {answer['partition']}, leader "
        f"epoch {answer['epoch']}); every key hashed to that partition is coordinated there"
    )


def run(args: argparse.Namespace, api: ControlClient, emit_json: Callable[[object], None]) -> int:
    """One of ``cluster``'s verbs (``args._handler``)."""
    handler = args._handler
    answer: JSON
    if handler == "cluster":
        shown = show(api, args.json)
        if isinstance(shown, dict):
            emit_json(shown)
        else:
            print(shown)
        return 0
    if handler == "cluster_stop":
        mode = "graceful" if args.graceful else "kill"
        answer = api.stop_node(args.node, mode)
        text = stopped_text(answer, mode)
    elif handler == "cluster_start":
        answer = api.start_node(args.node)
        text = started_text(answer)
    elif handler == "cluster_move_coordinator":
        key_type, key = ("group", args.group) if args.group is not None else ("transaction", args.transactional_id)
        answer = api.move_coordinator(key, args.to, key_type)
        text = coordinator_moved_text(answer, f"{'group' if key_type == 'group' else 'transactional id'} {key}")
    elif handler == "cluster_move_leader":
        answer = api.move_leader(args.topic, args.partition, None if args.preferred else args.to)
        text = f"{args.topic}-{args.partition}: leader node {answer['leader']}, leader epoch {answer['epoch']}"
    else:
        answer = api.set_load_delay(args.ms)
        text = f"coordinator load delay: {answer.get('load_delay_ms', args.ms)} ms"
    if args.json:
        emit_json(answer)
    else:
        print(text)
    return 0


HANDLERS: Sequence[str] = (
    "cluster", "cluster_stop", "cluster_start", "cluster_move_coordinator", "cluster_move_leader",
    "cluster_load_delay",
)  # fmt: skip


# -- a group's coordinator, for groups and describe -------------------------------------------------------------


def coordinators(api: ControlClient) -> Callable[[str], int] | None:
    """Group id -> its coordinator's node id when several nodes run (None for one node, or a broker without
    ``/v1/cluster``): computed here from one ``GET /v1/cluster``, with Kafka's own partitionFor."""
    try:
        cluster = api.cluster()
    except ControlError as error:
        if error.status in (404, 405):
            return None
        raise
    partitions: list[JSON] = (cluster.get("internal") or {}).get(OFFSETS_TOPIC) or []
    if len(cluster.get("nodes") or []) < 2 or not partitions:
        return None
    leaders = [int(row["leader"]) for row in partitions]
    return lambda group_id: leaders[partition_for(group_id, len(leaders))]
