"""One run of the multi-node client tests: the cluster, a producer, both groups' members, and what to check after
a fault (cluster-and-durability.md 9, items 19-28).

``Run.settle()`` waits until both groups are Stable with three members each and every member has had a commit
acknowledged; ``Run.snapshot()`` keeps the groups (generation, member ids, epochs) and every acknowledged commit
before the fault; the checks afterwards are Kafka's outcome: no rebalance, the same members, committed offsets
never below what was acknowledged, nothing lost, nothing re-read below an acknowledged commit. ``Run.report()``
says what each member did after the fault, with timings, and writes it (``CLUSTER_CLIENTS_REPORT``: a JSON-lines
file to append to; docs/cluster.md is written from it).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from broker.control.client import ControlError
from tests.cluster.harness import CLASSIC, KIP848, PARTITIONS, TOPIC, Cluster, Member, Producer, start_member, wait

# Client log lines worth reporting: what a library says about its coordinator (or any error/warning line).
_NOTEWORTHY = re.compile(
    r"coordinator|NOT_COORDINATOR|NotCoordinator|LOAD_IN_PROGRESS|LoadInProgress|rebalanc|heartbeat|FAIL|"
    r"Connect|refused|Unexpected|UNKNOWN_MEMBER|fatal|rejoin",
    re.IGNORECASE,
)
_NUMBERS = re.compile(r"\d+(\.\d+)?")


@dataclass
class Snapshot:
    when: float  # time.time() of the fault
    groups: dict[str, dict[str, Any]]
    acknowledged: dict[str, dict[int, int]]  # per group: the highest acknowledged commit per partition


@dataclass
class Run:
    cluster: Cluster
    tmp_path: Path
    scenario: str
    members: list[Member] = field(default_factory=list)
    producer: Producer | None = None
    classic_group: str = ""
    consumer_group: str = ""
    aiokafka_group: str = ""  # aiokafka in a group of its own (begin(aiokafka_alone=True)), else ""
    coordinator: int = -1
    # Extra worker flags per client library ("aiokafka", "kafka-python", "confluent"): the leader-move tests turn
    # on the fetchers' debug lines.
    worker_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def groups(self) -> list[str]:
        return [g for g in (self.classic_group, self.consumer_group, self.aiokafka_group) if g]

    # -- set up -------------------------------------------------------------------------------------------------

    def begin(self, node_id: int | None = None, aiokafka_alone: bool = False) -> None:
        """The groups coordinated by ``node_id`` (default: the second node), the producer and six members.
        ``aiokafka_alone``: the aiokafka member in a group of its own, so that what it does (a rejoin after a
        COORDINATOR_LOAD_IN_PROGRESS, 5.1) does not rebalance the other classic members."""
        cluster = self.cluster
        self.coordinator = cluster.node_ids[1] if node_id is None else node_id
        prefix = f"cc-{self.scenario}"
        groups = cluster.groups_on(self.coordinator, prefix, 3 if aiokafka_alone else 2)
        self.classic_group, self.consumer_group = groups[:2]
        self.aiokafka_group = groups[2] if aiokafka_alone else ""
        self.producer = Producer(cluster.bootstrap)
        for name in CLASSIC:
            group = self.aiokafka_group if name == "aiokafka" and aiokafka_alone else self.classic_group
            flags = self.worker_flags.get(name, ())
            self.members.append(start_member(cluster, self.tmp_path, group, name, name, extra=flags))
        for name in KIP848:
            flags = self.worker_flags.get("confluent", ())
            member = start_member(cluster, self.tmp_path, self.consumer_group, name, "confluent", "consumer", flags)
            self.members.append(member)
        self.settle()

    def settle(self, timeout: float = 40.0) -> None:
        def ready() -> bool:
            for group in self.groups:
                try:
                    detail = self.cluster.group(group)
                except ControlError:
                    return False
                if detail.get("state") != "Stable" or len(detail.get("members", [])) != len(self.group_members(group)):
                    return False
            return all(m.events("committed") for m in self.members)

        wait("every group Stable with its members, every member committing", ready, self.seen, timeout)
        time.sleep(1.0)  # a second of steady state, so that "before" has commits of every member

    def seen(self) -> str:
        groups = {}
        for group in self.groups:
            try:
                detail = self.cluster.group(group)
                groups[group] = {k: detail.get(k) for k in ("state", "generation_id", "group_epoch")}
                groups[group]["members"] = len(detail.get("members", []))
            except ControlError as error:
                groups[group] = {"error": str(error)}
        return json.dumps(groups) + "\n" + "\n".join(m.describe() for m in self.members)

    def group_members(self, group: str) -> list[Member]:
        return [m for m in self.members if m.group == group]

    def acknowledged(self, group: str, before: float | None = None) -> dict[int, int]:
        highest: dict[int, int] = {}
        for member in self.group_members(group):
            for when, offsets in member.commits():
                if before is None or when < before:
                    for p, o in offsets.items():
                        highest[p] = max(highest.get(p, 0), o)
        return highest

    def identity(self, group: str) -> dict[str, Any]:
        """What must not change without a rebalance: the generation (classic) and the members' ids (and epochs)."""
        detail = self.cluster.group(group)
        members = sorted(
            (m["member_id"], m.get("member_epoch"), tuple(sorted(_partitions(m)))) for m in detail["members"]
        )
        return {"state": detail["state"], "generation": detail.get("generation_id"), "members": members}

    def snapshot(self) -> Snapshot:
        groups = {g: self.identity(g) for g in self.groups}
        when = time.time()
        return Snapshot(when, groups, {g: self.acknowledged(g, when) for g in groups})

    # -- checks after the fault --------------------------------------------------------------------------------

    def wait_consuming_after(self, when: float, timeout: float = 30.0, members: list[Member] | None = None) -> None:
        """Every member (of ``members``) consumes records produced after ``when`` and has a commit acknowledged
        after it."""
        assert self.producer is not None
        producer = self.producer
        lagging: list[str] = []

        def done() -> bool:
            fresh = producer.since(when)
            lagging[:] = []
            for member in self.members if members is None else members:
                got = {(e["partition"], e["offset"]) for e in member.after(when, "record")}
                if not got & fresh:
                    lagging.append(f"{member.name}: no record produced after it")
                elif not member.after(when, "committed"):
                    lagging.append(f"{member.name}: no commit acknowledged after it")
            return not lagging

        what = "every member consuming and committing records produced after the fault"
        wait(what, done, lambda: f"{lagging} {self.seen()}", timeout)

    def check_committed_not_below(self, snap: Snapshot) -> None:
        """Committed offsets, read from the coordinator as it is now, are >= those acknowledged before."""
        for group, acknowledged in snap.acknowledged.items():
            now = committed(self.cluster.bootstrap, group)
            below = {p: (o, now.get(p)) for p, o in acknowledged.items() if now.get(p, -1) < o}
            assert below == {}, (group, below)

    def finish(self, timeout: float = 30.0, groups: list[str] | None = None) -> None:
        """Stop the producer; every acknowledged record consumed by each group (of ``groups``) and committed to
        the end."""
        assert self.producer is not None
        self.producer.stop()
        assert self.producer.failed == [], self.producer.failed[:5]
        ends = self.producer.ends()
        produced = {(p, o) for p, o, _ in self.producer.acknowledged}
        for group in self.groups if groups is None else groups:

            def caught_up(group: str = group) -> bool:
                return committed(self.cluster.bootstrap, group) == ends

            wait(f"{group}: committed offsets at the end offsets {ends}", caught_up, self.seen, timeout)
            got = {(p, o) for m in self.group_members(group) for p, o, _ in m.consumed()}
            missing = sorted(produced - got)
            assert missing == [], (group, len(missing), missing[:10])  # nothing lost

    def check_no_duplicate_past_commit(self) -> None:
        """No (partition, offset) consumed again after a commit past it was acknowledged."""
        for group in self.groups:
            commits = sorted((when, p, o) for m in self.group_members(group) for when, c in m.commits()
                             for p, o in c.items())  # fmt: skip
            seen: set[tuple[int, int]] = set()
            again = []
            for p, o, when in sorted(
                ((p, o, w) for m in self.group_members(group) for p, o, w in m.consumed()), key=lambda r: r[2]
            ):
                if (p, o) in seen and any(c_when < when and c_p == p and c_o > o for c_when, c_p, c_o in commits):
                    again.append((p, o))
                seen.add((p, o))
            assert again == [], (group, len(again), again[:10])

    def check_no_rebalance(self, snap: Snapshot, until: float | None = None, groups: list[str] | None = None) -> None:
        """No callback after the fault, the same generation and member ids (and epochs), no fatal error: in
        ``groups`` (default: every group)."""
        until = time.time() if until is None else until
        groups = self.groups if groups is None else groups
        for member in self.members:
            if member.group not in groups:
                continue
            moves = [e for e in member.after(snap.when, "assigned", "revoked", "lost") if e["ts"] <= until]
            assert moves == [], (member.name, moves)
            fatal = [e for e in member.events("error") if e.get("fatal")]
            assert fatal == [], (member.name, fatal)
            assert member.worker.alive, member.describe()
        for group in groups:
            assert self.identity(group) == snap.groups[group], group

    # -- what each member did --------------------------------------------------------------------------------

    def report(
        self,
        snap: Snapshot,
        fault: str,
        per_member: dict[str, dict[str, Any]] | None = None,
        noteworthy: re.Pattern[str] | None = None,
        **extra: Any,
    ) -> list[dict[str, Any]]:
        """Per member: seconds from the fault to its next acknowledged commit, its callbacks, its errors and the
        client log lines about its coordinator (or those ``noteworthy`` matches), with ``per_member[name]`` and
        ``extra``; appended to ``CLUSTER_CLIENTS_REPORT`` when that is set."""
        rows = []
        for member in self.members:
            commits = member.after(snap.when, "committed")
            rows.append(
                {
                    "scenario": self.scenario, "fault": fault, "member": member.name, "client": member.client,
                    "protocol": member.protocol,
                    "next_commit_s": round(commits[0]["ts"] - snap.when, 3) if commits else None,
                    "callbacks": [(e["event"], e["generation"], round(e["ts"] - snap.when, 2))
                                  for e in member.after(snap.when, "assigned", "revoked", "lost")],
                    "commit_failed": _distinct(e["error"] for e in member.after(snap.when, "commit_failed")),
                    "poll_errors": _distinct(e["error"] for e in member.after(snap.when, "poll_error", "error")),
                    "log": log_lines(member.stderr(), snap.when, noteworthy=noteworthy),
                    **(per_member or {}).get(member.name, {}),
                    **extra,
                }
            )  # fmt: skip
        target = os.environ.get("CLUSTER_CLIENTS_REPORT")
        if target:
            with open(target, "a") as out:
                for row in rows:
                    out.write(json.dumps(row) + "\n")
        (self.tmp_path / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows

    def close(self) -> None:
        for member in self.members:
            member.stop()
            lines = "".join(json.dumps(e) + "\n" for e in member.events())
            (self.tmp_path / f"{member.group}-{member.name}.jsonl").write_text(lines)
        if self.producer is not None:
            self.producer.stop()
        self.cluster.close()


def _partitions(member: dict[str, Any]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a member's assignment in the control API's answer, whatever its shape:
    {topic: [partitions]}, [{"topic", "partitions"}] or null."""
    assignment = member.get("assignment") or {}
    if isinstance(assignment, dict):
        return [(str(t), int(p)) for t, ps in assignment.items() if isinstance(ps, list) for p in ps]
    entries = [e for e in assignment if isinstance(e, dict)]
    return [(str(e.get("topic", "")), int(p)) for e in entries for p in e.get("partitions", [])]


def _distinct(texts: Any) -> list[str]:
    kinds: dict[str, int] = {}
    for text in texts:
        kinds[text] = kinds.get(text, 0) + 1
    return [f"{n}x {text}" for text, n in kinds.items()]


def _stamp(line: str) -> float | None:
    """When a client log line was written: Python logging's asctime (local time) or librdkafka's epoch seconds."""
    if line.startswith("%") and line.count("|") >= 2:
        try:
            return float(line.split("|", 2)[1])
        except ValueError:
            return None
    try:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def log_count(stderr: str, text: str, since: float) -> int:
    """How many lines of a client's log written after ``since`` contain ``text``."""
    count, when = 0, 0.0
    for line in stderr.splitlines():
        when = _stamp(line) or when
        if when >= since and text in line:
            count += 1
    return count


def log_lines(
    stderr: str, since: float = 0.0, limit: int = 8, noteworthy: re.Pattern[str] | None = None
) -> list[str]:
    """The distinct noteworthy lines of a client's log written after ``since`` (numbers folded), with counts;
    ``noteworthy`` (default: about the coordinator, or an error) says which lines are."""
    kinds: dict[str, tuple[str, int]] = {}
    when = 0.0
    pattern = _NOTEWORTHY if noteworthy is None else noteworthy
    for line in stderr.splitlines():
        when = _stamp(line) or when  # a line without a stamp (a traceback's) is its first line's
        if when < since or not pattern.search(line):
            continue
        key = _NUMBERS.sub("N", line.split(" ", 2)[-1] if line[:4].isdigit() else line)
        first, count = kinds.get(key, (line, 0))
        kinds[key] = (first, count + 1)
    return [f"{count}x {first[:220]}" for first, count in list(kinds.values())[:limit]]


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets, asked of its coordinator as it is now (OffsetFetch)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        found = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    return {p: offset for p, offset in found.items() if offset is not None}


__all__ = ["PARTITIONS", "Run", "Snapshot", "committed", "log_count", "log_lines"]
