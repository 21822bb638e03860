"""The data plane of a three-node broker over TCP (issue 29; cluster-and-durability.md 4.3-4.5, checklist items 18, 20,
26, 27): only a partition's leader serves it, every other node answers NOT_LEADER_OR_FOLLOWER with the leader it
knows (KIP-951); leader epochs are checked as Partition.checkCurrentLeaderEpoch does; batches carry the epoch they
were appended in; OffsetForLeaderEpoch answers from the epoch cache recorded at election, never UNDEFINED for an
epoch the partition had, even before a record exists in the new epoch.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i64

from broker.server.broker import BrokerServer
from broker.server.settings import ClusterConfig
from broker.storage.records import read_header
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import make_batch
from tests.wire.client import WireClient, part, request
from tests.wire.share_client import heartbeat, partition_of, share_acknowledge, share_fetch
from tests.wire.test_data_plane import (
    EARLIEST,
    LATEST,
    fetch_partition,
    fetch_request,
    list_offsets_request,
    produce_request,
)

E = ErrorCode
TOPIC = "topic"  # 3 partitions: partition p is led by node p (node ids 1, 2, 3: the first is --node-id 1)


@pytest.fixture
async def cluster() -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(broker_settings(cluster=ClusterConfig(nodes=3)))
    await broker.start()
    yield broker
    await broker.stop()


class Nodes:
    """One connection per node of the cluster, by node id."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.clients: dict[int, WireClient] = {}

    async def to(self, node: int) -> WireClient:
        if node not in self.clients:
            self.clients[node] = await WireClient.connect(self.port(node), f"node-{node}")
        return self.clients[node]

    def port(self, node: int) -> int:
        for listener in self.server.listeners:
            route = listener.api.route
            if route is not None and route.node_id == node:
                return listener.port
        raise AssertionError(f"no listener of node {node}")

    def leader(self, partition: int, topic: str = TOPIC) -> int:
        return self.server.nodes.layout.leadership(topic, partition).leader

    def epoch(self, partition: int, topic: str = TOPIC) -> int:
        return self.server.nodes.layout.leadership(topic, partition).epoch

    def follower(self, partition: int, topic: str = TOPIC) -> int:
        return next(node for node in self.server.nodes.layout.order if node != self.leader(partition, topic))

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()


@pytest.fixture
async def nodes(cluster: BrokerServer) -> AsyncIterator[Nodes]:
    opened = Nodes(cluster)
    yield opened
    await opened.close()


async def produce_to(client: WireClient, partition: int, count: int = 1, *, version: int = 11, acks: int = -1) -> Any:
    response = await client.call(produce_request(version, [(partition, make_batch(count))], acks=acks))
    (answer,) = response.responses[0].partition_responses
    return response, answer


def offset_for_leader_epoch(
    partitions: list[tuple[int, int, int]], *, topic: str = TOPIC, version: int = 4
) -> Any:
    """(partition, current leader epoch, leader epoch) each."""
    api = ApiKey.OFFSET_FOR_LEADER_EPOCH
    return request(api, version, replica_id=BrokerId(-1), topics=(
        part(api, version, "OffsetForLeaderTopic", topic=topic, partitions=tuple(
            part(api, version, "OffsetForLeaderPartition", partition=i32(p), current_leader_epoch=i32(current),
                 leader_epoch=i32(epoch))
            for p, current, epoch in partitions
        )),
    ))  # fmt: skip


async def end_offsets(client: WireClient, partition: int, *epochs: int, current: int = -1) -> list[tuple[Any, ...]]:
    response = await client.call(offset_for_leader_epoch([(partition, current, e) for e in epochs]))
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]


# -- Produce -------------------------------------------------------------------------------------------------


