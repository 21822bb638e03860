"""Offsets and lag over the control API and ``/metrics`` (issue 26), with a real client: aiokafka produces to the
in-process broker and a consumer of a group commits, and every answer is checked against ``docs/control-api.yaml``
(the client of ``test_control_api.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.server.broker import BrokerServer
from tests.control.test_control_api import ControlClient

GROUP = "lagged"
PRODUCED = {0: 10, 1: 4}  # records per partition of "topic" (3 partitions; partition 2 stays empty)
COMMITTED = {0: 6, 1: 4}


async def produce(port: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    await producer.start()
    try:
        for partition, count in PRODUCED.items():
            for n in range(count):
                await producer.send_and_wait("topic", f"r{n}".encode(), partition=partition)
    finally:
        await producer.stop()


@pytest.fixture
async def consumer(broker: BrokerServer) -> AsyncIterator[AIOKafkaConsumer]:
    """A member of GROUP that owns all of "topic" and committed COMMITTED."""
    await produce(broker.port)
    client = AIOKafkaConsumer(
        "topic",
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        group_id=GROUP,
        client_id="lag-reader",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    await client.start()
    try:
        deadline = time.monotonic() + 15
        while len(client.assignment()) < 3:
            assert time.monotonic() < deadline, "the consumer was not assigned the topic"
            await asyncio.sleep(0.05)
        await client.commit({TopicPartition("topic", p): offset for p, offset in COMMITTED.items()})
        yield client
    finally:
        await client.stop()


def member_id(detail: dict[str, Any]) -> str:
    (member,) = detail["members"]
    found: str = member["member_id"]
    return found


async def test_describe_shows_each_partitions_committed_offset_log_end_offset_lag_and_owner(
    api: ControlClient, consumer: AIOKafkaConsumer
) -> None:
    detail = await api.group(GROUP)
    owner = member_id(detail)
    assert detail["offsets"] == [
        {
            "topic": "topic",
            "partition": 0,
            "committed_offset": 6,
            "log_end_offset": 10,
            "lag": 4,
            "member_id": owner,
            "client_id": "lag-reader",
            "host": "/127.0.0.1",
        },
        {
            "topic": "topic",
            "partition": 1,
            "committed_offset": 4,
            "log_end_offset": 4,
            "lag": 0,
            "member_id": owner,
            "client_id": "lag-reader",
            "host": "/127.0.0.1",
        },
        {
            "topic": "topic",
            "partition": 2,
            "committed_offset": None,
            "log_end_offset": 0,
            "lag": None,
            "member_id": owner,
            "client_id": "lag-reader",
            "host": "/127.0.0.1",
        },
    ]
    assert detail["lag"] == 4
    listed = {group["group_id"]: group for group in (await api.get("/v1/groups")).json["groups"]}
    assert listed[GROUP]["lag"] == 4


async def test_the_lag_follows_new_records_and_commits(
    broker: BrokerServer, api: ControlClient, consumer: AIOKafkaConsumer
) -> None:
    await produce(broker.port)  # as many again: partition 0 ends at 20, partition 1 at 8
    await consumer.commit({TopicPartition("topic", 0): 10, TopicPartition("topic", 2): 0})
    detail = await api.group(GROUP)
    assert [(o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"]) for o in detail["offsets"]] == [
        (0, 10, 20, 10),
        (1, 4, 8, 4),
        (2, 0, 0, 0),
    ]
    assert detail["lag"] == 14


async def test_metrics_carry_lag_committed_offsets_and_the_sum_per_group(
    api: ControlClient, consumer: AIOKafkaConsumer
) -> None:
    metrics = await api.metrics()

    def value(name: str, **labels: str) -> float | None:
        return metrics.get((name, frozenset(labels.items())))

    partition = {"group": GROUP, "topic": "topic"}
    assert value("group_broker_consumer_group_lag", **partition, partition="0") == 4
    assert value("group_broker_consumer_group_lag", **partition, partition="1") == 0
    assert value("group_broker_consumer_group_lag", **partition, partition="2") is None  # nothing committed: "-"
    assert value("group_broker_consumer_group_committed_offset", **partition, partition="0") == 6
    assert value("group_broker_consumer_group_committed_offset", **partition, partition="2") is None
    assert value("group_broker_consumer_group_lag_sum", group=GROUP) == 4


async def test_a_simple_group_without_members_has_unowned_rows(broker: BrokerServer, api: ControlClient) -> None:
    """Offsets committed with assign() (generation -1): the group is Empty, its rows have no owner."""
    await produce(broker.port)
    client = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}", group_id="simple", enable_auto_commit=False)
    await client.start()
    try:
        client.assign([TopicPartition("topic", 0)])
        await client.commit({TopicPartition("topic", 0): 3})
    finally:
        await client.stop()
    detail = await api.group("simple")
    assert detail["members"] == []
    assert detail["offsets"] == [
        {
            "topic": "topic",
            "partition": 0,
            "committed_offset": 3,
            "log_end_offset": 10,
            "lag": 7,
            "member_id": None,
            "client_id": None,
            "host": None,
        },
    ]
