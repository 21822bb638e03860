"""Routing of coordinator requests on a three-node broker (issue 29; cluster-and-durability.md 1.2, 1.3; checklist
2-4): FindCoordinator answers alike from every node, a coordinator request at another node answers NOT_COORDINATOR
in its API's shape, ListGroups lists each node's own groups, and a request naming several groups answers
NOT_COORDINATOR in the entries of the groups another node coordinates (Kafka's per-group error)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kio.static.primitive import i8, i32

from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import WireClient, part, request
from tests.wire.cluster_client import (
    E,
    cluster,
    connect_to,
    group_on,
    heartbeat_request,
    join_request,
    stable_pair,
    txn_on,
)
from tests.wire.test_consumer_group_api import consumer_describe
from tests.wire.test_consumer_group_api import join as consumer_join
from tests.wire.test_transactions_api import add_offsets_request, add_partitions_request, end_request, init_request
from tests.wire.test_txn_offset_commit import errors, txn_offset_commit

__all__ = ["cluster"]


@pytest.fixture
async def opened() -> AsyncIterator[list[WireClient]]:
    clients: list[WireClient] = []
    yield clients
    for client in clients:
        await client.close()


def offset_commit(group_id: str, offset: int = 5) -> object:
    api = ApiKey.OFFSET_COMMIT
    return request(
        api, 8, group_id=group_id, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
        topics=(
            part(
                api, 8, "OffsetCommitRequestTopic", name="topic",
                partitions=(
                    part(
                        api, 8, "OffsetCommitRequestPartition", partition_index=i32(0), committed_offset=offset,
                        committed_leader_epoch=i32(-1), committed_metadata="",
                    ),
                ),
            ),
        ),
    )  # fmt: skip


def offset_fetch_v8(*group_ids: str) -> object:
    api = ApiKey.OFFSET_FETCH
    return request(
        api, 8, require_stable=False,
        groups=tuple(part(api, 8, "OffsetFetchRequestGroup", group_id=g, topics=None) for g in group_ids),
    )  # fmt: skip


async def test_find_coordinator_names_the_same_node_from_every_node(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 2 and 4: every node names the leader of the key's internal partition, groups and transactions."""
    layout = cluster.nodes.layout
    for key_type, key, expected in ((0, "my-group", layout.group_coordinator("my-group")),
                                    (1, "txn-1", layout.transaction_coordinator("txn-1"))):  # fmt: skip
        for node_id in layout.order:
            client = await connect_to(cluster, node_id, opened)
            answer = await client.call(
                request(ApiKey.FIND_COORDINATOR, 4, key_type=i8(key_type), coordinator_keys=(key,))
            )
            (found,) = answer.coordinators
            assert (found.error_code, int(found.node_id)) == (E.none, expected)


