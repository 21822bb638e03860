"""The internal topics' partition counts are fixed in the data directory at creation (issue 29; checklist 5,
cluster-and-durability.md 8.1): a group's coordinator is abs(hashCode) modulo the count, so a restart with another
count would move every group; it refuses the start, before anything is bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.server.broker import BrokerServer
from broker.server.durable import StartRefused
from broker.server.settings import ClusterConfig
from broker.storage.disk.datadir import DataDir
from broker.storage.disk.errors import DataDirError
from broker.storage.disk.fsync import FsyncPolicy
from tests.conftest import broker_settings


def counts(offsets: int = 50, transactions: int = 50) -> dict[str, int]:
    return {"offsets_topic_num_partitions": offsets, "transaction_state_log_num_partitions": transactions}


def open_dir(path: Path, partition_counts: dict[str, int]) -> DataDir:
    return DataDir.open(
        path, cluster_id="c", cluster_id_given=False, fsync=FsyncPolicy("never"), partition_counts=partition_counts
    )


def test_the_counts_are_stored_at_creation_and_another_one_refused(tmp_path: Path) -> None:
    open_dir(tmp_path, counts(10, 7)).close()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert (meta["offsets_topic_num_partitions"], meta["transaction_state_log_num_partitions"]) == (10, 7)
    open_dir(tmp_path, counts(10, 7)).close()
    with pytest.raises(DataDirError, match="created with --offsets-topic-num-partitions 10, not 50"):
        open_dir(tmp_path, counts(50, 7))
    with pytest.raises(DataDirError, match="created with --transaction-state-log-num-partitions 7, not 8"):
        open_dir(tmp_path, counts(10, 8))
    open_dir(tmp_path, counts(10, 7)).close()  # the refusals released the lock


def test_a_directory_from_before_the_counts_takes_them_at_its_next_start(tmp_path: Path) -> None:
    open_dir(tmp_path, {}).close()
    assert "offsets_topic_num_partitions" not in json.loads((tmp_path / "meta.json").read_text())
    open_dir(tmp_path, counts(5, 6)).close()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert (meta["offsets_topic_num_partitions"], meta["transaction_state_log_num_partitions"]) == (5, 6)
    with pytest.raises(DataDirError, match="not 50"):
        open_dir(tmp_path, counts())


async def test_the_broker_refuses_to_start_with_another_count(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    cluster = ClusterConfig(nodes=3, offsets_topic_num_partitions=12)
    server = BrokerServer(broker_settings(data_dir=data_dir, cluster=cluster))
    await server.start()
    await server.stop()
    with pytest.raises(StartRefused, match="created with --offsets-topic-num-partitions 12, not 50") as refused:
        BrokerServer(broker_settings(data_dir=data_dir, cluster=ClusterConfig(nodes=3)))
    assert str(refused.value).startswith(f"data directory {data_dir}: ")
    server = BrokerServer(broker_settings(data_dir=data_dir, cluster=cluster))
    await server.start()
    assert server.nodes.layout.offsets_partitions == 12
    await server.stop()


async def test_the_layout_survives_a_restart(tmp_path: Path) -> None:
    """Checklist 31: leaders as they were, epochs and epoch caches not reset; a restart starts every node."""
    settings = broker_settings(data_dir=str(tmp_path / "data"), cluster=ClusterConfig(nodes=3))
    server = BrokerServer(settings)
    await server.start()
    nodes = server.nodes
    order = nodes.layout.order
    nodes.move_leader("topic", 0, order[2])
    nodes.move_coordinator("group", "my-group", order[1])
    await nodes.stop(order[0], "graceful")  # everything node 0 led moves on
    before = {
        key: (leadership.leader, leadership.epoch, list(leadership.epochs))
        for key, leadership in nodes.layout._leaderships.items()
        if leadership.epoch > 0
    }
    assert ("topic", 0) in before and ("__consumer_offsets", nodes.layout.group_partition("my-group")) in before
    await server.abandon()  # as a SIGKILL leaves it
    again = BrokerServer(settings)
    await again.start()
    try:
        layout = again.nodes.layout
        assert all(layout.up.values())
        after = {key: (layout.leadership(*key).leader, layout.leadership(*key).epoch,
                       list(layout.leadership(*key).epochs)) for key in before}  # fmt: skip
        assert after == before
        assert layout.group_coordinator("my-group") == order[1]
        assert layout.leadership("topic", 0).leader == order[2]
        # Untouched partitions start as a fresh layout places them.
        untouched = next(p for p in range(50) if ("__transaction_state", p) not in before)
        assert layout.leadership("__transaction_state", untouched).epoch == 0
    finally:
        await again.stop()
