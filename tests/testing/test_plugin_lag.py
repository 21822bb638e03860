"""``group_broker.lag(group)`` and ``group_broker.offsets(group)`` (issue 26) as a user meets them: a generated test
file run by a fresh pytest with the plugin, a real aiokafka producer and a consumer of a group that commits."""

from __future__ import annotations

import pytest

from tests.testing.test_pytest_plugin import INI

pytest_plugins = ["pytester"]

LAG_TESTS = """
import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


@pytest.fixture(scope="session")
def group_broker_settings():
    return {"topics": {"orders": 3}}


async def test_lag_and_offsets(group_broker):
    group = f"lag-{uuid.uuid4()}"
    producer = AIOKafkaProducer(bootstrap_servers=group_broker.bootstrap)
    await producer.start()
    try:
        for n in range(8):
            await producer.send_and_wait("orders", b"x", partition=0)
        await producer.send_and_wait("orders", b"x", partition=1)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("orders", bootstrap_servers=group_broker.bootstrap, group_id=group,
                                client_id="lagging", enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await consumer.commit({TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 1})
        # None, not the log end offset, for a partition owned without a commit: Kafka's tool prints "-".
        assert await group_broker.aio.lag(group) == {("orders", 0): 3, ("orders", 1): 0, ("orders", 2): None}
        rows = await group_broker.aio.offsets(group)
        assert [(r["partition"], r["committed_offset"], r["log_end_offset"]) for r in rows] == [
            (0, 5, 8), (1, 1, 1), (2, None, 0)
        ]
        assert {r["client_id"] for r in rows} == {"lagging"} and {r["host"] for r in rows} == {"/127.0.0.1"}
    finally:
        await consumer.stop()
    # Its member gone, the group keeps its commits: the same lags, no owner.
    assert group_broker.lag(group) == {("orders", 0): 3, ("orders", 1): 0}
    assert all(r["member_id"] is None for r in group_broker.offsets(group))


def test_lag_of_an_unknown_group_says_so(group_broker):
    from broker.control.client import ControlError

    with pytest.raises(ControlError, match="no group 'nobody'"):
        group_broker.lag("nobody")
"""


def test_lag_and_offsets_through_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_lag=LAG_TESTS)
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=2)
