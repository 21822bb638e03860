"""The control API with KIP-848 consumer groups, over real HTTP against a running broker, every answer checked against
``docs/control-api.yaml`` (the client of ``test_control_api.py``).

The groups are driven by real ConsumerGroupHeartbeat v1 requests over TCP (``consumer_members.py``); section numbers
refer to ``docs/spec/consumer-groups.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kio.schema.errors import ErrorCode
from openapi_core import OpenAPI

from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer
from tests.conftest import broker_settings
from tests.control.consumer_members import Member, close, members, settle
from tests.control.test_control_api import (
    TOPIC_PARTITIONS,
    Connect,
    Consumer,
    ControlClient,
    eventually,
    form_group,
    url,
)
from tests.wire.client import WireClient
from tests.wire.test_consumer_group_api import heartbeat

E = ErrorCode


def partitions_of(detail: dict[str, Any]) -> list[int]:
    """Every partition the members hold, sorted: each once when the assignment is sound."""
    return sorted(p for m in detail["members"] for ps in m["assignment"].values() for p in ps)


async def stable_consumer_group(
    api: ControlClient, broker: BrokerServer, group_id: str, size: int = 2, **options: Any
) -> list[Member]:
    group = await members(broker.port, group_id, size, **options)
    await settle(group)
    await api.wait(group_id, state="Stable", members=size)
    return group


@pytest.fixture
async def short_sessions(openapi: OpenAPI, spec: dict[str, Any]) -> AsyncIterator[tuple[BrokerServer, ControlClient]]:
    """A broker whose consumer groups have a 1 s session (section 7.1), and its checked control API client."""
    config = GroupConfig(
        initial_rebalance_delay_ms=0,
        min_session_timeout_ms=1000,
        consumer_session_timeout_ms=1000,
        consumer_min_session_timeout_ms=1000,
        consumer_heartbeat_interval_ms=100,
        consumer_min_heartbeat_interval_ms=100,
    )
    server = BrokerServer(broker_settings(admin_port=0, group=config))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield server, ControlClient(session, server.control.port, openapi, spec)
    finally:
        await server.stop()


# -- reading -------------------------------------------------------------------------------------------------


async def test_list_describe_and_wait_show_the_type_epochs_and_each_members_reconciliation(
    api: ControlClient, broker: BrokerServer
) -> None:
    group = await stable_consumer_group(api, broker, "cg-shown")
    epoch = group[0].epoch
    listed = (await api.get("/v1/groups")).json["groups"]
    # Its rebalances are its epoch bumps (one per member that joined); the last one ended Stable.
    last = listed[0].pop("last_rebalance")
    assert (listed[0].pop("rebalances"), last["cause"]) == (epoch, "subscription_changed")
    assert listed[0].pop("lag") == 0  # nothing committed yet
    assert last["duration_ms"] is not None
    assert listed == [
        {"group_id": "cg-shown", "group_type": "consumer", "state": "Stable", "protocol_type": "consumer",
         "protocol": "uniform", "generation_id": epoch, "leader": None, "members": 2, "group_epoch": epoch,
         "assignment_epoch": epoch},
    ]
    detail = await api.group("cg-shown")
    assert (detail["group_type"], detail["state"], detail["group_epoch"], detail["assignment_epoch"]) == (
        "consumer", "Stable", epoch, epoch
    )
    assert detail["pending_members"] == [] and detail["subscribed_topics"] == ["topic"]
    assert partitions_of(detail) == list(range(TOPIC_PARTITIONS))
    # Every owned partition has a row with its owner, and no lag while nothing is committed (as Kafka's "-").
    owners = {p: m["member_id"] for m in detail["members"] for ps in m["assignment"].values() for p in ps}
    assert [(o["partition"], o["member_id"], o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in detail["offsets"]] == [(p, owners[p], None, 0, None) for p in range(TOPIC_PARTITIONS)]
    assert detail["lag"] == 0
    by_id = {m["member_id"]: m for m in detail["members"]}
    assert set(by_id) == {m.member_id for m in group}
    for index, member in enumerate(group):
        shown = by_id[member.member_id]
        assert 0 <= shown["session_expires_in_ms"] <= 45_000 and 0 <= shown["last_heartbeat_age_ms"] < 5000
        assert shown["assignment"] == shown["target"] and shown["assignment"]
        assert {k: shown[k] for k in ("client_id", "member_epoch", "state", "pending_revocation")} == {
            "client_id": f"cg-shown-c{index}", "member_epoch": epoch, "state": "stable", "pending_revocation": {}
        }
        assert (shown["subscribed_topic_names"], shown["subscribed_topic_regex"]) == (["topic"], None)
        assert (shown["group_instance_id"], shown["rack_id"], shown["rebalance_timeout_ms"]) == (None, None, 300_000)

    # A member leaves: the group is Assigning until the other heartbeats (section 3.4), and wait knows the state.
    await group[1].leave()
    assert (await api.wait("cg-shown", state="ASSIGNING", members=1))["group_epoch"] == epoch + 1
    await group[0].poll()
    after = await api.wait("cg-shown", state="Stable", members=1, min_generation=epoch + 1)
    assert partitions_of(after) == list(range(TOPIC_PARTITIONS))
    await close(group)


async def test_list_filters_by_type(api: ControlClient, broker: BrokerServer, connect: Connect) -> None:
    group = await stable_consumer_group(api, broker, "cg-typed", size=1)
    await form_group(api, [Consumer(await connect("classic-typed-c0"), "classic-typed")])
    both = ["cg-typed", "classic-typed"]
    for kind, expected in (("consumer", ["cg-typed"]), ("classic", ["classic-typed"]), ("", both)):
        # An empty value is taken as absent (openapi-core refuses the request as malformed, the server does not).
        answer = await api.get("/v1/groups", query={"type": kind}, well_formed=bool(kind))
        assert sorted(g["group_id"] for g in answer.json["groups"]) == sorted(expected), kind
    bad = await api.get("/v1/groups", query={"type": "queue"}, well_formed=False)
    assert bad.status == 400 and "type must be one of" in bad.error
    assert (await api.get("/v1/groups", query={"state": "Stable"}, well_formed=False)).status == 400
    await close(group)


async def test_events_are_version_2_records_of_a_consumer_group(api: ControlClient, broker: BrokerServer) -> None:
    async with api.stream({"group": "cg-events"}) as stream:
        group = await stable_consumer_group(api, broker, "cg-events")
        streamed = await stream.until(lambda r: r["event"] == "state_changed" and r["to"] == "Stable")
    events = await api.events("cg-events")
    assert [r["seq"] for r in streamed] == [r["seq"] for r in events[: len(streamed)]]
    assert all(r["v"] == 2 and r["group_type"] == "consumer" for r in events)
    names = [r["event"] for r in events]
    for name in ("group_created", "member_joined", "group_epoch_bumped", "target_assignment_computed",
                 "member_reconciled", "state_changed"):
        assert name in names, name
    assert "referee_violation" not in names  # the referee watched every step and found nothing
    assert "rebalance_started" not in names  # a classic group's event
    computed = [r for r in events if r["event"] == "target_assignment_computed"]
    assert computed[-1]["assignor"] == "uniform" and computed[-1]["assignment_epoch"] == group[0].epoch
    await close(group)


# -- the verbs -------------------------------------------------------------------------------------------------


async def test_kick_fences_the_member_as_a_leave_group_would(api: ControlClient, broker: BrokerServer) -> None:
    group = await stable_consumer_group(api, broker, "cg-kick")
    victim = group[1]
    since = (await api.events("cg-kick"))[-1]["seq"]
    answer = await api.post(url("v1", "groups", "cg-kick", "members", victim.member_id, "kick"))
    assert answer.status == 200
    assert answer.json == {"group_id": "cg-kick", "member_id": victim.member_id, "kicked": True}
    gone = await api.group("cg-kick")
    assert [m["member_id"] for m in gone["members"]] == [group[0].member_id]
    assert gone["state"] == "Assigning"
    kicked = [(r["event"], r.get("cause")) for r in await api.events("cg-kick", since_seq=since)]
    assert kicked[:2] == [("member_left", "kicked"), ("group_epoch_bumped", "member_kicked")]

    # Its next heartbeat is refused; it re-joins under its id, as librdkafka does (section 12.5).
    await victim.poll()
    assert victim.errors == [E.unknown_member_id]
    await settle(group)
    back = await api.wait("cg-kick", state="Stable", members=2)
    assert partitions_of(back) == list(range(TOPIC_PARTITIONS))

    for missing in (url("v1", "groups", "cg-kick", "members", "nobody", "kick"),
                    url("v1", "groups", "no-group", "members", victim.member_id, "kick")):
        assert (await api.post(missing)).status == 404
    await close(group)


async def test_fence_removes_a_static_member_and_frees_its_instance_id(
    api: ControlClient, broker: BrokerServer
) -> None:
    static = Member(await WireClient.connect(broker.port, "static"), "cg-fence", instance_id="instance-1")
    dynamic = Member(await WireClient.connect(broker.port, "dynamic"), "cg-fence")
    await settle([static, dynamic])
    before = await api.wait("cg-fence", state="Stable", members=2)

    answer = await api.post(url("v1", "groups", "cg-fence", "instances", "instance-1", "fence"))
    assert answer.status == 200
    assert answer.json == {
        "group_id": "cg-fence", "group_instance_id": "instance-1", "member_id": static.member_id, "new_member_id": None
    }
    detail = await api.group("cg-fence")
    assert [m["member_id"] for m in detail["members"]] == [dynamic.member_id]
    assert detail["group_epoch"] == before["group_epoch"] + 1
    left = [r for r in await api.events("cg-fence") if r["event"] == "member_left"]
    assert (left[-1]["member_id"], left[-1]["cause"], left[-1]["group_instance_id"]) == (
        static.member_id, "removed", "instance-1"
    )
    # The instance id is free: the same process comes back through a fresh join (no UNRELEASED_INSTANCE_ID).
    await static.poll()
    assert static.errors == [E.unknown_member_id]
    await settle([static, dynamic])
    await api.wait("cg-fence", state="Stable", members=2)
    missing = await api.post(url("v1", "groups", "cg-fence", "instances", "instance-9", "fence"))
    assert missing.status == 404 and "instance-9" in missing.error
    await close([static, dynamic])


async def test_rebalance_bumps_the_epoch_and_moves_nothing_in_an_unchanged_group(
    api: ControlClient, broker: BrokerServer
) -> None:
    group = await stable_consumer_group(api, broker, "cg-forced", size=3)
    before = await api.group("cg-forced")
    answer = await api.post(url("v1", "groups", "cg-forced", "rebalance"))
    assert answer.status == 200
    assert (answer.json["state"], answer.json["group_epoch"], answer.json["assignment_epoch"]) == (
        "Assigning", before["group_epoch"] + 1, before["group_epoch"]
    )
    again = await api.post(url("v1", "groups", "cg-forced", "rebalance"))
    assert again.status == 409 and "Assigning" in again.error
    await settle(group)
    after = await api.wait("cg-forced", state="Stable", min_generation=before["group_epoch"] + 1)
    assert after["assignment_epoch"] == before["group_epoch"] + 1
    assert {m["member_id"]: m["assignment"] for m in after["members"]} == {
        m["member_id"]: m["assignment"] for m in before["members"]
    }
    events = await api.events("cg-forced")
    bumped = [r for r in events if r["event"] == "group_epoch_bumped"]
    assert (bumped[-1]["cause"], bumped[-1]["member_id"]) == ("forced", None)
    computed = [r for r in events if r["event"] == "target_assignment_computed"]
    assert computed[-1]["moved"] == []  # uniform is sticky: nothing moves (docs/control-api.yaml)

    for member in group:
        await member.leave()
    await api.wait("cg-forced", state="Empty")
    empty = await api.post(url("v1", "groups", "cg-forced", "rebalance"))
    assert empty.status == 409 and "Empty" in empty.error
    await close(group)


# -- metrics and fault rules -----------------------------------------------------------------------------------


async def test_metrics_count_consumer_groups_heartbeats_bumps_and_reconciliations(
    api: ControlClient, broker: BrokerServer
) -> None:
    group = await stable_consumer_group(api, broker, "cg-metered")
    detail = await api.group("cg-metered")
    metrics = await api.metrics()

    def value(name: str, **labels: str) -> float | None:
        return metrics.get((name, frozenset(labels.items())))

    events = await api.events("cg-metered")
    heartbeats = value("kafka_requests_total", api="ConsumerGroupHeartbeat", version="1")
    assert heartbeats is not None and heartbeats >= 4
    assert value("group_broker_consumer_heartbeats_total") == heartbeats
    assert value("group_broker_groups", type="consumer", state="Stable") == 1
    assert value("group_broker_groups", type="consumer", state="Reconciling") == 0
    assert value("group_broker_group_members", group="cg-metered", type="consumer") == 2
    assert value("group_broker_group_generation", group="cg-metered", type="consumer") == detail["group_epoch"]
    assert value("group_broker_group_assignment_epoch", group="cg-metered") == detail["assignment_epoch"]
    bumps = [r for r in events if r["event"] == "group_epoch_bumped"]
    assert value("group_broker_epoch_bumps_total", group="cg-metered", cause="subscription_changed") == len(bumps)
    computed = [r for r in events if r["event"] == "target_assignment_computed"]
    assert value("group_broker_target_assignments_total", group="cg-metered") == len(computed)
    moved = sum(len(r["moved"]) for r in computed)
    assert value("group_broker_partitions_moved_total", group="cg-metered") == moved
    steps = [r for r in events if r["event"] == "member_reconciled"]
    counted = sum(value("group_broker_reconciliations_total", state=s) or 0 for s in ("stable", "unrevoked_partitions",
                                                                                     "unreleased_partitions"))
    assert counted == len(steps)
    assert (value("group_broker_rebalance_duration_seconds_count", protocol="consumer") or 0) >= 1
    await close(group)


async def test_a_session_expiry_is_seen_in_the_group_its_events_and_the_metrics(
    short_sessions: tuple[BrokerServer, ControlClient],
) -> None:
    broker, api = short_sessions
    group = await members(broker.port, "cg-expiry", 2)
    await settle(group)
    await api.wait("cg-expiry", state="Stable", members=2)
    # One member goes quiet; the other keeps heartbeating and takes its partitions after the 1 s session.
    task = asyncio.create_task(_keep_polling(group[0]))
    after = await api.wait("cg-expiry", state="Stable", members=1, timeout_ms=10_000)
    task.cancel()
    assert partitions_of(after) == list(range(TOPIC_PARTITIONS))
    expired = [r for r in await api.events("cg-expiry") if r["event"] == "member_expired"]
    assert [(r["member_id"], r["timer"], r["timeout_ms"]) for r in expired] == [(group[1].member_id, "session", 1000)]
    metrics = await api.metrics()
    assert metrics[("group_broker_eviction_delay_seconds_count", frozenset({("cause", "session_timeout")}))] == 1
    await close(group)


async def _keep_polling(member: Member) -> None:
    while True:
        await member.poll()
        await asyncio.sleep(0.05)


async def test_a_fault_rule_matches_consumer_group_heartbeats_by_group(
    api: ControlClient, broker: BrokerServer
) -> None:
    matched = await stable_consumer_group(api, broker, "cg-faulty", size=1)
    other = await stable_consumer_group(api, broker, "cg-other", size=1)
    rule = await api.add_fault(
        api="ConsumerGroupHeartbeat", group_id="cg-faulty", action="error", error="COORDINATOR_NOT_AVAILABLE", count=1
    )
    assert rule["api"] == "ConsumerGroupHeartbeat"
    member = matched[0]
    refused = await member.client.call(heartbeat(1, "cg-faulty", member.member_id, member.epoch))
    assert (refused.error_code, refused.member_id, refused.member_epoch) == (E.coordinator_not_available, None, 0)
    untouched = other[0]
    assert (await untouched.client.call(heartbeat(1, "cg-other", untouched.member_id, untouched.epoch))).error_code is (
        E.none
    )
    assert (await member.client.call(heartbeat(1, "cg-faulty", member.member_id, member.epoch))).error_code is E.none

    async def one_hit() -> bool:
        return [f["hits"] for f in await api.faults() if f["id"] == rule["id"]] == [1]

    await eventually(one_hit)
    await close(matched + other)
