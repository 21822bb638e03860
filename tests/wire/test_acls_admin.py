"""ACLs of the admin and transaction APIs over a real socket (docs/spec/security.md 10, checklist 56): topic admin,
configs, DescribeCluster, ConsumerGroupDescribe, ListOffsets, OffsetForLeaderEpoch, OffsetDelete, TxnOffsetCommit
and AddPartitionsToTxn, each denied and granted in its own shape. The principal is User:ANONYMOUS (PLAINTEXT)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from broker.security.acls import CLUSTER_NAME, Operation, PatternType, ResourceType
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.wire.client import WireClient, part, request
from tests.wire.test_acls import grant, offset_commit, start
from tests.wire.test_cluster_admin import delete_records_request, describe_cluster_request
from tests.wire.test_configs import alter, describe
from tests.wire.test_data_plane import init_producer_id_request, list_offsets_request
from tests.wire.test_topic_admin import create_request, delete_request, grow_request, new_topic
from tests.wire.test_transactions_api import add_partitions_request
from tests.wire.test_txn_admin_api import call_describe
from tests.wire.test_txn_offset_commit import txn_offset_commit

E = ErrorCode
Op, R = Operation, ResourceType
DENIED = "Authorization failed."


@pytest.fixture
async def acl_server() -> AsyncIterator[BrokerServer]:
    server = await start()
    yield server
    await server.stop()


@pytest.fixture
async def client(acl_server: BrokerServer) -> AsyncIterator[WireClient]:
    connection = await WireClient.connect(acl_server.port, "acl-admin-test")
    yield connection
    await connection.close()


async def test_create_topics_needs_create_on_the_cluster_or_the_topic(
    acl_server: BrokerServer, client: WireClient
) -> None:
    answer = await client.call(create_request(7, new_topic(7, "made-1"), new_topic(7, "made-2")))
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        ("made-1", E.topic_authorization_failed, DENIED), ("made-2", E.topic_authorization_failed, DENIED),
    ]  # fmt: skip
    grant(acl_server, R.TOPIC, "made-1", Op.CREATE)
    answer = await client.call(create_request(7, new_topic(7, "made-1"), new_topic(7, "made-2")))
    assert [t.error_code for t in answer.topics] == [E.none, E.topic_authorization_failed]
    grant(acl_server, R.CLUSTER, CLUSTER_NAME, Op.CREATE)
    answer = await client.call(create_request(7, new_topic(7, "made-2")))
    assert [t.error_code for t in answer.topics] == [E.none]


async def test_delete_topics_needs_describe_then_delete(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.TOPIC, "other", Op.DESCRIBE)
    answer = await client.call(delete_request(6, "other", "no-such-topic"))
    assert [(t.name, t.error_code) for t in answer.responses] == [
        ("other", E.topic_authorization_failed), ("no-such-topic", E.topic_authorization_failed),
    ]  # fmt: skip
    grant(acl_server, R.TOPIC, "other", Op.DELETE)
    answer = await client.call(delete_request(6, "other"))
    assert [t.error_code for t in answer.responses] == [E.none]
    assert acl_server.topics.get("other") is None


async def test_create_partitions_needs_alter_on_the_topic(acl_server: BrokerServer, client: WireClient) -> None:
    answer = await client.call(grow_request(3, ("topic", 4, None)))
    assert [(r.error_code, r.error_message) for r in answer.results] == [(E.topic_authorization_failed, DENIED)]
    grant(acl_server, R.TOPIC, "topic", Op.ALTER)
    assert [r.error_code for r in (await client.call(grow_request(3, ("topic", 4, None)))).results] == [E.none]


async def test_delete_records_needs_delete_on_the_topic(acl_server: BrokerServer, client: WireClient) -> None:
    answer = await client.call(delete_records_request(2, {"topic": [(0, 0)]}))
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.low_watermark) == (E.topic_authorization_failed, -1)
    grant(acl_server, R.TOPIC, "topic", Op.DELETE)
    answer = await client.call(delete_records_request(2, {"topic": [(0, 0)]}))
    assert answer.topics[0].partitions[0].error_code is E.none


async def test_configs_need_describe_configs_and_alter_configs(acl_server: BrokerServer, client: WireClient) -> None:
    answer = await client.call(describe(4, (2, "topic", None), (4, "1", None), (32, "some-group", None)))
    assert [(r.error_code, r.error_message, r.configs) for r in answer.results] == [
        (E.topic_authorization_failed, "Topic authorization failed.", ()),
        (E.cluster_authorization_failed, "Cluster authorization failed.", ()),
        (E.group_authorization_failed, "Group authorization failed.", ()),
    ]
    grant(acl_server, R.TOPIC, "topic", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    answer = await client.call(describe(4, (2, "topic", ("retention.ms",))))
    assert [(r.error_code, len(r.configs)) for r in answer.results] == [(E.none, 1)]
    altered = await client.call(alter(2, (2, "topic", {"retention.ms": "1000"}), (2, "other", {"retention.ms": "1"})))
    assert [r.error_code for r in altered.responses] == [E.none, E.topic_authorization_failed]


async def test_describe_cluster_authorized_operations(acl_server: BrokerServer, client: WireClient) -> None:
    assert (await client.call(describe_cluster_request(1, operations=True))).cluster_authorized_operations == 0
    grant(acl_server, R.CLUSTER, CLUSTER_NAME, Op.ALTER)
    answer = await client.call(describe_cluster_request(1, operations=True))
    assert answer.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)


async def test_consumer_group_describe_needs_describe_on_each_group(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "seen", Op.DESCRIBE)
    answer = await client.call(
        request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=("seen", "hidden"), include_authorized_operations=True)
    )
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("seen", E.group_id_not_found), ("hidden", E.group_authorization_failed),
    ]  # fmt: skip


async def test_list_offsets_and_offset_for_leader_epoch_need_describe(
    acl_server: BrokerServer, client: WireClient
) -> None:
    answer = await client.call(list_offsets_request(7, [(0, -1)]))
    assert answer.topics[0].partitions[0].error_code is E.topic_authorization_failed
    epochs = request(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=i32(-1),
        topics=(part(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderTopic", topic="topic", partitions=(
            part(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderPartition", partition=i32(0),
                 current_leader_epoch=i32(-1), leader_epoch=i32(0)),
        )),),
    )  # fmt: skip
    assert (await client.call(epochs)).topics[0].partitions[0].error_code is E.topic_authorization_failed
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE)
    assert (await client.call(list_offsets_request(7, [(0, -1)]))).topics[0].partitions[0].error_code is E.none
    assert (await client.call(epochs)).topics[0].partitions[0].error_code is E.none


def offset_delete(group_id: str, *topics: str) -> Any:
    return request(
        ApiKey.OFFSET_DELETE, 0, group_id=group_id,
        topics=tuple(
            part(ApiKey.OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name=name,
                 partitions=(part(ApiKey.OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=i32(0)),))
            for name in topics
        ),
    )  # fmt: skip


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "g-del", Op.READ)
    grant(acl_server, R.TOPIC, "*", Op.READ)
    await client.call(offset_commit("g-del", ("topic", 1), ("other", 1)))
    denied = await client.call(offset_delete("g-del", "topic"))
    assert (denied.error_code, denied.topics) == (E.group_authorization_failed, ())
    grant(acl_server, R.GROUP, "g-del", Op.DELETE)
    grant(acl_server, R.TOPIC, "other", Op.READ, permission=_deny())
    answer = await client.call(offset_delete("g-del", "topic", "other"))
    assert answer.error_code is E.none
    assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
        ("topic", E.none), ("other", E.topic_authorization_failed),
    ]  # fmt: skip


def _deny() -> Any:
    from broker.security.acls import Permission

    return Permission.DENY


async def test_56_txn_offset_commit_without_group_read_then_without_topic_read(
    acl_server: BrokerServer, client: WireClient
) -> None:
    tid, group = "txn-56", "g-56"
    denied = await client.call(txn_offset_commit(3, [("topic", [(0, 1)])], producer_id=0, group_id=group,
                                                 transactional_id=tid))  # fmt: skip
    assert [p.error_code for t in denied.topics for p in t.partitions] == [E.transactional_id_authorization_failed]
    grant(acl_server, R.TRANSACTIONAL_ID, tid, Op.WRITE)
    init = await client.call(init_producer_id_request(4, tid))
    assert init.error_code is E.none
    commit = txn_offset_commit(
        3, [("topic", [(0, 1), (1, 1)]), ("other", [(0, 1)])], producer_id=init.producer_id,
        producer_epoch=init.producer_epoch, group_id=group, transactional_id=tid,
    )  # fmt: skip
    answer = await client.call(commit)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [E.group_authorization_failed] * 3
    grant(acl_server, R.GROUP, group, Op.READ)
    grant(acl_server, R.TOPIC, "topic", Op.READ)
    answer = await client.call(commit)
    errors = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
    assert errors[("other", 0)] is E.topic_authorization_failed
    assert errors[("topic", 0)] is not E.topic_authorization_failed  # on to the transaction's own checks


async def test_add_partitions_to_txn_needs_write_on_each_topic(acl_server: BrokerServer, client: WireClient) -> None:
    tid = "txn-add"
    grant(acl_server, R.TRANSACTIONAL_ID, tid, Op.WRITE)
    grant(acl_server, R.TOPIC, "top", Op.WRITE, pattern_type=PatternType.PREFIXED)
    init = await client.call(init_producer_id_request(4, tid))
    answer = await client.call(
        add_partitions_request(3, tid, init.producer_id, init.producer_epoch, ("topic", 0), ("other", 0))
    )
    errors = {(t.name, p.partition_index): p.partition_error_code for t in answer.results_by_topic_v3_and_below
              for p in t.results_by_partition}  # fmt: skip
    assert errors == {("topic", 0): E.operation_not_attempted, ("other", 0): E.topic_authorization_failed}
    answer = await client.call(add_partitions_request(3, tid, init.producer_id, init.producer_epoch, ("topic", 0)))
    assert [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition] == [
        E.none
    ]


async def test_acl_apis_keep_their_v1_shape(acl_server: BrokerServer, client: WireClient) -> None:
    """v1 (not flexible) answers as v3 does, USER being v3's only."""
    grant(acl_server, R.CLUSTER, CLUSTER_NAME, Op.ALTER, Op.DESCRIBE)
    user = part(ApiKey.CREATE_ACLS, 1, "AclCreation", resource_type=i8(7), resource_name="bob",
                resource_pattern_type=i8(3), principal="User:bob", host="*", operation=i8(13),
                permission_type=i8(3))  # fmt: skip
    answer = await client.call(request(ApiKey.CREATE_ACLS, 1, creations=(user,)))
    assert [r.error_code for r in answer.results] == [E.invalid_request]
    answer = await client.call(request(ApiKey.CREATE_ACLS, 3, creations=(part(ApiKey.CREATE_ACLS, 3, "AclCreation",
        resource_type=i8(7), resource_name="bob", resource_pattern_type=i8(3), principal="User:bob", host="*",
        operation=i8(13), permission_type=i8(3)),)))  # fmt: skip
    assert [r.error_code for r in answer.results] == [E.none]
    described = await client.call(request(
        ApiKey.DESCRIBE_ACLS, 1, resource_type_filter=i8(4), resource_name_filter=None, pattern_type_filter=i8(1),
        principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1),
    ))  # fmt: skip
    assert [(r.resource_name, len(r.acls)) for r in described.resources] == [(CLUSTER_NAME, 2)]



