"""A broker with ``--data-dir`` SIGKILLed and started again, with real clients (issue 27;
cluster-and-durability.md section 9, items 6-10, 14, 16, 17; 12 and 13 are in test_transactions_restart.py).

Each test runs a broker process, kills it with SIGKILL at a moment the clients are busy, starts it again on the same
ports and directory, and checks what the clients see: records byte for byte, committed offsets, the classic group
at its generation with its member ids, KIP-848 members with their ids and epochs, no fatal error. The same scenario
without ``--data-dir`` must visibly lose (the negative control).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durability.broker_process import BrokerProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", "--topic", "t:3")
    process.start()
    yield process
    process.stop()


def produce(bootstrap: str, count: int, topic: str = "t") -> list[tuple[int, int, bytes]]:
    """``count`` records with acks=all; (partition, offset, value) of each acknowledged one."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    futures = [
        (producer.send(topic, value=b"value-%05d" % i, key=b"k%d" % i, partition=i % 3), b"value-%05d" % i)
        for i in range(count)
    ]
    producer.flush()
    acknowledged = []
    for future, value in futures:
        metadata = future.get(timeout=10)
        acknowledged.append((metadata.partition, metadata.offset, value))
    producer.close()
    return acknowledged


def read_all(bootstrap: str, topic: str = "t", partitions: int = 3) -> dict[tuple[int, int], bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
        for records in consumer.poll(500).values():
            for record in records:
                seen[(record.partition, record.offset)] = record.value
    consumer.close()
    return seen


def test_acknowledged_records_come_back_byte_for_byte_after_sigkill(broker: BrokerProcess) -> None:
    acknowledged = produce(broker.bootstrap, 600)
    before = read_all(broker.bootstrap)
    broker.kill()
    broker.start()
    after = read_all(broker.bootstrap)
    assert after == before
    assert all(after[(p, o)] == value for p, o, value in acknowledged)
    produce(broker.bootstrap, 30)  # and the log goes on after the restart
    assert len(read_all(broker.bootstrap)) == 630


def committed(bootstrap: str, group: str, partitions: int = 3) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    found = {p: consumer.committed(TopicPartition("t", p)) for p in range(partitions)}
    consumer.close()
    return {p: offset for p, offset in found.items() if offset is not None}


def test_a_classic_group_keeps_generation_member_ids_and_offsets_across_sigkill(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    produce(broker.bootstrap, 300)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=10_000, heartbeat_interval_ms=500,
    )  # fmt: skip
    consumer.subscribe(["t"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 300 and time.monotonic() < deadline:
        seen += sum(len(records) for records in consumer.poll(500).values())
    consumer.commit()
    before_group = broker.get("/v1/groups/g")
    before_offsets = committed(broker.bootstrap, "g")
    assert sum(before_offsets.values()) == 300

    broker.kill()
    broker.start()
    after_group = broker.get("/v1/groups/g")
    assert committed(broker.bootstrap, "g") == before_offsets
    assert after_group["state"] == "Stable" and after_group["generation_id"] == before_group["generation_id"]
    assert [m["member_id"] for m in after_group["members"]] == [m["member_id"] for m in before_group["members"]]

    # The member heartbeats into the same generation: no rebalance, and it consumes what comes next.
    produce(broker.bootstrap, 30)
    more = 0
    deadline = time.monotonic() + 30
    while more < 30 and time.monotonic() < deadline:
        more += sum(len(records) for records in consumer.poll(500).values())
    consumer.commit()
    assert more == 30
    assert broker.get("/v1/groups/g")["generation_id"] == before_group["generation_id"]
    consumer.close()


def test_kip848_librdkafka_members_keep_ids_and_epochs_and_live_on(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    produce(broker.bootstrap, 60)
    errors: list[str] = []
    members = [
        Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": "cg", "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "error_cb": lambda error: errors.append(str(error)),
        })
        for _ in range(3)
    ]
    for member in members:
        member.subscribe(["t"])
    consumed = 0
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        for member in members:
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                consumed += 1
                member.commit(message=message, asynchronous=False)
        group = broker.get("/v1/groups/cg")
        if consumed >= 60 and group["state"] == "Stable" and len(group["members"]) == 3:
            break
    before = {m["member_id"]: m["member_epoch"] for m in broker.get("/v1/groups/cg")["members"]}
    assert len(before) == 3, before

    broker.kill()
    broker.start()
    after = {m["member_id"]: m["member_epoch"] for m in broker.get("/v1/groups/cg")["members"]}
    assert after == before
    produce(broker.bootstrap, 30)
    more = 0
    deadline = time.monotonic() + 40
    while more < 30 and time.monotonic() < deadline:
        for member in members:
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                more += 1
    assert more == 30
    group = broker.get("/v1/groups/cg")
    assert {m["member_id"] for m in group["members"]} == set(before)  # nobody was fenced or rejoined
    assert not [e for e in errors if "fatal" in e.lower() or "GROUP_ID_NOT_FOUND" in e], errors
    for member in members:
        member.close()


def test_an_idempotent_producer_retrying_across_a_restart_writes_once(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(200):
        producer.produce("t", value=b"%d" % i, partition=i % 3)
        if i == 100:
            producer.flush(10)
            broker.kill()
            broker.start()
    assert producer.flush(30) == 0
    values = sorted(int(v) for v in read_all(broker.bootstrap).values())
    assert values == list(range(200))  # nothing twice, nothing lost


def test_a_second_broker_on_the_same_directory_refuses_with_one_line(broker: BrokerProcess) -> None:
    other = BrokerProcess(broker.data_dir)
    done = subprocess.run(other.argv(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "is in use by another broker (pid" in done.stderr and str(broker.data_dir) in done.stderr


def test_a_corrupt_journal_entry_stops_the_start_naming_file_and_byte(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data", "--topic", "x:1")
    process.start()
    for group in ("a", "b", "c"):
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer = KafkaConsumer(bootstrap_servers=process.bootstrap, group_id=group, enable_auto_commit=False)
        consumer.commit({TopicPartition("x", 0): OffsetAndMetadata(5, "", -1)})
        consumer.close()
    process.stop()
    journal = tmp_path / "data" / "coordinator" / "journal.log"
    data = bytearray(journal.read_bytes())
    data[20] ^= 0xFF
    journal.write_bytes(bytes(data))
    done = subprocess.run(process.argv(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stderr
    assert f"{journal}: corrupt entry at byte 0" in done.stderr and "Traceback" not in done.stderr


def test_without_a_data_directory_a_restart_loses_everything(tmp_path: Path) -> None:
    """The negative control (item 17): the same kill without --data-dir loses records, offsets and the group."""
    process = BrokerProcess(None, "--topic", "t:3")
    process.start()
    try:
        produce(process.bootstrap, 30)
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer = KafkaConsumer(bootstrap_servers=process.bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)})
        consumer.close()
        assert committed(process.bootstrap, "g") == {0: 5}
        process.kill()
        process.start()
        assert committed(process.bootstrap, "g") == {}
        assert read_all(process.bootstrap) == {}
    finally:
        process.stop()


def test_serve_help_names_the_data_directory() -> None:
    done = subprocess.run([sys.executable, "-m", "broker", "serve", "--help"], capture_output=True, text=True)
    assert "--data-dir" in done.stdout and "--fsync" in done.stdout


async def test_an_aiokafka_member_keeps_its_generation_and_offsets_across_sigkill(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    produce(broker.bootstrap, 90)
    consumer = AIOKafkaConsumer(
        "t", bootstrap_servers=broker.bootstrap, group_id="aio", enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=500,
    )  # fmt: skip
    await consumer.start()
    try:
        seen = 0
        while seen < 90:
            seen += sum(len(records) for records in (await consumer.getmany(timeout_ms=500)).values())
        await consumer.commit()
        before = broker.get("/v1/groups/aio")
        await asyncio.to_thread(broker.kill)
        await asyncio.to_thread(broker.start)
        after = broker.get("/v1/groups/aio")
        assert (after["state"], after["generation_id"]) == ("Stable", before["generation_id"])
        assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
        assert sum([await consumer.committed(TopicPartition("t", p)) or 0 for p in range(3)]) == 90
        await asyncio.to_thread(produce, broker.bootstrap, 15)
        more = 0
        for _ in range(60):
            more += sum(len(records) for records in (await consumer.getmany(timeout_ms=500)).values())
            if more >= 15:
                break
        assert more == 15
        assert broker.get("/v1/groups/aio")["generation_id"] == before["generation_id"]
    finally:
        await consumer.stop()
