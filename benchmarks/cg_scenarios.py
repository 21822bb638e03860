"""The KIP-848 consumer-group scenarios (README.md, "Consumer groups (KIP-848), exactly"), each against one system.

The members are those of benchmarks/cg_loadgen.py: they join, acknowledge every assignment and heartbeat like
librdkafka 2.16 (docs/spec/consumer-groups.md section 12.3). Each scenario's groups subscribe to one topic,
created on the system first (CreateTopics on ours; the mock has no CreateTopics, so through its C API).
"""

from __future__ import annotations

import socket
import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks import wire
from benchmarks.cg_loadgen import REBALANCE_TIMEOUT_MS, CgMember, new_member_id
from benchmarks.jobs import JobFailed, run_jobs
from benchmarks.loadgen import CLIENT_ID
from benchmarks.scenarios import HeartbeatLoad, Measurement, run_heartbeats, run_id
from benchmarks.systems import System, api_versions, call

ENCODER_MAX = 1  # ConsumerGroupHeartbeat v0 and v1 (section 2.1); librdkafka 2.10-2.16 sends exactly v1 (2.5)
PROBE_TOPIC = "cg-bench-probe"
FORM_GROUPS = "benchmarks.cg_loadgen:cg_form_groups"
FORM_ONE = "benchmarks.cg_loadgen:cg_form_one"
HEARTBEATS = "benchmarks.cg_loadgen:cg_heartbeats"


@dataclass
class CgLoad:
    """The consumer-group knobs of the command line."""

    partitions: int  # of the topic a group subscribes to; 0: as many as the group has members
    form_members: int  # members forming at once (heartbeat scenarios)
    form_connections: int  # connections they share
    gap_ms: float  # pause before a heartbeat with nothing to report; 0: at once
    timeout_s: float = 60.0  # for one group to reconcile


def topic_for(partitions: int) -> str:
    return f"cg-bench-{partitions}"


def _options(version: int, partitions: int, load: CgLoad) -> dict[str, Any]:
    """benchmarks.cg_loadgen.CgOptions, as the job's keyword arguments."""
    return {
        "version": version,
        "topic": topic_for(partitions),
        "partitions": partitions,
        "gap_s": load.gap_ms / 1000,
        "timeout_s": load.timeout_s,
    }


# -- versions -------------------------------------------------------------------------------------------------------


def probe(system: System, version: int) -> None:
    """One member joins a throwaway group and leaves; raises ParseError or OSError unless both answer error 0."""
    group, member = f"cg-probe-{run_id()}", new_member_id()
    regex = {"topic_regex": ""} if version >= 1 else {}
    join = wire.consumer_heartbeat_body(
        version,
        group,
        member,
        0,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        topic_names=[PROBE_TOPIC],
        owned=(),
        **regex,
    )
    with socket.create_connection((system.host, system.port), timeout=10) as sock:
        for epoch, body in ((0, join), (-1, wire.consumer_heartbeat_body(version, group, member, -1))):
            frame = wire.frame(wire.CONSUMER_GROUP_HEARTBEAT, version, 1, CLIENT_ID, body)
            answer = wire.parse_consumer_heartbeat(call(sock, frame))
            if answer.error:
                what = "join" if epoch == 0 else "leave"
                raise wire.ParseError(f"{what} answered error {answer.error}: {answer.message}")


def negotiate(systems: tuple[System, ...]) -> tuple[dict[str, int | None], dict[str, Any]]:
    """The ConsumerGroupHeartbeat version each system is measured with: the highest both advertise (up to v1) that
    also answers a join and a leave well, else that system's own; None when it does not serve the API."""
    advertised = {s.name: api_versions(s.host, s.port).get(wire.CONSUMER_GROUP_HEARTBEAT) for s in systems}
    ranges = [r for r in advertised.values() if r is not None]
    common = max(r[0] for r in ranges), min([*(r[1] for r in ranges), ENCODER_MAX])
    used: dict[str, int | None] = {}
    refused: list[str] = []
    for system in systems:
        served = advertised[system.name]
        used[system.name] = None
        if served is None:
            refused.append(f"{system.name} does not serve ConsumerGroupHeartbeat (not in its ApiVersions)")
            continue
        mine = range(min(served[1], ENCODER_MAX), served[0] - 1, -1)
        both = [v for v in mine if common[0] <= v <= common[1]]
        for version in [*both, *(v for v in mine if v not in both)]:
            try:
                probe(system, version)
            except (OSError, wire.ParseError) as error:
                refused.append(f"{system.name} ConsumerGroupHeartbeat v{version}: {error}")
                continue
            used[system.name] = version
            break
    details = {
        "advertised": {name: None if r is None else list(r) for name, r in advertised.items()},
        "used": used,
        "refused": refused,
    }
    return used, details