async def test_produce_at_a_follower_names_the_leader_and_its_endpoint(nodes: Nodes) -> None:
    leader, follower = nodes.leader(0), nodes.follower(0)
    response, answer = await produce_to(await nodes.to(follower), 0)
    assert answer.error_code is E.not_leader_or_follower and answer.base_offset == -1
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, 0)
    assert [(e.node_id, e.port) for e in response.node_endpoints] == [(leader, nodes.port(leader))]
    assert nodes.server.topics.get(TOPIC).log(0).next_offset == 0  # type: ignore[union-attr]
    # Before v10 there is no CurrentLeader: the error alone.
    _, old = await produce_to(await nodes.to(follower), 0, version=9)
    assert old.error_code is E.not_leader_or_follower
    _, led = await produce_to(await nodes.to(leader), 0)
    assert led.error_code is E.none and led.base_offset == 0


async def test_batches_carry_the_leader_epoch_they_were_appended_in(nodes: Nodes) -> None:
    first = nodes.leader(1)
    assert (await produce_to(await nodes.to(first), 1, 2))[1].error_code is E.none
    moved = nodes.server.nodes.move_leader(TOPIC, 1, nodes.follower(1))
    assert moved.epoch == 1
    # The old leader is told off at once; the new one appends in epoch 1.
    assert (await produce_to(await nodes.to(first), 1))[1].error_code is E.not_leader_or_follower
    assert (await produce_to(await nodes.to(moved.leader), 1, 3))[1].base_offset == 2
    log = nodes.server.topics.get(TOPIC).log(1)  # type: ignore[union-attr]
    assert log is not None
    stamped = [(b.base_offset, read_header(b.data).partition_leader_epoch) for b in log.batches_from(0)]
    assert stamped == [(0, 0), (2, 1)]
    # Fetch returns them as stored, each with its own epoch.
    response = await (await nodes.to(moved.leader)).call(fetch_request(12, [(TOPIC, [fetch_partition(12, 1, 0)])]))
    records = response.responses[0].partitions[0].records
    assert read_header(records).partition_leader_epoch == 0
    assert read_header(records[len(log.read(0, 1, at_least_one=True)):]).partition_leader_epoch == 1


async def test_acks_all_needs_min_insync_replicas(nodes: Nodes) -> None:
    topic = nodes.server.topics.get(TOPIC)
    assert topic is not None
    topic.replace_configs({"min.insync.replicas": "3"})
    leader = nodes.leader(2)
    assert (await produce_to(await nodes.to(leader), 2))[1].error_code is E.none  # all three run
    stopped = next(n for n in nodes.server.nodes.layout.order if n not in (leader,))
    await nodes.server.nodes.stop(stopped)
    _, refused = await produce_to(await nodes.to(leader), 2)
    assert refused.error_code is E.not_enough_replicas and refused.base_offset == -1
    assert "ISR 2 is insufficient" in refused.error_message
    assert (await produce_to(await nodes.to(leader), 2, acks=1))[1].error_code is E.none  # acks=1: no ISR check
    assert topic.log(2).next_offset == 2  # type: ignore[union-attr]


async def test_a_partition_with_no_running_replica_is_offline(cluster: BrokerServer) -> None:
    """Item 27: RF 1, its node stopped: leader -1 in Metadata, NOT_LEADER_OR_FOLLOWER from every node; after the
    start the partition is led again with all its records."""
    nodes = Nodes(cluster)
    try:
        admin = await nodes.to(1)
        created = await admin.call(create_topic("solo", 1, 1))
        assert created.topics[0].error_code is E.none
        owner = nodes.leader(0, "solo")
        produced = await (await nodes.to(owner)).call(produce_request(11, [(0, make_batch(2))], topic="solo"))
        assert produced.responses[0].partition_responses[0].error_code is E.none
        other = next(n for n in cluster.nodes.layout.order if n != owner)
        await cluster.nodes.stop(owner)
        assert nodes.leader(0, "solo") == -1
        answered = await (await nodes.to(other)).call(produce_request(11, [(0, make_batch(1))], topic="solo"))
        assert answered.responses[0].partition_responses[0].error_code is E.not_leader_or_follower
        await cluster.nodes.start(owner)
        assert nodes.leader(0, "solo") == owner and nodes.epoch(0, "solo") == 2
        nodes.clients.pop(owner)  # its connection was dropped with the node
        fetched = await (await nodes.to(owner)).call(fetch_request(12, [("solo", [fetch_partition(12, 0, 0)])]))
        assert fetched.responses[0].partitions[0].high_watermark == 2
    finally:
        await nodes.close()


