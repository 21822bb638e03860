"""Real client processes through a kill of their coordinator's node, its start again, and two of three nodes
stopped (issue 29; cluster-and-durability.md 9, items 19, 21, 22 and 28).

Against ``serve --nodes 3``: a classic group of aiokafka, kafka-python and confluent-kafka members and a KIP-848
group of three confluent-kafka members (group.protocol=consumer), both coordinated by one node, consume one topic
while a producer writes to it. After the node is killed: FindCoordinator at the live nodes names a live node within
a second, every member consumes what is produced after the stop, the committed offsets read from the new
coordinator are at least those acknowledged before, nothing is lost, nothing is re-read below an acknowledged
commit, and nobody rebalances (no callback, the same generation, member ids and epochs, no fatal error): Kafka's
outcome, since the new coordinator loads the groups as they were (2.3). docs/cluster.md has what each client did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.cluster.scenario import Run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.close()


def test_killing_the_coordinator_node_and_starting_it_again_costs_no_member_its_membership(
    cluster: Cluster, tmp_path: Path
) -> None:
    run = Run(cluster, tmp_path, "kill")
    try:
        run.begin()
        cluster.find_coordinator(cluster.node_ids[0], run.classic_group)  # the probe's own imports, done now
        snap = run.snapshot()
        stopped = time.monotonic()
        answer = cluster.stop(run.coordinator, "kill")
        assert answer["moved_coordinators"] and run.coordinator not in cluster.up()
        found_s = max(cluster.probe_coordinator(g, {run.coordinator}, stopped) for g in run.groups)
        assert found_s < 1.0
        new = cluster.coordinator(run.classic_group)
        assert new != run.coordinator and new == cluster.coordinator(run.consumer_group)
        run.wait_consuming_after(snap.when)
        run.check_committed_not_below(snap)
        run.check_no_rebalance(snap)
        run.report(snap, "kill", find_coordinator_s=round(found_s, 3), new_coordinator=new)

        # Item 22: the node starts again, is listed within a second, leads nothing; the groups keep consuming.
        again = run.snapshot()
        cluster.start(run.coordinator)
        assert run.coordinator in cluster.up()
        listed_s = time.time() - again.when
        assert listed_s < 1.0
        leaders = cluster.describe()["internal"]["__consumer_offsets"]
        assert all(row["leader"] != run.coordinator for row in leaders)
        run.wait_consuming_after(again.when)
        run.check_no_rebalance(snap)
        run.report(again, "node started again", listed_s=round(listed_s, 3))
        run.finish()
        run.check_no_rebalance(snap)
        run.check_no_duplicate_past_commit()
    finally:
        run.close()


def test_stopping_two_of_three_nodes_leaves_one_node_coordinating_and_leading_everything(
    cluster: Cluster, tmp_path: Path
) -> None:
    run = Run(cluster, tmp_path, "two-down")
    try:
        run.begin()
        snap = run.snapshot()
        last = cluster.node_ids[0]
        others = [n for n in cluster.node_ids if n != last]
        gone: set[int] = set()
        cluster.find_coordinator(last, run.classic_group)  # the probe's own imports, done now
        found: list[float] = []
        for node_id in (run.coordinator, *[n for n in others if n != run.coordinator]):
            stopped = time.monotonic()
            cluster.stop(node_id, "kill")
            gone.add(node_id)
            found += [cluster.probe_coordinator(group, gone, stopped) for group in run.groups]
        assert max(found) < 1.0
        assert cluster.up() == [last]
        described = cluster.describe()
        assert {row["leader"] for rows in described["internal"].values() for row in rows} == {last}
        run.wait_consuming_after(snap.when)
        run.check_committed_not_below(snap)
        run.check_no_rebalance(snap)
        run.report(snap, "two of three killed", find_coordinator_s=round(max(found), 3))
        run.finish()
        run.check_no_rebalance(snap)
        run.check_no_duplicate_past_commit()
    finally:
        run.close()
