"""The control API's offset routes (issue 26): ``POST /v1/groups/{group}/offsets/reset``,
``DELETE /v1/groups/{group}/offsets`` and ``DELETE /v1/groups/{group}``, over HTTP against an in-process broker,
every answer checked against docs/control-api.yaml. Records and commits come from aiokafka; consumer-group members
are ConsumerGroupHeartbeat clients over TCP."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.server.broker import BrokerServer
from tests.control.consumer_members import close, members, settle
from tests.control.test_control_api import ControlClient, url

TOPIC, PARTITIONS, PER_PARTITION = "topic", 3, 5


async def produce(broker: BrokerServer) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}")
    await producer.start()
    try:
        for i in range(PER_PARTITION * PARTITIONS):
            await producer.send_and_wait(TOPIC, b"r%d" % i, partition=i % PARTITIONS)
    finally:
        await producer.stop()


async def consume(broker: BrokerServer, group: str, commit: bool = False) -> list[tuple[int, int]]:
    """What an aiokafka consumer of the group reads from its committed offsets (and commits, if asked)."""
    consumer = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=f"127.0.0.1:{broker.port}", group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen: list[tuple[int, int]] = []
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1500)
            if not batch:
                break
            seen += [(record.partition, record.offset) for records in batch.values() for record in records]
        if commit:
            await consumer.commit()
    finally:
        await consumer.stop()
    return sorted(seen)


async def committed(broker: BrokerServer, group: str) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}", group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        await consumer.stop()


def reset_path(group: str) -> str:
    return url("v1", "groups", group, "offsets", "reset")


async def test_a_dry_run_plans_and_execute_commits_what_a_consumer_then_reads(
    api: ControlClient, broker: BrokerServer
) -> None:
    group = "api-reset"
    await produce(broker)
    assert len(await consume(broker, group, commit=True)) == PER_PARTITION * PARTITIONS

    plan = await api.post(reset_path(group), json={"all_topics": True, "to": "earliest"})
    assert plan.status == 200, plan.data
    assert plan.json == {
        "group_id": group, "state": "Empty", "executed": False, "warnings": [],
        "offsets": [{"topic": TOPIC, "partition": p, "new_offset": 0} for p in range(PARTITIONS)],
    }
    assert await committed(broker, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    done = await api.post(reset_path(group), json={"topics": {TOPIC: [1]}, "shift_by": -2, "execute": True})
    assert done.status == 200, done.data
    assert done.json["executed"] is True
    assert done.json["offsets"] == [{"topic": TOPIC, "partition": 1, "new_offset": PER_PARTITION - 2}]
    assert await consume(broker, group) == [(1, PER_PARTITION - 2), (1, PER_PARTITION - 1)]

    clamped = await api.post(reset_path(group), json={"topics": {TOPIC: None}, "to_offset": 99, "execute": True})
    assert clamped.json["warnings"][0] == (f"New offset (99) is higher than latest offset for topic partition "
                                           f"{TOPIC}-0. Value will be set to {PER_PARTITION}")
    assert await committed(broker, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    future = await api.post(reset_path(group), json={"all_topics": True, "to_datetime": "2999-01-01T00:00:00Z"})
    assert [o["new_offset"] for o in future.json["offsets"]] == [PER_PARTITION] * PARTITIONS
    assert future.json["warnings"][0] == (f"Warn: Partition 0 from topic {TOPIC} is empty. Falling back to latest "
                                          "known offset.")
    past = await api.post(reset_path(group), json={"all_topics": True, "by_duration": "P1D", "execute": True})
    assert [o["new_offset"] for o in past.json["offsets"]] == [0] * PARTITIONS
    assert await committed(broker, group) == dict.fromkeys(range(PARTITIONS), 0)

    events = await api.events(group)
    assert "offsets_committed" not in {e["event"] for e in events}  # a debug event: this broker logs at info


async def test_a_new_group_is_created_by_an_executed_reset(api: ControlClient, broker: BrokerServer) -> None:
    group = "api-new"
    answer = await api.post(reset_path(group), json={"topics": {TOPIC: [0, 2]}, "to": "latest", "execute": True})
    assert answer.status == 200, answer.data
    assert answer.json["state"] == "Dead"  # none yet, as Kafka's describe shows it
    assert (await api.group(group))["state"] == "Empty"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be a JSON object"),
        ({"to": "earliest"}, "One of the reset scopes should be defined"),
        ({"all_topics": True}, "exactly one target is needed"),
        ({"all_topics": True, "to": "earliest", "to_offset": 3}, "exactly one target is needed"),
        ({"all_topics": True, "to": "middle"}, 'to must be "earliest" or "latest"'),
        ({"all_topics": True, "to_offset": "3"}, "to_offset must be a 64-bit integer"),
        ({"all_topics": True, "to_offset": True}, "to_offset must be a 64-bit integer"),
        ({"all_topics": True, "by_duration": "1h"}, "Text cannot be parsed to a Duration"),
        ({"all_topics": True, "to_datetime": "yesterday"}, "It does not contain a 'T'"),
        ({"all_topics": True, "to": "earliest", "execute": "yes"}, "execute and all_topics must be true or false"),
        ({"topics": {TOPIC: [-1]}, "to": "earliest"}, "must be null or a non-empty list of partitions"),
        ({"topics": {TOPIC: [7]}, "to": "earliest"}, f"Error getting starting offset of topic partition: {TOPIC}-7"),
        ({"topics": {TOPIC: None}, "all_topics": True, "to": "earliest"}, "topics and all_topics exclude each other"),
        ({"all_topics": True, "to": "earliest", "dry": True}, "unknown field(s) ['dry']"),
    ],
)
async def test_a_bad_body_is_400_and_changes_nothing(
    api: ControlClient, broker: BrokerServer, body: Any, message: str
) -> None:
    group = "api-bad"
    answer = await api.post(reset_path(group), json=body, well_formed=False)
    assert answer.status == 400, answer.data
    assert message in answer.error
    assert (await api.get(url("v1", "groups", group))).status == 404  # no group was made


async def test_an_unknown_topic_is_404(api: ControlClient) -> None:
    answer = await api.post(reset_path("api-t"), json={"topics": {"nope": None}, "to": "latest"})
    assert answer.status == 404
    assert answer.error.startswith("UNKNOWN_TOPIC_OR_PARTITION")
    gone = await api.delete(url("v1", "groups", "api-t", "offsets"), query={"topic": "nope"})
    assert gone.status == 404


async def test_members_in_the_group_refuse_reset_delete_offsets_and_delete_group(
    api: ControlClient, broker: BrokerServer
) -> None:
    group = "api-busy"
    await api.post(reset_path(group), json={"all_topics": False, "topics": {TOPIC: None}, "to": "latest",
                                            "execute": True})
    group_members = await members(broker.port, group, 1, topics=(TOPIC,))
    await settle(group_members)
    await api.wait(group, state="Stable", members=1)

    refused = await api.post(reset_path(group), json={"all_topics": True, "to": "earliest", "execute": True})
    assert refused.status == 409
    assert refused.error == (f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                             "state is Stable.")
    offsets_path = url("v1", "groups", group, "offsets")
    subscribed = await api.delete(offsets_path, query={"topic": TOPIC, "partition": 0})
    assert subscribed.status == 409
    assert subscribed.error.startswith("GROUP_SUBSCRIBED_TO_TOPIC")
    busy = await api.delete(url("v1", "groups", group))
    assert busy.status == 409
    assert busy.error == f"group '{group}' could not be deleted: NON_EMPTY_GROUP: The group is not empty."
    assert await committed(broker, group) == dict.fromkeys(range(PARTITIONS), 0)  # nothing was changed

    for member in group_members:
        await member.leave()
    await close(group_members)
    await api.wait(group, state="Empty")
    deleted = await api.delete(offsets_path, query={"topic": TOPIC, "partition": 0})
    assert deleted.status == 200, deleted.data
    assert deleted.json == {"group_id": group, "offsets": [{"topic": TOPIC, "partition": 0}]}
    assert (await api.delete(offsets_path, query={"topic": TOPIC, "partition": 9})).status == 404
    assert (await api.delete(offsets_path, query={"topic": TOPIC, "partition": "x"}, well_formed=False)).status == 400
    assert (await api.delete(offsets_path, query={"topic": TOPIC, "part": "0"}, well_formed=False)).status == 400

    dropped = await api.delete(url("v1", "groups", group))
    assert dropped.status == 200
    assert dropped.json == {"group_id": group, "deleted": True}
    names = [e["event"] for e in await api.events(group)]
    assert names[-2:] == ["offsets_deleted", "group_deleted"]  # the simple group became a consumer group before
    again = await api.delete(url("v1", "groups", group))
    assert again.status == 404
    assert "GROUP_ID_NOT_FOUND" in again.error
    missing = await api.delete(url("v1", "groups", "api-never", "offsets"), query={"topic": TOPIC})
    assert missing.status == 404