async def test_50_consumer_group_describe_of_a_group_assigned_an_undescribable_topic(
    acl_server: BrokerServer, client: WireClient
) -> None:
    from broker.security.acls import AclFilter
    from tests.wire.test_acls import SECOND

    grant(acl_server, R.GROUP, "g-50", Op.READ)
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE)
    beat = request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="g-50", member_id="", member_epoch=i32(0), instance_id=None,
        rack_id=None, rebalance_timeout=10 * SECOND, subscribed_topic_names=("topic",), server_assignor=None,
        topic_partitions=(),
    )  # fmt: skip
    assert (await client.call(beat)).error_code is E.none
    describe_50 = request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=("g-50",), include_authorized_operations=False)
    (group,) = (await client.call(describe_50)).groups
    assert (group.error_code, len(group.members)) == (E.none, 1)
    assert acl_server.authorizer is not None
    acl_server.authorizer.delete([AclFilter(R.TOPIC, "topic", PatternType.LITERAL)])
    (group,) = (await client.call(describe_50)).groups
    assert (group.error_code, group.error_message, group.members) == (
        E.topic_authorization_failed,
        "The group has described topic(s) that the client is not authorized to describe.",
        (),
    )


async def test_transaction_admin_apis_need_describe_or_read(acl_server: BrokerServer, client: WireClient) -> None:
    tid = "txn-seen"
    grant(acl_server, R.TRANSACTIONAL_ID, tid, Op.WRITE)  # implies DESCRIBE
    assert (await client.call(init_producer_id_request(4, tid))).error_code is E.none
    assert acl_server.transactions is not None
    described = await call_describe(client, tid, "txn-hidden")  # kafka-python's decoder: kio refuses Empty's -1
    assert [(s.transactional_id, s.error_code) for s in described.transaction_states] == [
        (tid, E.none), ("txn-hidden", E.transactional_id_authorization_failed),
    ]  # fmt: skip
    listed = await client.call(request(ApiKey.LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(),
                                       duration_filter=i64(-1)))  # fmt: skip
    assert [s.transactional_id for s in listed.transaction_states] == [tid]
    acl_server.authorizer.delete([_txn_filter(tid)])  # type: ignore[union-attr]
    listed = await client.call(request(ApiKey.LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(),
                                       duration_filter=i64(-1)))  # fmt: skip
    assert listed.transaction_states == ()
    producers = request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=(
        part(ApiKey.DESCRIBE_PRODUCERS, 0, "TopicRequest", name="topic", partition_indexes=(i32(0),)),
    ))  # fmt: skip
    answer = await client.call(producers)
    assert answer.topics[0].partitions[0].error_code is E.topic_authorization_failed
    grant(acl_server, R.TOPIC, "topic", Op.READ)
    assert (await client.call(producers)).topics[0].partitions[0].error_code is E.none


