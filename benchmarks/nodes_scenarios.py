"""Issue 29's figures: the classic heartbeat scenario against several nodes, and a node stop.

* ours with ``--nodes 1`` and ``--nodes N`` (3), both processes up at once, the heartbeat runs interleaved (1, N, 1,
  N, ...; best of each): the groups' coordinators found with FindCoordinator, the groups chosen so that they spread
  evenly over the nodes, each group formed and heartbeating at its coordinator (``benchmarks/nodes_loadgen.py``);
* librdkafka's mock cluster with N brokers and kfake with N brokers (``--kfake``), the same load;
* then a node stop on each N-node system: the node coordinating the most groups, while one member of every group
  heartbeats at its coordinator; the time from the stop to each group's first Heartbeat answered with error 0 on its
  new coordinator (max and median over the groups that moved). Ours: ``POST /v1/cluster/nodes/{id}/stop`` with
  ``{"mode": "kill"}``. The mock: ``rd_kafka_mock_broker_set_down`` (its connections close), which moves no
  coordinator, then ``rd_kafka_mock_coordinator_set`` for each of that broker's groups to the other brokers in turn.
  kfake: its connections closed at their next request (a control function) and ``RemoveNode`` (coordinators rehash
  over the brokers left, so groups of the other nodes may move too);
* then ours alone, each case on a fresh N-node process (every node up, the groups formed again): a graceful stop
  (``{"mode": "graceful"}``: the leaderships move first, then the connections close), one group's coordinator
  moved to another node (``POST /v1/cluster/coordinators``; every group of its ``__consumer_offsets`` partition moves
  with it), and a kill after ``POST /v1/cluster/coordinators/load-delay`` (the new coordinator answers
  COORDINATOR_LOAD_IN_PROGRESS for that long). The mock moves one group's coordinator too
  (``rd_kafka_mock_coordinator_set``: on its 3-broker process before its stop, moved back after); the rest the peers
  do not have (their rows say why).
"""

from __future__ import annotations

import json
import multiprocessing
import socket
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from benchmarks import scenarios
from benchmarks.jobs import JobFailed, job_main, run_jobs
from benchmarks.loadgen import FormOptions, Versions
from benchmarks.nodes_loadgen import RoutedMember
from benchmarks.report import Bar, Row
from benchmarks.scenarios import HeartbeatLoad, Measurement
from benchmarks.systems import Kfake, Mock, Ours, System, api_versions, free_port

T = TypeVar("T")
Guarded = Callable[[str, str, str, str, Callable[[], Measurement]], None]
# The stop cases, each with its (max, median) rows: the kill on the heartbeat runs' process, the others on fresh ones.
CASES = {
    "kill": ("nodes_failover_max", "nodes_failover_median"),
    "graceful": ("nodes_graceful_max", "nodes_graceful_median"),
    "move": ("nodes_move_max", "nodes_move_median"),
    "load-delay": ("nodes_load_delay_max", "nodes_load_delay_median"),
}
KEYS = ("nodes_heartbeat_1", "nodes_heartbeat", *(key for keys in CASES.values() for key in keys))
HEARTBEAT_KEY = 12
# Why the peers have no row for ours' other cases (README "Several nodes").
PEERS_LACK = {
    ("mock", "graceful"): "n/a: the mock's one stop is rd_kafka_mock_broker_set_down (its connections close at once)",
    ("mock", "load-delay"): "n/a: the mock has no coordinator load (one group store for every broker)",
    ("kfake", "graceful"): "n/a: kfake's one stop is RemoveNode (and its connections closed by a control function)",
    ("kfake", "move"): "n/a: kfake has no per-key coordinator move (a hash over the brokers)",
    ("kfake", "load-delay"): "n/a: kfake has no coordinator load (one group state for every broker)",
}


@dataclass
class NodesLoad:
    nodes: int = 3
    repeats: int = 2  # interleaved heartbeat runs of ours --nodes 1 and --nodes N; the best of each counts
    kfake: Path | None = None
    systems: tuple[str, ...] = ("ours", "mock", "kfake")
    after_s: float = 2.0  # the failover run goes on this long after the stop (longer while a group is failing)
    load_delay_ms: int = 200  # the load-delay case's coordinator load delay
    cases: tuple[str, ...] = ("graceful", "move", "load-delay")  # ours' cases after the kill, each on a fresh process