# -- Fetch and ListOffsets -----------------------------------------------------------------------------------


async def test_fetch_checks_leadership_then_epoch(nodes: Nodes) -> None:
    nodes.server.nodes.move_leader(TOPIC, 0, nodes.follower(0))
    leader, epoch = nodes.leader(0), nodes.epoch(0)
    follower = nodes.follower(0)

    async def fetched(node: int, current: int, version: int = 12) -> Any:
        partition = fetch_partition(version, 0, 0, leader_epoch=current)
        key: Any = TOPIC if version < 13 else nodes.server.topics.get(TOPIC).topic_id  # type: ignore[union-attr]
        return await (await nodes.to(node)).call(fetch_request(version, [(key, [partition])]))

    at_follower = (await fetched(follower, epoch)).responses[0].partitions[0]
    assert at_follower.error_code is E.not_leader_or_follower
    assert (at_follower.current_leader.leader_id, at_follower.current_leader.leader_epoch) == (leader, epoch)
    fenced = (await fetched(leader, epoch - 1)).responses[0].partitions[0]
    assert fenced.error_code is E.fenced_leader_epoch and fenced.current_leader.leader_id == leader
    unknown = (await fetched(leader, epoch + 1)).responses[0].partitions[0]
    assert unknown.error_code is E.unknown_leader_epoch and unknown.current_leader.leader_id == -1
    assert (await fetched(leader, epoch)).responses[0].partitions[0].error_code is E.none
    assert (await fetched(leader, -1)).responses[0].partitions[0].error_code is E.none
    # v16: the leader's endpoint too (KIP-951).
    response = await fetched(follower, -1, 16)
    assert response.responses[0].partitions[0].error_code is E.not_leader_or_follower
    assert [(e.node_id, e.port) for e in response.node_endpoints] == [(leader, nodes.port(leader))]
    # Before v12 no CurrentLeader: the error alone.
    assert (await fetched(follower, -1, 11)).responses[0].partitions[0].error_code is E.not_leader_or_follower


async def test_fetch_with_a_diverging_last_fetched_epoch_gets_the_divergence(nodes: Nodes) -> None:
    await produce_to(await nodes.to(nodes.leader(0)), 0, 3)  # offsets 0-2 in epoch 0
    moved = nodes.server.nodes.move_leader(TOPIC, 0, nodes.follower(0))
    await produce_to(await nodes.to(moved.leader), 0, 2)  # offsets 3-4 in epoch 1
    leader = await nodes.to(moved.leader)

    def at(offset: int, last_fetched: int) -> Any:
        partition = fetch_partition(12, 0, offset, leader_epoch=1)
        return fetch_request(12, [(TOPIC, [part(ApiKey.FETCH, 12, "FetchPartition", **{
            "partition": partition.partition, "current_leader_epoch": partition.current_leader_epoch,
            "fetch_offset": partition.fetch_offset, "last_fetched_epoch": i32(last_fetched),
            "log_start_offset": partition.log_start_offset, "partition_max_bytes": partition.partition_max_bytes,
        })])])  # fmt: skip

    # A consumer at offset 5 whose last record was of epoch 0: epoch 0 ended at 3, before its position.
    diverged = (await leader.call(at(5, 0))).responses[0].partitions[0]
    assert diverged.error_code is E.none and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
    # In line with the cache: records, no divergence.
    agreed = (await leader.call(at(3, 0))).responses[0].partitions[0]
    assert agreed.records and agreed.diverging_epoch.epoch == -1