def _txn_filter(tid: str) -> Any:
    from broker.security.acls import AclFilter

    return AclFilter(R.TRANSACTIONAL_ID, tid, PatternType.LITERAL)


async def test_share_group_describe_needs_describe_on_each_group(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "share-seen", Op.DESCRIBE)
    answer = await client.call(
        request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=("share-seen", "share-hidden"),
                include_authorized_operations=False)
    )  # fmt: skip
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("share-seen", E.group_id_not_found), ("share-hidden", E.group_authorization_failed),
    ]  # fmt: skip


async def test_share_offset_admin_and_write_txn_markers_are_refused_whole(client: WireClient) -> None:
    altered = await client.call(request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id="share-g", topics=()))
    assert altered.error_code is E.group_authorization_failed
    deleted = await client.call(request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id="share-g", topics=()))
    assert deleted.error_code is E.group_authorization_failed
    topic = part(ApiKey.WRITE_TXN_MARKERS, 1, "WritableTxnMarkerTopic", name="topic", partition_indexes=(i32(0),))
    marker = part(ApiKey.WRITE_TXN_MARKERS, 1, "WritableTxnMarker", producer_id=i64(1), producer_epoch=_i16(0),
                  transaction_result=False, topics=(topic,), coordinator_epoch=i32(0))  # fmt: skip
    markers = await client.call(request(ApiKey.WRITE_TXN_MARKERS, 1, markers=(marker,)))
    assert [(m.producer_id, p.error_code) for m in markers.markers for t in m.topics for p in t.partitions] == [
        (1, E.cluster_authorization_failed)
    ]


