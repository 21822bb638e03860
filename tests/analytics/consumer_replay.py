"""Replaying a generated log's consumer-group records (KIP-848) by the coordinator's rules.

``ConsumerReplay.check(record)`` fails on the first record that breaks a rule of docs/spec/consumer-groups.md as
``broker/coordinator/modern/`` applies it: the group epoch moves by one (6.1), a target is computed at the group
epoch over every member and moves only what its ``moved`` says (4.11), targets are balanced (the uniform assignor,
6.4), a member's step never gives it a partition another member still owns, assigned or pending revocation (3.5,
5.1), its epoch waits while it revokes, and every ``state_changed`` names the state the group's members make (3.4).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker.analytics.synthetic.world import TOPICS

PARTITIONS = dict(TOPICS)
CAUSES = {"subscription_changed", "member_left", "member_expired"}
Partition = tuple[str, int]


@dataclass
class Member:
    epoch: int = 0
    state: str = "stable"
    owns: set[Partition] = field(default_factory=set)  # assigned and pending revocation


@dataclass
class Group:
    state: str = "Empty"
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[Partition, str] = field(default_factory=dict)  # partition -> its member in the target
    topics: set[str] = field(default_factory=set)
    last: dict[str, Any] | None = None  # the group's previous record

    def derived_state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not (m.state == "stable" and m.epoch == self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass
class ConsumerReplay:
    counts: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    member_states: Counter[str] = field(default_factory=Counter)
    groups: dict[str, Group] = field(default_factory=dict)

    def new_run(self) -> None:
        self.groups = {}  # a broker restart forgets every group (and says nothing of consumer groups)

    def check(self, record: dict[str, Any]) -> None:
        event = record["event"]
        self.counts[event] += 1
        g = self.groups.get(record["group_id"])
        if event == "group_created":
            assert g is None, f"created twice: {record}"
            self.groups[record["group_id"]] = Group(last=record)
            return
        assert g is not None, f"{event} for a consumer group never created: {record}"
        getattr(self, f"on_{event}")(g, record)
        g.last = record

    def _owner_check(self, g: Group, member_id: str, owns: set[Partition]) -> None:
        for other_id, other in g.members.items():
            assert other_id == member_id or not (other.owns & owns), f"{owns & other.owns} owned twice"

    # -- the events

    def on_member_joined(self, g: Group, r: dict[str, Any]) -> None:
        assert r["member_id"] not in g.members and len(r["member_id"]) == 22
        assert r["protocol_type"] == "consumer" and r["subscribed_topic_names"] == sorted(r["subscribed_topic_names"])
        assert r["subscribed_topic_regex"] == "" and r["server_assignor"] is None
        g.topics = set(r["subscribed_topic_names"])
        g.members[r["member_id"]] = Member()

    def on_group_epoch_bumped(self, g: Group, r: dict[str, Any]) -> None:
        assert r["group_epoch"] == g.group_epoch + 1, "the group epoch moves by one"
        assert r["cause"] in CAUSES, r
        if r["cause"] == "subscription_changed":
            assert g.last is not None and g.last["event"] == "member_joined" and g.last["member_id"] == r["member_id"]
        else:
            assert g.last is not None and g.last["event"] == "member_left" and g.last["member_id"] == r["member_id"]
        self.causes[r["cause"]] += 1
        g.group_epoch = r["group_epoch"]

    def on_target_assignment_computed(self, g: Group, r: dict[str, Any]) -> None:
        assert g.group_epoch > g.assignment_epoch and r["assignment_epoch"] == g.group_epoch
        assert r["assignor"] == "uniform" and r["members"] == len(g.members) > 0
        keys = [(m["topic"], m["partition"]) for m in r["moved"]]
        assert keys == sorted(keys), "moves in partition order"
        for move in r["moved"]:
            key = (move["topic"], move["partition"])
            assert g.target.get(key) == move["from"], (move, g.target.get(key))
            assert move["to"] in g.members
            g.target[key] = move["to"]
        total = sum(PARTITIONS[t] for t in g.topics)
        assert len(g.target) == total, "every partition has a target owner"
        sizes = Counter(g.target.values())
        assert set(sizes) <= set(g.members) and max(sizes.values()) - min(sizes.get(m, 0) for m in g.members) <= 1
        g.assignment_epoch = r["assignment_epoch"]

    def on_member_reconciled(self, g: Group, r: dict[str, Any]) -> None:
        m = g.members[r["member_id"]]
        assert r["previous_epoch"] == m.epoch, (r, m)
        assigned = {(t, p) for t, ps in r["assigned"].items() for p in ps}
        pending = {(t, p) for t, ps in r["pending_revocation"].items() for p in ps}
        mine = {key for key, owner in g.target.items() if owner == r["member_id"]}
        assert assigned <= mine and not (pending & mine), "it keeps only its target and revokes the rest"
        if r["state"] == "unrevoked_partitions":
            assert pending and r["member_epoch"] == m.epoch, "its epoch waits while it revokes"
        else:
            assert not pending and r["member_epoch"] == g.assignment_epoch
            assert (assigned == mine) == (r["state"] == "stable"), r
        self._owner_check(g, r["member_id"], assigned | pending)
        m.epoch, m.state, m.owns = r["member_epoch"], r["state"], assigned | pending
        self.member_states[r["state"]] += 1

    def on_state_changed(self, g: Group, r: dict[str, Any]) -> None:
        assert r["from"] == g.state and r["to"] == g.derived_state() != g.state, (r, g.derived_state())
        assert (r["group_epoch"], r["assignment_epoch"]) == (g.group_epoch, g.assignment_epoch)
        g.state = r["to"]
        self.states[r["to"]] += 1

    def on_group_emptied(self, g: Group, r: dict[str, Any]) -> None:
        assert g.last is not None and g.last["event"] == "state_changed" and g.state == "Empty"
        assert r["group_epoch"] == g.group_epoch

    def on_member_expired(self, g: Group, r: dict[str, Any]) -> None:
        assert r["member_id"] in g.members and (r["timer"], r["timeout_ms"]) == ("session", 45_000)

    def on_member_left(self, g: Group, r: dict[str, Any]) -> None:
        m = g.members.pop(r["member_id"])
        assert r["member_epoch"] == m.epoch
        if r["cause"] == "expired":
            assert g.last is not None and g.last["event"] == "member_expired" and g.last["member_id"] == r["member_id"]
        else:
            assert (r["cause"], r["reason"]) == ("left", "left the group (epoch -1)"), r
        self.causes[f"left:{r['cause']}"] += 1
        g.target = {key: owner for key, owner in g.target.items() if owner != r["member_id"]}

    def on_group_deleted(self, g: Group, r: dict[str, Any]) -> None:
        assert g.state == "Empty" and not g.members and r["reason"] == "deleted by DeleteGroups"
        del self.groups[r["group_id"]]
