"""Real client processes through data-partition leader moves on ``serve --nodes 3`` (issue 29; cluster-and-durability.md
4.3-4.5, checklist items 20 and 26).

The same two groups as test_clients_node_stop.py (a classic group of aiokafka, kafka-python and confluent-kafka, a
KIP-848 group of three confluent-kafka members) consume the topic while a confluent-kafka producer (idempotent,
acks=all) writes to it. ``POST /v1/cluster/partitions/t/{p}/leader`` moves the leader of every partition to its next
replica, three rounds in a row (the third with ``{"preferred": true}``: back where each started). Each move raises
the partition's leader epoch by one, and every node's Metadata says so; the old leader answers Fetch
FENCED_LEADER_EPOCH (the client's epoch is now old) or NOT_LEADER_OR_FOLLOWER, with the new leader (KIP-951);
clients that validate their position after an epoch change (KIP-320: kafka-python, librdkafka) ask
OffsetForLeaderEpoch, which must answer the end of the epoch they last fetched, never UNDEFINED (an UNDEFINED answer
makes kafka-python reset by auto.offset.reset, re-reading from offset 0, which the checks below catch). The second
test moves a partition's leader to a node and kills that node at once: the partition fails over to its first running
replica, epoch + 2 in all.

Kafka's outcome is asserted after each round: every member fetches records produced after the move and has a
commit acknowledged, committed offsets never below an acknowledged commit, no rebalance (no callback, the same
generation, member ids and epochs), then nothing lost, nothing re-read below an acknowledged commit, and the
producer's log holds every acknowledged record exactly once. What each client did (its fetcher's lines about
leaders and epochs, the time from the move to its next fetched record) goes to ``CLUSTER_CLIENTS_REPORT``;
docs/cluster.md has the table.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import PARTITIONS, TOPIC, Cluster, wait
from tests.cluster.scenario import Run, log_count

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROUNDS = 3

# What each library says about leaders and epochs, at DEBUG for its fetcher only (librdkafka: debug=fetch,topic).
LEADER_LOGS: dict[str, tuple[str, ...]] = {
    "aiokafka": ("--debug-loggers", "aiokafka.consumer.fetcher"),
    "kafka-python": ("--debug-loggers", "kafka.consumer.fetcher,kafka.consumer.subscription_state"),
    "confluent": ("--rdkafka-debug", "fetch,topic"),
}
# Their lines about a leader change (and any failure), not the per-fetch ones nor librdkafka's bookkeeping of which
# broker thread serves a partition.
LEADER_LINES = re.compile(
    r"FENCED_LEADER_EPOCH|FencedLeaderEpoch|NOT_LEADER|NotLeader|UNKNOWN_LEADER|UnknownLeader|OffsetForLeaderEpoch|"
    r"epoch validation|Validating offsets|validation (succeeded|failed)|Truncation|truncation|diverg|leader updated|"
    r"Error fetching|offset reset|Resetting offset|FAIL|Unexpected",
)
# Counted per member after each move: (what the report calls it, the texts that count).
COUNTED = (
    ("fenced_leader_epoch", ("FENCED_LEADER_EPOCH", "FencedLeaderEpoch")),
    ("not_leader", ("NOT_LEADER", "NotLeader")),
    ("validations", ("offset and epoch validation succeeded", "Sending OffsetForLeaderEpochRequest")),
    ("truncations", ("runcation",)),
    ("resets", ("offset reset", "Resetting offset")),
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.close()


def agreed_leaders(cluster: Cluster) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    """Metadata of the topic as every running node answers it: the same from each (asserted)."""
    answers = {node: cluster.leaders(node) for node in cluster.up()}
    first = next(iter(answers.values()))
    assert all(answer == first for answer in answers.values()), answers
    return first


def validations(cluster: Cluster) -> int:
    """OffsetForLeaderEpoch requests the broker answered so far (its /metrics, every client together)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.admin_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        int(float(m.group(1)))
        for m in re.finditer(r'^kafka_requests_total\{api="OffsetForLeaderEpoch"[^}]*\} (\S+)$', text, re.MULTILINE)
    )


def next_records(run: Run, since: float) -> dict[str, dict[str, Any]]:
    """Per member: seconds from ``since`` to the first record it fetched that was produced after ``since``, and how
    many of its log lines since then tell each of ``COUNTED``."""
    assert run.producer is not None
    fresh = run.producer.since(since)
    found: dict[str, dict[str, Any]] = {}
    for member in run.members:
        times = [e["ts"] for e in member.after(since, "record") if (e["partition"], e["offset"]) in fresh]
        stderr = member.stderr()
        counts = {name: sum(log_count(stderr, text, since) for text in texts) for name, texts in COUNTED}
        found[member.name] = {"next_record_s": round(min(times) - since, 3) if times else None, **counts}
    return found


