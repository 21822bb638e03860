"""One classic group of aiokafka, kafka-python and confluent-kafka members across a SIGKILL of the broker (issue 27;
cluster-and-durability.md section 9, items 7-9).

Each member runs in its own thread, commits synchronously after every poll and notes what it consumed, what commits
were acknowledged and any revocation. After the kill and the restart: the committed offsets are the acknowledged
ones, the group is Stable at the same generation with the same member ids, no member is revoked (Kafka loads the
group as it was: the members just heartbeat on), nothing below an acknowledged commit is consumed again, and every
library consumes what is produced next.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.durability.broker_process import BrokerProcess
from tests.durability.test_restart import committed, produce

GROUP, TOPIC, PARTITIONS = "mixed", "t", 3
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class Member:
    """What one member's thread saw; read by the test under ``lock``."""

    library: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    consumed: list[tuple[int, int, float]] = field(default_factory=list)  # (partition, offset, when)
    revoked: list[tuple[float, list[int]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def saw(self, records: list[tuple[int, int]]) -> None:
        now = time.monotonic()
        with self.lock:
            self.consumed += [(p, o, now) for p, o in records]

    def lost(self, partitions: list[int]) -> None:
        with self.lock:
            self.revoked.append((time.monotonic(), sorted(partitions)))

    def count(self, since: float = 0.0) -> int:
        with self.lock:
            return sum(1 for _, _, when in self.consumed if when >= since)


def kafka_python(bootstrap: str, member: Member) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            member.lost([tp.partition for tp in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=GROUP, client_id="kafka-python", enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=500,
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
    )  # fmt: skip
    consumer.subscribe([TOPIC], listener=Listener())
    pending = False
    while not member.stop.is_set():
        batches = consumer.poll(200)
        records = [(r.partition, r.offset) for rs in batches.values() for r in rs]
        member.saw(records)
        pending = pending or bool(records)
        if pending:
            try:
                consumer.commit()
                pending = False
            except Exception as error:  # refused in a rebalance, or cut by the kill: tried again next round
                member.errors.append(repr(error))
    consumer.close()


def confluent(bootstrap: str, member: Member) -> None:
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "confluent", "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
         "partition.assignment.strategy": "roundrobin"}
    )  # fmt: skip
    consumer.subscribe([TOPIC], on_revoke=lambda _, partitions: member.lost([tp.partition for tp in partitions]))
    pending = False
    while not member.stop.is_set():
        messages = [m for m in consumer.consume(100, 0.2) if m.error() is None]
        member.saw([(m.partition(), m.offset()) for m in messages])
        pending = pending or bool(messages)
        if pending:
            try:
                consumer.commit(asynchronous=False)
                pending = False
            except KafkaException as error:
                member.errors.append(repr(error))
    consumer.close()


def aiokafka(bootstrap: str, member: Member) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            member.lost([tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=GROUP, client_id="aiokafka", enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=500,
        )  # fmt: skip  (aiokafka's default assignor is roundrobin)
        consumer.subscribe([TOPIC], listener=Listener())
        await consumer.start()
        pending = False
        try:
            while not member.stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                records = [(r.partition, r.offset) for rs in batches.values() for r in rs]
                member.saw(records)
                pending = pending or bool(records)
                if pending:
                    try:
                        await consumer.commit()
                        pending = False
                    except Exception as error:
                        member.errors.append(repr(error))
        finally:
            await consumer.stop()

    asyncio.run(run())


LIBRARIES: dict[str, Callable[[str, Member], None]] = {
    "aiokafka": aiokafka, "kafka-python": kafka_python, "confluent": confluent,
}  # fmt: skip


def guarded(run: Callable[[str, Member], None], bootstrap: str, member: Member) -> None:
    """The member's loop; what kills its thread is kept for the assertion that reports it."""
    try:
        run(bootstrap, member)
    except BaseException:
        member.errors.append(traceback.format_exc(limit=4))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", "--topic", f"{TOPIC}:{PARTITIONS}")
    process.start()
    yield process
    process.stop()


def wait(what: str, probe: Callable[[], bool], seen: Callable[[], object], timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s; {seen()}"
        time.sleep(0.1)


def test_a_group_of_three_libraries_keeps_its_generation_ids_and_offsets_across_sigkill(
    broker: BrokerProcess,
) -> None:
    produce(broker.bootstrap, 300)
    members = {name: Member(name) for name in LIBRARIES}
    threads = [
        threading.Thread(target=guarded, args=(LIBRARIES[name], broker.bootstrap, member), name=name, daemon=True)
        for name, member in members.items()
    ]
    for thread in threads:
        thread.start()
    try:

        def settled() -> bool:
            try:
                group = broker.get(f"/v1/groups/{GROUP}")
            except urllib.error.HTTPError:  # 404 until the first JoinGroup
                return False
            return group["state"] == "Stable" and len(group["members"]) == 3 and sum(
                committed(broker.bootstrap, GROUP).values()
            ) == 300

        def seen() -> object:
            try:
                group = broker.get(f"/v1/groups/{GROUP}")
            except urllib.error.HTTPError as error:
                group = {"error": str(error)}
            return {
                "group": {k: group.get(k) for k in ("state", "generation_id", "members")},
                "committed": committed(broker.bootstrap, GROUP),
                "members": {n: (m.count(), m.errors[-3:], m.revoked) for n, m in members.items()},
            }

        wait("three members Stable with all 300 records committed", settled, seen)
        before = broker.get(f"/v1/groups/{GROUP}")
        acknowledged = committed(broker.bootstrap, GROUP)
        assert {m["client_id"] for m in before["members"]} == set(LIBRARIES)

        broker.kill()
        killed = time.monotonic()
        broker.start()
        after = broker.get(f"/v1/groups/{GROUP}")
        assert committed(broker.bootstrap, GROUP) == acknowledged  # right after the listener opens
        assert (after["state"], after["generation_id"]) == ("Stable", before["generation_id"])
        assert sorted(m["member_id"] for m in after["members"]) == sorted(m["member_id"] for m in before["members"])

        produce(broker.bootstrap, 60)  # 20 on each partition: one partition per member
        wait(
            "every library consuming after the restart",
            lambda: all(member.count(since=killed) >= 20 for member in members.values()),
            seen,
        )
        wait("the new records committed", lambda: sum(committed(broker.bootstrap, GROUP).values()) == 360, seen)
        final = broker.get(f"/v1/groups/{GROUP}")
        assert final["generation_id"] == before["generation_id"]  # no rebalance
    finally:
        stopping = time.monotonic()  # closing a consumer revokes its partitions: those are not the restart's
        for member in members.values():
            member.stop.set()
        for thread in threads:
            thread.join(20)
    for name, member in members.items():
        assert [r for r in member.revoked if killed <= r[0] < stopping] == [], (name, member.revoked)
        again = [(p, o) for p, o, when in member.consumed if when >= killed and o < acknowledged.get(p, 0)]
        assert again == [], (name, again[:5])  # nothing below an acknowledged commit read twice