async def test_list_offsets_at_followers_and_with_epochs(nodes: Nodes) -> None:
    await produce_to(await nodes.to(nodes.leader(1)), 1, 2)
    moved = nodes.server.nodes.move_leader(TOPIC, 1, nodes.follower(1))
    leader = await nodes.to(moved.leader)

    async def listed(client: WireClient, timestamp: int, current: int = -1) -> Any:
        response = await client.call(list_offsets_request(10, [(1, timestamp)], leader_epoch=current))
        return response.topics[0].partitions[0]

    latest = await listed(leader, LATEST)
    assert (latest.error_code, latest.offset, latest.leader_epoch) == (E.none, 2, 1)  # the current epoch
    earliest = await listed(leader, EARLIEST, 1)
    assert (earliest.error_code, earliest.offset, earliest.leader_epoch) == (E.none, 0, 0)  # offset 0's epoch
    assert (await listed(await nodes.to(moved.previous), LATEST)).error_code is E.not_leader_or_follower
    assert (await listed(leader, LATEST, 0)).error_code is E.fenced_leader_epoch
    assert (await listed(leader, LATEST, 2)).error_code is E.unknown_leader_epoch


# -- OffsetForLeaderEpoch (spec 4.4, item 20) ----------------------------------------------------------------


async def test_offset_for_leader_epoch_after_moves_is_never_undefined(nodes: Nodes) -> None:
    await produce_to(await nodes.to(nodes.leader(0)), 0, 3)  # epoch 0: offsets 0-2
    first = nodes.server.nodes.move_leader(TOPIC, 0, nodes.follower(0))
    at_first = await nodes.to(first.leader)
    # Right after the move, no record in epoch 1 yet: epoch 0 ends where epoch 1 starts, at 3.
    assert await end_offsets(at_first, 0, 0, 1) == [(E.none, 0, 3), (E.none, 1, 3)]
    await produce_to(at_first, 0, 2)  # epoch 1: offsets 3-4
    second = nodes.server.nodes.move_leader(TOPIC, 0, first.previous)
    at_second = await nodes.to(second.leader)
    assert await end_offsets(at_second, 0, 0, 1, 2, current=2) == [(E.none, 0, 3), (E.none, 1, 5), (E.none, 2, 5)]
    # UNDEFINED only for -1 and for an epoch above every entry.
    assert await end_offsets(at_second, 0, -1, 7) == [(E.none, -1, -1), (E.none, -1, -1)]
    # checkCurrentLeaderEpoch, then the leadership.
    assert (await end_offsets(at_second, 0, 1, current=1))[0][0] is E.fenced_leader_epoch
    assert (await end_offsets(at_second, 0, 1, current=3))[0][0] is E.unknown_leader_epoch
    assert (await end_offsets(at_first, 0, 1))[0] == (E.not_leader_or_follower, -1, -1)
    # Older versions answer the same.
    response = await at_second.call(offset_for_leader_epoch([(0, -1, 0)], version=2))
    assert (response.topics[0].partitions[0].leader_epoch, response.topics[0].partitions[0].end_offset) == (0, 3)


async def test_offset_for_leader_epoch_after_a_node_stop(nodes: Nodes) -> None:
    """Item 20: the stopped node's partitions have live leaders in a higher epoch, and the old epoch answers the
    log end offset at the moment of the stop, before any record is written in the new epoch."""
    victim = nodes.leader(2)
    await produce_to(await nodes.to(victim), 2, 4)
    stopped = await nodes.server.nodes.stop(victim)
    assert [TOPIC, 2] in [moved[:2] for moved in stopped["moved_leaders"]]
    leader = nodes.leader(2)
    assert leader != victim and nodes.epoch(2) == 1
    assert await end_offsets(await nodes.to(leader), 2, 0, current=1) == [(E.none, 0, 4)]
    unknown_topic = await (await nodes.to(leader)).call(offset_for_leader_epoch([(0, -1, 0)], topic="nope"))
    assert unknown_topic.topics[0].partitions[0].error_code is E.unknown_topic_or_partition


