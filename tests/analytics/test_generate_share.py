"""The generator's share groups (issue 28, ``broker/analytics/synthetic/share.py``), without Spark.

Their records have the real broker's fields in its order (``ShareEventLog``, the broker's own writer of them, on a
manual clock), and a generated log replays by the share-partition's rules: a record is acquired only when
available, with a delivery count one above its last, and released, archived or acknowledged only by the member that
holds it; the delivery limit archives; every cause shows up. Without share groups the log is the one before them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.analytics import generate as gen
from broker.analytics.synthetic.share import DELIVERY_LIMIT, LOCK_MS, render_runs, runs
from broker.coordinator.modern.share.events import ShareEventLog
from broker.coordinator.modern.share.group import ShareGroup
from broker.coordinator.modern.share.member import ShareMember
from broker.coordinator.modern.types import StaticCatalog
from broker.events.hub import EventHub, Record
from broker.timing.clock import ManualClock


def real_share_fields() -> dict[str, list[str]]:
    """The keys of each share record, in order, as the broker writes them."""
    catalog = StaticCatalog({"orders": 2})
    info = catalog.by_name("orders")
    assert info is not None
    records: list[Record] = []
    hub = EventHub(ManualClock())
    hub.subscribe(records.append)
    log = ShareEventLog(hub, catalog)
    group = ShareGroup("g", 0)
    member = ShareMember("m", 0, client_id="c", client_host="/h", subscribed_topic_names=("orders",))
    log.group_created(group)
    log.member_joined(group, member)
    log.records_acquired("g", info.topic_id, 0, "m", [(0, 4, 1)], LOCK_MS)
    log.records_acknowledged("g", info.topic_id, 0, "m", 3, 1)
    log.records_released("g", info.topic_id, 0, "m", "release", [4])
    log.records_archived("g", info.topic_id, 0, "m", "delivery_limit", [(4, DELIVERY_LIMIT)])
    return {str(r["event"]): list(r) for r in records}


def share_records(path: Path) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return [r for r in lines if r.get("group_type") == "share"]


def offsets(runs_: list[list[int]]) -> list[int]:
    return [o for first, last, *_ in runs_ for o in range(first, last + 1)]


def test_ranges_and_runs_are_the_brokers_shapes() -> None:
    assert runs([(3, 1), (1, 1), (2, 2), (4, 1), (7, 1)]) == [(1, 1, 1), (2, 2, 2), (3, 4, 1), (7, 7, 1)]
    assert render_runs([5, 1, 2, 3]) == "[[1,3],[5,5]]"


def test_share_records_have_the_real_brokers_fields_in_its_order(tmp_path: Path) -> None:
    real = real_share_fields()
    log = tmp_path / "events.jsonl"
    gen.generate(log, 20_000, seed=3, share_groups=4)
    shapes: dict[str, set[tuple[str, ...]]] = {}
    for record in share_records(log):
        shapes.setdefault(record["event"], set()).add(tuple(record))
    assert set(shapes) == set(real), sorted(shapes)
    for event, found in shapes.items():
        assert found == {tuple(real[event])}, (event, found, real[event])


class ShareReplay:
    """The share-partitions' rules, checked record by record (the module's docstring). The delivery counts and
    the records done with (acknowledged or archived) outlive a broker restart (the share state is durable); what
    a member holds does not."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, int], dict[int, int]] = {}  # partition -> offset -> last delivery count
        self.done: dict[tuple[str, str, int], set[int]] = {}
        self.held: dict[tuple[str, str, str, int], dict[int, str]] = {}  # (run, partition) -> offset -> member
        self.acked: dict[tuple[str, str, str, int, str], int] = {}  # acknowledged, the releases after it to come
        self.seen: Counter[str] = Counter()

    def settle(self, run: tuple[str, str, str, int], member: str) -> None:
        """An acknowledgement's records: what the member still holds once the releases after it are applied."""
        count = self.acked.pop((*run, member), None)
        if count is None:
            return
        mine = [o for o, m in self.held[run].items() if m == member]
        assert len(mine) == count, (run, member, mine, count)
        for o in mine:
            del self.held[run][o]
        self.done[run[1:]].update(mine)

    def check(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["event"] in ("group_created", "share_member_joined"):
                continue
            part = (r["group_id"], r["topic"], r["partition"])
            run = (r["run_id"], *part)
            counts, done = self.counts.setdefault(part, {}), self.done.setdefault(part, set())
            held = self.held.setdefault(run, {})
            member = r["member_id"]
            if r["event"] == "records_acquired":
                for pending in [k for k in self.acked if k[-1] == member]:
                    self.settle(pending[:-1], member)
                got = [(o, c) for first, last, c in r["ranges"] for o in range(first, last + 1)]
                assert r["records"] == len(got) and r["redelivered"] == sum(c > 1 for _, c in got)
                assert not any(m == member for m in held.values()), ("one batch at a time", r)
                for o, c in got:
                    assert o not in held and o not in done, (r, o)
                    assert c == counts.get(o, 0) + 1 <= DELIVERY_LIMIT, (r, o, counts.get(o))
                    held[o] = member
                    counts[o] = c
                self.seen["redelivered"] += r["redelivered"]
            elif r["event"] in ("records_released", "records_archived"):
                gone = offsets(r["offsets"])
                assert r["records"] == len(gone)
                for o in gone:
                    assert held.pop(o) == member, (r, o)
                if r["event"] == "records_archived":
                    assert r["delivery_count"] == max(counts[o] for o in gone) >= DELIVERY_LIMIT
                    done.update(gone)
                    self.seen["archived"] += len(gone)
                else:
                    assert all(counts[o] < DELIVERY_LIMIT for o in gone)
                    self.seen[r["cause"]] += len(gone)
            else:
                acknowledged = r["accepted"] + r["rejected"]
                assert acknowledged > 0 and (*run, member) not in self.acked, r
                self.acked[(*run, member)] = acknowledged
                self.seen["acknowledged"] += acknowledged
        for pending in list(self.acked):
            self.settle(pending[:-1], pending[-1])


@pytest.mark.parametrize(("events", "seed"), [(30_000, 8), (6000, 28)])  # 28: a record at the limit held at a restart
def test_a_generated_share_log_replays_by_the_share_partitions_rules(tmp_path: Path, events: int, seed: int) -> None:
    log = tmp_path / "events.jsonl"
    result = gen.generate(log, events, seed=seed, share_groups=3, restarts=1)
    records = share_records(log)
    assert result.runs == 2 and records
    replay = ShareReplay()
    replay.check(records)
    for cause in ("release", "lock_expired", "session_closed", "archived", "acknowledged", "redelivered"):
        assert replay.seen[cause] > 0, (cause, replay.seen)


def test_without_share_groups_the_log_is_the_one_before_them(tmp_path: Path) -> None:
    plain, none, some = tmp_path / "plain.jsonl", tmp_path / "none.jsonl", tmp_path / "some.jsonl"
    gen.generate(plain, 5000, seed=7)
    gen.generate(none, 5000, seed=7, share_groups=0)
    gen.generate(some, 5000, seed=7, share_groups=2)
    assert plain.read_bytes() == none.read_bytes()
    assert not share_records(plain) and share_records(some)
    # The other groups' records are those of the log without share groups, as far as it goes (seq aside).
    def others(path: Path) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return [{k: v for k, v in r.items() if k != "seq"} for r in lines if r.get("group_type") != "share"]

    with_share, without = others(some), others(plain)
    run = with_share[0]["run_id"]
    first_run = [r for r in with_share if r["run_id"] == run]
    while first_run and (first_run[-1]["event"], first_run[-1].get("to")) == ("state_changed", "Dead"):
        first_run.pop()  # the graceful stop's unloading: where the two logs' first runs end differs
    assert len(first_run) > 100 and first_run == without[: len(first_run)]
