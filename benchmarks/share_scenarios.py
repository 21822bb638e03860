"""The KIP-932 share-group scenarios (README.md, "Share groups (issue 28, in progress)"), each against one system.

Three systems, each in a fresh process per scenario: ours, librdkafka's mock cluster and franz-go's kfake (when a
kfake binary is given: ``--kfake PATH`` or the ``KFAKE`` environment variable). The members are those of
benchmarks/share_loadgen.py.

* ``share_fetch``: records/s delivered and acknowledged to ``consumers`` share consumers of one partition, in
  rounds (``fetch_scenario``). Each round's records are produced first (Produce v7, ``batch_records`` records of
  ``value_bytes`` bytes per batch), the consumers join, the group starts at the earliest offset
  (IncrementalAlterConfigs GROUP ``share.auto.offset.reset=earliest`` on ours and kfake; the mock has no group
  configs, so its cluster-wide ``rd_kafka_mock_sharegroup_set_auto_offset_reset``), then the clock runs from the
  first ShareFetch to the answer that completes the acknowledgement of every record of the round.
* ``share_heartbeat``: steady ShareGroupHeartbeats/s of ``groups`` x ``members_per_group`` settled members, with the
  classic scenario's load (connections, window, refill, seconds).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import share_wire, wire
from benchmarks.jobs import run_jobs
from benchmarks.report import Bar, Row
from benchmarks.scenarios import HeartbeatLoad, Measurement, run_heartbeats, run_id
from benchmarks.systems import Kfake, Mock, Ours, System, api_versions, read_answer

FETCH = "benchmarks.share_loadgen:share_fetch_run"
FORM = "benchmarks.share_loadgen:share_form_groups"
HEARTBEATS = "benchmarks.share_loadgen:share_heartbeats"
PEERS = ("mock", "kfake")
# What librdkafka 2.16 sends (section 12.2-12.3): exactly v1 of each; a system must advertise it.
NEEDED = {wire.SHARE_GROUP_HEARTBEAT: 1, wire.SHARE_FETCH: 1, wire.SHARE_ACKNOWLEDGE: 1, wire.PRODUCE: 7}


@dataclass
class ShareLoad:
    """The share-group knobs of the command line."""

    records: int = 400_000
    round_records: int = 0  # produced, then consumed, per round; 0: all in one round
    mock_round_records: int = 40_000  # the mock's rounds: it keeps 5 MB of a partition
    consumers: int = 3
    batch_records: int = 100
    value_bytes: int = 100
    max_records: int = 500  # MaxRecords = BatchSize = librdkafka's max.poll.records
    max_wait_ms: int = 500  # librdkafka's fetch.wait.max.ms
    timeout_s: float = 60.0  # for one system to acknowledge every record; past it the rate so far is reported
    kfake: Path | None = None
    systems: tuple[str, ...] = ("ours", *PEERS)  # which to run (CI: ours only)


Guarded = Callable[[str, str, str, str, Callable[[], Measurement]], None]
Recorder = Callable[[str, str, str, str, Measurement], None]


def unserved(system: System) -> str | None:
    """Why ``system`` cannot run the scenarios (an API version of NEEDED not advertised), or None."""
    served = api_versions(system.host, system.port)
    missing = [f"{key} v{v}" for key, v in NEEDED.items() if not (served.get(key, (99, -1))[0] <= v <= served[key][1])]
    return f"{system.name} does not advertise {', '.join(missing)}" if missing else None


def produce(system: System, topic: str, load: ShareLoad, count: int, in_flight: int = 32) -> int:
    """``count`` records into partition 0 of ``topic``, ``load.batch_records`` to a batch, one batch per Produce
    (Kafka's v3+ rule: exactly one batch per partition), ``in_flight`` requests written at a time."""
    batch = share_wire.record_batch(load.batch_records, load.value_bytes)
    full, rest = divmod(count, load.batch_records)
    batches = [batch] * full + ([share_wire.record_batch(rest, load.value_bytes)] if rest else [])
    with socket.create_connection((system.host, system.port), timeout=30) as sock:
        for start in range(0, len(batches), in_flight):
            chunk = batches[start : start + in_flight]
            frames = [wire.frame(wire.PRODUCE, 7, start + n, "bench", share_wire.produce_body(topic, 0, b))
                      for n, b in enumerate(chunk)]  # fmt: skip
            sock.sendall(b"".join(frames))
            for _ in chunk:
                for code, _ in share_wire.parse_produce(read_answer(sock)):
                    if code:
                        raise RuntimeError(f"Produce to {topic} answered error {code}")
    return count


_SUMMED = ("seconds", "cpu_seconds", "delivered", "redelivered", "acknowledged", "fetches", "empty_fetches",
           "acknowledges", "keep_alive_errors", "join_rejoins")  # fmt: skip


def fetch_scenario(system: System, load: ShareLoad) -> Measurement:
    """Rounds until ``load.records``: produce (untimed), then consumers join the group and (timed) fetch and
    acknowledge every record of the round, then leave. One round (``load.round_records`` 0) but on the mock, whose
    rounds are ``load.mock_round_records``: librdkafka 2.16's mock keeps 5 MB of each partition
    (``rd_kafka_mock_partition`` ``max_size``), so records produced beyond that are gone before anyone fetches them.
    The group, its share-partition and its SPSO persist from round to round. Rounds cost the faster systems: the end
    of each round waits for a member whose last fetch found nothing and long-polls (MaxWaitMs) with its
    acknowledgements on board."""
    reason = unserved(system)
    if reason is not None:
        return Measurement(None, f"n/a: {reason}", flagged=system.name == "ours")
    tag = run_id()
    topic, group = f"share-bench-{tag}", f"sg-bench-{tag}"
    system.create_topic(topic, 1)
    if isinstance(system, Mock):
        answer = system.command("share-reset 1")
        if answer != "ok":
            return Measurement(None, f"n/a: the mock cannot start share groups at the earliest offset: {answer}")
    totals: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    totals |= {"rounds": [], "per_member": [0] * load.consumers, "ack_errors": {}, "timed_out": False}
    server_cpu = 0.0
    left, first = load.records, True
    per_round = (load.mock_round_records if isinstance(system, Mock) else load.round_records) or load.records
    while left > 0 and not totals["timed_out"]:
        count = produce(system, topic, load, min(per_round, left))
        left -= count
        options = {"records": count, "max_records": load.max_records, "batch_size": load.max_records,
                   "max_wait_ms": load.max_wait_ms, "timeout_s": max(load.timeout_s - totals["seconds"], 1.0)}
        job = {
            "host": system.host, "port": system.port, "group_id": group, "topic": topic, "consumers": load.consumers,
            "options": options, "set_earliest": first and not isinstance(system, Mock),
            "exact": not isinstance(system, Mock),
        }  # fmt: skip
        first = False
        system.wait_idle()
        cpu = system.cpu_seconds()
        result = run_jobs(FETCH, [job], timeout_s=load.timeout_s + 120)[0]
        server_cpu += system.cpu_seconds() - cpu
        for key in _SUMMED:
            totals[key] += result[key]
        totals["per_member"] = [a + b for a, b in zip(totals["per_member"], result["per_member"], strict=True)]
        for code, n in result["ack_errors"].items():
            totals["ack_errors"][code] = totals["ack_errors"].get(code, 0) + n
        totals["rounds"].append({
            "records": count, "seconds": round(result["seconds"], 4), "ok": result["ok"], "reason": result["reason"],
            "assigned_members": result["assigned_members"],
        })  # fmt: skip
        totals["timed_out"] = result["timed_out"]
        if not result["ok"] and not result["timed_out"]:
            return Measurement(None, f"n/a: round {len(totals['rounds'])}: {result['reason']}", totals, flagged=True)
    seconds = max(totals["seconds"], 1e-9)
    details = totals | {
        "records": load.records, "round_records": per_round, "batch_records": load.batch_records,
        "value_bytes": load.value_bytes, "consumers": load.consumers, "max_records": load.max_records,
        "generator_cpu_percent": round(100 * totals["cpu_seconds"] / seconds),
        "server_cpu_percent": round(100 * server_cpu / seconds),
        "server_cpu_us_per_record": round(1e6 * server_cpu / max(totals["acknowledged"], 1), 3),
    }  # fmt: skip
    mine = system.name == "ours"
    rate = totals["acknowledged"] / seconds
    rounds = len(totals["rounds"])
    assigned = min(r["assigned_members"] for r in totals["rounds"])
    if totals["timed_out"]:  # what it could do in the time given, said so
        note = (f"partial: {totals['acknowledged']:,} of {load.records:,} acknowledged in the {load.timeout_s:.0f} s "
                f"allowed ({rounds} rounds), {totals['fetches']:,} ShareFetches ({totals['empty_fetches']:,} empty); "
                f"{assigned} of {load.consumers} assigned the partition")  # fmt: skip
        return Measurement(rate, note, details, flagged=mine)
    share = "/".join(f"{n:,}" for n in totals["per_member"])
    note = (
        f"{load.consumers} consumers, 1 partition, {load.records:,} x {load.value_bytes} B in batches of "
        f"{load.batch_records}, {rounds} round{'s' if rounds > 1 else ''}; {totals['fetches']:,} ShareFetches "
        f"({totals['empty_fetches']} empty), delivered {share}; {assigned} of {load.consumers} assigned the partition"
    )
    flagged = bool(totals["redelivered"] or totals["ack_errors"] or totals["keep_alive_errors"])
    if flagged:
        note += (f"; FLAGGED: {totals['redelivered']} redelivered, acknowledgement errors {totals['ack_errors']}, "
                 f"{totals['keep_alive_errors']} heartbeat errors")  # fmt: skip
    return Measurement(rate, note, details, flagged)


def heartbeat_scenario(system: System, groups: int, per_group: int, load: HeartbeatLoad) -> Measurement:
    reason = unserved(system)
    if reason is not None:
        return Measurement(None, f"n/a: {reason}", flagged=system.name == "ours")
    topic = f"share-hb-{per_group}"
    system.create_topic(topic, per_group)
    tag = run_id()
    job = {
        "host": system.host, "port": system.port, "group_ids": [f"sg-hb-{tag}-{g:05d}" for g in range(groups)],
        "members_per_group": per_group, "topic": topic, "connections": min(16, groups * per_group),
        "exact": not isinstance(system, Mock),
    }  # fmt: skip
    formed = run_jobs(FORM, [job])[0]
    result = run_heartbeats(system, HEARTBEATS, formed["members"], {"exact": not isinstance(system, Mock)}, load)
    result.details.update({"formation_seconds": round(formed["seconds"], 3), "partitions": per_group})
    return result


def _start(name: str, load: ShareLoad) -> System:
    if name == "ours":
        return Ours.start()
    if name == "mock":
        return Mock.start()
    assert load.kfake is not None
    return Kfake.start(load.kfake)


def run(wanted: set[str], load: ShareLoad, groups: int, per_group: int, heartbeats: HeartbeatLoad,
        guarded: Guarded, record: Recorder) -> None:  # fmt: skip
    """Each wanted scenario on each system, a fresh process per scenario and system; kfake's rows say why not
    when no binary was given."""
    jobs: list[tuple[str, str, str, Callable[[System], Measurement]]] = []
    if "share-fetch" in wanted:
        label = f"share records/s acknowledged, {load.consumers} consumers of 1 partition"

        def fetch(system: System) -> Measurement:
            return fetch_scenario(system, load)

        jobs.append(("share_fetch", label, "records/s", fetch))
    if "share-heartbeat" in wanted:

        def beat(system: System) -> Measurement:
            return heartbeat_scenario(system, groups, per_group, heartbeats)

        jobs.append(("share_heartbeat", f"share-group heartbeats, {groups * per_group} members", "heartbeats/s", beat))
    for key, label, unit, work in jobs:
        for name in ("ours", *PEERS):
            if name not in load.systems:
                continue
            if name == "kfake" and load.kfake is None:
                record(key, label, unit, name, Measurement(None, "n/a: no kfake binary given (--kfake PATH or KFAKE)"))
                continue

            def measured(name: str = name, work: Callable[[System], Measurement] = work) -> Measurement:
                with _start(name, load) as system:
                    system.wait_ready()
                    return work(system)

            guarded(key, label, unit, name, measured)


def bars(rows: dict[str, Row]) -> list[Bar]:
    """Issue 28's bar: share records/s >= 2x the faster of the mock and kfake, same run; the heartbeats beside it
    (the issue sets no figure for them; consumer groups' bar is 2x the mock)."""
    out = []
    for key, name, bar in (
        ("share_fetch", "share records/s vs the faster of mock and kfake, same run", 2.0),
        ("share_heartbeat", "share-group heartbeats vs the faster of mock and kfake, same run", None),
    ):
        row = rows.get(key)
        ours = None if row is None else row.value("ours")
        peers = {} if row is None else {p: row.value(p) for p in PEERS if row.value(p)}
        if ours is None or not peers:
            out.append(Bar(name, None, ">= 2.00x" if bar else "", None, "not measured in this run"))
            continue
        faster = max(peers, key=lambda p: peers[p] or 0.0)
        value = ours / (peers[faster] or 1.0)
        missing = [p for p in PEERS if p not in peers]
        note = f"against {faster}" + (f"; {', '.join(missing)} not measured" if missing else "")
        if bar is None:
            out.append(Bar(name, value, "no bar set", None, note))
        else:
            verdict = None if missing else value >= bar
            out.append(Bar(name, value, f">= {bar:.2f}x", verdict, note if not missing else f"no verdict: {note}"))
    return out


def details_of(rows: dict[str, Row]) -> dict[str, Any]:
    """Ours over each peer, per share row (for the JSON's meta)."""
    return {
        key: {p: (row.value("ours") or 0) / v for p in PEERS if (v := row.value(p))}
        for key, row in rows.items()
        if key.startswith("share_") and row.value("ours")
    }