@dataclass
class Cluster:
    """An N-node system under test: every node's address and how to stop one."""

    system: System
    addresses: list[tuple[str, int]]
    admin_port: int = 0

    def warm(self) -> None:
        """Ours: one GET /v1/cluster first (the control API's first request costs ~150 ms of set-up)."""
        if isinstance(self.system, Ours):
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/v1/cluster", timeout=10) as answer:
                answer.read()

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """Ours: one POST to the control API, its status and JSON answer."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.admin_port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")

    def stop(self, node_id: int, groups: dict[str, int], nodes: list[int], mode: str = "kill") -> str:
        """Stop the node (kill, or ours' graceful); ``groups``: group id -> coordinator (for the mock, which moves
        none itself)."""
        system = self.system
        if isinstance(system, Ours):
            return str(self.post(f"/v1/cluster/nodes/{node_id}/stop", {"mode": mode})[0])
        if mode != "kill":
            raise TypeError(f"{type(system).__name__} has no {mode} stop")
        if isinstance(system, Mock):
            others = [n for n in nodes if n != node_id]
            moved = [g for g, n in groups.items() if n == node_id]
            moves = " ".join(f"{g}={others[i % len(others)]}" for i, g in enumerate(moved))
            return system.command(f"stop {node_id} {moves}")
        if isinstance(system, Kfake):
            return system.command(f"stop {node_id}")
        raise TypeError(system)

    def move(self, group_id: str, node_id: int) -> tuple[str, int | None]:
        """Move the group's coordinator to the node: the answer, and ours' ``__consumer_offsets`` partition (every
        group of it moves along; the mock moves the one key)."""
        system = self.system
        if isinstance(system, Ours):
            status, answer = self.post("/v1/cluster/coordinators", {"type": "group", "key": group_id, "node": node_id})
            return str(status), answer.get("partition")
        if isinstance(system, Mock):
            return system.command(f"move {group_id}={node_id}"), None
        raise TypeError(f"{type(system).__name__} has no per-key coordinator move")


def free_ports(count: int) -> int:
    """A port P with P .. P + count - 1 all free (ours listens on --port + i)."""
    while True:
        base = free_port()
        if base + count > 65535:
            continue
        try:
            for i in range(1, count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", base + i))
        except OSError:
            continue
        return base


def start_ours(nodes: int) -> Cluster:
    base, admin = free_ports(nodes), free_port()
    ours = Ours.start(None, ["--nodes", str(nodes), "--admin-port", str(admin)], port=base)
    cluster = Cluster(ours, [("127.0.0.1", base + i) for i in range(nodes)], admin)
    ours.wait_ready()
    for host, port in cluster.addresses:
        api_versions(host, port)
    return cluster


def start_peer(name: str, nodes: int, kfake: Path | None) -> Cluster:
    if name == "mock":
        mock = Mock.start(None, brokers=nodes)
        mock.wait_ready()
        return Cluster(mock, list(mock.addresses))
    assert kfake is not None
    peer = Kfake.start(kfake, brokers=nodes)
    peer.wait_ready()
    return Cluster(peer, list(peer.addresses))


def form(cluster: Cluster, groups: int, per_group: int, options: FormOptions, load: HeartbeatLoad, nodes: int,
         mock_delay_ms: int) -> tuple[list[RoutedMember], dict[str, Any]]:  # fmt: skip
    system = cluster.system
    system.set_join_delay(mock_delay_ms)
    mock = isinstance(system, Mock)
    result = run_jobs(
        "benchmarks.nodes_loadgen:form_routed",
        [
            {
                "addresses": cluster.addresses, "tag": scenarios.run_id(), "groups": groups,
                "members_per_group": per_group, "options": options, "max_generations": 1 if mock else 5,
                "nodes": nodes, "connections": load.form_connections,
            }
        ],
    )[0]  # fmt: skip
    members: list[RoutedMember] = result["members"]
    details = {
        "groups_per_node": result["groups_per_node"],
        "members_formed": len(members),
        "formation_seconds": round(result["seconds"], 3),
        "formation_failures": result["failures"][:10],
        "candidate_group_ids_asked": result["candidates_asked"],
    }
    if len(members) < groups * per_group:
        raise RuntimeError(f"only {len(members)} of {groups * per_group} members formed: {result['failures'][:1]}")
    return members, details


def heartbeats(cluster: Cluster, members: list[RoutedMember], version: int, load: HeartbeatLoad,
               formed: dict[str, Any]) -> Measurement:  # fmt: skip
    measured = scenarios.run_heartbeats(
        cluster.system, "benchmarks.nodes_loadgen:heartbeats_routed", members, {"version": version}, load
    )
    spread = ", ".join(f"node {n}: {c}" for n, c in formed["groups_per_node"].items())
    measured.note += f"; groups per coordinator {spread}"
    measured.details.update(formed)
    return measured


def failover(cluster: Cluster, members: list[RoutedMember], version: int, after_s: float, case: str = "kill",
             load_delay_ms: int = 0, restore: bool = False) -> list[Measurement]:  # fmt: skip
    """One member of each group heartbeats while the node coordinating the most groups is stopped (``case`` kill
    or graceful; load-delay: a kill after the load delay is set) or while one of its groups' coordinator moves to
    the next node (move; with ``restore``, moved back afterwards, untimed, so the formation's routes hold again):
    max and median from the act to each group's first error 0 on its new node."""
    first: dict[str, RoutedMember] = {}
    for routed in members:
        first.setdefault(routed.member.group_id, routed)
    coordinators = {g: r.route.node_id for g, r in first.items()}
    counts: dict[int, int] = {}
    for node in coordinators.values():
        counts[node] = counts.get(node, 0) + 1
    victim = max(counts, key=lambda n: (counts[n], n))
    nodes = sorted({r.route.node_id for r in members} | set(counts))
    act, what = _act(cluster, case, victim, coordinators, nodes, load_delay_ms)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    kwargs = {"addresses": cluster.addresses, "members": list(first.values()), "version": version, "after_s": after_s}
    process = context.Process(
        target=job_main, args=(0, "benchmarks.nodes_loadgen:failover", kwargs, barrier, results), daemon=True
    )
    process.start()
    try:
        cluster.warm()
        if case == "load-delay":  # set before the barrier, untimed: the kill is what the clock measures
            cluster.post("/v1/cluster/coordinators/load-delay", {"ms": load_delay_ms})
        barrier.wait(timeout=60)
        stopped_at = time.monotonic()
        answer = act()
        stop_ms = (time.monotonic() - stopped_at) * 1000
        _, result, error = results.get(timeout=60)
    finally:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
        if restore and case == "move":
            cluster.move(what["moved_group"], what["from_node"])
    if error is not None:
        raise JobFailed(f"failover job failed:\n{error}")
    groups: list[dict[str, Any]] = result["groups"]
    moved = [g for g in groups if g["first_error_at"] is not None]
    lost = [g["group_id"] for g in moved if g["recovered_at"] is None]
    recoveries = [(g["recovered_at"] - stopped_at) * 1000 for g in moved if g["recovered_at"] is not None]
    detected = [(g["first_error_at"] - stopped_at) * 1000 for g in moved]

    def since_stop(field: str) -> list[float]:
        return sorted(round((g[field] - stopped_at) * 1000, 2) for g in moved if g[field] is not None)

    other_errors = sorted({k for g in moved for k in g["errors"] if k not in ("closed", "15", "16", "14")})
    new_nodes: dict[str, int] = {}
    for g in moved:
        new_nodes[str(g["new_node"])] = new_nodes.get(str(g["new_node"]), 0) + 1
    first_errors: dict[str, int] = {}
    for g in moved:
        first_errors[g["first_error"]] = first_errors.get(g["first_error"], 0) + 1
    off_victim = sum(1 for g in moved if g["old_node"] != victim)
    details = {
        "case": case, "stopped_node": victim, "stop_answer": answer, "stop_call_ms": round(stop_ms, 2),
        "groups": len(groups), "groups_moved": len(moved), "moved_from_other_nodes": off_victim,
        "new_coordinators": new_nodes, "recovery_ms": [round(x, 2) for x in sorted(recoveries)],
        "first_error_ms": [round(x, 2) for x in sorted(detected)], "never_recovered": lost,
        "found_new_coordinator_ms": since_stop("found_at"), "connected_to_it_ms": since_stop("connected_at"),
        "refinds": sorted(g["refinds"] for g in moved),
        "error_codes": sorted({k for g in moved for k in g["errors"]}),
        # Each moved group's first error ("closed": its connection closed or was refused; else the Heartbeat's
        # error code) and every error seen, summed over the groups: what the act looked like to the clients.
        "first_errors": first_errors, "errors_seen": _summed(g["errors"] for g in moved),
        # A Heartbeat answered 0 carries the member id and generation formed: it recovered with no rebalance (a
        # rebalance would have answered REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID: flagged).
        "no_rebalance": bool(moved) and not lost and not other_errors,
    }  # fmt: skip
    if case == "move":
        details.pop("stopped_node")
        details.update(what)
    elif case == "load-delay":
        details["load_delay_ms"] = load_delay_ms
    flagged = bool(lost or other_errors or not moved)
    head = {
        "kill": f"node {victim} stopped",
        "graceful": f"node {victim} stopped gracefully",
        "move": f"group {what.get('moved_group')}'s coordinator moved from node {victim} to {what.get('to_node')}",
        "load-delay": f"node {victim} stopped, load delay {load_delay_ms} ms",
    }[case]
    note = (
        f"{head} ({answer}, {stop_ms:.0f} ms); {len(moved)} of {len(groups)} groups moved"
        + (f" ({off_victim} from other nodes)" if off_victim else "")
        + f", to {new_nodes}; first error after {max(detected, default=0):.0f} ms at most"
        + (f", first errors {first_errors}" if case != "kill" else "")
    )
    if flagged:
        note += f"; FLAGGED: never recovered {lost[:3]}, other errors {other_errors}" if moved else "; FLAGGED: none"
    if not recoveries:
        return [Measurement(None, note, details, True), Measurement(None, note, details, True)]
    return [
        Measurement(max(recoveries), note, details, flagged),
        Measurement(statistics.median(recoveries), f"{len(recoveries)} groups", {}, flagged),
    ]


def _act(cluster: Cluster, case: str, victim: int, coordinators: dict[str, int], nodes: list[int],
         load_delay_ms: int) -> tuple[Callable[[], str], dict[str, Any]]:  # fmt: skip
    """What the clock times for ``case`` (its answer as a string), and what it will do (the move's group and
    nodes)."""
    if case in ("kill", "load-delay"):
        return partial(cluster.stop, victim, coordinators, nodes), {}
    if case == "graceful":
        return partial(cluster.stop, victim, coordinators, nodes, "graceful"), {}
    if case != "move":
        raise ValueError(f"no case {case!r}: one of {', '.join(CASES)}")
    group = min(g for g, node in coordinators.items() if node == victim)
    target = nodes[(nodes.index(victim) + 1) % len(nodes)]
    what: dict[str, Any] = {"moved_group": group, "from_node": victim, "to_node": target}

    def move() -> str:
        answer, what["moved_partition"] = cluster.move(group, target)
        return answer

    return move, what


def _summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for key, count in one.items():
            total[key] = total.get(key, 0) + count
    return dict(sorted(total.items()))


def versions_for(given: Versions | None, kfake: Path | None, nodes: int) -> tuple[Versions, list[str]]:
    """The run's classic versions (negotiated by one-node ours and mock when not given), lowered to what kfake
    advertises."""
    notes: list[str] = []
    if given is None:
        with Ours.start() as ours, Mock.start() as mock:
            ours.wait_ready()
            mock.wait_ready()
            given, _ = scenarios.negotiate(ours, mock)
    if kfake is not None:
        with Kfake.start(kfake) as peer:
            seen = api_versions(peer.host, peer.port)
        capped = Versions(*(min(v, seen.get(k, (0, v))[1]) for v, k in zip(given, (11, 14, 12), strict=True)))
        if capped != given:
            notes.append(f"kfake advertises less than {given}: {capped} used")
        given = capped
    return given, notes


def run(load: NodesLoad, groups: int, per_group: int, given: Versions | None, options: FormOptions,
        heartbeat: HeartbeatLoad, mock_delay_ms: int, guarded: Guarded) -> dict[str, Any]:  # fmt: skip
    """Every row of the scenario (``options``' versions are replaced by ``given``, or by those negotiated here);
    returns what the run records in meta.nodes."""
    versions, notes = versions_for(given, load.kfake if "kfake" in load.systems else None, load.nodes)
    options = FormOptions(versions, options.session_timeout_ms, static=options.static)
    v = versions.heartbeat
    count = groups * per_group
    n = load.nodes
    hb_label = f"heartbeats, {count} members, groups spread over {n} nodes"
    labels = {
        "nodes_heartbeat_1": (f"heartbeats, {count} members, ours --nodes 1 (same run)", "heartbeats/s"),
        "nodes_heartbeat": (hb_label, "heartbeats/s"),
        "nodes_failover_max": (f"node stop to every group answered on its new node ({n} nodes), max", "ms"),
        "nodes_failover_median": ("node stop to a group answered on its new node, median", "ms"),
        "nodes_graceful_max": (f"graceful node stop to every group answered on its new node ({n} nodes), max", "ms"),
        "nodes_graceful_median": ("graceful node stop to a group answered on its new node, median", "ms"),
        "nodes_move_max": ("one group's coordinator moved to its groups answered on the new node, max", "ms"),
        "nodes_move_median": ("one group's coordinator moved to a group answered on the new node, median", "ms"),
        "nodes_load_delay_max": (f"node stop, {load.load_delay_ms} ms load delay, to every group answered, max", "ms"),
        "nodes_load_delay_median": (f"node stop, {load.load_delay_ms} ms load delay, to a group answered, median",
                                    "ms"),
    }  # fmt: skip

    def record(key: str, system: str, measured: Measurement | Exception) -> None:
        def work() -> Measurement:
            if isinstance(measured, Exception):
                raise measured
            return measured

        guarded(key, *labels[key], system, work)

    spread: dict[str, Any] = {}
    if "ours" in load.systems:
        one, many = start_ours(1), start_ours(n)
        try:
            formed = [
                attempt(partial(form, c, groups, per_group, options, heartbeat, k, 0)) for c, k in ((one, 1), (many, n))
            ]
            best: list[Measurement | Exception] = [f if isinstance(f, Exception) else Measurement(None) for f in formed]
            for _ in range(load.repeats):
                for i, cluster in enumerate((one, many)):
                    got = formed[i]
                    if isinstance(got, Exception):
                        continue
                    measured = attempt(partial(heartbeats, cluster, got[0], v, heartbeat, got[1]))
                    print(f"  ours --nodes {(1, n)[i]}: {_show(measured)}", file=sys.stderr, flush=True)
                    if not isinstance(best[i], Measurement) or _better(measured, best[i]):
                        best[i] = measured
            record("nodes_heartbeat_1", "ours", best[0])
            record("nodes_heartbeat", "ours", best[1])
            spread["ours"] = None if isinstance(formed[1], Exception) else formed[1][1]["groups_per_node"]
            if not isinstance(formed[1], Exception):
                _failover(record, "ours", many, formed[1][0], v, load.after_s)
        finally:
            one.system.stop()
            many.system.stop()
        for case in load.cases:  # each on a fresh process: every node up, the coordinators spread as before
            _fresh_case(record, case, load, groups, per_group, options, heartbeat, v)
    for name in ("mock", "kfake"):
        if name not in load.systems:
            continue
        if name == "kfake" and load.kfake is None:
            for key in _measured_keys(name, load.cases):
                record(key, name, Measurement(None, "n/a: no kfake binary given (--kfake PATH or KFAKE)"))
            continue
        try:
            peer = start_peer(name, n, load.kfake)
        except Exception as error:
            for key in _measured_keys(name, load.cases):
                record(key, name, error)
            continue
        try:
            got = attempt(partial(form, peer, groups, per_group, options, heartbeat, n, mock_delay_ms))
            if isinstance(got, Exception):
                for key in _measured_keys(name, load.cases):
                    record(key, name, got)
                continue
            record("nodes_heartbeat", name, attempt(partial(heartbeats, peer, got[0], v, heartbeat, got[1])))
            spread[name] = got[1]["groups_per_node"]
            if name == "mock" and "move" in load.cases:  # its one case of ours': before the kill, moved back after
                _failover(record, name, peer, got[0], v, load.after_s, "move", restore=True)
            _failover(record, name, peer, got[0], v, load.after_s)
        finally:
            peer.system.stop()
    for name in ("mock", "kfake"):
        for case in load.cases if name in load.systems else ():
            for key in CASES[case] if (name, case) in PEERS_LACK else ():
                record(key, name, Measurement(None, PEERS_LACK[(name, case)]))
    return {"versions": versions._asdict(), "notes": notes, "groups_per_node": spread}


Recorder = Callable[[str, str, "Measurement | Exception"], None]


def _failover(record: Recorder, name: str, cluster: Cluster, members: list[RoutedMember], version: int,
              after_s: float, case: str = "kill", load_delay_ms: int = 0, restore: bool = False) -> None:  # fmt: skip
    measured = attempt(partial(failover, cluster, members, version, after_s, case, load_delay_ms, restore))
    keys = CASES[case]
    if isinstance(measured, Exception):
        for key in keys:
            record(key, name, measured)
        return
    for key, value in zip(keys, measured, strict=True):
        record(key, name, value)


def _fresh_case(record: Recorder, case: str, load: NodesLoad, groups: int, per_group: int, options: FormOptions,
                heartbeat: HeartbeatLoad, version: int) -> None:  # fmt: skip
    """Ours' ``case`` on a fresh N-node process, its groups formed as for the heartbeat runs."""
    cluster = attempt(partial(start_ours, load.nodes))
    if isinstance(cluster, Exception):
        for key in CASES[case]:
            record(key, "ours", cluster)
        return
    try:
        got = attempt(partial(form, cluster, groups, per_group, options, heartbeat, load.nodes, 0))
        if isinstance(got, Exception):
            for key in CASES[case]:
                record(key, "ours", got)
            return
        _failover(record, "ours", cluster, got[0], version, load.after_s, case, load.load_delay_ms)
    finally:
        cluster.system.stop()


def _measured_keys(peer: str, cases: tuple[str, ...]) -> list[str]:
    """The rows a peer has a figure for: its heartbeats, its kill, and the cases of ours it can do too."""
    keys = ["nodes_heartbeat", *CASES["kill"]]
    return keys + [k for case in cases if (peer, case) not in PEERS_LACK for k in CASES[case]]


def attempt(work: Callable[[], T]) -> T | Exception:
    try:
        return work()
    except Exception as error:
        return error


def _better(new: Measurement | Exception, old: Measurement | Exception) -> bool:
    if isinstance(new, Exception) or new.value is None:
        return False
    return isinstance(old, Exception) or old.value is None or new.value > old.value


def _show(measured: Measurement | Exception) -> str:
    if isinstance(measured, Exception):
        return f"failed: {measured!r}"[:200]
    return "n/a" if measured.value is None else f"{measured.value:,.0f}/s {measured.note}"


def bars(rows: dict[str, Row], nodes: int) -> list[Bar]:
    """Issue 29's bar (--nodes N heartbeats >= 0.9x --nodes 1, same run) and the peers beside it, no verdict."""
    row = rows.get("nodes_heartbeat")
    one = rows.get("nodes_heartbeat_1")
    many_value = None if row is None else row.value("ours")
    one_value = None if one is None else one.value("ours")
    name = f"heartbeats --nodes {nodes} / --nodes 1, same run"
    out = []
    if many_value is None or not one_value:
        out.append(Bar(name, None, ">= 0.90x", None, "not measured in this run"))
    else:
        ratio = many_value / one_value
        out.append(Bar(name, ratio, ">= 0.90x", ratio >= 0.9))
    for peer in ("mock", "kfake"):
        over = None if row is None else row.ratio_over(peer)
        out.append(Bar(f"heartbeats, {nodes} nodes, ours / {peer}", over, "no bar set", None,
                       "" if over is not None else "not measured in this run"))  # fmt: skip
    out.append(_load_delay_bar(rows))
    return out


def _load_delay_bar(rows: dict[str, Row]) -> Bar:
    """Informational: a kill with a load delay of D ms should cost about D ms more than the kill alone (the same
    re-find, then COORDINATOR_LOAD_IN_PROGRESS until the load ends)."""
    delayed, kill = rows.get("nodes_load_delay_max"), rows.get("nodes_failover_max")
    measured = None if delayed is None else delayed.measured.get("ours")
    kill_ms = None if kill is None else kill.value("ours")
    if measured is None or measured.value is None or kill_ms is None:
        return Bar("node stop with a load delay, max minus the delay, ms", None, "no bar set", None,
                   "not measured in this run")  # fmt: skip
    delay = measured.details.get("load_delay_ms", 0)
    extra = measured.value - delay
    return Bar(f"node stop with a {delay} ms load delay, max minus {delay} ms", extra, "no bar set", None,
               f"ms; the kill alone: {kill_ms:.1f} ms, expected about the same")  # fmt: skip
