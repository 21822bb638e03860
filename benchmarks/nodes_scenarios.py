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
  over the brokers left, so groups of the other nodes may move too).
"""

from __future__ import annotations

import json
import multiprocessing
import socket
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
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
KEYS = ("nodes_heartbeat_1", "nodes_heartbeat", "nodes_failover_max", "nodes_failover_median")
HEARTBEAT_KEY = 12


@dataclass
class NodesLoad:
    nodes: int = 3
    repeats: int = 2  # interleaved heartbeat runs of ours --nodes 1 and --nodes N; the best of each counts
    kfake: Path | None = None
    systems: tuple[str, ...] = ("ours", "mock", "kfake")
    after_s: float = 2.0  # the failover run goes on this long after the stop (longer while a group is failing)


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

    def stop(self, node_id: int, groups: dict[str, int], nodes: list[int]) -> str:
        """Stop the node (kill); ``groups``: group id -> coordinator (for the mock, which moves none itself)."""
        system = self.system
        if isinstance(system, Ours):
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.admin_port}/v1/cluster/nodes/{node_id}/stop",
                data=json.dumps({"mode": "kill"}).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                return str(answer.status)
        if isinstance(system, Mock):
            others = [n for n in nodes if n != node_id]
            moved = [g for g, n in groups.items() if n == node_id]
            moves = " ".join(f"{g}={others[i % len(others)]}" for i, g in enumerate(moved))
            return system.command(f"stop {node_id} {moves}")
        if isinstance(system, Kfake):
            return system.command(f"stop {node_id}")
        raise TypeError(system)


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


def failover(cluster: Cluster, members: list[RoutedMember], version: int, after_s: float) -> list[Measurement]:
    """Stop the node coordinating the most groups while one member of each group heartbeats: max and median."""
    first: dict[str, RoutedMember] = {}
    for routed in members:
        first.setdefault(routed.member.group_id, routed)
    coordinators = {g: r.route.node_id for g, r in first.items()}
    counts: dict[int, int] = {}
    for node in coordinators.values():
        counts[node] = counts.get(node, 0) + 1
    victim = max(counts, key=lambda n: (counts[n], n))
    nodes = sorted({r.route.node_id for r in members} | set(counts))
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
        barrier.wait(timeout=60)
        stopped_at = time.monotonic()
        answer = cluster.stop(victim, coordinators, nodes)
        stop_ms = (time.monotonic() - stopped_at) * 1000
        _, result, error = results.get(timeout=60)
    finally:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
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
    off_victim = sum(1 for g in moved if g["old_node"] != victim)
    details = {
        "stopped_node": victim, "stop_answer": answer, "stop_call_ms": round(stop_ms, 2),
        "groups": len(groups), "groups_moved": len(moved), "moved_from_other_nodes": off_victim,
        "new_coordinators": new_nodes, "recovery_ms": [round(x, 2) for x in sorted(recoveries)],
        "first_error_ms": [round(x, 2) for x in sorted(detected)], "never_recovered": lost,
        "found_new_coordinator_ms": since_stop("found_at"), "connected_to_it_ms": since_stop("connected_at"),
        "refinds": sorted(g["refinds"] for g in moved),
        "error_codes": sorted({k for g in moved for k in g["errors"]}),
    }  # fmt: skip
    flagged = bool(lost or other_errors or not moved)
    note = (
        f"node {victim} stopped ({answer}, {stop_ms:.0f} ms); {len(moved)} of {len(groups)} groups moved"
        + (f" ({off_victim} from other nodes)" if off_victim else "")
        + f", to {new_nodes}; first error after {max(detected, default=0):.0f} ms at most"
    )
    if flagged:
        note += f"; FLAGGED: never recovered {lost[:3]}, other errors {other_errors}" if moved else "; FLAGGED: none"
    if not recoveries:
        return [Measurement(None, note, details, True), Measurement(None, note, details, True)]
    return [
        Measurement(max(recoveries), note, details, flagged),
        Measurement(statistics.median(recoveries), f"{len(recoveries)} groups", {}, flagged),
    ]


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
    }

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
    for name in ("mock", "kfake"):
        if name not in load.systems:
            continue
        if name == "kfake" and load.kfake is None:
            for key in ("nodes_heartbeat", "nodes_failover_max", "nodes_failover_median"):
                record(key, name, Measurement(None, "n/a: no kfake binary given (--kfake PATH or KFAKE)"))
            continue
        try:
            peer = start_peer(name, n, load.kfake)
        except Exception as error:
            for key in ("nodes_heartbeat", "nodes_failover_max", "nodes_failover_median"):
                record(key, name, error)
            continue
        try:
            got = attempt(partial(form, peer, groups, per_group, options, heartbeat, n, mock_delay_ms))
            if isinstance(got, Exception):
                for key in ("nodes_heartbeat", "nodes_failover_max", "nodes_failover_median"):
                    record(key, name, got)
                continue
            record("nodes_heartbeat", name, attempt(partial(heartbeats, peer, got[0], v, heartbeat, got[1])))
            spread[name] = got[1]["groups_per_node"]
            _failover(record, name, peer, got[0], v, load.after_s)
        finally:
            peer.system.stop()
    return {"versions": versions._asdict(), "notes": notes, "groups_per_node": spread}


Recorder = Callable[[str, str, "Measurement | Exception"], None]


def _failover(record: Recorder, name: str, cluster: Cluster, members: list[RoutedMember], version: int,
              after_s: float) -> None:  # fmt: skip
    measured = attempt(partial(failover, cluster, members, version, after_s))
    if isinstance(measured, Exception):
        record("nodes_failover_max", name, measured)
        record("nodes_failover_median", name, measured)
        return
    record("nodes_failover_max", name, measured[0])
    record("nodes_failover_median", name, measured[1])


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
    return out
