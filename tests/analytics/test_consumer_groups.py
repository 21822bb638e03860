"""Consumer groups (KIP-848) in the analytics job: their rebalance windows, members and ownership.

The logs are written by the real coordinator (driven on a manual clock through ConsumerGroupHeartbeat, with an
``EventHub`` recording what it emits), so the job reads exactly what a broker writes: version-2 records with
``group_type`` "consumer". Each scenario's answers are worked out by hand in its docstring; times are in ms from
the scenario's start. One run of the job (a module fixture) serves every test, next to a classic (version 1)
history, which must come out as it always did.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job
from tests.analytics.conftest import rows, write_lines
from tests.analytics.consumer_log import T0, Recorded, heartbeats
from tests.analytics.test_windows import eager_log, pick

Tables = dict[str, list[dict[str, Any]]]


def members_come_and_go() -> Recorded:
    """Four partitions of t. a joins at 0: Stable at once. b joins at 1000; a is told to revoke 2 and 3 at 1200,
    acknowledges at 1400; b gets them at 1500 (Stable). c joins at 2000; b revokes 3 at 2100 and acknowledges at
    2200, a moves to the new epoch at 2200, c gets 3 at 2300 (Stable). c dies after its acknowledgement at 2400;
    its session (6 s) runs out at 8400: fenced, epoch 4; a reconciles at 8500, b takes 3 at 8600 (Stable). b
    leaves at 9000; a takes everything at 9100."""
    h = Recorded()
    a, b, c = h.consumer("a"), h.consumer("b"), h.consumer("c")
    a.poll()
    h.at(1000)
    b.poll()
    for ms, consumer in ((1200, a), (1400, a), (1500, b), (1600, b)):
        h.at(ms)
        consumer.poll()
    h.at(2000)
    c.poll()
    for ms, consumer in ((2100, b), (2200, b), (2200, a), (2300, c), (2400, c)):
        h.at(ms)
        consumer.poll()
    heartbeats(h, 2500, 8000, a, b)  # c is dead: no heartbeat
    h.at(8400)  # c's session times out
    for ms, consumer in ((8500, a), (8600, b), (8700, b)):
        h.at(ms)
        consumer.poll()
    h.at(9000)
    b.leave()
    h.at(9100)
    a.poll()
    return h


def single_member() -> Recorded:
    """A group of one on topic u (2 partitions), which grows to 3 at 1000: a's next heartbeat bumps the epoch,
    computes the target and hands it the new partition at once. The group never leaves Stable, so the broker
    says nothing of its state: the episode ends at a's member_reconciled."""
    h = Recorded(topics={"u": 2})
    a = h.consumer("solo", names=("u",), group_id="solo")
    a.poll()
    h.at(1000)
    h.add_partitions("u", 3)
    h.at(1300)
    a.poll()
    return h


def static_member_returns() -> Recorded:
    """s (instance i1) and d share t. s leaves for a while at 1000 (epoch -2: still a member, its partitions kept,
    no rebalance: section 7.5); its next process joins at 3000 as s2 with the same instance id: s is fenced and
    s2 takes over its partitions in that very heartbeat, without an epoch bump."""
    h = Recorded()
    s, d = h.consumer("s", instance_id="i1", group_id="static"), h.consumer("d", group_id="static")
    s.poll()
    h.at(100)
    d.poll()
    for ms, consumer in ((200, s), (300, s), (400, d), (500, d)):
        h.at(ms)
        consumer.poll()
    h.at(1000)
    s.leave(-2)
    heartbeats(h, 1500, 2500, d)
    h.at(3000)
    h.consumer("s2", instance_id="i1", group_id="static").poll()
    return h


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Tables:
    tmp = tmp_path_factory.mktemp("consumer")
    lines = eager_log("run-a", "eager").lines()  # a version-1 classic history in the same input
    for scenario in (members_come_and_go(), single_member(), static_member_returns()):
        lines += scenario.lines()
    out = tmp / "out"
    job.run([str(write_lines(tmp / "events.jsonl", lines))], str(out), spark=spark)
    return {name: rows(spark, out, name) for name in ("input", "rebalances", "members", "ownership", "summary")}


