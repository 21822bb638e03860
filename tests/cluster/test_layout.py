"""The cluster layout on its own: placement, leader moves, epochs and the epoch cache (cluster-and-durability.md 4)."""

from __future__ import annotations

import pytest

from broker.cluster.hashing import OFFSETS_TOPIC, partition_for
from broker.cluster.layout import UNDEFINED, ClusterLayout, LastRunningNode, UnknownNode


def layout(nodes: int = 3, ends: dict[tuple[str, int], int] | None = None) -> ClusterLayout:
    log_end = ends if ends is not None else {}
    return ClusterLayout(
        list(range(nodes)),
        topics=lambda: [("orders", 3)],
        log_end=lambda topic, partition: log_end.get((topic, partition), 0),
    )


def test_placement_is_round_robin_with_the_first_replica_leading() -> None:
    cluster = layout()
    assert [cluster.leadership("orders", p).replicas for p in range(3)] == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    assert [cluster.leadership("orders", p).leader for p in range(3)] == [0, 1, 2]
    assert cluster.leadership("orders", 0).epoch == 0
    assert cluster.controller() == 0
    assert ClusterLayout([0, 1, 2, 3, 4]).replicas_for(4) == (4, 0, 1)


def test_a_stopped_node_hands_its_partitions_to_the_next_running_replica() -> None:
    ends = {("orders", 0): 10}
    cluster = layout(ends=ends)
    moves = {(m.topic, m.partition): m for m in cluster.stop(0)}
    assert (moves[("orders", 0)].leader, moves[("orders", 0)].epoch, moves[("orders", 0)].previous) == (1, 1, 0)
    assert ("orders", 1) not in moves
    assert cluster.isr("orders", 0) == (1, 2)
    assert cluster.controller() == 1
    # Every __consumer_offsets partition node 0 led moved too: no group is left without a coordinator.
    assert 0 not in cluster.group_coordinators
    assert cluster.group_coordinator("my-group") == cluster.leadership(OFFSETS_TOPIC, 12).leader
    # Started again: it rejoins the ISR and leads nothing.
    assert cluster.start(0) == []
    assert cluster.leadership("orders", 0).leader == 1 and cluster.isr("orders", 0) == (0, 1, 2)


def test_the_last_running_node_cannot_stop_and_unknown_nodes_are_refused() -> None:
    cluster = layout(2)
    cluster.stop(1)
    with pytest.raises(LastRunningNode):
        cluster.stop(0)
    with pytest.raises(UnknownNode):
        cluster.stop(7)


def test_a_partition_with_no_running_replica_is_offline_until_one_starts() -> None:
    cluster = ClusterLayout([0, 1], replication_factor=1, topics=lambda: [("solo", 2)])
    cluster.stop(1)
    assert cluster.leadership("solo", 1).leader == -1
    (back,) = [m for m in cluster.start(1) if m.topic == "solo"]
    assert (back.partition, back.leader, back.epoch) == (1, 1, 2)


def test_end_offset_for_follows_leader_epoch_file_cache() -> None:
    """Checklist item 20 and 4.4: the new epoch's start is recorded at election, so the old epoch is answered at
    once with the log end offset of the moment of the move, never UNDEFINED."""
    ends = {("orders", 0): 10}
    cluster = layout(ends=ends)
    cluster.move_leader("orders", 0, 1)  # epoch 1 starts at 10
    assert cluster.end_offset_for("orders", 0, 0) == (0, 10)
    ends[("orders", 0)] = 25
    assert cluster.end_offset_for("orders", 0, 1) == (1, 25)  # the current epoch: the log end
    cluster.move_leader("orders", 0, 2)  # epoch 2 starts at 25
    assert cluster.end_offset_for("orders", 0, 1) == (1, 25)
    assert cluster.end_offset_for("orders", 0, 0) == (0, 10)
    assert cluster.end_offset_for("orders", 0, -1) == UNDEFINED
    assert cluster.end_offset_for("orders", 0, 9) == UNDEFINED
    # Two moves with no record between them: the later epoch replaces the entry (LeaderEpochFileCache.assign).
    cluster.move_leader("orders", 0, 0)
    assert cluster.leadership("orders", 0).epochs == [(0, 0), (1, 10), (3, 25)]
    assert cluster.end_offset_for("orders", 0, 2) == (1, 25)


def test_moving_a_coordinator_moves_every_key_of_its_partition() -> None:
    cluster = layout()
    partition = partition_for("my-group", 50)
    assert partition == partition_for("test-group", 50) == 12
    target = (cluster.group_coordinator("my-group") + 1) % 3
    moved = cluster.move_leader(OFFSETS_TOPIC, partition, target)
    assert moved.leader == target
    assert cluster.group_coordinator("my-group") == cluster.group_coordinator("test-group") == target


def test_a_load_is_in_progress_until_its_delay_passes() -> None:
    cluster = layout()
    cluster.begin_load(OFFSETS_TOPIC, 3, now_ms=1000, delay_ms=500)
    assert cluster.is_loading(OFFSETS_TOPIC, 3, 1499)
    assert not cluster.is_loading(OFFSETS_TOPIC, 3, 1500)
    assert cluster.loading == {}


def test_each_election_stamps_the_new_epoch_and_offsets_map_to_their_epochs() -> None:
    ends = {("orders", 0): 0}
    stamped: list[tuple[str, int, int]] = []
    cluster = ClusterLayout(
        [0, 1, 2],
        topics=lambda: [("orders", 3)],
        log_end=lambda topic, partition: ends.get((topic, partition), 0),
        on_elect=lambda topic, partition, epoch: stamped.append((topic, partition, epoch)),
    )
    ends[("orders", 0)] = 4
    cluster.move_leader("orders", 0, 1)
    ends[("orders", 0)] = 9
    cluster.move_leader("orders", 0, 2)
    assert stamped == [("orders", 0, 1), ("orders", 0, 2)]
    # LeaderEpochFileCache.epochForOffset: the entry each offset falls in.
    assert [cluster.epoch_for_offset("orders", 0, o) for o in (0, 3, 4, 8, 9, 20)] == [0, 0, 1, 1, 2, 2]


def test_a_topic_keeps_its_replication_factor_until_it_is_forgotten() -> None:
    cluster = layout()
    cluster.add_topic("narrow", 1)
    assert [cluster.leadership("narrow", p).replicas for p in range(3)] == [(0,), (1,), (2,)]
    cluster.move_leader("narrow", 0, 1)
    cluster.forget_topic("narrow")
    assert cluster.leadership("narrow", 0).replicas == (0, 1, 2) and cluster.leadership("narrow", 0).epoch == 0


def test_a_recovered_log_seeds_the_epoch_cache() -> None:
    """Issue 27: the epochs the recovered batches carry, so a restart never takes an epoch back."""
    stamped: list[int] = []
    cluster = ClusterLayout(
        [0, 1, 2],
        log_end=lambda _topic, _partition: 12,
        log_epochs=lambda topic, _partition: [(0, 0), (2, 5), (3, 9)] if topic == "orders" else [],
        on_elect=lambda _topic, _partition, epoch: stamped.append(epoch),
    )
    leadership = cluster.leadership("orders", 0)
    assert (leadership.epoch, leadership.epochs, stamped) == (3, [(0, 0), (2, 5), (3, 9)], [3])
    assert cluster.end_offset_for("orders", 0, 1) == (0, 5)
    assert cluster.end_offset_for("orders", 0, 2) == (2, 9)
    assert cluster.end_offset_for("orders", 0, 3) == (3, 12)
    assert cluster.leadership("other", 0).epochs == [(0, 0)]