async def test_only_several_nodes_list_offset_for_leader_epoch(nodes: Nodes) -> None:
    api = ApiKey.API_VERSIONS
    answer = await (await nodes.to(1)).call(request(api, 3, client_software_name="t", client_software_version="1"))
    listed = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert listed[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (2, 4)


# -- share groups (KIP-932: the share-partition leader is the partition leader) --------------------------------


async def test_share_fetch_and_acknowledge_of_a_partition_led_elsewhere(nodes: Nodes) -> None:
    server = nodes.server
    coordinator = server.nodes.layout.group_coordinator("sg")
    client = await nodes.to(coordinator)
    joined = await client.call(heartbeat("sg", "m1", 0, (TOPIC,)))
    assert joined.error_code is E.none
    topic = server.topics.get(TOPIC)
    assert topic is not None
    elsewhere = [p for p in range(3) if nodes.leader(p) != coordinator]
    here = [p for p in range(3) if nodes.leader(p) == coordinator]
    answer = await client.call(share_fetch("sg", "m1", 0, topic.topic_id, [0, 1, 2], version=2))
    assert answer.error_code is E.none
    for p in elsewhere:
        refused = partition_of(answer, p)
        assert refused.error_code is E.not_leader_or_follower
        assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (nodes.leader(p), 0)
    for p in here:
        assert partition_of(answer, p).error_code is E.none
    assert sorted(e.node_id for e in answer.node_endpoints) == sorted({nodes.leader(p) for p in elsewhere})
    acked = await client.call(share_acknowledge("sg", "m1", 1, topic.topic_id, {elsewhere[0]: [(0, 0, (1,))]}))
    assert partition_of(acked, elsewhere[0]).error_code is E.not_leader_or_follower


# -- CreateTopics and DeleteTopics ---------------------------------------------------------------------------


def create_topic(name: str, replication: int, partitions: int = 3) -> Any:
    api = ApiKey.CREATE_TOPICS
    return request(api, 7, topics=(part(api, 7, "CreatableTopic", name=name, num_partitions=i32(partitions),
                   replication_factor=i16(replication), assignments=(), configs=()),),
                   timeout=datetime.timedelta(seconds=5), validate_only=False)  # fmt: skip


async def test_create_topics_replication_against_the_nodes(nodes: Nodes) -> None:
    client = await nodes.to(1)
    too_many = (await client.call(create_topic("wide", 4))).topics[0]
    assert too_many.error_code is E.invalid_replication_factor
    assert "only 3 broker(s) are registered" in too_many.error_message
    default = (await client.call(create_topic("default", -1))).topics[0]
    assert (default.error_code, default.replication_factor) == (E.none, 3)
    two = (await client.call(create_topic("two", 2))).topics[0]
    assert (two.error_code, two.replication_factor) == (E.none, 2)
    layout = nodes.server.nodes.layout
    assert [len(layout.leadership("two", p).replicas) for p in range(3)] == [2, 2, 2]
    assert [len(layout.leadership("default", p).replicas) for p in range(3)] == [3, 3, 3]


async def test_delete_topics_forgets_the_leaderships(nodes: Nodes) -> None:
    client = await nodes.to(1)
    assert (await client.call(create_topic("again", 2, 1))).topics[0].error_code is E.none
    nodes.server.nodes.move_leader("again", 0, nodes.follower(0, "again"))
    assert nodes.epoch(0, "again") == 1
    api = ApiKey.DELETE_TOPICS
    deleted = await client.call(request(api, 6, topics=(part(api, 6, "DeleteTopicState", name="again", topic_id=None),),
                                        timeout=datetime.timedelta(seconds=5)))  # fmt: skip
    assert deleted.responses[0].error_code is E.none
    assert (await client.call(create_topic("again", 1, 1))).topics[0].error_code is E.none
    assert nodes.epoch(0, "again") == 0 and len(nodes.server.nodes.layout.leadership("again", 0).replicas) == 1


async def test_a_parked_fetch_hears_of_a_leader_move(nodes: Nodes) -> None:
    """DelayedFetch: a fetch parked at the leader answers NOT_LEADER_OR_FOLLOWER when it completes elsewhere."""
    leader = await nodes.to(nodes.leader(0))
    waiting = asyncio.ensure_future(
        leader.call(fetch_request(12, [(TOPIC, [fetch_partition(12, 0, 0)])], max_wait_ms=300))
    )
    await asyncio.sleep(0.05)
    moved = nodes.server.nodes.move_leader(TOPIC, 0, nodes.follower(0))
    answer = (await waiting).responses[0].partitions[0]
    assert answer.error_code is E.not_leader_or_follower
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (moved.leader, 1)


async def test_a_leader_move_answers_parked_fetches_at_once_with_the_epoch_checked_first(nodes: Nodes) -> None:
    """ReplicaManager completes a partition's delayed fetches when it makes it follower or leader, and the answer
    checks the request's CurrentLeaderEpoch before leadership (Partition.getLocalLog): a fetch parked with the
    epoch the move made old hears FENCED_LEADER_EPOCH, one without an epoch NOT_LEADER_OR_FOLLOWER, both with the
    new leader and without waiting out their max wait (nothing is appended meanwhile). Before, both waited out
    their max wait (or the next append) and both heard NOT_LEADER_OR_FOLLOWER."""
    first, epoch = nodes.leader(0), nodes.epoch(0)
    other = nodes.follower(0)

    def parked(client: WireClient, current: int, partition: int = 0) -> asyncio.Future[Any]:
        fetching = fetch_partition(12, partition, 0, leader_epoch=current)
        return asyncio.ensure_future(client.call(fetch_request(12, [(TOPIC, [fetching])], max_wait_ms=30_000)))

    # Two connections to the leader, so that the two fetches park side by side.
    with_epoch = parked(await nodes.to(first), epoch)
    without = await WireClient.connect(nodes.port(first), "unchecked")
    try:
        without_epoch = parked(without, -1)
        await asyncio.sleep(0.05)
        assert not with_epoch.done() and not without_epoch.done()
        nodes.server.nodes.move_leader(TOPIC, 0, other)
        fenced, not_leader = await asyncio.wait_for(asyncio.gather(with_epoch, without_epoch), 5)
    finally:
        await without.close()
    for answer, error in ((fenced, E.fenced_leader_epoch), (not_leader, E.not_leader_or_follower)):
        (partition,) = answer.responses[0].partitions
        assert partition.error_code is error
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (other, epoch + 1)
        assert partition.records in (None, b"")

    # A fetch of a partition whose leader did not move stays parked.
    unmoved = parked(await nodes.to(nodes.leader(1)), nodes.epoch(1), partition=1)
    await asyncio.sleep(0.05)
    nodes.server.nodes.move_leader(TOPIC, 0, first)
    await asyncio.sleep(0.05)
    assert not unmoved.done()
    unmoved.cancel()


async def test_one_node_answers_offset_for_leader_epoch_from_epoch_0(server: BrokerServer) -> None:
    """Unlisted on one node, but answered as a one-entry epoch cache would: epoch 0 from offset 0."""
    client = await WireClient.connect(server.port)
    try:
        await produce_to(client, 0, 2)
        assert await end_offsets(client, 0, 0, 1, -1) == [(E.none, 0, 2), (E.none, -1, -1), (E.none, -1, -1)]
        assert (await end_offsets(client, 0, 0, current=1))[0][0] is E.unknown_leader_epoch
        listed = await client.call(list_offsets_request(10, [(0, LATEST)]))
        assert listed.topics[0].partitions[0].leader_epoch == 0
    finally:
        await client.close()


async def test_a_recovered_log_keeps_its_epochs(tmp_path: Path) -> None:
    """Issue 27: batches keep the epoch they were appended in across a restart, and the epoch cache is rebuilt
    from them, so the partition's leader epoch never goes back and OffsetForLeaderEpoch answers as before."""
    settings = broker_settings(cluster=ClusterConfig(nodes=3), data_dir=str(tmp_path))
    first = BrokerServer(settings)
    await first.start()
    try:
        nodes = Nodes(first)
        await produce_to(await nodes.to(nodes.leader(0)), 0, 2)
        moved = first.nodes.move_leader(TOPIC, 0, nodes.follower(0))
        await produce_to(await nodes.to(moved.leader), 0, 3)
        await nodes.close()
    finally:
        await first.stop()
    again = BrokerServer(settings)
    await again.start()
    try:
        nodes = Nodes(again)
        assert nodes.epoch(0) == 1 and again.nodes.layout.leadership(TOPIC, 0).epochs == [(0, 0), (1, 2)]
        leader = await nodes.to(nodes.leader(0))
        assert await end_offsets(leader, 0, 0, 1, current=1) == [(E.none, 0, 2), (E.none, 1, 5)]
        await produce_to(leader, 0)
        log = again.topics.get(TOPIC).log(0)  # type: ignore[union-attr]
        assert log is not None
        assert [read_header(b.data).partition_leader_epoch for b in log.batches_from(0)] == [0, 1, 1]
        await nodes.close()
    finally:
        await again.stop()


async def test_delete_records_and_describe_producers_only_at_the_leader(nodes: Nodes) -> None:
    await produce_to(await nodes.to(nodes.leader(0)), 0, 3)
    api = ApiKey.DELETE_RECORDS
    deleting = request(api, 2, topics=(part(api, 2, "DeleteRecordsTopic", name=TOPIC, partitions=(
        part(api, 2, "DeleteRecordsPartition", partition_index=i32(0), offset=i64(1)),)),),
        timeout=datetime.timedelta(seconds=5))  # fmt: skip
    refused = (await (await nodes.to(nodes.follower(0))).call(deleting)).topics[0].partitions[0]
    assert (refused.error_code, refused.low_watermark) == (E.not_leader_or_follower, -1)
    done = (await (await nodes.to(nodes.leader(0))).call(deleting)).topics[0].partitions[0]
    assert (done.error_code, done.low_watermark) == (E.none, 1)
    api = ApiKey.DESCRIBE_PRODUCERS
    describing = request(api, 0, topics=(part(api, 0, "TopicRequest", name=TOPIC, partition_indexes=(i32(0),)),))
    at_follower = await (await nodes.to(nodes.follower(0))).call(describing)
    assert at_follower.topics[0].partitions[0].error_code is E.not_leader_or_follower
    at_leader = await (await nodes.to(nodes.leader(0))).call(describing)
    assert at_leader.topics[0].partitions[0].error_code is E.none


async def test_a_share_session_partition_whose_leader_moved_acquires_nothing(nodes: Nodes) -> None:
    server = nodes.server
    coordinator = server.nodes.layout.group_coordinator("sg2")
    client = await nodes.to(coordinator)
    assert (await client.call(heartbeat("sg2", "m1", 0, (TOPIC,)))).error_code is E.none
    topic = server.topics.get(TOPIC)
    assert topic is not None
    here = next(p for p in range(3) if nodes.leader(p) == coordinator)
    opened = await client.call(share_fetch("sg2", "m1", 0, topic.topic_id, [here], version=2))
    assert opened.error_code is E.none and partition_of(opened, here).error_code is E.none
    moved = server.nodes.move_leader(TOPIC, here, nodes.follower(here))
    await produce_to(await nodes.to(moved.leader), here, 2)
    again = await client.call(share_fetch("sg2", "m1", 1, topic.topic_id, [], version=2))
    refused = partition_of(again, here)
    assert refused.error_code is E.not_leader_or_follower and not refused.acquired_records
    assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (moved.leader, 1)
    assert [e.node_id for e in again.node_endpoints] == [moved.leader]


async def test_a_last_fetched_epoch_the_cache_cannot_end_is_out_of_range(nodes: Nodes) -> None:
    """Partition.readFromLocalLog: an UNDEFINED end for LastFetchedEpoch is OFFSET_OUT_OF_RANGE, not a divergence."""
    leader = await nodes.to(nodes.leader(1))
    await produce_to(leader, 1, 2)
    fetch_part = part(ApiKey.FETCH, 12, "FetchPartition", partition=i32(1), current_leader_epoch=i32(0),
                      fetch_offset=i64(2), last_fetched_epoch=i32(5), log_start_offset=i64(-1),
                      partition_max_bytes=i32(1 << 20))  # fmt: skip
    answer = (await leader.call(fetch_request(12, [(TOPIC, [fetch_part])]))).responses[0].partitions[0]
    assert answer.error_code is E.offset_out_of_range
