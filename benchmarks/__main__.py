"""``python -m benchmarks``: our broker and librdkafka's mock cluster, side by side, same load generator.

See benchmarks/README.md for what each scenario measures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import cg_scenarios, durable, nodes_scenarios, scenarios, share_scenarios
from benchmarks.cg_scenarios import CgLoad
from benchmarks.jobs import raise_fd_limit
from benchmarks.loadgen import FormOptions, Versions
from benchmarks.mock_cluster import find_librdkafka
from benchmarks.report import (
    Bar,
    Change,
    Row,
    bars_text,
    baseline_changes,
    baseline_text,
    document,
    table,
    write_json,
)
from benchmarks.scenarios import HeartbeatLoad, Measurement
from benchmarks.share_scenarios import ShareLoad
from benchmarks.systems import ConsumerSettings, Mock, Ours, System

QUICK = {
    "groups": 2,
    "members_per_group": 3,
    "seconds": 1.0,
    "connections": 2,
    "scale_members": 40,
    "scale_group_size": 10,
    "formation_sizes": "3,10",
    "formation_repeats": 1,
    "startup_repeats": 2,
    "cg_formation_sizes": "6",
    "cg_formation_repeats": 1,
    "durable_records": 2000,
    "durable_groups": 20,
    "share_records": 2000,
    "share_round_records": 1000,
    "share_mock_round_records": 1000,
    "share_timeout_s": 20.0,
    "nodes_repeats": 1,
    "nodes_after_s": 1.0,
}

SCENARIOS = (
    "startup", "heartbeat", "formation", "scale", "cg-heartbeat", "cg-formation", "cg-scale", "durable",
    "share-fetch", "share-heartbeat", "heartbeat-nodes",
)  # fmt: skip
SHARE_ONLY = {"share-fetch", "share-heartbeat", "heartbeat-nodes"}  # scenarios that start their own processes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    add = parser.add_argument
    add("--quick", action="store_true", help=f"tiny sizes for CI (a few members, 1 s runs): {QUICK}")
    add("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    add("--only", default=",".join(SCENARIOS), help=f"comma-separated scenarios to run, of {', '.join(SCENARIOS)}")
    add("--groups", type=int, default=10, help="heartbeat scenario: groups")
    add("--members-per-group", type=int, default=10, help="heartbeat scenario: members in each group")
    add("--connections", type=int, default=8, help="heartbeat connections (shared by the generators)")
    add("--window", type=int, default=64, help="Heartbeats in flight on each connection")
    add("--refill", type=int, default=8, help="replace answered Heartbeats in batches of at least this many")
    add("--seconds", type=float, default=5.0, help="length of each heartbeat run")
    add("--generators", type=int, default=1, help="load generator processes for heartbeat runs")
    add("--scale-members", type=int, default=100_000, help="scale scenario: live members")
    add("--scale-group-size", type=int, default=100, help="scale scenario: members per group")
    add("--formation-sizes", default="10,100,1000", help="formation scenario: group sizes")
    add("--formation-repeats", type=int, default=3, help="formation scenario: samples per size (median)")
    add("--startup-repeats", type=int, default=5, help="start-up scenario: samples (median)")
    add("--static-members", action="store_true", help="join with group.instance.id (default: dynamic members)")
    add("--session-timeout-ms", type=int, default=300_000, help="members' session timeout (long: none expire)")
    add("--form-connections", type=int, default=2000, help="connections used to form many groups in waves")
    add("--mock-form-delay-ms", type=int, default=100, help="mock initial rebalance delay when forming many groups")
    # Issue 27: the broker with --data-dir beside the broker without (benchmarks/durable.py).
    add("--durable-records", type=int, default=1_000_000, help="durable: records in the recovery directory")
    add("--durable-groups", type=int, default=10_000, help="durable: groups' offsets in the recovery directory")
    add("--baseline", type=Path, metavar="JSON", help="an earlier --json output: compare the classic figures with it")
    add("--baseline-tolerance", type=float, default=0.10, help="a classic figure worse than this share regressed")
    # KIP-848 consumer groups (README "Consumer groups"); the heartbeat load and sizes are the classic ones.
    add("--cg-formation-sizes", default="1000", help="consumer-group formation: group sizes")
    add("--cg-formation-repeats", type=int, default=3, help="consumer-group formation: samples per size (median)")
    add("--cg-partitions", type=int, default=0, help="partitions of the subscribed topic (0: one per group member)")
    add("--cg-form-members", type=int, default=2000, help="consumer-group members forming at once (heartbeat runs)")
    add("--cg-form-connections", type=int, default=16, help="connections those members share")
    add("--cg-heartbeat-interval-ms", type=int, default=5000, help="heartbeat interval both brokers give members")
    add(
        "--cg-session-timeout-ms",
        type=int,
        default=1_800_000,
        help="session timeout both brokers give members (long: none expires while 100,000 are formed)",
    )
    add("--cg-timeout-s", type=float, default=120, help="longest wait for one consumer group to reconcile")
    add("--cg-gap-ms", type=float, default=0, help="members' pause before a heartbeat with nothing to report")
    # KIP-932 share groups (README "Share groups"): ours, the mock and kfake; the heartbeat load is the classic one.
    add("--kfake", type=Path, default=os.environ.get("KFAKE") or None, help="a kfake binary (env KFAKE; README)")
    add("--share-records", type=int, default=400_000, help="share-fetch: records produced, then all acknowledged")
    add("--share-round-records", type=int, default=0, help="share-fetch: records per round (0: all in one)")
    add("--share-mock-round-records", type=int, default=40_000, help="share-fetch: the mock's rounds (it keeps 5 MB)")
    add("--share-consumers", type=int, default=3, help="share-fetch: share consumers of the one partition")
    add("--share-batch-records", type=int, default=100, help="share-fetch: records per produced batch")
    add("--share-value-bytes", type=int, default=100, help="share-fetch: bytes of each record's value")
    add("--share-max-records", type=int, default=500, help="share-fetch: MaxRecords = BatchSize of each ShareFetch")
    add("--share-timeout-s", type=float, default=60, help="share-fetch: time allowed per system (then: partial)")
    add("--share-systems", default="ours,mock,kfake", help="share scenarios: which of ours, mock, kfake to run")
    # Issue 29 (README "Several nodes"): ours --nodes 1 and --nodes N, the mock and kfake with N brokers, a node stop.
    add("--cluster-nodes", type=int, default=3, help="heartbeat-nodes: nodes of each multi-node system")
    add("--nodes-repeats", type=int, default=2, help="heartbeat-nodes: interleaved runs of ours 1 and N (best)")
    add("--nodes-systems", default="ours,mock,kfake", help="heartbeat-nodes: which of ours, mock, kfake to run")
    add("--nodes-after-s", type=float, default=2.0, help="heartbeat-nodes: seconds each stop case runs after the act")
    add("--nodes-load-delay-ms", type=int, default=200, help="heartbeat-nodes: the load-delay case's delay")
    args = parser.parse_args(argv)
    unknown = {x.strip() for x in args.only.split(",") if x.strip()} - set(SCENARIOS)
    if unknown:
        parser.error(f"--only: unknown scenarios {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.quick:
        for name, value in QUICK.items():
            if parser.get_default(name) == getattr(args, name):
                setattr(args, name, value)
    return args


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "platform": platform.platform()}


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: dict[str, Row] = {}
        self.meta: dict[str, Any] = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": shlex.join([Path(sys.executable).name, "-m", "benchmarks", *sys.argv[1:]]),
            "machine": machine(),
            "librdkafka": find_librdkafka().name,
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        }
        self.load = HeartbeatLoad(
            connections=args.connections,
            window=args.window,
            refill=args.refill,
            seconds=args.seconds,
            generators=args.generators,
            form_connections=args.form_connections,
        )
        self.versions: Versions | None = None
        self.cg = CgLoad(
            args.cg_partitions, args.cg_form_members, args.cg_form_connections, args.cg_gap_ms, args.cg_timeout_s
        )
        self.consumer = ConsumerSettings(args.cg_session_timeout_ms, args.cg_heartbeat_interval_ms)
        self.cg_versions: dict[str, int | None] | None = None

    def record(self, key: str, label: str, unit: str, system: str, measured: Measurement) -> None:
        row = self.rows.setdefault(key, Row(key, label, unit))
        row.measured[system] = measured
        value = "n/a" if measured.value is None else f"{measured.value:,.1f}"
        print(f"  {system}: {label}: {value} {unit}  {measured.note}", file=sys.stderr, flush=True)

    def options(self) -> FormOptions:
        assert self.versions is not None
        return FormOptions(self.versions, self.args.session_timeout_ms, static=self.args.static_members)

    def guarded(self, key: str, label: str, unit: str, system: str, work: Callable[[], Measurement]) -> None:
        """A scenario that fails is reported as n/a with the reason, and the run goes on."""
        try:
            measured = work()
        except Exception as error:
            reason = str(error).strip().splitlines()[-1] if str(error).strip() else repr(error)
            measured = Measurement(None, f"n/a: {type(error).__name__}: {reason}", flagged=True)
        self.record(key, label, unit, system, measured)


def run_startup(run: Run) -> None:
    repeats = run.args.startup_repeats
    for kind in (Ours, Mock):
        label = f"start-up to first ApiVersions (median of {repeats})"
        run.guarded("startup", label, "ms", kind.name, partial(scenarios.startup, kind, repeats))


def run_main_scenarios(run: Run, wanted: set[str]) -> None:
    args = run.args
    with Ours.start(run.consumer) as ours, Mock.start(run.consumer) as mock:
        ours.wait_ready()
        mock.wait_ready()
        run.versions, run.meta["protocol"] = scenarios.negotiate(ours, mock)
        print(f"versions: {run.meta['protocol']['used']}", file=sys.stderr)
        systems: tuple[System, ...] = (ours, mock)
        for system in systems:
            idle = Measurement(scenarios.settle_rss(system, 0.5) / 1e6, "fresh process, nothing joined")
            run.record("rss_idle", "resident memory, idle", "MB", system.name, idle)
        if "heartbeat" in wanted:
            members = args.groups * args.members_per_group
            label = f"heartbeat throughput, {members} members"
            for system in systems:
                run.guarded(
                    "heartbeat",
                    label,
                    "heartbeats/s",
                    system.name,
                    partial(
                        scenarios.heartbeat_scenario,
                        system,
                        args.groups,
                        args.members_per_group,
                        run.options(),
                        run.load,
                        args.mock_form_delay_ms,
                    ),
                )
        if "formation" in wanted:
            for size in [int(x) for x in args.formation_sizes.split(",") if x.strip()]:
                for system in systems:
                    run.guarded(
                        f"formation_{size}",
                        f"formation, {size} members, one generation",
                        "ms",
                        system.name,
                        partial(scenarios.formation, system, size, run.options(), args.formation_repeats),
                    )
        run_cg_scenarios(run, wanted, systems)


def cg_versions(run: Run, systems: tuple[System, ...]) -> dict[str, int | None]:
    """ConsumerGroupHeartbeat versions, negotiated once per run (and recorded in meta.cg_protocol)."""
    if run.cg_versions is None:
        run.cg_versions, run.meta["cg_protocol"] = cg_scenarios.negotiate(systems)
        notes = [f"{s.name}: {n}" for s in systems for n in s.consumer_notes()]
        run.meta["cg_protocol"]["settings_not_applied"] = notes
        print(f"consumer-group versions: {run.cg_versions}", file=sys.stderr)
    return run.cg_versions


def run_cg_scenarios(run: Run, wanted: set[str], systems: tuple[System, ...]) -> None:
    """The KIP-848 scenarios that share the main processes: steady heartbeats and formation."""
    args = run.args
    if not wanted & {"cg-heartbeat", "cg-formation", "cg-scale"}:
        return
    versions = cg_versions(run, systems)  # cg-scale's fresh processes use them too
    Work = Callable[[System, int], Measurement]
    jobs: list[tuple[str, str, str, Work]] = []
    if "cg-heartbeat" in wanted:
        count = args.groups * args.members_per_group
        heartbeats: Work = partial(_cg_heartbeat, args.groups, args.members_per_group, run)
        jobs.append(("cg_heartbeat", f"consumer-group heartbeats, {count} members", "heartbeats/s", heartbeats))
    if "cg-formation" in wanted:
        for size in [int(x) for x in args.cg_formation_sizes.split(",") if x.strip()]:
            formation: Work = partial(_cg_formation, size, run)
            jobs.append((f"cg_formation_{size}", f"consumer group of {size} reconciled", "ms", formation))
    for key, label, unit, work in jobs:
        for system in systems:
            version = versions[system.name]
            if version is None:
                details = run.meta["cg_protocol"]
                run.record(key, label, unit, system.name, cg_scenarios.not_served(system.name, details))
                continue
            run.guarded(key, label, unit, system.name, partial(work, system, version))


def _cg_heartbeat(groups: int, per_group: int, run: Run, system: System, version: int) -> Measurement:
    return cg_scenarios.heartbeat_scenario(system, version, groups, per_group, run.cg, run.load)


def _cg_formation(size: int, run: Run, system: System, version: int) -> Measurement:
    return cg_scenarios.formation(system, version, size, run.args.cg_formation_repeats, run.cg)


def run_scale(run: Run) -> None:
    """A fresh process per system: idle RSS, form the members, RSS again, then heartbeats."""
    args = run.args
    count = args.scale_members
    size = min(args.scale_group_size, count)
    groups = max(1, count // size)
    for kind in (Ours, Mock):
        with kind.start() as system:
            system.wait_ready()
            idle = scenarios.settle_rss(system, 0.5)
            try:
                members, formed = scenarios.form_members(
                    system, groups, size, run.options(), args.form_connections, args.mock_form_delay_ms
                )
            except Exception as error:
                reason = f"n/a: forming {groups * size} members failed: {str(error).strip().splitlines()[-1]}"
                for key, label, unit in _scale_rows(groups * size):
                    run.record(key, label, unit, kind.name, Measurement(None, reason, flagged=True))
                continue
            if len(members) < groups * size:
                reason = (
                    f"n/a: only {len(members)} of {groups * size} members formed: {formed['formation_failures'][:1]}"
                )
                for key, label, unit in _scale_rows(groups * size):
                    run.record(key, label, unit, kind.name, Measurement(None, reason, formed, flagged=True))
                continue
            loaded = scenarios.settle_rss(system, 1.0)
            note = f"{groups} groups x {size}, formed in {formed['formation_seconds']:.1f} s"
            keys = _scale_rows(len(members))
            run.record(*keys[0], kind.name, Measurement(loaded / 1e6, note, formed))
            run.record(*keys[3], kind.name, Measurement(formed["formation_seconds"], f"{groups} groups x {size}"))
            per_member = (loaded - idle) / len(members)
            detail = {"idle_rss_bytes": idle, "loaded_rss_bytes": loaded}
            run.record(*keys[1], kind.name, Measurement(per_member, "(RSS with members - idle RSS) / members", detail))
            run.guarded(
                keys[2][0],
                keys[2][1],
                keys[2][2],
                kind.name,
                partial(scenarios.heartbeat_throughput, system, members, run.options().versions, run.load),
            )


def run_cg_scale(run: Run) -> None:
    """The consumer-group scale run: a fresh process per system, idle RSS, members formed, RSS, heartbeats."""
    args = run.args
    count = args.scale_members
    size = min(args.scale_group_size, count)
    groups = max(1, count // size)
    rows = _cg_scale_rows(groups * size)
    for kind in (Ours, Mock):
        version = (run.cg_versions or {}).get(kind.name)
        if version is None:
            missing = cg_scenarios.not_served(kind.name, run.meta.get("cg_protocol", {"refused": []}))
            for row in rows:
                run.record(*row, kind.name, missing)
            continue
        with kind.start(run.consumer) as system:
            system.wait_ready()
            idle = scenarios.settle_rss(system, 0.5)
            try:
                members, formed = cg_scenarios.form_members(system, version, groups, size, run.cg)
            except Exception as error:
                reason = f"n/a: forming {groups * size} members failed: {str(error).strip().splitlines()[-1]}"
                for row in rows:
                    run.record(*row, kind.name, Measurement(None, reason, flagged=True))
                continue
            if len(members) < groups * size:
                first = formed["formation_failures"][:1]
                reason = f"n/a: only {len(members)} of {groups * size} members reconciled: {first}"
                for row in rows:
                    run.record(*row, kind.name, Measurement(None, reason, formed, flagged=True))
                continue
            loaded = scenarios.settle_rss(system, 1.0)
            note = f"{groups} groups x {size}, reconciled in {formed['formation_seconds']:.1f} s"
            run.record(*rows[0], kind.name, Measurement(loaded / 1e6, note, formed))
            per_member = (loaded - idle) / len(members)
            detail = {"idle_rss_bytes": idle, "loaded_rss_bytes": loaded}
            run.record(*rows[1], kind.name, Measurement(per_member, "(RSS with members - idle RSS) / members", detail))
            work = partial(cg_scenarios.heartbeat_throughput, system, version, members, formed["partitions"], run.load)
            run.guarded(*rows[2], kind.name, work)


def run_share(run: Run, wanted: set[str]) -> None:
    """Issue 28's figures: ours, the mock and kfake, a fresh process of each per scenario."""
    args = run.args
    load = ShareLoad(
        records=args.share_records, round_records=args.share_round_records,
        mock_round_records=args.share_mock_round_records, consumers=args.share_consumers,
        batch_records=args.share_batch_records,
        value_bytes=args.share_value_bytes, max_records=args.share_max_records, timeout_s=args.share_timeout_s,
        kfake=args.kfake, systems=tuple(x.strip() for x in args.share_systems.split(",") if x.strip()),
    )  # fmt: skip
    share_scenarios.run(wanted, load, args.groups, args.members_per_group, run.load, run.guarded, run.record)
    kfake = None if args.kfake is None else str(args.kfake)
    run.meta["share"] = {"kfake": kfake, "ours_over": share_scenarios.details_of(run.rows)}