async def test_group_requests_at_another_node_answer_not_coordinator(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 3: Heartbeat / OffsetCommit / OffsetFetch / JoinGroup of a group at a node that does not coordinate
    it answer NOT_COORDINATOR; at its coordinator the normal answer."""
    home, away = cluster.nodes.layout.order[0], cluster.nodes.layout.order[1]
    group = group_on(cluster, home)
    at_home, elsewhere = await connect_to(cluster, home, opened), await connect_to(cluster, away, opened)
    assert (await elsewhere.call(heartbeat_request(group, 1, "m"))).error_code is E.not_coordinator
    assert (await at_home.call(heartbeat_request(group, 1, "m"))).error_code is E.unknown_member_id
    commit = await elsewhere.call(offset_commit(group))
    assert commit.topics[0].partitions[0].error_code is E.not_coordinator
    commit = await at_home.call(offset_commit(group))
    assert commit.topics[0].partitions[0].error_code is E.none
    fetch = await elsewhere.call(request(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False))
    assert fetch.error_code is E.not_coordinator
    fetch = await at_home.call(request(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False))
    assert fetch.error_code is E.none and fetch.topics[0].partitions[0].committed_offset == 5
    joined = await elsewhere.call(join_request(group))
    assert joined.error_code is E.not_coordinator
    hb = await elsewhere.call(consumer_join(0, group_on(cluster, home, "c"), "m1"))
    assert hb.error_code is E.not_coordinator


async def test_transaction_requests_at_another_node_answer_not_coordinator(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 4: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn of a transactional id at a node
    that does not lead its ``__transaction_state`` partition, in each API's shape; TxnOffsetCommit goes by its
    group (the group coordinator's request)."""
    home, away = cluster.nodes.layout.order[0], cluster.nodes.layout.order[2]
    tid = txn_on(cluster, home)
    at_home, elsewhere = await connect_to(cluster, home, opened), await connect_to(cluster, away, opened)
    refused = await elsewhere.call(init_request(4, tid))
    assert refused.error_code is E.not_coordinator and int(refused.producer_id) == -1
    started = await at_home.call(init_request(4, tid))
    assert started.error_code is E.none
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    added = await elsewhere.call(add_partitions_request(3, tid, pid, epoch, ("topic", 0)))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below for p in t.results_by_partition] == [
        E.not_coordinator
    ]
    group_home = group_on(cluster, home)
    assert (await elsewhere.call(add_offsets_request(3, tid, pid, epoch, group_home))).error_code is E.not_coordinator
    assert (await at_home.call(add_offsets_request(3, tid, pid, epoch, group_home))).error_code is E.none
    # TxnOffsetCommit is the group coordinator's: routed by the group, whoever leads the transactional id.
    group_away = group_on(cluster, away)
    commit = txn_offset_commit(3, [("topic", [(0, 7)])], producer_id=pid, producer_epoch=epoch, group_id=group_away,
                               transactional_id=tid)  # fmt: skip
    assert {e for *_, e in errors(await at_home.call(commit))} == {E.not_coordinator}
    commit = txn_offset_commit(3, [("topic", [(0, 7)])], producer_id=pid, producer_epoch=epoch, group_id=group_home,
                               transactional_id=tid)  # fmt: skip
    assert {e for *_, e in errors(await at_home.call(commit))} == {E.none}
    assert (await elsewhere.call(end_request(3, tid, pid, epoch, True))).error_code is E.not_coordinator
    assert (await at_home.call(end_request(3, tid, pid, epoch, True))).error_code is E.none


async def test_list_groups_on_each_node_lists_the_groups_it_coordinates(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    order = cluster.nodes.layout.order
    groups = {node_id: group_on(cluster, node_id) for node_id in order}
    for node_id, group in groups.items():
        client = await connect_to(cluster, node_id, opened)
        commit = await client.call(offset_commit(group))
        assert commit.topics[0].partitions[0].error_code is E.none
    listed = {}
    for node_id in order:
        client = await connect_to(cluster, node_id, opened)
        answer = await client.call(request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=()))
        assert answer.error_code is E.none
        listed[node_id] = [g.group_id for g in answer.groups]
    assert listed == {node_id: [group] for node_id, group in groups.items()}
    # After a move the group is listed by its new coordinator only.
    cluster.nodes.move_coordinator("group", groups[order[0]], order[1])
    for node_id, expected in ((order[0], []), (order[1], sorted([groups[order[0]], groups[order[1]]]))):
        client = await connect_to(cluster, node_id, opened)
        answer = await client.call(request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=()))
        assert sorted(g.group_id for g in answer.groups) == expected


async def test_list_groups_while_a_partition_loads(cluster: BrokerServer, opened: list[WireClient]) -> None:
    order = cluster.nodes.layout.order
    group = group_on(cluster, order[0])
    cluster.nodes.load_delay_ms = 60_000
    cluster.nodes.move_coordinator("group", group, order[1])
    client = await connect_to(cluster, order[1], opened)
    answer = await client.call(request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=()))
    assert answer.error_code is E.coordinator_load_in_progress and answer.groups == ()
    other = await connect_to(cluster, order[2], opened)
    answer = await other.call(request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=()))
    assert answer.error_code is E.none


