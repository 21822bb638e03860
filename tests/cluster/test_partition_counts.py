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