def run_nodes(run: Run) -> None:
    """Issue 29's figures (benchmarks/nodes_scenarios.py)."""
    args = run.args
    systems = tuple(x.strip() for x in args.nodes_systems.split(",") if x.strip())
    load = nodes_scenarios.NodesLoad(
        args.cluster_nodes, args.nodes_repeats, args.kfake, systems, args.nodes_after_s, args.nodes_load_delay_ms
    )
    options = FormOptions(Versions(0, 0, 0), args.session_timeout_ms, static=args.static_members)
    run.meta["nodes"] = nodes_scenarios.run(
        load, args.groups, args.members_per_group, run.versions, options, run.load, args.mock_form_delay_ms, run.guarded
    )
    run.meta.setdefault("protocol", {"used": run.meta["nodes"]["versions"], "refused": []})


def run_durable(run: Run) -> durable.Measured:
    """Issue 27's figures: ours with a data directory against ours in memory (no mock: it has no such mode)."""
    args = run.args
    sizes = durable.Sizes(
        seconds=args.seconds, startup_repeats=args.startup_repeats, groups=args.groups,
        members=args.members_per_group, connections=args.connections, records=args.durable_records,
        recovery_groups=args.durable_groups, heartbeat_runs=1 if args.quick else 2,
    )  # fmt: skip
    return durable.measure(sizes)


