"""The synthetic event-log generator: valid version-2 logs, the broker's exact fields and order, realistic histories.

The fields of each event are checked against what the real coordinator emits (driven on a manual clock through
the same scenarios, classic and KIP-848 consumer groups), and every generated log is replayed through a small
checker of the coordinator's rules: state transitions, who is a member, generations, assignments that cover the
partitions with one owner each, ``moved`` recomputed from the previous assignment, ``rebalance_ms`` and the session
expiry's timing; for consumer groups, epochs, targets and reconciliation steps (``consumer_replay.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.analytics import generate as gen
from broker.analytics.synthetic.world import TOPICS
from broker.coordinator.config import GroupConfig
from broker.coordinator.messages import LeavingMember
from broker.events.names import FORMAT_VERSION
from tests.analytics.consumer_log import every_event
from tests.analytics.consumer_replay import ConsumerReplay
from tests.coordinator.harness import subscription
from tests.coordinator.test_events import EventHarness, assign

ROOT = Path(__file__).resolve().parents[2]
EVENTS_DOC = ROOT / "docs" / "events.md"
COMMON = ["v", "seq", "ts_ms", "run_id", "event", "group_id"]
STATES = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}
# The coordinator's legal transitions (broker/coordinator/group.py), as (from, to).
TRANSITIONS = {
    ("Empty", "PreparingRebalance"),
    ("PreparingRebalance", "CompletingRebalance"),
    ("PreparingRebalance", "Empty"),
    ("CompletingRebalance", "PreparingRebalance"),
    ("CompletingRebalance", "Stable"),
    ("Stable", "PreparingRebalance"),
} | {(state, "Dead") for state in STATES}
PARTITIONS = dict(TOPICS)


def records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


# -- the fields: the real coordinator's, in its order ---------------------------------------------------------------


def real_coordinator_fields() -> dict[str, list[list[str]]]:
    """Every event the generator writes, as the real coordinator emits it: the keys of each record, in order."""
    h = EventHarness(config=GroupConfig(initial_rebalance_delay_ms=0), topics={"orders": 4})
    protocols = (("range", subscription("orders")),)
    joins = [h.join_new(client_id=f"c{i}", protocols=protocols, reason="starting") for i in range(3)]
    h.advance(0)
    a, b, c = (j.value.member_id for j in joins)
    h.sync(b, 1)
    h.sync(c, 1)
    h.sync(a, 1, {a: assign(orders=[0, 1]), b: assign(orders=[2]), c: assign(orders=[3])})
    h.advance(5000)
    h.heartbeat(a, 1)
    h.heartbeat(b, 1)
    h.advance(5000)  # c sent no heartbeat: it expires; a and b rejoin
    h.join(a, protocols=protocols, reason="group is already rebalancing")
    h.join(b, protocols=protocols)
    h.sync(b, 2)
    h.sync(a, 2, {a: assign(orders=[0, 1]), b: assign(orders=[2, 3])})
    h.leave(LeavingMember(b, reason="the consumer is being closed"))
    h.join(a, protocols=protocols)
    h.sync(a, 3, {a: assign(orders=[0, 1, 2, 3])})
    static = h.join("", instance_id="s-0", client_id="s", protocols=protocols)
    h.join(a, protocols=protocols)
    s0 = static.value.member_id
    h.sync(s0, 4)
    h.sync(a, 4, {a: assign(orders=[0, 1]), s0: assign(orders=[2, 3])})
    h.join("", instance_id="s-0", client_id="s", protocols=protocols)  # a static member bounced: fenced
    h.coordinator.kick("group", a)
    h.leave(LeavingMember("", group_instance_id="s-0"))
    h.coordinator.delete_groups(["group"])
    fields: dict[str, list[list[str]]] = {}
    for record in [*h.take(), *every_event().records]:  # classic, then consumer groups (version 2)
        keys = list(record)
        if keys not in fields.setdefault(record["event"], []):
            fields[record["event"]].append(keys)
    return fields


def test_every_event_has_the_real_coordinators_fields_in_its_order(tmp_path: Path) -> None:
    real = real_coordinator_fields()
    log = tmp_path / "events.jsonl"
    gen.generate(log, 30_000, seed=1)
    seen: dict[str, set[tuple[str, ...]]] = {}
    for record in records(log):
        seen.setdefault(record["event"], set()).add(tuple(record))
    for event, shapes in seen.items():
        if event in ("offsets_expired",):  # no fields beyond the common ones (the harness cannot expire offsets)
            assert shapes == {tuple(COMMON)}
            continue
        assert event in real, f"{event} is not something the coordinator emits in these scenarios"
        assert shapes <= {tuple(keys) for keys in real[event]}, (event, shapes, real[event])


def test_every_event_name_and_field_is_documented(tmp_path: Path) -> None:
    doc = EVENTS_DOC.read_text(encoding="utf-8")
    log = tmp_path / "events.jsonl"
    gen.generate(log, 20_000, seed=2)
    for record in records(log):
        assert f"### `{record['event']}`" in doc, record["event"]
        for key in record:
            assert f"`{key}`" in doc, (record["event"], key)


# -- the replay checker -------------------------------------------------------------------------------------------


@dataclass
class GroupReplay:
    state: str = "Empty"
    generation: int = 0
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # member id -> its member_joined fields
    rejoined: set[str] = field(default_factory=set)
    rebalance_started_ms: int | None = None
    previous: dict[str, dict[str, list[int]]] | None = None  # the last sync's owners
    last: str | None = None  # the previous event of this group (causal order within a step)


@dataclass
class Replay:
    """Replays one file; fails on the first record that breaks a rule of the coordinator."""

    counts: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    runs: list[str] = field(default_factory=list)
    protocols: Counter[str] = field(default_factory=Counter)
    restarts_in_completing: int = 0
    revocations: int = 0
    static_replaced_without_rebalance: int = 0
    expiries_during_rebalance: int = 0
    consumer: ConsumerReplay = field(default_factory=ConsumerReplay)

    def events(self) -> int:
        """Every record replayed, classic and consumer groups'."""
        return sum(self.counts.values()) + sum(self.consumer.counts.values())

    def check(self, path: Path) -> None:
        # A group's topics: every topic any generation of it was assigned (one generation may leave one unowned).
        self.topics: dict[str, set[str]] = {}
        for record in records(path):
            for topics in (record.get("assignments") or {}).values():
                self.topics.setdefault(record["group_id"], set()).update(topics)
        groups: dict[str, GroupReplay] = {}
        seq = 0
        ts = 0
        for record in records(path):
            event = record["event"]
            assert list(record)[:6] == COMMON and record["v"] == FORMAT_VERSION
            if not self.runs or record["run_id"] != self.runs[-1]:
                assert record["run_id"] not in self.runs, "a run continues after another began"
                assert record["seq"] == 1, "a run starts at seq 1"
                assert record["ts_ms"] >= ts, "a new run starts after the last"
                self.runs.append(record["run_id"])
                groups = {}  # the broker forgot every group
                self.consumer.new_run()
            else:
                assert record["seq"] == seq + 1, "seq grows by one"
                assert record["ts_ms"] >= ts, "the clock never goes back within a run"
            seq, ts = record["seq"], record["ts_ms"]
            if record.get("group_type") == "consumer":
                assert list(record)[-1] == "group_type" and record["group_id"] not in groups
                self.consumer.check(record)
                continue
            assert "group_type" not in record and record["group_id"] not in self.consumer.groups
            self.counts[event] += 1
            g = groups.get(record["group_id"])
            if event == "group_created":
                assert g is None or g.state == "Dead", "created twice"
                groups[record["group_id"]] = GroupReplay(last=event)
                continue
            assert g is not None, f"{event} for a group never created: {record}"
            assert g.state != "Dead" or event == "group_deleted", record
            getattr(self, f"on_{event}")(g, record)
            g.last = event

    # -- the events

    def on_state_changed(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert (r["from"], r["to"]) in TRANSITIONS, r
        assert r["from"] == g.state, (g.state, r)
        g.state = r["to"]
        if r["to"] in ("CompletingRebalance", "Empty") and r["from"] == "PreparingRebalance":
            g.generation += 1
        assert r["generation_id"] == g.generation, (g.generation, r)

    def on_rebalance_started(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.last == "state_changed" and g.state == "PreparingRebalance", "rebalance_started follows its transition"
        assert r["generation_id"] == g.generation and r["members"] == len(g.members), (r, len(g.members))
        self.causes[r["cause"]] += 1
        if r["previous_state"] == "CompletingRebalance":
            self.restarts_in_completing += 1
        if r["cause"] == "member_rejoined":
            assert r["previous_state"] == "Stable"
        assert (
            r["member_id"] is None
            or r["member_id"] in g.members
            or r["cause"]
            in (
                "member_expired",
                "member_left",
                "member_kicked",
                "sync_timeout",
            )
        )
        g.rebalance_started_ms = r["ts_ms"]
        g.rejoined = {
            m
            for m in g.members
            if r["cause"] in ("member_joined", "member_rejoined", "static_member_replaced") and m == r["member_id"]
        }

    def on_member_joined(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert r["member_id"] not in g.members
        prefix = r["group_instance_id"] or r["client_id"]
        assert r["member_id"].startswith(prefix + "-") and len(r["member_id"]) == len(prefix) + 37
        assert r["protocol_type"] == "consumer" and r["session_timeout_ms"] < r["rebalance_timeout_ms"]
        assert all(m.get("group_instance_id") != r["group_instance_id"] for m in g.members.values()) or (
            r["group_instance_id"] is None
        ), "a static member joins once"
        g.members[r["member_id"]] = r
        g.rejoined.add(r["member_id"])
        self.protocols[r["protocols"][0]] += 1

    def on_member_rejoined(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert r["member_id"] in g.members, "only a member rejoins"
        assert r["state"] == g.state and g.state in ("PreparingRebalance", "Stable")
        if g.state == "Stable":
            self.revocations += 1
        assert r["member_id"] not in g.rejoined or g.state == "Stable"
        g.rejoined.add(r["member_id"])

    def _gone(self, g: GroupReplay, r: dict[str, Any]) -> None:
        member = g.members.pop(r["member_id"], None)
        assert member is not None, f"{r['event']} of a member that never joined: {r}"
        assert r["client_id"] == member["client_id"] and r["group_instance_id"] in (None, member["group_instance_id"])
        g.rejoined.discard(r["member_id"])

    def on_member_left(self, g: GroupReplay, r: dict[str, Any]) -> None:
        self._gone(g, r)
        self.causes[f"left:{r['cause']}"] += 1
        if r["cause"] == "rejoin_timeout":
            assert g.state == "PreparingRebalance" and r["ts_ms"] - g.rebalance_started_ms >= 60_000

    def on_member_expired(self, g: GroupReplay, r: dict[str, Any]) -> None:
        self._gone(g, r)
        self.causes[f"expired:{r['cause']}"] += 1
        if r["cause"] == "session_timeout":
            # SIGKILL: the timer fires just after the session timeout since the last heartbeat.
            assert r["session_timeout_ms"] <= r["since_last_heartbeat_ms"] <= r["session_timeout_ms"] + 10, r
        else:
            assert r["cause"] == "kicked" and r["since_last_heartbeat_ms"] < r["session_timeout_ms"]
        if g.state == "PreparingRebalance":
            self.expiries_during_rebalance += 1

    def on_member_fenced(self, g: GroupReplay, r: dict[str, Any]) -> None:
        member = g.members.pop(r["member_id"])
        assert r["group_instance_id"] == member["group_instance_id"] is not None
        assert r["new_member_id"].startswith(r["group_instance_id"] + "-")
        g.members[r["new_member_id"]] = member  # it moves to the end of the join order, as in the broker
        if g.state == "Stable":
            self.static_replaced_without_rebalance += 1
        if g.state != "Stable" or r["member_id"] in g.rejoined:
            g.rejoined.add(r["new_member_id"])
        g.rejoined.discard(r["member_id"])
        if g.previous is not None and r["member_id"] in g.previous:
            pass  # the broker's view keeps the old id until the next sync: moved then names it

    def on_join_completed(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.last == "state_changed" and r["generation_id"] == g.generation
        assert r["members"] == list(g.members), "the generation is every member, in join order"
        assert set(g.members) <= g.rejoined, "the join completes only when every member has (re)joined"
        assert r["state"] == g.state
        if r["state"] == "Empty":
            assert r["members"] == [] and r["leader"] is None and r["protocol"] is None
        else:
            assert r["leader"] in g.members and r["protocol"] in ("range", "cooperative-sticky")
        g.rejoined = set()

    def on_sync_completed(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.last == "state_changed" and g.state == "Stable" and r["generation_id"] == g.generation
        assignments: dict[str, dict[str, list[int]]] = r["assignments"]
        assert list(assignments) == list(g.members), "every member, in join order"
        owners: dict[tuple[str, int], str] = {}
        for member_id, topics in assignments.items():
            assert list(topics) == sorted(topics)
            for topic, partitions in topics.items():
                assert partitions == sorted(set(partitions))
                for p in partitions:
                    assert 0 <= p < PARTITIONS[topic]
                    assert (topic, p) not in owners, f"{topic}-{p} has two owners"
                    owners[(topic, p)] = member_id
        total = sum(PARTITIONS[t] for t in self.topics[r["group_id"]])
        cooperative = r["protocol"] == "cooperative-sticky"
        assert r["rebalance_protocol"] == ("cooperative" if cooperative else "eager")
        if cooperative:
            assert r["unowned"] == total - len(owners)
        else:
            assert r["unowned"] == 0 and len(owners) == total, "range covers every partition"
        # moved: recomputed from the previous generation's owners.
        before = {(t, p): m for m, ts in (g.previous or {}).items() for t, ps in ts.items() for p in ps}
        expected = []
        if g.previous is not None:
            for key in sorted(before.keys() | owners.keys()):
                if before.get(key) != owners.get(key):
                    expected.append(
                        {"topic": key[0], "partition": key[1], "from": before.get(key), "to": owners.get(key)}
                    )
        assert r["moved"] == expected
        assert r["rebalance_ms"] == r["ts_ms"] - g.rebalance_started_ms
        for member_id, size in r["assignment_bytes"].items():
            topics = assignments[member_id]
            assert size == 10 + sum(6 + len(t) + 4 * len(ps) for t, ps in topics.items())
        g.previous = {m: ts for m, ts in assignments.items() if ts}

    def on_group_emptied(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.last == "join_completed" and g.state == "Empty" and r["generation_id"] == g.generation
        g.previous = None

    def on_offsets_expired(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.state == "Empty" and not g.members

    def on_group_deleted(self, g: GroupReplay, r: dict[str, Any]) -> None:
        assert g.last == "state_changed" and g.state == "Dead" and not g.members
        assert r["reason"] in ("deleted by DeleteGroups", "empty group without offsets expired")


def test_a_generated_log_replays_by_the_coordinators_rules(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    result = gen.generate(log, 60_000, seed=3, restarts=2)
    replay = Replay()
    replay.check(log)
    assert replay.events() == result.events >= 60_000
    assert len(replay.runs) == result.runs == 3
    # Realism: the whole cast shows up.
    for event in (
        "group_created", "member_joined", "member_rejoined", "member_left", "member_expired", "member_fenced",
        "rebalance_started", "join_completed", "sync_completed", "state_changed", "group_emptied", "group_deleted",
    ):  # fmt: skip
        assert replay.counts[event] > 0, event
    for cause in ("member_joined", "member_rejoined", "member_left", "member_expired", "static_member_replaced"):
        assert replay.causes[cause] > 0, cause
    assert replay.causes["left:leave_group"] > 0 and replay.causes["expired:session_timeout"] > 0
    assert replay.protocols["range"] > 0 and replay.protocols["cooperative-sticky"] > 0
    assert replay.restarts_in_completing > 0, "rebalances restarted while CompletingRebalance"
    assert replay.revocations > 0, "cooperative groups revoke, then rebalance again"
    assert replay.static_replaced_without_rebalance > 0
    assert replay.expiries_during_rebalance > 0, "a dead member holds a rebalance up until it expires"
    # KIP-848 consumer groups, a share of them: every event, cause, group state and member state.
    consumer = replay.consumer
    for event in (
        "group_created", "member_joined", "group_epoch_bumped", "target_assignment_computed", "member_reconciled",
        "state_changed", "member_left", "member_expired", "group_emptied",
    ):  # fmt: skip
        assert consumer.counts[event] > 0, event
    assert set(consumer.causes) == {"subscription_changed", "member_left", "member_expired", "left:left",
                                    "left:expired"}  # fmt: skip
    assert set(consumer.states) == {"Empty", "Assigning", "Reconciling", "Stable"}
    assert set(consumer.member_states) == {"stable", "unrevoked_partitions", "unreleased_partitions"}


def test_rare_twists_appear_in_a_bigger_log(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    gen.generate(log, 300_000, seed=4)
    replay = Replay()
    replay.check(log)
    for cause in ("forced", "member_kicked", "sync_timeout"):
        assert replay.causes[cause] > 0, cause
    assert replay.causes["left:rejoin_timeout"] > 0 and replay.causes["left:sync_timeout"] > 0
    assert replay.counts["offsets_expired"] > 0
    assert replay.consumer.counts["group_deleted"] > 0, "consumer groups are deleted too"


# -- determinism, files, bad lines, the command line ---------------------------------------------------------------


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    gen.generate(first, 5000, seed=7, bad_lines=2)
    gen.generate(second, 5000, seed=7, bad_lines=2)
    gen.generate(other, 5000, seed=8, bad_lines=2)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()


def test_several_files_are_several_brokers_with_their_own_groups(tmp_path: Path) -> None:
    out = tmp_path / "logs"
    result = gen.generate(out, 20_000, seed=5, files=4)
    assert [p.name for p in result.paths] == [f"events-{k:05d}.jsonl" for k in range(4)]
    groups: list[set[str]] = []
    events = 0
    for path in result.paths:
        replay = Replay()
        replay.check(path)
        events += replay.events()
        groups.append({r["group_id"] for r in records(path)})
    assert events == result.events and abs(events - 20_000) < 100
    assert all(not (a & b) for i, a in enumerate(groups) for b in groups[i + 1 :]), "each group has one coordinator"


def test_bad_lines_are_mixed_in_without_taking_a_seq(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    result = gen.generate(log, 3000, seed=6, bad_lines=9)
    good, bad = [], []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad.append(line)
            continue
        (good if isinstance(record.get("seq"), int) else bad).append(line)  # no seq, or a mistyped one
    assert len(bad) == result.bad_lines == 9
    assert len(good) == result.events
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(good) + "\n", encoding="utf-8")
    Replay().check(clean)


def test_the_command_line_writes_a_log(tmp_path: Path) -> None:
    out = tmp_path / "cli.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "broker.analytics.generate", str(out), "--events", "2000", "--seed", "9"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert "events/s" in done.stderr
    Replay().check(out)
    assert (
        "pyspark"
        not in subprocess.run(
            [sys.executable, "-c", "import sys, broker.analytics.generate; print(sorted(sys.modules))"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    ), "generating needs no Spark"


@pytest.mark.parametrize("events", [1, 10])
def test_tiny_logs(tmp_path: Path, events: int) -> None:
    log = tmp_path / "tiny.jsonl"
    result = gen.generate(log, events, seed=1)
    assert result.events >= events
    Replay().check(log)


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_the_share_of_consumer_groups(tmp_path: Path, share: float) -> None:
    log = tmp_path / "events.jsonl"
    gen.generate(log, 5000, seed=12, consumer_share=share)
    replay = Replay()
    replay.check(log)
    consumer, classic = sum(replay.consumer.counts.values()), sum(replay.counts.values())
    assert (consumer, classic) == ((0, replay.events()) if share == 0 else (replay.events(), 0))
    with pytest.raises(ValueError, match="consumer_share"):
        gen.generate(log, 10, consumer_share=1.5)
