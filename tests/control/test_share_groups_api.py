"""The control API with KIP-932 share groups, over real HTTP against a running broker, every answer checked against
``docs/control-api.yaml`` (the client of ``test_control_api.py``).

The share group is driven by real ShareGroupHeartbeat, ShareFetch and ShareAcknowledge requests over TCP
(``tests/wire/share_client.py``); section numbers refer to ``docs/spec/share-groups.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kio.schema.errors import ErrorCode
from openapi_core import OpenAPI

from broker.server.broker import BrokerServer
from tests.conftest import broker_settings
from tests.control.test_control_api import ControlClient, eventually, url
from tests.storage import make_batch
from tests.wire.client import WireClient
from tests.wire.share_client import SHARE_GROUP_CONFIG, Acks, acquired, heartbeat, set_group_config, share_fetch
from tests.wire.test_data_plane import produce_request

E = ErrorCode
ACCEPT, RELEASE = 1, 2


@pytest.fixture
async def share_api(
    openapi: OpenAPI, spec: dict[str, Any]
) -> AsyncIterator[tuple[BrokerServer, ControlClient, WireClient]]:
    """A broker with 1 s share locks, its checked control API client and a raw Kafka client."""
    server = BrokerServer(broker_settings(admin_port=0, group=SHARE_GROUP_CONFIG, topics=(("topic", 3), ("one", 1))))
    await server.start()
    client = await WireClient.connect(server.port, "share-test")
    assert server.control is not None
    try:
        async with aiohttp.ClientSession() as session:
            yield server, ControlClient(session, server.control.port, openapi, spec), client
    finally:
        await client.close()
        await server.stop()


def topic_id(server: BrokerServer, name: str = "one") -> Any:
    topic = server.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def joined_with_records(server: BrokerServer, client: WireClient, group: str, count: int = 5) -> Any:
    """Member m1 of ``group`` (reading ``one`` from the earliest offset) has fetched ``count`` records: answer."""
    join = await client.call(heartbeat(group, "m1", 0, ("one",)))
    assert join.error_code is E.none and join.member_epoch == 1
    assert (await set_group_config(client, group, share_auto_offset_reset="earliest")).responses[0].error_code is E.none
    produced = await client.call(produce_request(11, [(0, make_batch(count))], topic="one"))
    assert produced.responses[0].partition_responses[0].error_code is E.none
    first = await client.call(share_fetch(group, "m1", 0, topic_id(server), [0]))
    assert acquired(first) == [(0, count - 1, 1)]
    return first


async def share_partitions(api: ControlClient, group: str) -> dict[str, Any]:
    answer = await api.get(url("v1", "groups", group, "share-partitions"))
    assert answer.status == 200, answer.data
    found: dict[str, Any] = answer.json
    return found


async def test_describe_shows_members_and_each_share_partitions_offsets_and_counts(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg")
    listed = (await api.get("/v1/groups", query={"type": "share"})).json["groups"]
    shown = [(g["group_id"], g["group_type"], g["state"], g["members"]) for g in listed]
    assert shown == [("sg", "share", "Stable", 1)]
    detail = await api.group("sg")
    assert detail["group_type"] == "share" and detail["protocol_type"] == "share" and detail["group_epoch"] == 1
    [member] = detail["members"]
    assert member["member_id"] == "m1" and member["client_id"] == "share-test"
    assert member["client_host"] == "/127.0.0.1"
    assert member["subscribed_topic_names"] == ["one"] and member["assignment"] == {"one": [0]}
    assert detail["share_partitions"] == [
        {"topic": "one", "partition": 0, "start_offset": 0, "end_offset": 4, "in_flight": 5, "available": 0,
         "acquired": 5, "acknowledged": 0, "archived": 0, "delivered_total": 5, "redelivered_total": 0,
         "archived_total": 0},
    ]  # fmt: skip


async def test_the_record_view_names_the_holder_the_delivery_count_and_the_lock(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-rec")
    view = await share_partitions(api, "sg-rec")
    [partition] = view["partitions"]
    [run] = partition["records"]
    assert (run["first_offset"], run["last_offset"], run["state"], run["delivery_count"], run["member_id"]) == (
        0, 4, "acquired", 1, "m1",
    )  # fmt: skip
    assert run["lock_deadline_ms"] - view["now_ms"] == run["lock_expires_in_ms"]
    assert 0 < run["lock_expires_in_ms"] <= 1000
    # RELEASE offset 1, ACCEPT the rest: 1 comes back available; the next fetch redelivers it (count 2).
    tid = topic_id(server)
    acks: Acks = {0: [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 4, (ACCEPT,))]}
    again = await client.call(share_fetch("sg-rec", "m1", 1, tid, [], acks=acks))
    assert acquired(again) == [(1, 1, 2)]
    [partition] = (await share_partitions(api, "sg-rec"))["partitions"]
    runs = [(r["first_offset"], r["last_offset"], r["state"], r["delivery_count"], r["member_id"])
            for r in partition["records"]]  # fmt: skip
    assert runs == [(1, 1, "acquired", 2, "m1"), (2, 4, "acknowledged", 1, None)]
    assert (partition["start_offset"], partition["end_offset"], partition["in_flight"]) == (1, 4, 4)
    assert (partition["delivered_total"], partition["redelivered_total"]) == (6, 1)
    released = [e for e in await api.events("sg-rec") if e["event"] == "records_released"]
    assert [e["cause"] for e in released] == ["release"]


async def test_an_expired_lock_shows_the_records_available_again(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-exp", 2)

    async def available() -> bool:
        [partition] = (await share_partitions(api, "sg-exp"))["partitions"]
        return [(r["state"], r["member_id"], r["lock_deadline_ms"]) for r in partition["records"]] == [
            ("available", None, None)
        ]

    await eventually(available, timeout=5.0)
    causes = [e["cause"] for e in await api.events("sg-exp") if e["event"] == "records_released"]
    assert causes == ["lock_expired"]


async def test_kick_removes_the_share_member_and_releases_what_it_held(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-kick", 3)
    answer = await api.post(url("v1", "groups", "sg-kick", "members", "m1", "kick"))
    assert answer.status == 200 and answer.json == {"group_id": "sg-kick", "member_id": "m1", "kicked": True}
    detail = await api.group("sg-kick")
    assert detail["members"] == [] and detail["state"] == "Empty"
    [partition] = detail["share_partitions"]
    assert (partition["acquired"], partition["available"]) == (0, 3)
    events = await api.events("sg-kick")
    names = [e["event"] for e in events]
    assert "member_left" in names and "share_session_closed" in names
    assert [e["cause"] for e in events if e["event"] == "records_released"] == ["session_closed"]
    # Its next heartbeat is told it is gone; it re-joins with epoch 0.
    beat = await client.call(heartbeat("sg-kick", "m1", 1))
    assert beat.error_code is E.unknown_member_id
    missing = await api.post(url("v1", "groups", "sg-kick", "members", "m1", "kick"))
    assert missing.status == 404


async def test_fence_of_a_share_group_is_404_it_has_no_static_members(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-fence", 1)
    answer = await api.post(url("v1", "groups", "sg-fence", "instances", "i1", "fence"))
    assert answer.status == 404 and "no static member" in answer.error


async def test_share_partitions_of_an_unknown_or_other_group_is_404_and_a_query_400(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    assert (await api.get(url("v1", "groups", "nobody", "share-partitions"))).status == 404
    await joined_with_records(server, client, "sg-q", 1)
    bad = await api.get(url("v1", "groups", "sg-q", "share-partitions"), query={"x": 1}, well_formed=False)
    assert bad.status == 400 and "x" in bad.error
    # A share group that has not fetched yet has no share-partitions.
    await client.call(heartbeat("sg-new", "m1", 0, ("one",)))
    assert (await share_partitions(api, "sg-new"))["partitions"] == []
    assert (await api.group("sg-new"))["share_partitions"] == []


@pytest.mark.parametrize("api_name", ["ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge"])
async def test_fault_rules_take_the_share_api_names(
    share_api: tuple[BrokerServer, ControlClient, WireClient], api_name: str
) -> None:
    _, api, _ = share_api
    rule = await api.add_fault(api=api_name, action="error", error="COORDINATOR_NOT_AVAILABLE", count=1)
    assert rule["api"] == api_name


@pytest.mark.parametrize("key, name", [(76, "ShareGroupHeartbeat"), (77, "ShareGroupDescribe"), (78, "ShareFetch"),
                                       (79, "ShareAcknowledge")])  # fmt: skip
async def test_fault_rules_take_the_share_api_keys(
    share_api: tuple[BrokerServer, ControlClient, WireClient], key: int, name: str
) -> None:
    _, api, _ = share_api
    rule = await api.add_fault(api=key, action="delay", delay_ms=10, count=1)
    assert rule["api"] == name


async def test_an_error_rule_answers_share_fetch_and_heartbeat_with_the_error(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-fault", 1)
    await api.add_fault(api="ShareFetch", group_id="sg-fault", action="error", error="UNKNOWN_SERVER_ERROR", count=1)
    failed = await client.call(share_fetch("sg-fault", "m1", 1, topic_id(server), []))
    assert failed.error_code is E.unknown_server_error
    await api.add_fault(api="ShareGroupHeartbeat", member_id="m1", action="error", error="COORDINATOR_NOT_AVAILABLE",
                        count=1)  # fmt: skip
    beat = await client.call(heartbeat("sg-fault", "m1", 1))
    assert beat.error_code is E.coordinator_not_available
    assert (await client.call(heartbeat("sg-fault", "m1", 1))).error_code is E.none
    await asyncio.sleep(0)


async def test_metrics_show_share_partitions_in_flight_redeliveries_and_archived_records(
    share_api: tuple[BrokerServer, ControlClient, WireClient],
) -> None:
    server, api, client = share_api
    await joined_with_records(server, client, "sg-metrics", count=4)
    # RELEASE 1, REJECT 2, ACCEPT 0 and 3: 1 is redelivered (count 2), 2 archived.
    acks: Acks = {0: [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 2, (3,)), (3, 3, (ACCEPT,))]}
    again = await client.call(share_fetch("sg-metrics", "m1", 1, topic_id(server), [], acks=acks))
    assert acquired(again) == [(1, 1, 2)]
    metrics = await api.metrics()
    key = frozenset({("group", "sg-metrics"), ("topic", "one"), ("partition", "0")})

    def state(name: str) -> float:
        return metrics[("group_broker_share_records_in_flight", key | {("state", name)})]

    assert metrics[("group_broker_share_start_offset", key)] == 1
    assert metrics[("group_broker_share_end_offset", key)] == 3
    assert (state("acquired"), state("available"), state("acknowledged"), state("archived")) == (1, 0, 1, 1)
    assert metrics[("group_broker_share_deliveries_total", key)] == 5
    assert metrics[("group_broker_share_redeliveries_total", key)] == 1
    assert metrics[("group_broker_share_archived_total", key)] == 1
    assert metrics[("group_broker_groups", frozenset({("type", "share"), ("state", "Stable")}))] == 1
    assert metrics[("group_broker_groups", frozenset({("type", "share"), ("state", "Empty")}))] == 0
