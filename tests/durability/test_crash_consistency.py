"""Crash consistency (issue 27): SIGKILL the broker at seeded random moments under a load of idempotent produces
and offset commits from real clients, start it again each time on the same directory, and check after every round
that every acknowledged record is there once and every acknowledged commit is there (or a later one).

``GROUP_BROKER_CRASH_ROUNDS`` (default 6 in CI) and ``GROUP_BROKER_CRASH_SEED`` make a longer run.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from tests.durability.broker_process import BrokerProcess
from tests.durability.test_restart import read_all

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROUNDS = int(os.environ.get("GROUP_BROKER_CRASH_ROUNDS", "6"))
SEED = int(os.environ.get("GROUP_BROKER_CRASH_SEED", "27"))


def test_every_acknowledged_write_survives_random_sigkills(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker = BrokerProcess(tmp_path / "data", "--topic", "t:3")
    broker.start()
    stop = threading.Event()
    acked: list[bytes] = []
    commits: dict[int, int] = {}  # partition -> the highest acknowledged commit
    failures: list[str] = []

    def produce() -> None:
        def report(error: object, message: object) -> None:
            if error is None:
                acked.append(message.value())  # type: ignore[attr-defined]
            else:
                failures.append(f"produce: {error}")

        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60_000, "reconnect.backoff.max.ms": 200,
        })
        i = 0
        while not stop.is_set():
            try:
                producer.produce("t", b"%08d" % i, partition=i % 3, on_delivery=report)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)
        producer.flush(60)

    def commit() -> None:
        offset = 0
        consumer: KafkaConsumer | None = None
        while not stop.is_set():
            try:
                if consumer is None:
                    consumer = KafkaConsumer(
                        bootstrap_servers=broker.bootstrap, group_id="crash", enable_auto_commit=False,
                        request_timeout_ms=5000,
                    )  # fmt: skip
                offset += 1
                partition = offset % 3
                consumer.commit({TopicPartition("t", partition): OffsetAndMetadata(offset, "", -1)})
                commits[partition] = offset
            except Exception:  # the broker is down: reconnect and go on
                if consumer is not None:
                    consumer.close(autocommit=False)
                consumer = None
                time.sleep(0.05)
        if consumer is not None:
            consumer.close(autocommit=False)

    workers = [threading.Thread(target=produce), threading.Thread(target=commit)]
    for worker in workers:
        worker.start()
    rounds = random.Random(SEED)
    try:
        for _ in range(ROUNDS):
            time.sleep(rounds.uniform(0.2, 1.2))
            before_values, before_commits = list(acked), dict(commits)
            broker.kill()
            broker.start()
            stored = read_all(broker.bootstrap)
            values = sorted(stored.values())
            assert len(values) == len(set(values)), "a record is stored twice"
            missing = set(before_values) - set(values)
            assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="crash", enable_auto_commit=False)
            for partition, offset in before_commits.items():
                found = consumer.committed(TopicPartition("t", partition))
                assert found is not None and found >= offset, (partition, found, offset)
            consumer.close(autocommit=False)
    finally:
        stop.set()
        for worker in workers:
            worker.join(90)
        broker.stop()
    assert len(acked) > 100 and sum(commits.values()) > 10
    assert not [f for f in failures if "Fatal" in f or "fatal" in f], failures[:3]