def not_served(name: str, details: dict[str, Any]) -> Measurement:
    """The row of a system without a usable ConsumerGroupHeartbeat: n/a and why (flagged for ours only: the mock
    not serving the protocol is a fact about librdkafka, reported, not a failure of this broker)."""
    mine = [note for note in details["refused"] if note.startswith(name)]
    reason = mine[-1] if mine else f"{name}: no ConsumerGroupHeartbeat version answered"
    return Measurement(None, f"n/a: {reason}", flagged=name == "ours")


# -- scenarios ------------------------------------------------------------------------------------------------------


def form_members(
    system: System, version: int, groups: int, per_group: int, load: CgLoad
) -> tuple[list[CgMember], dict[str, Any]]:
    """``groups`` groups of ``per_group`` members, each reconciled (as README.md defines it)."""
    partitions = load.partitions or per_group
    system.create_topic(topic_for(partitions), partitions)
    tag = run_id()
    job = {
        "host": system.host,
        "port": system.port,
        "group_ids": [f"cg-{tag}-{g:06d}" for g in range(groups)],
        "members_per_group": per_group,
        "options": _options(version, partitions, load),
        "members_at_once": load.form_members,
        "connections": load.form_connections,
    }
    result = run_jobs(FORM_GROUPS, [job], timeout_s=max(600.0, groups * per_group / 50))[0]
    members: list[CgMember] = result["members"]
    details = {
        "groups": groups,
        "members_per_group": per_group,
        "partitions": partitions,
        "members_formed": len(members),
        "formation_seconds": round(result["seconds"], 3),
        "formation_heartbeats": result["heartbeats"],
        "formation_rejoins": result["rejoins"],
        "formation_failures": result["failures"][:10],
        "formation_failure_count": len(result["failures"]),
        "protocol_version": version,
    }
    return members, details


def heartbeat_throughput(
    system: System, version: int, members: list[CgMember], partitions: int, load: HeartbeatLoad
) -> Measurement:
    extra = {"version": version, "topic": topic_for(partitions)}
    return run_heartbeats(system, HEARTBEATS, members, extra, load)


def heartbeat_scenario(
    system: System, version: int, groups: int, per_group: int, cg: CgLoad, load: HeartbeatLoad
) -> Measurement:
    try:
        members, formed = form_members(system, version, groups, per_group, cg)
    except JobFailed as error:
        return Measurement(None, f"n/a: forming {groups * per_group} members failed: {error}".splitlines()[0])
    if len(members) < groups * per_group:
        first = formed["formation_failures"][:1]
        reason = f"n/a: only {len(members)} of {groups * per_group} members reconciled: {first}"
        return Measurement(None, reason, formed, flagged=True)
    result = heartbeat_throughput(system, version, members, formed["partitions"], load)
    result.details.update(formed)
    return result


def formation(system: System, version: int, count: int, repeats: int, cg: CgLoad) -> Measurement:
    """One group of ``count`` members: median time from the first join written to every member reconciled."""
    partitions = cg.partitions or count
    system.create_topic(topic_for(partitions), partitions)
    tag = run_id()
    job = {
        "host": system.host,
        "port": system.port,
        "group_ids": [f"cg-form-{count}-{tag}-{r}" for r in range(repeats)],
        "count": count,
        "options": _options(version, partitions, cg),
    }
    results = run_jobs(FORM_ONE, [job])[0]["groups"]
    bad = [r["reason"] for r in results if not r["ok"]]
    if bad:
        return Measurement(None, f"n/a: {bad[0]}", {"results": results}, flagged=True)
    samples = [r["seconds"] * 1000 for r in results]
    heartbeats = statistics.median(r["heartbeats"] for r in results)
    details = {
        "samples_ms": [round(x, 2) for x in samples],
        "heartbeats": [r["heartbeats"] for r in results],
        "rejoins": [r["rejoins"] for r in results],
        "final_epochs": [r["epoch"] for r in results],
        "partitions": partitions,
        "protocol_version": version,
    }
    note = f"median of {repeats}, {partitions} partitions, {heartbeats:,.0f} heartbeats answered on the way"
    return Measurement(statistics.median(samples), note, details)