def _cg_scale_rows(members: int) -> list[tuple[str, str, str]]:
    return [
        ("cg_rss_members", f"resident memory, {members} consumer-group members", "MB"),
        ("cg_bytes_per_member", "resident memory per additional consumer-group member", "B/member"),
        ("cg_heartbeat_scale", f"consumer-group heartbeats, {members} members", "heartbeats/s"),
    ]


def _scale_rows(members: int) -> list[tuple[str, str, str]]:
    return [
        ("rss_members", f"resident memory, {members} members", "MB"),
        ("bytes_per_member", "resident memory per additional member", "B/member"),
        ("heartbeat_scale", f"heartbeat throughput, {members} members", "heartbeats/s"),
        ("scale_formation", f"{members} members formed (JoinGroup and SyncGroup)", "s"),
    ]


def compute_bars(run: Run, changes: list[Change] | None) -> list[Bar]:
    """The issues' bars. One whose sizes this run did not measure shows its value but no verdict.

    ``changes``: the classic figures against --baseline (None without one).
    """
    args = run.args

    def ours(key: str) -> float | None:
        row = run.rows.get(key)
        return None if row is None else row.value("ours")

    def bar(name: str, value: float | None, target: str, ok: Callable[[float], bool], sized: str = "") -> Bar:
        if value is None:
            return Bar(name, None, target, None, "not measured in this run")
        if sized:
            return Bar(name, value, target, None, f"no verdict: {sized}")
        return Bar(name, value, target, ok(value))

    def ratio(key: str) -> float | None:
        row = run.rows.get(key)
        return None if row is None else row.ratio

    def share(few: str, many: str) -> float | None:
        base, scaled = ours(few), ours(many)
        return scaled / base if base and scaled is not None else None

    few = args.groups * args.members_per_group
    scale_sizes = "" if args.scale_members == 100_000 else f"measured with {args.scale_members} members"
    if not scale_sizes and few != 100:
        scale_sizes = f"baseline has {few} members, not 100"
    worst = min(changes, key=lambda c: c.better) if changes else None
    tolerance = args.baseline_tolerance
    regression = bar(
        "classic figures vs --baseline, worst change",
        None if worst is None else worst.better * 100,
        f">= -{tolerance:.0%}",
        lambda v: v >= -tolerance * 100,
    )
    if worst is not None:
        regression.note = f"{worst.label}, in %"
    elif args.baseline is None:
        regression.note = "no --baseline given"
    return [
        # Issue 17's bars (issue 4's were 2x, 0.80, 300 ms, 60 MB, 2048 B).
        bar("heartbeat throughput vs mock, same run", ratio("heartbeat"), ">= 3.00x", lambda v: v >= 3),
        bar(
            "throughput with 100,000 members / with 100",
            share("heartbeat", "heartbeat_scale"),
            ">= 0.85",
            lambda v: v >= 0.85,
            scale_sizes,
        ),
        bar("start-up (median)", ours("startup"), "< 150 ms", lambda v: v < 150),
        bar("idle resident memory", ours("rss_idle"), "< 40 MB", lambda v: v < 40),
        bar(
            "resident memory per additional member",
            ours("bytes_per_member"),
            "<= 1024 B",
            lambda v: v <= 1024,
            "" if args.scale_members == 100_000 else f"measured with {args.scale_members} members",
        ),
        bar(
            "100,000 members formed, ours / mock time",
            ratio("scale_formation"),
            "< 1.00",
            lambda v: v < 1,
            "" if args.scale_members == 100_000 else f"measured with {args.scale_members} members",
        ),
        bar("1000-member group formed", ours("formation_1000"), "< 1000 ms", lambda v: v < 1000),
        bar("consumer-group heartbeats vs mock, same run", ratio("cg_heartbeat"), ">= 2.00x", lambda v: v >= 2),
        bar(
            "consumer-group heartbeats with 100,000 members / with 100",
            share("cg_heartbeat", "cg_heartbeat_scale"),
            ">= 0.80",
            lambda v: v >= 0.8,
            scale_sizes,
        ),
        regression,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    raise_fd_limit()
    wanted = {x.strip() for x in args.only.split(",") if x.strip()}
    run = Run(args)
    started = time.perf_counter()
    if "startup" in wanted:
        run_startup(run)
    if wanted - SHARE_ONLY:  # the share scenarios start their own processes (three systems, not two)
        run_main_scenarios(run, wanted)
    if "scale" in wanted:
        run_scale(run)
    if "cg-scale" in wanted:
        run_cg_scale(run)
    measured_durable = run_durable(run) if "durable" in wanted else None
    if wanted & {"share-fetch", "share-heartbeat"}:
        run_share(run, wanted)
    if "heartbeat-nodes" in wanted:
        run_nodes(run)
    run.meta["seconds"] = round(time.perf_counter() - started, 1)
    order = ["startup", "heartbeat", "heartbeat_scale", *[k for k in run.rows if k.startswith("formation_")]]
    order += ["scale_formation"]
    order += ["rss_idle", "rss_members", "bytes_per_member"]
    order += ["cg_heartbeat", "cg_heartbeat_scale", *[k for k in run.rows if k.startswith("cg_formation_")]]
    order += ["cg_rss_members", "cg_bytes_per_member", "share_fetch", "share_heartbeat", *nodes_scenarios.KEYS]
    rows = [run.rows[k] for k in order if k in run.rows]
    changes = None
    if args.baseline is not None:
        changes = baseline_changes(rows, json.loads(args.baseline.read_text()))
        run.meta["baseline"] = {"path": str(args.baseline), "changes": {c.key: round(c.better, 4) for c in changes}}
    bars = compute_bars(run, changes) + share_scenarios.bars(run.rows)
    bars += nodes_scenarios.bars(run.rows, args.cluster_nodes) if "heartbeat-nodes" in wanted else []
    if measured_durable is not None:
        bars += [Bar(f"--data-dir / memory-only: {f.name}", f.ratio, f.bar, f.ok) for f in measured_durable.figures]
    doc = document(run.meta, rows, bars)
    if measured_durable is not None:
        doc["durable"] = measured_durable.document()
    print()
    print(f"{run.meta['date']}  {run.meta['command']}")
    host = run.meta["machine"]
    used = run.meta.get("protocol", {}).get("used")
    print(f"nproc {host['nproc']}, {host['cpu']}, {run.meta['librdkafka']}, versions used {used}")
    for refused in run.meta.get("protocol", {}).get("refused", []):
        print(f"  advertised but not answered: {refused}")
    if "cg_protocol" in run.meta:
        cg = run.meta["cg_protocol"]
        print(f"ConsumerGroupHeartbeat versions used {cg['used']}")
        for refused in [*cg["refused"], *cg["settings_not_applied"]]:
            print(f"  consumer groups: {refused}")
    print()
    print(table(rows))
    print()
    if measured_durable is not None:
        print("the broker with --data-dir (fsync never) beside the broker without, same run:")
        print(measured_durable.table())
        print()
    if changes is not None:
        print(baseline_text(changes, str(args.baseline)))
        print()
    print(bars_text(bars))
    if doc["flagged"]:
        print()
        print("FLAGGED:")
        for line in doc["flagged"]:
            print(f"  {line}")
    sys.stdout.flush()
    sys.stdout.flush()
    if args.json is not None:
        write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