def of(tables: Tables, table: str, group: str, *keys: str) -> list[dict[str, Any]]:
    found = [row for row in tables[table] if row["group_id"] == group]
    return sorted(found, key=lambda row: tuple((row[k] is None, row[k]) for k in keys))


TIMES = ("start_ms", "end_ms", "joined_ms", "ended_ms")


def relative(row: dict[str, Any], *names: str) -> tuple[Any, ...]:
    """``pick``, with the moments (not the durations) from the scenario's start."""
    return tuple(row[n] - T0 if n in TIMES and row[n] is not None else row[n] for n in names)


EPISODE = ("generation", "previous_generation", "cause", "trigger_member", "restarts", "start_ms", "end_ms",
           "duration_ms", "outcome", "members_before", "members_after", "partitions_moved", "revocations",
           "partitions", "unowned_partition_seconds", "protocol", "rebalance_protocol")  # fmt: skip


def test_every_line_is_read(tables: Tables) -> None:
    counts = {row["kind"]: row["count"] for row in tables["input"]}
    assert counts["lines"] == counts["parsed"] > 0, counts


def test_consumer_group_episodes_run_from_the_epoch_bump_to_stable(tables: Tables) -> None:
    """Unowned partition-seconds, partitions x duration less what the ownership covers:

    - 1000-1500: a keeps 0, 1 (1000 ms); 2, 3 are a's until 1400 (800 ms), b's from 1500: 2000 - 1800 = 0.2 s;
    - 2000-2300: 0, 1, 2 owned throughout (900), 3 b's until 2200 (200): 1200 - 1100 = 0.1 s;
    - 8400-8600: 0, 1, 2 (600); 3 was c's until the fencing at 8400, b's from 8600: 800 - 600 = 0.2 s;
    - 9000-9100: a keeps 0, 1 (200); 2, 3 were b's until it left at 9000, a's from 9100: 400 - 200 = 0.2 s.

    The first target moves every partition from nobody; b's revocation of two, then one, are its revocations."""
    episodes = [relative(r, *EPISODE) for r in of(tables, "rebalances", "group", "start_ms")]
    assert episodes == [
        (1, 0, "member_joined", "a", 0, 0, 0, 0, "stable", 1, 1, 4, 0, 4, 0.0, "uniform", "consumer"),
        (2, 1, "member_joined", "b", 0, 1000, 1500, 500, "stable", 2, 2, 2, 2, 4, 0.2, "uniform", "consumer"),
        (3, 2, "member_joined", "c", 0, 2000, 2300, 300, "stable", 3, 3, 1, 1, 4, 0.1, "uniform", "consumer"),
        (4, 3, "member_expired", "c", 0, 8400, 8600, 200, "stable", 2, 2, 1, 0, 4, 0.2, "uniform", "consumer"),
        (5, 4, "member_left", "b", 0, 9000, 9100, 100, "stable", 1, 1, 2, 0, 4, 0.2, "uniform", "consumer"),
    ]
    assert all(r["broker_rebalance_ms"] is None and r["partitions_unowned"] is None for r in tables["rebalances"]
               if r["rebalance_protocol"] == "consumer")  # fmt: skip


def test_consumer_group_members_and_their_detection(tables: Tables) -> None:
    """c's expiry (its session timer, restarted at every heartbeat: 6000 ms of silence) is one end, not two (the
    fencing's member_left follows it)."""
    members = [relative(m, "member_id", "joined_ms", "ended_ms", "end", "end_cause", "since_last_heartbeat_ms",
                        "session_timeout_ms") for m in of(tables, "members", "group", "member_id")]  # fmt: skip
    assert members == [
        ("a", 0, None, "open", None, None, None),
        ("b", 1000, 9000, "left", "left", None, None),
        ("c", 2000, 8400, "expired", "session_timeout", 6000, 6000),
    ]


