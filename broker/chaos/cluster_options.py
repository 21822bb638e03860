"""The options of ``chaos run`` aimed at the broker's nodes (issue 29; ``cluster_chaos``), and what they refuse.

``--nodes N`` starts the run's broker with N nodes; ``--stop-node-every S`` stops the node that coordinates the
group every S seconds (``--stop-node-mode``: kill and graceful in turn by default) and starts it again
``--node-restart-after`` seconds later (default ``--restart-after``); ``--move-coordinator-every S`` moves the
group's coordinator to another running node. Both need a second node: with ``--bootstrap`` the running broker's
``GET /v1/cluster`` must list several (``cluster_chaos.running_cluster_problem``, asked before the run starts).
"""

from __future__ import annotations

import argparse
from typing import Any

STOP_MODES = ("alternate", "kill", "graceful")

JSON = dict[str, Any]


def add_cluster_arguments(schedule: argparse._ArgumentGroup) -> None:
    schedule.add_argument(
        "--stop-node-every", type=float, default=None, metavar="S",
        help="also stop the node that coordinates the group every S s (POST /v1/cluster/nodes/{id}/stop), never "
        "the last running one, and start it again after --node-restart-after; the report says, per stop, the "
        "time to each consumer's next acknowledged commit (needs --nodes 2 or more, or a --bootstrap broker with "
        "several nodes; default: no node stops)",
    )  # fmt: skip
    schedule.add_argument(
        "--stop-node-mode", choices=STOP_MODES, default=None,
        help="how --stop-node-every stops a node: kill (its connections drop at once), graceful (its coordinators "
        "move first) or alternate, kill first (default alternate)",
    )  # fmt: skip
    schedule.add_argument(
        "--node-restart-after", type=float, default=None, metavar="S",
        help="start a stopped node again after S s (default: --restart-after)",
    )  # fmt: skip
    schedule.add_argument(
        "--move-coordinator-every", type=float, default=None, metavar="S",
        help="also move the group's coordinator to another running node every S s (POST /v1/cluster/coordinators); "
        "the report says, per move, the time to each consumer's next acknowledged commit (needs --nodes 2 or more, "
        "or a --bootstrap broker with several nodes; default: no moves)",
    )  # fmt: skip


def node_chaos(args: argparse.Namespace) -> bool:
    """Whether the run does anything to the broker's nodes."""
    return args.stop_node_every is not None or args.move_coordinator_every is not None


def cluster_problems(args: argparse.Namespace) -> list[str]:
    problems = []
    nodes = args.nodes
    if nodes is not None and nodes < 1:
        problems.append("--nodes must be at least 1")
    if nodes is not None and args.bootstrap is not None:
        problems.append(
            "--nodes is for the broker the run starts: a running broker (--bootstrap) has the nodes it was "
            "started with (serve --nodes N); leave out --nodes"
        )
    for flag, value in (("--stop-node-every", args.stop_node_every),
                        ("--move-coordinator-every", args.move_coordinator_every)):  # fmt: skip
        if value is None:
            continue
        if not value > 0:
            problems.append(f"{flag} must be positive")
        if args.bootstrap is None and (nodes or 1) < 2:
            what = "stops a node, never the last running one" if flag == "--stop-node-every" else (
                "moves the coordinator to another running node"
            )
            problems.append(f"{flag} needs --nodes 2 or more: it {what}, and a one-node broker has no other")
    if args.stop_node_every is None:
        problems += [
            f"{flag} is for --stop-node-every" for flag, value in
            (("--stop-node-mode", args.stop_node_mode), ("--node-restart-after", args.node_restart_after))
            if value is not None
        ]  # fmt: skip
    if args.node_restart_after is not None and args.node_restart_after < 0:
        problems.append("--node-restart-after must not be negative")
    if node_chaos(args):
        if args.group_protocol == "share":
            problems.append(
                "--stop-node-every and --move-coordinator-every measure the time to each consumer's next "
                "acknowledged commit: a share group commits no offsets (not with --group-protocol share)"
            )
        if args.exactly_once:
            problems.append(
                "--stop-node-every and --move-coordinator-every read the consumers' commit files, which the "
                "transactional workers do not write (not with --exactly-once)"
            )
    if args.broker_restart_every is not None and (nodes or 1) > 1:
        problems.append(
            "--broker-restart-every restarts a one-node broker on fixed ports: not with --nodes above 1 (each node "
            "needs a port of its own that stays free across the restarts)"
        )
    return problems


def cluster_config(args: argparse.Namespace) -> JSON:
    """The report's ``config`` entries of the nodes."""
    return {
        "nodes": args.nodes,
        "stop_node_every_s": args.stop_node_every,
        "stop_node_mode": args.stop_node_mode or (STOP_MODES[0] if args.stop_node_every is not None else None),
        "node_restart_after_s": node_restart_after(args) if args.stop_node_every is not None else None,
        "move_coordinator_every_s": args.move_coordinator_every,
    }


def node_restart_after(args: argparse.Namespace) -> float:
    return float(args.node_restart_after if args.node_restart_after is not None else args.restart_after)
