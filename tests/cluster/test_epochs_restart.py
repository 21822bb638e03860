"""Leader epochs in which nothing was written, across a restart of ``serve --nodes 3 --data-dir D`` (issue 29,
checklist 31; cluster-and-durability.md 3.3, 4.4).

A leader move raises a partition's leader epoch and records, at election, that the new epoch starts at the log end
(Kafka's LeaderEpochFileCache, kept in ``leader-epoch-checkpoint``). An epoch with no record is in no batch, so
it cannot be rebuilt from the log: the layout the data directory keeps must bring it back. After SIGKILL and a
restart, Metadata's leaders and LeaderEpochs and OffsetForLeaderEpoch's answers are what they were, and a record
produced then carries the restored epoch (it carried the epoch before it: its offset fell in epoch 1 of the epoch
cache while its batch said 0). A topic deleted and made again under its name stays at epoch 0 across the restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from protocol.apis import ApiKey
from tests.cluster.harness import PARTITIONS, TOPIC, Cluster
from tests.wire.client import WireClient, part, request

pytestmark = pytest.mark.timeout(120)

EPOCHS = (0, 1, 2, 3)


def metadata_request(topics: tuple[str, ...]) -> Any:
    api = ApiKey.METADATA
    return request(
        api, 12,
        topics=tuple(part(api, 12, "MetadataRequestTopic", name=name, topic_id=None) for name in topics),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )  # fmt: skip


def offset_for_leader_epoch_request(topic: str, partition: int, epochs: tuple[int, ...]) -> Any:
    api = ApiKey.OFFSET_FOR_LEADER_EPOCH
    return request(api, 4, replica_id=BrokerId(-1), topics=(
        part(api, 4, "OffsetForLeaderTopic", topic=topic, partitions=tuple(
            part(api, 4, "OffsetForLeaderPartition", partition=i32(partition), current_leader_epoch=i32(-1),
                 leader_epoch=i32(epoch))
            for epoch in epochs
        )),
    ))  # fmt: skip


def seen(cluster: Cluster, topics: tuple[str, ...]) -> dict[str, Any]:
    """What clients are told: per partition, Metadata's (leader, LeaderEpoch, replicas) from node 1 and the
    leader's OffsetForLeaderEpoch answers (error, epoch, end offset) for epochs 0-3."""

    async def ask() -> dict[str, Any]:
        first = await WireClient.connect(cluster.port_of(cluster.node_ids[0]), "probe")
        try:
            answer = await first.call(metadata_request(topics))
        finally:
            await first.close()
        found: dict[str, Any] = {}
        for topic in answer.topics:
            for p in topic.partitions:
                leader = await WireClient.connect(cluster.port_of(int(p.leader_id)), "probe")
                try:
                    asked = offset_for_leader_epoch_request(topic.name, int(p.partition_index), EPOCHS)
                    ends = await leader.call(asked)
                finally:
                    await leader.close()
                found[f"{topic.name}-{p.partition_index}"] = {
                    "metadata": (int(p.error_code), int(p.leader_id), int(p.leader_epoch), list(p.replica_nodes)),
                    "end_offsets": [
                        (int(e.error_code), int(e.leader_epoch), int(e.end_offset)) for e in ends.topics[0].partitions
                    ],
                }
        return found

    return asyncio.run(ask())


def produce(cluster: Cluster, topic: str, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
    errors: list[Any] = []
    for n in range(count):
        producer.produce(topic, b"r%d" % n, partition=partition, on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(15) == 0 and errors == [None] * count, errors


def epochs_read(cluster: Cluster, topic: str, partition: int, count: int) -> list[tuple[int, int | None]]:
    """(offset, the leader epoch its batch carries) of the partition's first ``count`` records, as a consumer
    fetches them (confluent-kafka's Message.leader_epoch)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "epochs", "log_level": 0})
    read: list[tuple[int, int | None]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.leader_epoch()))
                if len(read) == count:
                    break
    finally:
        consumer.close()
    return read


def move(cluster: Cluster, topic: str, partition: int, node: int) -> int:
    return int(cluster.ctl._json("POST", f"/v1/cluster/partitions/{topic}/{partition}/leader", {"node": node})["epoch"])


def test_epochs_with_no_record_survive_a_kill_and_restart(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    data = str(tmp_path / "data")
    cluster = Cluster(tmp_path, "--data-dir", data)
    try:
        _one, two, three = cluster.node_ids
        produce(cluster, TOPIC, 0, 3)  # epoch 0: offsets 0-2
        produce(cluster, TOPIC, 1, 2)
        # Partition 0: two moves with nothing written, epochs 1 and 2 both start at 3 (the second replaces the first
        # in the epoch cache, LeaderEpochFileCache.assign). Partition 1: its leader's node killed, epoch 1 at 2.
        assert move(cluster, TOPIC, 0, two) == 1
        assert move(cluster, TOPIC, 0, three) == 2
        leader_1 = seen(cluster, (TOPIC,))[f"{TOPIC}-1"]["metadata"][1]
        cluster.stop(leader_1)
        cluster.start(leader_1)
        # A topic whose leader moved, deleted and made again: the namesake starts at epoch 0.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("again", 1, replication_factor=3)])["again"].result(10)
        assert move(cluster, "again", 0, two) == 1  # partition 0 is node 1's: replicas 1, 2, 3
        admin.delete_topics(["again"])["again"].result(10)
        admin.create_topics([NewTopic("again", 1, replication_factor=3)])["again"].result(10)
        before = seen(cluster, (TOPIC, "again"))
        assert before[f"{TOPIC}-0"]["metadata"][1:3] == (three, 2)
        assert before[f"{TOPIC}-0"]["end_offsets"] == [(0, 0, 3), (0, 0, 3), (0, 2, 3), (0, -1, -1)]
        assert before[f"{TOPIC}-1"]["metadata"][2] == 1
        assert before[f"{TOPIC}-1"]["end_offsets"] == [(0, 0, 2), (0, 1, 2), (0, -1, -1), (0, -1, -1)]
        assert before["again-0"]["metadata"][2] == 0
    finally:
        cluster.process.kill()  # SIGKILL: no clean shutdown
        cluster.process.wait(10)

    again = Cluster(tmp_path, "--data-dir", data)
    try:
        assert seen(again, (TOPIC, "again")) == before
        # Written in the restored epoch: partition 0's new record carries epoch 2, and the cache's epoch 2 ends
        # after it.
        produce(again, TOPIC, 0, 1)
        assert epochs_read(again, TOPIC, 0, 4) == [(0, 0), (1, 0), (2, 0), (3, 2)]
        after_write = seen(again, (TOPIC,))
        assert after_write[f"{TOPIC}-0"]["end_offsets"] == [(0, 0, 3), (0, 0, 3), (0, 2, 4), (0, -1, -1)]
        assert after_write[f"{TOPIC}-0"]["metadata"] == before[f"{TOPIC}-0"]["metadata"]
    finally:
        again.close()
    # And once more, cleanly stopped this time: the batches and the kept layout agree.
    third = Cluster(tmp_path, "--data-dir", data)
    try:
        assert seen(third, (TOPIC,))[f"{TOPIC}-0"] == after_write[f"{TOPIC}-0"]
        assert seen(third, (TOPIC,))[f"{TOPIC}-1"] == before[f"{TOPIC}-1"]
        assert len(seen(third, (TOPIC,))) == PARTITIONS
    finally:
        third.close()
