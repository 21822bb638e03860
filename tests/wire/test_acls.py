"""ACLs over a real socket (docs/spec/security.md 10 and 11; checklist "Authorization" and "ACL and credential
administration"): each API denied and granted, in its own error shape.

Every wire connection here is PLAINTEXT, so its principal is User:ANONYMOUS: the tests grant and deny that
principal (and ``User:*``), through the broker's authorizer (``grant``) or through CreateAcls itself.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from broker.security.acls import Operation, PatternType, Permission, ResourceType, binding
from broker.server.broker import BrokerServer
from broker.server.settings import AclConfig
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.storage import make_batch
from tests.wire.client import WireClient, part, request
from tests.wire.test_data_plane import fetch_partition, fetch_request, init_producer_id_request, produce_request

E = ErrorCode
Op, R = Operation, ResourceType
ME = "User:ANONYMOUS"  # a PLAINTEXT connection's principal
INT32_MIN = -(2**31)
SECOND = datetime.timedelta(seconds=1)


async def start(**acls: Any) -> BrokerServer:
    settings = broker_settings(
        acls=AclConfig(authorizer="standard", **acls), topics=(("topic", 3), ("other", 1)), auto_create_topics=False
    )
    server = BrokerServer(settings)
    await server.start()
    return server


@pytest.fixture
async def acl_server() -> AsyncIterator[BrokerServer]:
    server = await start()
    yield server
    await server.stop()


@pytest.fixture
async def client(acl_server: BrokerServer) -> AsyncIterator[WireClient]:
    connection = await WireClient.connect(acl_server.port, "acl-test")
    yield connection
    await connection.close()


def grant(
    server: BrokerServer,
    kind: ResourceType,
    name: str,
    *operations: Operation,
    principal: str = ME,
    permission: Permission = Permission.ALLOW,
    pattern_type: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> None:
    assert server.authorizer is not None
    server.authorizer.add(
        [binding(kind, name, principal, op, permission, pattern_type=pattern_type, host=host) for op in operations]
    )


# -- request builders ---------------------------------------------------------------------------------------


def metadata(*topics: str | None, version: int = 12, everything: bool = False, operations: bool = False) -> Any:
    return request(
        ApiKey.METADATA,
        version,
        topics=None
        if everything
        else tuple(part(ApiKey.METADATA, version, "MetadataRequestTopic", name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=operations,
        include_topic_authorized_operations=operations,
    )


def find_coordinator(key: str, *, key_type: int = 0, version: int = 4) -> Any:
    if version < 4:
        return request(ApiKey.FIND_COORDINATOR, version, key=key, **({"key_type": i8(key_type)} if version else {}))
    return request(ApiKey.FIND_COORDINATOR, version, key_type=i8(key_type), coordinator_keys=(key,))


def join(group_id: str) -> Any:
    return request(
        ApiKey.JOIN_GROUP,
        5,
        group_id=group_id,
        session_timeout=10 * SECOND,
        rebalance_timeout=10 * SECOND,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(part(ApiKey.JOIN_GROUP, 5, "JoinGroupRequestProtocol", name="range", metadata=b""),),
    )


def heartbeat(group_id: str) -> Any:
    return request(
        ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=i32(1), member_id="m", group_instance_id=None
    )


def describe_groups(*groups: str, operations: bool = True) -> Any:
    return request(ApiKey.DESCRIBE_GROUPS, 5, groups=groups, include_authorized_operations=operations)


def offset_commit(group_id: str, *topics: tuple[str, int]) -> Any:
    version = 8
    return request(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id=group_id,
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=tuple(
            part(
                ApiKey.OFFSET_COMMIT,
                version,
                "OffsetCommitRequestTopic",
                name=name,
                partitions=tuple(
                    part(
                        ApiKey.OFFSET_COMMIT,
                        version,
                        "OffsetCommitRequestPartition",
                        partition_index=i32(p),
                        committed_offset=i64(5),
                        committed_leader_epoch=i32(-1),
                        committed_metadata="",
                    )
                    for p in range(count)
                ),
            )
            for name, count in topics
        ),
    )


def _indexes(count: int) -> tuple[i32, ...]:
    return tuple(i32(p) for p in range(count))


def offset_fetch(group_id: str, *topics: tuple[str, int], everything: bool = False) -> Any:
    version = 8
    wanted = None if everything else tuple(
        part(ApiKey.OFFSET_FETCH, version, "OffsetFetchRequestTopics", name=n, partition_indexes=_indexes(c))
        for n, c in topics
    )
    group = part(ApiKey.OFFSET_FETCH, version, "OffsetFetchRequestGroup", group_id=group_id, topics=wanted)
    return request(ApiKey.OFFSET_FETCH, version, groups=(group,), require_stable=False)


def acl_filter(api: ApiKey, cls: str, *, kind: int = 1, name: str | None = None, pattern: int = 1, version: int = 3,
               principal: str | None = None, operation: int = 1, permission: int = 1) -> Any:  # fmt: skip
    return part(
        api, version, cls, resource_type_filter=i8(kind), resource_name_filter=name, pattern_type_filter=i8(pattern),
        principal_filter=principal, host_filter=None, operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


def creation(kind: int, name: str, principal: str = ME, *, operation: int = 3, pattern: int = 3,
             permission: int = 3, version: int = 3) -> Any:  # fmt: skip
    return part(
        ApiKey.CREATE_ACLS, version, "AclCreation", resource_type=i8(kind), resource_name=name,
        resource_pattern_type=i8(pattern), principal=principal, host="*", operation=i8(operation),
        permission_type=i8(permission),
    )  # fmt: skip


# -- Authorization (checklist 38-56) ------------------------------------------------------------------------


async def test_38_a_super_user_may_do_everything_without_acls() -> None:
    server = await start(super_users=(ME,))
    client = await WireClient.connect(server.port)
    try:
        answer = await client.call(metadata("topic", "unknown"))
        assert [t.error_code for t in answer.topics] == [E.none, E.unknown_topic_or_partition]
        joined = await client.call(join("any-group"))
        assert joined.error_code is E.member_id_required  # the coordinator saw it: v4+ asks for a member id
        described = await client.call(request(ApiKey.DESCRIBE_ACLS, 3, **_any_filter()))
        assert described.error_code is E.none
    finally:
        await client.close()
        await server.stop()


def _any_filter() -> dict[str, Any]:
    return {
        "resource_type_filter": i8(1), "resource_name_filter": None, "pattern_type_filter": i8(1),
        "principal_filter": None, "host_filter": None, "operation": i8(1), "permission_type": i8(1),
    }  # fmt: skip


async def test_39_without_acls_metadata_of_any_named_topic_is_denied_existing_or_not(client: WireClient) -> None:
    answer = await client.call(metadata("topic", "does-not-exist"))
    assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [
        ("topic", E.topic_authorization_failed, ()),
        ("does-not-exist", E.topic_authorization_failed, ()),
    ]
    everything = await client.call(metadata(everything=True))
    assert everything.topics == ()  # an all-topics request leaves them out


async def test_40_allow_everyone_if_no_acl_found_until_someone_has_an_acl() -> None:
    server = await start(allow_everyone_if_no_acl_found=True)
    client = await WireClient.connect(server.port)
    try:
        assert [t.error_code for t in (await client.call(metadata("topic"))).topics] == [E.none]
        grant(server, R.TOPIC, "topic", Op.READ, principal="User:alice")
        assert [t.error_code for t in (await client.call(metadata("topic"))).topics] == [E.topic_authorization_failed]
        assert [t.name for t in (await client.call(metadata(everything=True))).topics] == ["other"]
    finally:
        await client.close()
        await server.stop()


@pytest.mark.parametrize("version", [0, 3, 4, 6])
async def test_41_find_coordinator_without_group_describe(
    acl_server: BrokerServer, client: WireClient, version: int
) -> None:
    answer = await client.call(find_coordinator("g41", version=version))
    entry = answer if version < 4 else answer.coordinators[0]
    assert (entry.error_code, entry.node_id, entry.host, entry.port) == (E.group_authorization_failed, -1, "", -1)
    grant(acl_server, R.GROUP, "g41", Op.DESCRIBE)
    answer = await client.call(find_coordinator("g41", version=version))
    entry = answer if version < 4 else answer.coordinators[0]
    assert (entry.error_code, entry.node_id) == (E.none, 1)


async def test_42_describe_without_read_finds_the_coordinator_but_join_is_denied_and_creates_nothing(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "g42", Op.DESCRIBE)
    assert (await client.call(find_coordinator("g42"))).coordinators[0].error_code is E.none
    joined = await client.call(join("g42"))
    assert (joined.error_code, joined.member_id, joined.generation_id) == (E.group_authorization_failed, "", -1)
    assert acl_server.coordinator.group_type("g42") is None  # no group was created
    described = await client.call(describe_groups("g42"))
    assert described.groups[0].group_state == "Dead"


async def test_43_read_on_a_group_implies_describe(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.GROUP, "g43", Op.READ)
    assert (await client.call(find_coordinator("g43"))).coordinators[0].error_code is E.none
    joined = await client.call(join("g43"))
    assert joined.error_code is E.member_id_required
    (group,) = (await client.call(describe_groups("g43"))).groups
    assert group.error_code is E.none
    assert group.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    (denied,) = (await client.call(describe_groups("other-group"))).groups
    assert (denied.error_code, denied.group_state, denied.members) == (E.group_authorization_failed, "", ())


async def test_44_list_groups_shows_only_the_groups_the_principal_may_describe(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "seen-", Op.DESCRIBE, pattern_type=PatternType.PREFIXED)
    for group_id in ("seen-a", "hidden"):
        grant(acl_server, R.GROUP, group_id, Op.READ)
        await client.call(join(group_id))
        await client.call(join(group_id))  # member id required first, then the member joins
    listed = await client.call(request(ApiKey.LIST_GROUPS, 4, states_filter=()))
    assert listed.error_code is E.none
    assert sorted(g.group_id for g in listed.groups) == ["hidden", "seen-a"]  # READ implies DESCRIBE
    acl_server.authorizer.delete([_group_read_filter("hidden")])  # type: ignore[union-attr]
    listed = await client.call(request(ApiKey.LIST_GROUPS, 4, states_filter=()))
    assert [g.group_id for g in listed.groups] == ["seen-a"]
    grant(acl_server, R.CLUSTER, "kafka-cluster", Op.DESCRIBE)
    listed = await client.call(request(ApiKey.LIST_GROUPS, 4, states_filter=()))
    assert sorted(g.group_id for g in listed.groups) == ["hidden", "seen-a"]


def _group_read_filter(group_id: str) -> Any:
    from broker.security.acls import AclFilter

    return AclFilter(R.GROUP, group_id, PatternType.LITERAL)


async def test_45_offset_commit_with_one_topic_denied(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.GROUP, "g45", Op.READ)
    grant(acl_server, R.TOPIC, "topic", Op.READ)
    answer = await client.call(offset_commit("g45", ("topic", 2), ("other", 1)))
    assert [(t.name, [p.error_code for p in t.partitions]) for t in answer.topics] == [
        ("topic", [E.none, E.none]),
        ("other", [E.topic_authorization_failed]),
    ]
    fetched = await client.call(offset_fetch("g45", ("topic", 1)))
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5


async def test_46_offset_commit_without_group_read_fails_every_partition(client: WireClient) -> None:
    answer = await client.call(offset_commit("g46", ("topic", 2), ("other", 1)))
    assert [[p.error_code for p in t.partitions] for t in answer.topics] == [
        [E.group_authorization_failed] * 2,
        [E.group_authorization_failed],
    ]


async def test_47_offset_fetch_of_a_topic_without_describe(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.GROUP, "g47", Op.READ)
    grant(acl_server, R.TOPIC, "topic", Op.READ)
    grant(acl_server, R.TOPIC, "other", Op.READ)
    await client.call(offset_commit("g47", ("topic", 1), ("other", 1)))
    acl_server.authorizer.delete([_topic_filter("other")])  # type: ignore[union-attr]
    answer = await client.call(offset_fetch("g47", ("topic", 1), ("other", 1)))
    (group,) = answer.groups
    assert [(t.name, [(p.error_code, p.committed_offset) for p in t.partitions]) for t in group.topics] == [
        ("topic", [(E.none, 5)]),
        ("other", [(E.topic_authorization_failed, -1)]),
    ]
    everything = await client.call(offset_fetch("g47", everything=True))
    assert [t.name for t in everything.groups[0].topics] == ["topic"]
    denied = await client.call(offset_fetch("not-mine", ("topic", 1)))
    assert (denied.groups[0].error_code, denied.groups[0].topics) == (E.group_authorization_failed, ())


def _topic_filter(name: str) -> Any:
    from broker.security.acls import AclFilter

    return AclFilter(R.TOPIC, name, PatternType.LITERAL)


async def test_48_fetch_with_describe_but_no_read(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE)
    answer = await client.call(fetch_request(12, [("topic", [fetch_partition(12, 0, 0), fetch_partition(12, 1, 0)])]))
    assert [p.error_code for p in answer.responses[0].partitions] == [E.topic_authorization_failed] * 2
    grant(acl_server, R.TOPIC, "topic", Op.READ)
    answer = await client.call(fetch_request(12, [("topic", [fetch_partition(12, 0, 0)])]))
    assert [p.error_code for p in answer.responses[0].partitions] == [E.none]


async def test_49_consumer_group_heartbeat_subscribing_a_topic_without_describe(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "g49", Op.READ)
    beat = request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="g49", member_id="", member_epoch=i32(0), instance_id=None,
        rack_id=None, rebalance_timeout=10 * SECOND, subscribed_topic_names=("topic",), server_assignor=None,
        topic_partitions=(),
    )  # fmt: skip
    answer = await client.call(beat)
    assert answer.error_code is E.topic_authorization_failed
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE)
    assert (await client.call(beat)).error_code is E.none


async def test_51_prefixed_allow_literal_deny(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.GROUP, "pfx-", Op.DESCRIBE, pattern_type=PatternType.PREFIXED)
    grant(acl_server, R.GROUP, "pfx-b", Op.DESCRIBE, permission=Permission.DENY)
    grant(acl_server, R.GROUP, "pfx-c", Op.READ, permission=Permission.DENY)
    answer = await client.call(describe_groups("pfx-a", "other", "pfx-b", "pfx-c"))
    assert [g.error_code for g in answer.groups] == [
        E.none, E.group_authorization_failed, E.group_authorization_failed, E.none,
    ]  # fmt: skip


async def test_52_deny_all_on_a_topic_overrides_every_allow(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.TOPIC, "topic", Op.ALL)
    grant(acl_server, R.TOPIC, "*", Op.ALL, principal="User:*")
    grant(acl_server, R.TOPIC, "topic", Op.ALL, permission=Permission.DENY)
    answer = await client.call(metadata("topic", "other"))
    assert [t.error_code for t in answer.topics] == [E.topic_authorization_failed, E.none]


async def test_53_a_host_restricted_allow_does_not_apply_from_localhost(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE, host="10.0.0.1")
    assert [t.error_code for t in (await client.call(metadata("topic"))).topics] == [E.topic_authorization_failed]
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE, host="127.0.0.1")
    assert [t.error_code for t in (await client.call(metadata("topic"))).topics] == [E.none]


async def test_54_transactional_producer_without_write_or_describe_on_its_id(
    acl_server: BrokerServer, client: WireClient
) -> None:
    answer = await client.call(init_producer_id_request(4, "txn-54"))
    assert answer.error_code is E.transactional_id_authorization_failed
    found = await client.call(find_coordinator("txn-54", key_type=1))
    assert found.coordinators[0].error_code is E.transactional_id_authorization_failed
    grant(acl_server, R.TRANSACTIONAL_ID, "txn-54", Op.WRITE)
    assert (await client.call(find_coordinator("txn-54", key_type=1))).coordinators[0].error_code is E.none
    assert (await client.call(init_producer_id_request(4, "txn-54"))).error_code is E.none


async def test_55_idempotent_producer_without_idempotent_write_or_any_topic_write(
    acl_server: BrokerServer, client: WireClient
) -> None:
    assert (await client.call(init_producer_id_request(4, None))).error_code is E.cluster_authorization_failed
    grant(acl_server, R.TOPIC, "out-", Op.WRITE, pattern_type=PatternType.PREFIXED)
    assert (await client.call(init_producer_id_request(4, None))).error_code is E.none


async def test_produce_needs_write_on_each_topic(acl_server: BrokerServer, client: WireClient) -> None:
    answer = await client.call(produce_request(9, [(0, make_batch(1))]))
    assert [p.error_code for p in answer.responses[0].partition_responses] == [E.topic_authorization_failed]
    grant(acl_server, R.TOPIC, "topic", Op.WRITE)
    answer = await client.call(produce_request(9, [(0, make_batch(1))]))
    assert [p.error_code for p in answer.responses[0].partition_responses] == [E.none]


async def test_heartbeat_is_checked_even_where_it_has_a_fast_path(acl_server: BrokerServer, client: WireClient) -> None:
    # With ACLs on every frame takes the generic path: a Heartbeat is denied like any request.
    for _ in range(3):
        assert (await client.call(heartbeat("g-beat"))).error_code is E.group_authorization_failed
    grant(acl_server, R.GROUP, "g-beat", Op.READ)
    assert (await client.call(heartbeat("g-beat"))).error_code is E.unknown_member_id


async def test_metadata_authorized_operations(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.TOPIC, "topic", Op.READ, Op.WRITE)
    answer = await client.call(metadata("topic", version=10, operations=True))
    (topic,) = answer.topics
    assert topic.topic_authorized_operations == (1 << Op.READ) | (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert answer.cluster_authorized_operations == 0


# -- ACL administration (checklist 57-62) -------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_57_acl_apis_need_the_cluster_operations(client: WireClient, version: int) -> None:
    created = await client.call(
        request(ApiKey.CREATE_ACLS, version, creations=(creation(2, "t", version=version),) * 2)
    )
    assert [r.error_code for r in created.results] == [E.cluster_authorization_failed] * 2
    described = await client.call(
        request(ApiKey.DESCRIBE_ACLS, version, **_any_filter())
    )
    assert (described.error_code, described.resources) == (E.cluster_authorization_failed, ())
    filters = (acl_filter(ApiKey.DELETE_ACLS, "DeleteAclsFilter", version=version),)
    deleted = await client.call(request(ApiKey.DELETE_ACLS, version, filters=filters))
    assert [r.error_code for r in deleted.filter_results] == [E.cluster_authorization_failed]


async def test_58_invalid_creations_fail_one_by_one_and_a_duplicate_succeeds(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.CLUSTER, "kafka-cluster", Op.ALTER)
    before = len(acl_server.authorizer.bindings)  # type: ignore[union-attr]
    creations = (
        creation(1, "t"),  # type ANY
        creation(2, "t", pattern=2),  # pattern MATCH
        creation(2, "t", operation=1),  # operation ANY
        creation(2, ""),  # empty name
        creation(4, "other", operation=7),  # a cluster not named kafka-cluster
        creation(2, "t", principal="alice"),  # no principal type
        creation(2, "t"),  # valid
        creation(2, "t"),  # the same again
    )
    answer = await client.call(request(ApiKey.CREATE_ACLS, 3, creations=creations))
    assert [r.error_code for r in answer.results] == [E.invalid_request] * 6 + [E.none] * 2
    assert all(r.error_message for r in answer.results[:6])
    assert len(acl_server.authorizer.bindings) == before + 1  # type: ignore[union-attr]


async def test_59_60_61_create_describe_delete_over_the_wire(acl_server: BrokerServer, client: WireClient) -> None:
    grant(acl_server, R.CLUSTER, "kafka-cluster", Op.ALTER, Op.DESCRIBE)
    creations = (
        creation(3, "g59"),  # READ on the group
        creation(2, "orders", operation=8),
        creation(2, "ord", operation=4, pattern=4),
        creation(2, "*", operation=8, principal="User:*"),
    )
    created = await client.call(request(ApiKey.CREATE_ACLS, 3, creations=creations))
    assert [r.error_code for r in created.results] == [E.none] * 4
    assert (await client.call(join("g59"))).error_code is E.member_id_required  # the next JoinGroup is let in

    async def describe(**fields: Any) -> list[tuple[int, str, int, list[tuple[str, int]]]]:
        answer = await client.call(
            request(ApiKey.DESCRIBE_ACLS, 3, **(_any_filter() | fields))
        )
        assert answer.error_code is E.none
        return [
            (r.resource_type, r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
            for r in answer.resources
        ]

    assert await describe(resource_type_filter=i8(2), resource_name_filter="orders", pattern_type_filter=i8(2)) == [
        (2, "orders", 3, [(ME, 8)]), (2, "ord", 4, [(ME, 4)]), (2, "*", 3, [("User:*", 8)]),
    ]  # fmt: skip
    assert await describe(resource_type_filter=i8(2), pattern_type_filter=i8(4)) == [(2, "ord", 4, [(ME, 4)])]
    assert await describe(resource_type_filter=i8(2), resource_name_filter="orders", pattern_type_filter=i8(3)) == [
        (2, "orders", 3, [(ME, 8)])
    ]
    assert len(await describe()) == 5  # the four and the cluster's (two entries)
    invalid = await client.call(request(ApiKey.DESCRIBE_ACLS, 3, **(_any_filter() | {"operation": i8(0)})))
    assert invalid.error_code is E.invalid_request

    deleted = await client.call(
        request(
            ApiKey.DELETE_ACLS,
            3,
            filters=(
                acl_filter(ApiKey.DELETE_ACLS, "DeleteAclsFilter", kind=3, name="g59", pattern=3),
                acl_filter(ApiKey.DELETE_ACLS, "DeleteAclsFilter", kind=0),
            ),
        )
    )
    first, refused = deleted.filter_results
    assert (first.error_code, [(m.resource_type, m.resource_name, m.operation) for m in first.matching_acls]) == (
        E.none,
        [(3, "g59", 3)],
    )
    assert (refused.error_code, refused.matching_acls) == (E.invalid_request, ())
    assert (await client.call(join("g59"))).error_code is E.group_authorization_failed  # at the next request


async def test_authorization_denied_is_an_event(acl_server: BrokerServer, client: WireClient) -> None:
    seen: list[dict[str, Any]] = []
    acl_server.events.subscribe(seen.append)
    await client.call(join("g-event"))
    denied = [r for r in seen if r["event"] == "authorization_denied"]
    assert [(r["group_id"], r["principal"], r["api"], r["resource_type"], r["resource_name"], r["operation"])
            for r in denied] == [("g-event", ME, "JoinGroup", "GROUP", "g-event", "READ")]  # fmt: skip


@pytest.mark.parametrize("complete", [False, True])
async def test_sync_group_checks_v5_protocol_fields_before_read(client: WireClient, complete: bool) -> None:
    sync = request(
        ApiKey.SYNC_GROUP, 5, group_id="g-sync", generation_id=i32(1), member_id="m", group_instance_id=None,
        protocol_type="consumer" if complete else None, protocol_name="range" if complete else None, assignments=(),
    )  # fmt: skip
    answer = await client.call(sync)
    assert answer.error_code is (E.group_authorization_failed if complete else E.inconsistent_group_protocol)


async def test_49_a_regex_subscription_drops_the_topics_the_member_may_not_describe(
    acl_server: BrokerServer, client: WireClient
) -> None:
    grant(acl_server, R.GROUP, "g-regex", Op.READ)
    grant(acl_server, R.TOPIC, "topic", Op.DESCRIBE)  # "other" matches the regex too, but is not describable
    beat = request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, group_id="g-regex", member_id="m-regex-0000000000", member_epoch=i32(0),
        instance_id=None,
        rack_id=None, rebalance_timeout=10 * SECOND, subscribed_topic_names=None, subscribed_topic_regex="topic|other",
        server_assignor=None, topic_partitions=(),
    )  # fmt: skip
    answer = await client.call(beat)
    assert answer.error_code is E.none
    topic = acl_server.topics.get("topic")
    assert topic is not None and answer.assignment is not None
    assert [(t.topic_id, sorted(t.partitions)) for t in answer.assignment.topic_partitions] == [
        (topic.topic_id, [0, 1, 2])
    ]
