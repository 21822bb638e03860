"""The pytest plugin's offset calls (issue 26): ``group_broker.reset_offsets``, ``delete_offsets`` and
``delete_group``, as a user's test file calls them (generated and run by a fresh pytest that loads the plugin
through its entry point), with kafka-python producing, committing and reading back."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

OFFSET_TESTS = '''
import uuid
from datetime import timedelta

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker.control.client import ControlError


def read(group_broker, topic, group, commit=False):
    consumer = KafkaConsumer(
        topic, bootstrap_servers=group_broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=2000,
    )
    try:
        seen = [record.offset for record in consumer]
        if commit:
            consumer.commit()
    finally:
        consumer.close()
    return seen


def test_reset_delete_offsets_and_delete_group(group_broker):
    topic, group = f"t-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap)
    for i in range(6):
        producer.send(topic, b"r%d" % i)
    producer.flush()
    producer.close()
    assert read(group_broker, topic, group, commit=True) == list(range(6))

    assert group_broker.reset_offsets(group, topic, to_earliest=True, execute=False) == {(topic, 0): 0}
    assert read(group_broker, topic, group) == []  # the dry run committed nothing
    assert group_broker.reset_offsets(group, topic, [0], shift_by=-2) == {(topic, 0): 4}
    assert read(group_broker, topic, group) == [4, 5]
    assert group_broker.reset_offsets(group, all_topics=True, by_duration=timedelta(days=1)) == {(topic, 0): 0}
    assert read(group_broker, topic, group) == list(range(6))
    with pytest.raises(ControlError) as bad:
        group_broker.reset_offsets(group, topic, shift_by=1, to_offset=2)
    assert bad.value.status == 400

    assert group_broker.delete_offsets(group, topic) == [(topic, 0)]
    assert read(group_broker, topic, group) == list(range(6))  # no offset: auto_offset_reset again
    group_broker.delete_group(group)
    with pytest.raises(ControlError) as gone:
        group_broker.delete_group(group)
    assert gone.value.status == 404
    events = [e["event"] for e in group_broker.events(group)]
    assert "offsets_deleted" in events and events[-1] == "group_deleted"


def test_a_group_with_members_is_not_reset(group_broker):
    topic, group = f"t-{uuid.uuid4()}", f"g-{uuid.uuid4()}"
    KafkaProducer(bootstrap_servers=group_broker.bootstrap).send(topic, b"x").get(timeout=10)
    consumer = KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest")
    try:
        consumer.partitions_for_topic(topic)
        group_broker.wait_for(group, state="Stable", members=1, timeout=20, poll=lambda: consumer.poll(50))
        with pytest.raises(ControlError) as refused:
            group_broker.reset_offsets(group, topic, to_latest=True)
        assert refused.value.status == 409
        assert "is inactive, but the current state is Stable." in str(refused.value)
        with pytest.raises(ControlError) as busy:
            group_broker.delete_group(group)
        assert "NON_EMPTY_GROUP" in str(busy.value)
    finally:
        consumer.close()


async def test_the_async_forms(group_broker):
    group = f"g-{uuid.uuid4()}"
    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap)
    producer.send("async-t", b"x").get(timeout=10)
    producer.close()
    assert await group_broker.aio.reset_offsets(group, "async-t", to_latest=True) == {("async-t", 0): 1}
    assert await group_broker.aio.delete_offsets(group, "async-t", [0]) == [("async-t", 0)]
    await group_broker.aio.delete_group(group)
'''

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def test_offsets_through_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_offsets=OFFSET_TESTS)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=3)