def check_producer_log(run: Run) -> None:
    """Every record the producer had acknowledged is in the log once, at the offset acknowledged, and the log holds
    nothing else: the idempotent producer lost nothing and wrote no duplicate through the moves."""
    from kafka import KafkaConsumer, TopicPartition

    assert run.producer is not None
    acknowledged = {(p, o) for p, o, _ in run.producer.acknowledged}
    ends = run.producer.ends()
    consumer = KafkaConsumer(bootstrap_servers=run.cluster.bootstrap, enable_auto_commit=False)
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    log: list[tuple[int, int, bytes]] = []
    try:
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends.get(tp.partition, 0) for tp in partitions):
            assert time.monotonic() < deadline, {tp.partition: consumer.position(tp) for tp in partitions}
            for records in consumer.poll(timeout_ms=500).values():
                log += [(r.partition, r.offset, r.value) for r in records]
    finally:
        consumer.close()
    values = [value for _, _, value in log]
    assert len(values) == len(set(values)), sorted(v for v in set(values) if values.count(v) > 1)[:10]
    assert {(p, o) for p, o, _ in log} == acknowledged, (len(log), len(acknowledged))


def test_three_rounds_of_leader_moves_cost_no_member_its_membership_nor_a_record(
    cluster: Cluster, tmp_path: Path
) -> None:
    run = Run(cluster, tmp_path, "leader-moves", worker_flags=LEADER_LOGS)
    try:
        run.begin()
        cluster.leaders(cluster.node_ids[0])  # the probe's own imports, done now
        start = agreed_leaders(cluster)
        assert {leader for leader, _, _ in start.values()} == set(cluster.node_ids)  # every node leads some
        snap = run.snapshot()
        current = start
        for round_ in range(1, ROUNDS + 1):
            moved = run.snapshot()
            asked = validations(cluster)
            posting = time.monotonic()
            for partition, (leader, epoch, replicas) in sorted(current.items()):
                target = replicas[(replicas.index(leader) + 1) % len(replicas)]
                preferred = round_ == ROUNDS  # the last round: back to the preferred replica, by name
                assert not preferred or target == replicas[0]
                answer = cluster.move_leader(partition, None if preferred else target)
                assert answer == {"leader": target, "epoch": epoch + 1}, (partition, answer)
            moves_s = time.monotonic() - posting  # the six calls: a member's own partitions move within it
            current = agreed_leaders(cluster)
            for partition, (leader, epoch, replicas) in current.items():
                assert epoch == start[partition][1] + round_, (partition, current)  # one per move, nothing more
                assert leader == replicas[round_ % len(replicas)] and replicas == start[partition][2]
            run.wait_consuming_after(moved.when)
            run.check_committed_not_below(moved)
            run.check_no_rebalance(snap)
            run.report(
                moved, f"leader move, round {round_}", per_member=next_records(run, moved.when),
                noteworthy=LEADER_LINES, offset_for_leader_epoch=validations(cluster) - asked,
                epochs=sorted({epoch for _, epoch, _ in current.values()}), moves_s=round(moves_s, 3),
            )  # fmt: skip
        assert {p: leader for p, (leader, _, _) in current.items()} == {p: r[0] for p, (_, _, r) in start.items()}
        run.finish()
        run.check_no_rebalance(snap)
        run.check_no_duplicate_past_commit()
        check_producer_log(run)
    finally:
        run.close()


def test_a_leader_moved_to_a_node_that_is_killed_right_after_fails_over_to_the_next_replica(
    cluster: Cluster, tmp_path: Path
) -> None:
    run = Run(cluster, tmp_path, "leader-move-kill", worker_flags=LEADER_LOGS)
    try:
        run.begin()
        cluster.leaders(cluster.node_ids[0])  # the probe's own imports, done now
        start = agreed_leaders(cluster)
        # A partition whose next replica is not the groups' coordinator's node: the groups' coordinator stays put.
        partition, (leader, epoch, replicas) = next(
            (p, row) for p, row in sorted(start.items()) if row[2][1] != run.coordinator
        )
        assert leader == replicas[0]
        target = replicas[1]
        snap = run.snapshot()
        asked = validations(cluster)
        assert cluster.move_leader(partition, target) == {"leader": target, "epoch": epoch + 1}
        answer = cluster.stop(target, "kill")
        assert [TOPIC, partition, replicas[0]] in answer["moved_leaders"], answer
        # The failover: the first running replica in the assignment's order (Kafka's controller elects the first
        # live replica of the ISR), one epoch more; every other partition the killed node led went the same way.
        after = agreed_leaders(cluster)
        survivor = next(n for n in replicas if n != target)
        assert after[partition][:2] == (survivor, epoch + 2), after
        for p, (was, was_epoch, rs) in start.items():
            if p != partition:
                expected = (next(n for n in rs if n != target), was_epoch + 1) if was == target else (was, was_epoch)
                assert after[p][:2] == expected, (p, after)
        assert run.coordinator in cluster.up() and cluster.coordinator(run.classic_group) == run.coordinator
        run.wait_consuming_after(snap.when)
        run.check_committed_not_below(snap)
        run.check_no_rebalance(snap)
        run.report(
            snap, "leader move then kill of the new leader", per_member=next_records(run, snap.when),
            noteworthy=LEADER_LINES, offset_for_leader_epoch=validations(cluster) - asked, partition=partition,
            moved_to=target, failed_over_to=survivor, epoch=after[partition][1],
        )  # fmt: skip
        run.finish()
        run.check_no_rebalance(snap)
        run.check_no_duplicate_past_commit()
        check_producer_log(run)
        wait("the killed node listed as stopped", lambda: target not in cluster.up(), cluster.describe, 5)
    finally:
        run.close()
