"""Real client processes through a graceful stop of their coordinator's node, ``POST /v1/cluster/coordinators``
moves and a coordinator load delay (issue 29; cluster-and-durability.md 9, items 24 and 25).

The same two groups as test_clients_node_stop.py (a classic group of aiokafka, kafka-python and confluent-kafka,
a KIP-848 group of three confluent-kafka members) on ``serve --nodes 3`` with a producer running. A graceful stop and
a move are answered NOT_COORDINATOR (or a hang-up) at the old node; the members find the new coordinator and go on
without a rebalance, as they do against Kafka. With a load delay of 3000 ms the new coordinator answers
COORDINATOR_LOAD_IN_PROGRESS for three seconds: librdkafka retries (classic and KIP-848) and kafka-python too, and
Kafka's outcome holds for them; aiokafka 0.14's heartbeat task ends on that error (5.1), so it is in a group of
its own here, and the test checks only what Kafka promises every client (nothing lost, committed offsets never
below an acknowledged commit, nothing re-read below one) and records the rest (docs/cluster.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import SESSION_MS, Cluster, Member
from tests.cluster.scenario import Run, log_count, log_lines

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LOAD_DELAY_MS = 3000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.close()


def test_a_graceful_stop_and_a_coordinator_move_cost_no_member_its_membership(
    cluster: Cluster, tmp_path: Path
) -> None:
    run = Run(cluster, tmp_path, "graceful")
    try:
        run.begin()
        cluster.find_coordinator(cluster.node_ids[0], run.classic_group)  # the probe's own imports, done now
        snap = run.snapshot()
        called = time.monotonic()
        answer = cluster.stop(run.coordinator, "graceful")
        # A graceful stop moves first, then hangs up each connection once its answers are written (a parked
        # Fetch's among them: up to its max wait), so the call itself takes a while; FindCoordinator is timed
        # from its answer.
        stop_call_s = time.monotonic() - called
        assert answer["moved_coordinators"]
        found_s = max(cluster.probe_coordinator(g, {run.coordinator}, time.monotonic()) for g in run.groups)
        assert found_s < 1.0
        second = cluster.coordinator(run.classic_group)
        assert second != run.coordinator and second == cluster.coordinator(run.consumer_group)
        run.wait_consuming_after(snap.when)
        run.check_committed_not_below(snap)
        run.check_no_rebalance(snap)
        run.report(snap, "graceful stop", find_coordinator_s=round(found_s, 3), stop_call_s=round(stop_call_s, 3),
                   new_coordinator=second)  # fmt: skip

        # A move of both groups' partitions to the other running node (item 24).
        moved = run.snapshot()
        third = next(n for n in cluster.up() if n != second)
        for group in run.groups:
            partition = cluster.ctl._json("GET", f"/v1/cluster/coordinators?type=group&key={group}")["partition"]
            answer = cluster.move(group, third)
            assert (answer["node"], answer["partition"]) == (third, partition)
        assert {cluster.coordinator(g) for g in run.groups} == {third}
        run.wait_consuming_after(moved.when)
        run.check_committed_not_below(moved)
        run.check_no_rebalance(snap)
        # The Python clients say when they hear NOT_COORDINATOR: once per move (the heartbeat and a commit may both
        # hear it), then they are at the new coordinator. librdkafka says nothing without debug=cgrp.
        for member in run.members:
            if member.client in ("aiokafka", "kafka-python"):
                dead = log_count(member.stderr(), "Marking the coordinator dead", moved.when)
                assert 1 <= dead <= 2, (member.name, log_lines(member.stderr(), moved.when))
        run.report(moved, "coordinator move", new_coordinator=third)
        run.finish()
        run.check_no_rebalance(snap)
        run.check_no_duplicate_past_commit()
    finally:
        run.close()


def test_a_coordinator_load_delay_then_a_move(cluster: Cluster, tmp_path: Path) -> None:
    run = Run(cluster, tmp_path, "load-delay")
    try:
        run.begin(aiokafka_alone=True)
        cluster.load_delay(LOAD_DELAY_MS)
        target = next(n for n in cluster.node_ids if n != run.coordinator)
        snap = run.snapshot()
        for group in run.groups:
            cluster.move(group, target)
        assert all(cluster.find_coordinator(target, g) == (0, target) for g in run.groups)
        # librdkafka (classic and KIP-848) and kafka-python retry COORDINATOR_LOAD_IN_PROGRESS: Kafka's outcome.
        steady = [run.classic_group, run.consumer_group]
        run.wait_consuming_after(
            snap.when + LOAD_DELAY_MS / 1000, members=[m for m in run.members if m.group in steady]
        )
        steady_s = time.time() - snap.when
        run.check_committed_not_below(snap)
        run.check_no_rebalance(snap, groups=steady)
        cluster.load_delay(0)
        # aiokafka: 5.1 predicts that its heartbeat task ends, every getmany raises and the session expires; it
        # rejoins only once a commit hears UNKNOWN_MEMBER_ID. Recorded, not required (the client's behaviour):
        # the load delay, its session timeout and ten seconds more for it to consume again.
        (aiokafka,) = run.group_members(run.aiokafka_group)
        deadline = snap.when + (LOAD_DELAY_MS + SESSION_MS) / 1000 + 10
        while time.time() < deadline and not aiokafka_back(run, aiokafka, snap.when + LOAD_DELAY_MS / 1000):
            time.sleep(0.2)
        back = aiokafka_back(run, aiokafka, snap.when + LOAD_DELAY_MS / 1000)
        rows = run.report(
            snap, "load delay 3000 ms + move", load_delay_ms=LOAD_DELAY_MS, new_coordinator=target,
            steady_s=round(steady_s, 3), aiokafka_back_s=round(back - snap.when, 3) if back else None,
        )  # fmt: skip
        run.finish(groups=steady)
        run.check_committed_not_below(snap)  # aiokafka's group too, whether it came back or not
        run.check_no_rebalance(snap, groups=steady)
        run.check_no_duplicate_past_commit()
        assert aiokafka.worker.alive, aiokafka.describe()
    finally:
        run.close()
    assert {row["member"] for row in rows} == {m.name for m in run.members}


def aiokafka_back(run: Run, member: Member, since: float) -> float | None:
    """When ``member`` had a commit acknowledged for a record produced after ``since`` (None: not yet)."""
    assert run.producer is not None
    fresh = run.producer.since(since)
    consumed = [e["ts"] for e in member.after(since, "record") if (e["partition"], e["offset"]) in fresh]
    if not consumed:
        return None
    commits = [e["ts"] for e in member.after(consumed[0], "committed")]
    return commits[0] if commits else None