async def test_requests_naming_several_groups_answer_per_group(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """DescribeGroups, DeleteGroups, OffsetFetch v8, ConsumerGroupDescribe, ShareGroupDescribe and
    DescribeShareGroupOffsets: a group another node coordinates
    gets NOT_COORDINATOR in its own entry, whichever place it has in the request; the others are served."""
    home, away = cluster.nodes.layout.order[0], cluster.nodes.layout.order[1]
    mine, theirs = group_on(cluster, home), group_on(cluster, away)
    client = await connect_to(cluster, home, opened)
    assert (await client.call(offset_commit(mine))).topics[0].partitions[0].error_code is E.none
    for names in ((theirs, mine), (mine, theirs)):
        described = await client.call(
            request(ApiKey.DESCRIBE_GROUPS, 5, groups=names, include_authorized_operations=False)
        )
        by_id = {g.group_id: g for g in described.groups}
        assert [g.group_id for g in described.groups] == list(names)
        assert by_id[theirs].error_code is E.not_coordinator and by_id[theirs].group_state == ""
        assert by_id[mine].error_code is E.none and by_id[mine].group_state == "Empty"
        fetched = await client.call(offset_fetch_v8(*names))
        errors_by_id = {g.group_id: g.error_code for g in fetched.groups}
        assert errors_by_id == {theirs: E.not_coordinator, mine: E.none}
        described = await client.call(consumer_describe(0, *names))
        codes = {g.group_id: g.error_code for g in described.groups}
        assert codes == {theirs: E.not_coordinator, mine: E.group_id_not_found}
        described = await client.call(
            request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=names, include_authorized_operations=False)
        )
        codes = {g.group_id: g.error_code for g in described.groups}
        assert codes == {theirs: E.not_coordinator, mine: E.group_id_not_found}
        api = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
        offsets = await client.call(
            request(api, 1, groups=tuple(part(api, 1, "DescribeShareGroupOffsetsRequestGroup", group_id=g,
                                              topics=None) for g in names))
        )  # fmt: skip
        assert {g.group_id: g.error_code for g in offsets.groups}[theirs] is E.not_coordinator
    deleted = await client.call(request(ApiKey.DELETE_GROUPS, 2, groups_names=(theirs, mine)))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(theirs, E.not_coordinator), (mine, E.none)]


async def test_a_parked_join_is_answered_not_coordinator_and_the_members_carry_on_at_the_new_node(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 23/24: the leader's rejoin parked at the old coordinator is answered NOT_COORDINATOR with its member
    id when the coordinator moves; both members heartbeat at the new one in the same generation, no rebalance."""
    old, new = cluster.nodes.layout.order[0], cluster.nodes.layout.order[2]
    group = group_on(cluster, old)
    first, second = await connect_to(cluster, old, opened), await connect_to(cluster, old, opened)
    leader, follower, generation = await stable_pair(first, second, group)
    await first.send_raw(first.encode(join_request(group, leader)))  # parked: the follower has not rejoined
    assert (await second.call(heartbeat_request(group, generation, follower))).error_code is E.rebalance_in_progress
    moved = cluster.nodes.move_coordinator("group", group, new)
    assert moved.leader == new
    _, answer = first.decode(ApiKey.JOIN_GROUP, 3, await first.read_frame())
    assert (answer.error_code, answer.member_id) == (E.not_coordinator, leader)
    assert (await second.call(heartbeat_request(group, generation, follower))).error_code is E.not_coordinator
    at_new = await connect_to(cluster, new, opened)
    for member in (leader, follower):
        assert (await at_new.call(heartbeat_request(group, generation, member))).error_code is E.none
    state = cluster.coordinator.groups[group]
    assert state.state.value == "Stable" and state.generation_id == generation


async def test_a_graceful_stop_answers_parked_joins_before_the_connections_close(
    cluster: BrokerServer, opened: list[WireClient]
) -> None:
    """Checklist 23: a graceful stop of the coordinator node while a rebalance runs."""
    node = cluster.nodes.layout.order[1]
    group = group_on(cluster, node)
    first, second = await connect_to(cluster, node, opened), await connect_to(cluster, node, opened)
    leader, follower, generation = await stable_pair(first, second, group)
    await first.send_raw(first.encode(join_request(group, leader)))
    assert (await second.call(heartbeat_request(group, generation, follower))).error_code is E.rebalance_in_progress
    stopped = await cluster.nodes.stop(node, "graceful")
    assert stopped["moved_coordinators"]
    _, answer = first.decode(ApiKey.JOIN_GROUP, 3, await first.read_frame())
    assert (answer.error_code, answer.member_id) == (E.not_coordinator, leader)
    new = cluster.nodes.layout.group_coordinator(group)
    assert new != node
    at_new = await connect_to(cluster, new, opened)
    for member in (leader, follower):
        assert (await at_new.call(heartbeat_request(group, generation, member))).error_code is E.none
