"""The scenarios, each run against one system with the same load generator."""

from __future__ import annotations

import socket
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import wire
from benchmarks.jobs import JobFailed, run_jobs
from benchmarks.loadgen import CLIENT_ID, FormOptions, Member, Versions
from benchmarks.systems import Mock, Ours, System, api_versions, call, startup_seconds

# The most our encoder speaks; the run uses the highest version at or below both systems' ranges
# whose answers parse (probe_versions).
ENCODER_MAX = {wire.JOIN_GROUP: 9, wire.SYNC_GROUP: 5, wire.HEARTBEAT: 4}
API_NAMES = {wire.JOIN_GROUP: "JoinGroup", wire.SYNC_GROUP: "SyncGroup", wire.HEARTBEAT: "Heartbeat"}

# The mock completes a join only when its initial rebalance delay runs out (it has no "everyone is
# here" shortcut), so each formation tries these delays in turn and keeps the first that gathers
# every member into one generation.
MOCK_DELAY_LADDER_MS = (0, 5, 10, 20, 50, 100, 200, 500, 1000, 3000)


@dataclass
class Measurement:
    value: float | None  # None: not measured (see note)
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    flagged: bool = False


def run_id() -> str:
    return uuid.uuid4().hex[:6]


# -- versions -----------------------------------------------------------------------------------


def common_ranges(ours: System, mock: System) -> tuple[dict[int, tuple[int, int]], dict[str, Any]]:
    """What ApiVersions says both answer, capped at what the generator encodes."""
    seen = {s.name: api_versions(s.host, s.port) for s in (ours, mock)}
    ranges = {}
    for key, cap in ENCODER_MAX.items():
        lows = [seen[n].get(key, (0, -1))[0] for n in seen]
        highs = [seen[n].get(key, (0, -1))[1] for n in seen]
        ranges[key] = (max(lows), min([*highs, cap]))
    report = {
        name: {API_NAMES[k]: list(v[k]) for k in ENCODER_MAX if k in v} | {"ApiVersions": list(v.get(18, (0, -1)))}
        for name, v in seen.items()
    }
    return ranges, report


def probe_versions(system: System, ranges: dict[int, tuple[int, int]]) -> tuple[Versions, list[str]]:
    """The highest version of each group API that this system really answers well.

    One throwaway single-member group per system: JoinGroup, SyncGroup, then Heartbeat, each tried
    from the highest advertised common version down until the answer parses exactly (a system may
    advertise a version whose encoding it gets wrong; the mock closes the connection on those).
    """
    system.set_join_delay(0)
    notes: list[str] = []
    tag = run_id()
    protocols = [("range", wire.subscription(["bench"]))]

    def connection() -> socket.socket:
        return socket.create_connection((system.host, system.port), timeout=10)

    joined: tuple[int, wire.JoinAnswer, str] | None = None
    low, high = ranges[wire.JOIN_GROUP]
    for v in range(high, low - 1, -1):
        group = f"probe-{tag}-{v}"
        try:
            with connection() as sock:
                body = wire.join_body(v, group, "", None, 30_000, 30_000, protocols)
                answer = wire.parse_join(v, call(sock, wire.frame(wire.JOIN_GROUP, v, 1, CLIENT_ID, body)))
                if answer.error == wire.MEMBER_ID_REQUIRED:
                    body = wire.join_body(v, group, answer.member_id, None, 30_000, 30_000, protocols)
                    answer = wire.parse_join(v, call(sock, wire.frame(wire.JOIN_GROUP, v, 2, CLIENT_ID, body)))
            if answer.error:
                raise wire.ParseError(f"error {answer.error}")
            joined = (v, answer, group)
            break
        except (OSError, wire.ParseError) as error:
            notes.append(f"{system.name} JoinGroup v{v}: {error}")
    if joined is None:
        raise RuntimeError(f"{system.name} answers no common JoinGroup version: {notes}")
    join_v, answer, group = joined

    sync_v = None
    low, high = ranges[wire.SYNC_GROUP]
    for v in range(high, low - 1, -1):
        plan = [(answer.member_id, wire.assignment("bench", [0]))]
        body = wire.sync_body(v, group, answer.generation_id, answer.member_id, None, plan)
        try:
            with connection() as sock:
                code = wire.parse_sync(v, call(sock, wire.frame(wire.SYNC_GROUP, v, 3, CLIENT_ID, body)))
            if code:
                raise wire.ParseError(f"error {code}")
            sync_v = v
            break
        except (OSError, wire.ParseError) as error:
            notes.append(f"{system.name} SyncGroup v{v}: {error}")
    if sync_v is None:
        raise RuntimeError(f"{system.name} answers no common SyncGroup version: {notes}")

    heartbeat_v = None
    low, high = ranges[wire.HEARTBEAT]
    for v in range(high, low - 1, -1):
        body = wire.heartbeat_body(v, group, answer.generation_id, answer.member_id, None)
        try:
            with connection() as sock:
                got = call(sock, wire.frame(wire.HEARTBEAT, v, 5, CLIENT_ID, body))
            if got != wire.heartbeat_answer(v, 5)[4:]:
                raise wire.ParseError(f"unexpected answer {got.hex()}")
            heartbeat_v = v
            break
        except (OSError, wire.ParseError) as error:
            notes.append(f"{system.name} Heartbeat v{v}: {error}")
    if heartbeat_v is None:
        raise RuntimeError(f"{system.name} answers no common Heartbeat version: {notes}")
    return Versions(join_v, sync_v, heartbeat_v), notes


