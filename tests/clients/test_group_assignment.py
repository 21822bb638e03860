"""Real clients against a broker process: three consumers split a topic, a graceful close hands over.

Until the data plane exists the consumers cannot fetch (ListOffsets/Fetch are not
offered yet), so these tests stop at the assignment, as the foundation issue allows.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import BrokerProcess

TOPIC = "shared"  # created with 6 partitions by the broker_process fixture
PARTITIONS = set(range(6))
DEADLINE_S = 60.0


def assert_split(assignments: list[set[int]]) -> None:
    """Disjoint partition sets that together cover the topic."""
    seen: set[int] = set()
    for owned in assignments:
        assert not (owned & seen), f"partition owned twice: {assignments}"
        seen |= owned
    assert seen == PARTITIONS, f"not every partition is owned: {assignments}"


def balanced(assignments: list[set[int]]) -> bool:
    return sum(len(a) for a in assignments) == len(PARTITIONS) and all(
        len(a) == len(PARTITIONS) // len(assignments) for a in assignments
    )


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- aiokafka --------------------------------------------------------------------------


async def test_aiokafka_three_consumers_split_and_hand_over(broker_process: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    group = f"aiokafka-{uuid.uuid4()}"
    consumers = [
        AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=broker_process.bootstrap,
            group_id=group,
            client_id=f"aiokafka-{i}",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
        )
        for i in range(3)
    ]

    def owned(selected: list[Any]) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in selected]

    async def settle(selected: list[Any]) -> list[set[int]]:
        deadline = time.monotonic() + DEADLINE_S
        while not balanced(owned(selected)):
            assert time.monotonic() < deadline, f"no balanced assignment: {owned(selected)}"
            await asyncio.sleep(0.05)
        return owned(selected)

    try:
        for consumer in consumers:
            await consumer.start()
        assert_split(await settle(consumers))
        await consumers[0].stop()
        assert_split(await settle(consumers[1:]))
    finally:
        for consumer in consumers:
            await consumer.stop()


# -- kafka-python ------------------------------------------------------------------------


class PollingThread(threading.Thread):
    """Keeps a synchronous consumer polling, as an application's poll loop would."""

    def __init__(self, consumer: Any, poll: Callable[[Any], None], assignment: Callable[[Any], set[int]]) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self._poll = poll
        self._assignment = assignment
        self.owned: set[int] = set()
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._poll(self.consumer)
            except Exception as error:  # kept and checked at the end: a consumer must see no errors
                self.errors.append(error)
                time.sleep(0.05)
            self.owned = self._assignment(self.consumer)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


def run_threads(threads: list[PollingThread], close: Callable[[Any], None], timeout: float = DEADLINE_S) -> None:
    for thread in threads:
        thread.start()
    wait_until(lambda: balanced([t.owned for t in threads]), "three consumers to split the topic", timeout)
    assert_split([t.owned for t in threads])
    threads[0].stop()
    close(threads[0].consumer)  # graceful: LeaveGroup
    wait_until(lambda: balanced([t.owned for t in threads[1:]]), "the survivors to take over", timeout)
    assert_split([t.owned for t in threads[1:]])
    assert [t.errors for t in threads[1:]] == [[], []]


def kafka_python_scenario(bootstrap: str) -> None:
    from kafka import KafkaConsumer

    group = f"kafka-python-{uuid.uuid4()}"
    consumers = [
        KafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"kafka-python-{i}",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
        )
        for i in range(3)
    ]
    threads = [
        # poll() timeouts of about 1 s, not 100 ms: kafka-python 3.0.12 can lose the completion of a
        # JoinGroup/SyncGroup round that finishes while a timed-out poll() has left it in flight (its
        # IO thread goes idle and the consumer never resumes; seen in about 1 run in 6 with 100 ms,
        # never in 14 runs with 1 s; the broker answered every request, as the client's debug log shows).
        PollingThread(c, lambda c: c.poll(timeout_ms=1000), lambda c: {tp.partition for tp in c.assignment()})
        for c in consumers
    ]
    try:
        run_threads(threads, lambda c: c.close(), timeout=20.0)
    finally:
        for thread in threads:
            thread.stop()
            thread.consumer.close()


def test_kafka_python_three_consumers_split_and_hand_over(broker_process: BrokerProcess) -> None:
    kafka_python_scenario(broker_process.bootstrap)


# -- confluent-kafka (librdkafka) -------------------------------------------------------------


def test_confluent_kafka_three_consumers_split_and_hand_over(broker_process: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    group = f"confluent-{uuid.uuid4()}"
    consumers = [
        Consumer(
            {
                "bootstrap.servers": broker_process.bootstrap,
                "group.id": group,
                "client.id": f"confluent-{i}",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 200,
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
            }
        )
        for i in range(3)
    ]
    for consumer in consumers:
        consumer.subscribe([TOPIC])
    threads = [
        PollingThread(c, lambda c: c.poll(0.1), lambda c: {tp.partition for tp in c.assignment()}) for c in consumers
    ]
    closed: set[int] = set()

    def close(consumer: Any) -> None:
        consumer.close()
        closed.add(id(consumer))

    try:
        run_threads(threads, close)
    finally:
        for thread in threads:
            thread.stop()
            if id(thread.consumer) not in closed:
                thread.consumer.close()


@pytest.fixture(autouse=True)
def _broker_alive(broker_process: BrokerProcess) -> Any:
    yield
    assert broker_process.process.poll() is None, "the broker died:\n" + broker_process.log()[-4000:]