def _i16(value: int) -> Any:
    from kio.static.primitive import i16

    return i16(value)


async def test_leave_and_delete_groups_need_read_and_delete(acl_server: BrokerServer, client: WireClient) -> None:
    member = part(ApiKey.LEAVE_GROUP, 3, "MemberIdentity", member_id="m", group_instance_id=None)
    left = await client.call(request(ApiKey.LEAVE_GROUP, 3, group_id="g-leave", members=(member,)))
    assert (left.error_code, left.members) == (E.group_authorization_failed, ())
    grant(acl_server, R.GROUP, "g-del-", Op.DELETE, pattern_type=PatternType.PREFIXED)
    deleted = await client.call(request(ApiKey.DELETE_GROUPS, 2, groups_names=("g-del-1", "g-keep")))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g-del-1", E.group_id_not_found), ("g-keep", E.group_authorization_failed),
    ]  # fmt: skip


async def test_end_txn_add_offsets_and_transactional_produce_need_write_on_the_id(
    acl_server: BrokerServer, client: WireClient
) -> None:
    from tests.storage import make_batch
    from tests.wire.test_data_plane import produce_request
    from tests.wire.test_transactions_api import add_offsets_request, end_request

    tid = "txn-end"
    assert (await client.call(end_request(3, tid, 0, 0, True))).error_code is E.transactional_id_authorization_failed
    added = await client.call(add_offsets_request(3, tid, 0, 0, "g-txn"))
    assert added.error_code is E.transactional_id_authorization_failed
    produced = await client.call(produce_request(9, [(0, make_batch(1))], transactional_id=tid))
    assert produced.responses[0].partition_responses[0].error_code is E.transactional_id_authorization_failed
    grant(acl_server, R.TRANSACTIONAL_ID, tid, Op.WRITE)
    added = await client.call(add_offsets_request(3, tid, 0, 0, "g-txn"))
    assert added.error_code is E.group_authorization_failed  # then READ on the group
    grant(acl_server, R.GROUP, "g-txn", Op.READ)
    added = await client.call(add_offsets_request(3, tid, 0, 0, "g-txn"))
    assert added.error_code not in (E.group_authorization_failed, E.transactional_id_authorization_failed)