def negotiate(ours: System, mock: System) -> tuple[Versions, dict[str, Any]]:
    ranges, advertised = common_ranges(ours, mock)
    found = [probe_versions(s, ranges) for s in (ours, mock)]
    versions = Versions(*(min(v[i] for v, _ in found) for i in range(3)))
    details = {
        "advertised": advertised,
        "used": {"JoinGroup": versions.join, "SyncGroup": versions.sync, "Heartbeat": versions.heartbeat},
        "refused": [note for _, notes in found for note in notes],
    }
    return versions, details


# -- scenarios ----------------------------------------------------------------------------------


def startup(kind: type[Ours] | type[Mock], repeats: int) -> Measurement:
    samples = [startup_seconds(kind) * 1000 for _ in range(repeats)]
    return Measurement(statistics.median(samples), f"median of {repeats}", {"samples_ms": samples})


@dataclass
class HeartbeatLoad:
    connections: int
    window: int
    refill: int
    seconds: float
    generators: int
    form_connections: int


def form_members(
    system: System, groups: int, per_group: int, options: FormOptions, form_connections: int, mock_delay_ms: int
) -> tuple[list[Member], dict[str, Any]]:
    system.set_join_delay(mock_delay_ms)
    tag = run_id()
    group_ids = [f"hb-{tag}-{g:06d}" for g in range(groups)]
    result = run_jobs(
        "form_groups",
        [
            {
                "host": system.host,
                "port": system.port,
                "group_ids": group_ids,
                "members_per_group": per_group,
                "options": options,
                "connections": form_connections,
                "max_generations": 1 if isinstance(system, Mock) else 5,
            }
        ],
    )[0]
    members: list[Member] = result["members"]
    details = {
        "groups": groups,
        "members_per_group": per_group,
        "members_formed": len(members),
        "formation_seconds": round(result["seconds"], 3),
        "formation_failures": result["failures"][:10],
        "formation_failure_count": len(result["failures"]),
    }
    if isinstance(system, Mock):
        details["mock_initial_rebalance_delay_ms"] = mock_delay_ms
    return members, details


def heartbeat_throughput(system: System, members: list[Member], versions: Versions, load: HeartbeatLoad) -> Measurement:
    return run_heartbeats(system, "heartbeats", members, {"version": versions.heartbeat}, load)


