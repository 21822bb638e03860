"""Coordinator moves on a three-node broker, on the wire (issue 29; cluster-and-durability.md 2.3-2.6; checklist
23-25): a parked SyncGroup answered NOT_COORDINATOR, a node killed under its group, a KIP-848 member keeping its
epoch and assignment at the new coordinator, and the load delay's COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import WireClient
from tests.wire.cluster_client import (
    E,
    cluster,
    connect_to,
    group_on,
    heartbeat_request,
    join_request,
    stable_pair,
    sync_request,
    txn_on,
)
from tests.wire.test_consumer_group_api import assigned, heartbeat, join, topic_id
from tests.wire.test_transactions_api import (
    add_partitions_request,
    end_request,
    init,
    partition_errors,
    produce_txn,
    txn_batch,
)

__all__ = ["cluster"]


@pytest.fixture
async def opened() -> AsyncIterator[list[WireClient]]:
    clients: list[WireClient] = []
    yield clients
    for client in clients:
        await client.close()


async def test_a_parked_sync_is_answered_not_coordinator_and_the_group_is_back_at_its_generation(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """2.4: a SyncGroup parked in CompletingRebalance; the new coordinator has the last stored generation."""
    old, new = cluster.nodes.layout.order[1], cluster.nodes.layout.order[0]
    group = group_on(cluster, old)
    first, second = await connect_to(cluster, old, opened), await connect_to(cluster, old, opened)
    leader, follower, generation = await stable_pair(first, second, group)
    # Both rejoin: generation + 1 is CompletingRebalance, the follower's SyncGroup parks for the leader's.
    await first.send_raw(first.encode(join_request(group, leader)))  # the leader's rejoin starts the rebalance
    await asyncio.sleep(0.05)
    follower_join = await second.call(join_request(group, follower))
    _, rejoined = first.decode(ApiKey.JOIN_GROUP, 3, await first.read_frame())
    assert int(rejoined.generation_id) == int(follower_join.generation_id) == generation + 1
    await second.send_raw(second.encode(sync_request(group, generation + 1, follower)))
    await asyncio.sleep(0.05)
    cluster.nodes.move_coordinator("group", group, new)
    _, parked = second.decode(ApiKey.SYNC_GROUP, 3, await second.read_frame())
    assert parked.error_code is E.not_coordinator
    at_new = await connect_to(cluster, new, opened)
    assert (await at_new.call(heartbeat_request(group, generation, leader))).error_code is E.none
    assert (await at_new.call(heartbeat_request(group, generation + 1, leader))).error_code is E.illegal_generation
    synced = await at_new.call(sync_request(group, generation, follower))
    assert (synced.error_code, synced.assignment) == (E.none, b"F")


async def test_a_killed_coordinator_node_leaves_its_groups_to_another_in_the_same_generation(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 19/21: kill mode drops the node's connections at once; the members find the new coordinator (here:
    the layout's) and heartbeat there in their generation."""
    node = cluster.nodes.layout.order[2]
    group = group_on(cluster, node)
    first, second = await connect_to(cluster, node, opened), await connect_to(cluster, node, opened)
    leader, follower, generation = await stable_pair(first, second, group)
    await cluster.nodes.stop(node)
    assert await first.closed_by_peer()
    new = cluster.nodes.layout.group_coordinator(group)
    assert new != node and cluster.nodes.layout.up[new]
    at_new = await connect_to(cluster, new, opened)
    for member in (leader, follower):
        assert (await at_new.call(heartbeat_request(group, generation, member))).error_code is E.none


async def test_a_consumer_group_member_keeps_its_epoch_and_assignment_at_the_new_coordinator(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """2.3 and 5.2: NOT_COORDINATOR at the old node; a full heartbeat at the new one with the current epoch is
    answered as if nothing happened (librdkafka's behaviour after re-querying the coordinator)."""
    old, new = cluster.nodes.layout.order[0], cluster.nodes.layout.order[1]
    group = group_on(cluster, old, "cg")
    member = str(uuid.uuid4())
    client = await connect_to(cluster, old, opened)
    joined = await client.call(join(1, group, member))
    assert joined.error_code is E.none
    epoch, owned = int(joined.member_epoch), assigned(joined)
    assert owned == {topic_id(cluster): [0, 1, 2]}
    cluster.nodes.move_coordinator("group", group, new)
    assert (await client.call(heartbeat(1, group, member, epoch))).error_code is E.not_coordinator
    at_new = await connect_to(cluster, new, opened)
    full = heartbeat(1, group, member, epoch, rebalance_ms=300_000, topics=("topic",),
                     owned={topic_id(cluster): (0, 1, 2)})  # fmt: skip
    answer = await at_new.call(full)
    assert (answer.error_code, int(answer.member_epoch)) == (E.none, epoch)
    assert cluster.coordinator.consumer_groups[group].group_epoch == epoch


async def test_the_load_delay_answers_coordinator_load_in_progress_then_serves(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 25 (one member): for the load delay the new node answers COORDINATOR_LOAD_IN_PROGRESS to a
    Heartbeat; then the member, its session started at the load's end, is served in its generation."""
    old, new = cluster.nodes.layout.order[0], cluster.nodes.layout.order[2]
    group = group_on(cluster, old)
    first, second = await connect_to(cluster, old, opened), await connect_to(cluster, old, opened)
    leader, _, generation = await stable_pair(first, second, group)
    cluster.nodes.load_delay_ms = 400
    started = time.monotonic()
    cluster.nodes.move_coordinator("group", group, new)
    at_new = await connect_to(cluster, new, opened)
    loading = await at_new.call(heartbeat_request(group, generation, leader))
    assert loading.error_code is E.coordinator_load_in_progress
    while (error := (await at_new.call(heartbeat_request(group, generation, leader))).error_code) is not E.none:
        assert error is E.coordinator_load_in_progress and time.monotonic() - started < 5
        await asyncio.sleep(0.05)
    assert time.monotonic() - started >= 0.39
    member = cluster.coordinator.groups[group].members[leader]
    assert member.expiry is not None and member.expiry.due_ms > cluster.clock.now_ms() + 9_000


async def test_a_transaction_completes_at_the_new_coordinator_after_its_node_stops(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 30: the transaction coordinator's node is killed mid-transaction; its ``__transaction_state``
    partition moves (the state is shared: nothing but the routing changes), the old node is gone, the producer's
    EndTxn at the new coordinator commits, and the partition gets its COMMIT marker."""
    node = cluster.nodes.layout.order[0]
    tid = txn_on(cluster, node)
    at_old = await connect_to(cluster, node, opened)
    pid, epoch = await init(at_old, tid)
    added = await at_old.call(add_partitions_request(3, tid, pid, epoch, ("topic", 0)))
    assert partition_errors(added) == {("topic", 0): E.none}
    written = await produce_txn(at_old, 9, tid, 0, txn_batch(pid, epoch, count=3))
    assert written.error_code is E.none
    await cluster.nodes.stop(node)
    new = cluster.nodes.layout.transaction_coordinator(tid)
    assert new != node
    at_new = await connect_to(cluster, new, opened)
    assert (await at_new.call(end_request(3, tid, pid, epoch, True))).error_code is E.none
    log = cluster.topics.get("topic").log(0)  # type: ignore[union-attr]
    assert log is not None
    deadline = time.monotonic() + 5
    while log.last_stable_offset < log.next_offset:  # the COMMIT marker written
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert log.next_offset == 4  # three records and the marker