def test_consumer_group_ownership_follows_the_reconciliations(tables: Tables) -> None:
    """A partition pending revocation is still owned (section 3.5): a's 2 and 3 end at 1400, when it says it let
    them go, not at 1200, when it was told to."""
    owners = [relative(o, "partition", "member_id", "generation", "start_ms", "end_ms", "end")
              for o in of(tables, "ownership", "group", "start_ms", "partition")]  # fmt: skip
    assert owners == [
        (0, "a", 1, 0, None, "open"),
        (1, "a", 1, 0, None, "open"),
        (2, "a", 1, 0, 1400, "moved"),
        (3, "a", 1, 0, 1400, "moved"),
        (2, "b", 2, 1500, 9000, "member_gone"),
        (3, "b", 2, 1500, 2200, "moved"),
        (3, "c", 3, 2300, 8400, "member_gone"),
        (3, "b", 4, 8600, 9000, "member_gone"),
        (2, "a", 5, 9100, None, "open"),
        (3, "a", 5, 9100, None, "open"),
    ]


def test_a_single_member_group_that_never_leaves_stable(tables: Tables) -> None:
    episodes = [relative(r, *EPISODE) for r in of(tables, "rebalances", "solo", "start_ms")]
    assert episodes == [
        (1, 0, "member_joined", "solo", 0, 0, 0, 0, "stable", 1, 1, 2, 0, 2, 0.0, "uniform", "consumer"),
        (2, 1, "metadata_changed", "solo", 0, 1300, 1300, 0, "stable", 1, 1, 1, 0, 3, 0.0, "uniform", "consumer"),
    ]


def test_a_static_member_replaced_hands_its_partitions_to_its_new_id(tables: Tables) -> None:
    """s's temporary leave is not an end; the fence is. s2 starts at its own member_joined (the fence does not
    start it twice) and owns s's partitions from the same moment; nothing bumped the epoch after d joined."""
    members = [relative(m, "member_id", "group_instance_id", "joined_ms", "ended_ms", "end", "end_cause")
               for m in of(tables, "members", "static", "member_id")]  # fmt: skip
    assert members == [
        ("d", None, 100, None, "open", None),
        ("s", "i1", 0, 3000, "fenced", "static_member_replaced"),
        ("s2", "i1", 3000, None, "open", None),
    ]
    owners = [relative(o, "partition", "member_id", "start_ms", "end_ms", "end")
              for o in of(tables, "ownership", "static", "start_ms", "partition")]  # fmt: skip
    assert owners == [
        (0, "s", 0, 3000, "member_gone"),
        (1, "s", 0, 3000, "member_gone"),
        (2, "s", 0, 300, "moved"),
        (3, "s", 0, 300, "moved"),
        (2, "d", 400, None, "open"),
        (3, "d", 400, None, "open"),
        (0, "s2", 3000, None, "open"),
        (1, "s2", 3000, None, "open"),
    ]
    assert len(of(tables, "rebalances", "static", "start_ms")) == 2  # s's creation of the group and d's join


def test_the_summary_counts_consumer_rebalances_next_to_eager_and_cooperative(tables: Tables) -> None:
    by_group = {row["group_id"]: row for row in tables["summary"]}
    group = by_group["group"]
    # The group's first episode formed it (from group epoch 0): counted apart from the protocols (issue 26).
    assert (group["rebalances"], group["formations"], group["consumer"], group["eager"]) == (5, 1, 4, 0)
    assert group["cooperative"] == group["no_protocol"] == 0
    assert group["causes"] == {"member_joined": 3, "member_expired": 1, "member_left": 1}
    assert (group["expirations"], group["detection_ms_max"], group["unowned_partition_seconds"]) == (1, 6000.0, 0.7)
    assert (by_group["eager"]["formations"], by_group["eager"]["eager"], by_group["eager"]["consumer"]) == (1, 1, 0)
    overall = by_group[None]
    assert (overall["formations"], overall["eager"], overall["consumer"]) == (4, 1, 4 + 1 + 1)
    assert overall["rebalances"] == 2 + 5 + 2 + 2
    # The classic history in the same input is unchanged by its neighbours.
    eager = [pick(r, "start_ms", "end_ms", "unowned_partition_seconds") for r in of(tables, "rebalances", "eager",
                                                                                        "start_ms")]  # fmt: skip
    assert eager == [(1000, 2100, 4.4), (10000, 10600, 2.4)]