def run_heartbeats(
    system: System, job: str, members: Sequence[Any], extra: dict[str, Any], load: HeartbeatLoad
) -> Measurement:
    """A heartbeat run of ``job`` (a loadgen job taking members, connections, window, refill, seconds and the
    ``extra`` arguments) over ``load.generators`` processes that start together; answers per second summed."""
    generators = max(1, min(load.generators, load.connections))
    per_generator = max(1, load.connections // generators)
    jobs = [
        {
            "host": system.host,
            "port": system.port,
            "members": members[g::generators],
            "connections": per_generator,
            "window": load.window,
            "refill": load.refill,
            "seconds": load.seconds,
            **extra,
        }
        for g in range(generators)
    ]
    system.wait_idle()  # e.g. the mock walks every member of every group for each closed connection
    server_cpu = system.cpu_seconds()
    results = run_jobs(job, jobs, timeout_s=load.seconds + 120)
    server_cpu = system.cpu_seconds() - server_cpu
    answers = sum(r["answers"] for r in results)
    errors = sum(r["errors"] for r in results)
    codes: dict[int, int] = {}
    for r in results:
        for code, n in r["error_codes"].items():
            codes[code] = codes.get(code, 0) + n
    lost = [x for r in results for x in r["lost"]]
    rate = sum(r["answers"] / r["seconds"] for r in results if r["seconds"] > 0)
    flagged = bool(errors or lost)
    note = f"{len(members)} members, {generators * per_generator} connections x {load.window} in flight"
    if flagged:
        note += f"; FLAGGED: {errors} error answers {codes}" + (f", {lost[0]}" if lost else "")
    warm_up = {k: sum(r[k] for r in results) for k in ("resync_with_assignment",) if all(k in r for r in results)}
    return Measurement(
        rate,
        note,
        warm_up
        | {
            "answers": answers,
            "errors": errors,
            "error_codes": codes,
            "connections_lost": lost,
            "seconds": [round(r["seconds"], 3) for r in results],
            "generators": generators,
            "connections": generators * per_generator,
            "window": load.window,
            "members": len(members),
            # CPU use over the run: a generator near 100% (of one core) would be the bottleneck.
            "generator_cpu_percent": [round(100 * r["cpu_seconds"] / r["seconds"]) for r in results],
            "server_cpu_percent": round(100 * server_cpu / max(r["seconds"] for r in results)),
        },
        flagged,
    )


def heartbeat_scenario(
    system: System, groups: int, per_group: int, options: FormOptions, load: HeartbeatLoad, mock_delay_ms: int
) -> Measurement:
    try:
        members, formed = form_members(system, groups, per_group, options, load.form_connections, mock_delay_ms)
    except JobFailed as error:
        return Measurement(None, f"n/a: forming {groups * per_group} members failed: {error}".splitlines()[0])
    if len(members) < groups * per_group:
        return Measurement(
            None, f"n/a: only {len(members)} of {groups * per_group} members formed", formed, flagged=True
        )
    result = heartbeat_throughput(system, members, versions=options.versions, load=load)
    result.details.update(formed)
    return result


def formation(system: System, count: int, options: FormOptions, repeats: int, attempts: int = 3) -> Measurement:
    """One generation of ``count`` members: median time from the first JoinGroup to the last SyncGroup answer.

    Each system gets its fastest correct way there (README.md, "Group formation"):
    - the mock: ``count`` fresh members join a new group at once; its initial rebalance delay is the
      smallest of MOCK_DELAY_LADDER_MS that gathers them all into the first generation;
    - ours: with an initial rebalance delay of 0 the first generation of a new group closes at the
      first timer tick after the first JoinGroup, with whoever has been read by then (Kafka does the
      same), so the group is first formed (untimed: a partial generation, then everyone), and the
      timed round is every member rejoining at once with a changed subscription: that generation
      completes the moment the last member's JoinGroup is read.
    """
    mock = isinstance(system, Mock)
    ladder: tuple[int | None, ...] = MOCK_DELAY_LADDER_MS if mock else (None,) * attempts
    failures: list[str] = []
    for delay in ladder:
        if delay is not None:
            system.set_join_delay(delay)
        tag = run_id()
        job = {
            "host": system.host,
            "port": system.port,
            "group_ids": [f"form-{count}-{tag}-{r}" for r in range(repeats)],
            "count": count,
            "options": options,
            "max_generations": 1 if mock else 5,
            "rejoin_round": not mock,
        }
        results = run_jobs("form_one", [job])[0]["groups"]
        bad = [r["reason"] for r in results if not r["ok"]]
        if bad:
            failures.append(f"delay {delay} ms: {bad[0]}" if delay is not None else bad[0])
            continue
        key = "fresh_seconds" if mock else "rejoin_seconds"
        samples = [r[key] * 1000 for r in results]
        details: dict[str, Any] = {
            "samples_ms": [round(x, 2) for x in samples],
            "measured": "fresh group, one generation" if mock else "rejoin round of a formed group",
            "fresh_formation_ms": [round(r["fresh_seconds"] * 1000, 2) for r in results],
            "fresh_generations": [r["fresh_generations"] for r in results],
            "join_rounds": results[0]["join_rounds"],
            "failed_attempts": failures,
        }
        if mock:
            details["mock_initial_rebalance_delay_ms"] = delay
            note = f"fresh group; initial rebalance delay {delay} ms (smallest that made one generation)"
        else:
            fresh = statistics.median(details["fresh_formation_ms"])
            gens = sorted(set(details["fresh_generations"]))
            note = f"rejoin round; a fresh group took {fresh:.0f} ms, generations {gens}"
        return Measurement(statistics.median(samples), f"median of {repeats}, {note}", details)
    return Measurement(
        None,
        f"n/a: no attempt formed one generation of {count}: {failures[-1]}",
        {"failed_attempts": failures},
        flagged=True,
    )


def settle_rss(system: System, seconds: float = 0.5) -> int:
    """VmRSS once the process has been idle a while."""
    system.wait_idle()
    time.sleep(seconds)
    return system.rss_bytes()
