"""Crash consistency (issue 27): SIGKILL the broker at seeded random moments under a load of idempotent produces,
offset commits, group joins and transactions from real clients, start it again each time on the same directory,
and check after every round:

* every acknowledged record is there once (confluent-kafka, idempotent);
* every acknowledged commit is there, or a later one (kafka-python);
* the group a kafka-python member keeps joining and leaving is at a generation no lower than the last one a
  SyncGroup handed out (what a member was told was written);
* every committed transaction's records are all visible to read_committed, once, and no transaction is visible in
  part (confluent-kafka's transactional producer; one cut by the kill may be committed or aborted, whole).

``GROUP_BROKER_CRASH_ROUNDS`` (default 20 in CI) and ``GROUP_BROKER_CRASH_SEED`` make a longer run.
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
ROUNDS = int(os.environ.get("GROUP_BROKER_CRASH_ROUNDS", "20"))
TXN_RECORDS = 5
SEED = int(os.environ.get("GROUP_BROKER_CRASH_SEED", "27"))


def test_every_acknowledged_write_survives_random_sigkills(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker = BrokerProcess(tmp_path / "data", "--topic", "t:3", "--topic", "tx:1")
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

    generations: list[int] = []  # each generation a SyncGroup handed the joining member

    def join() -> None:
        from kafka import ConsumerRebalanceListener

        class Told(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: object) -> None:
                pass

            def on_partitions_assigned(self, assigned: object) -> None:
                # Called once the SyncGroup answer is in: the generation the member now holds.
                generations.append(consumer._coordinator._generation.generation_id)

        while not stop.is_set():
            try:
                consumer = KafkaConsumer(
                    bootstrap_servers=broker.bootstrap, group_id="joiner", enable_auto_commit=False,
                    session_timeout_ms=6000, heartbeat_interval_ms=300, request_timeout_ms=5000,
                    # The rebalance timeout: a JoinGroup parked behind a member the kill left in the group (its
                    # LeaveGroup never arrived) waits at most this long, not kafka-python's default 300 s.
                    max_poll_interval_ms=5000,
                )  # fmt: skip
                consumer.subscribe(["t"], listener=Told())
                deadline = time.monotonic() + 3
                while not stop.is_set() and time.monotonic() < deadline and not consumer.assignment():
                    consumer.poll(100)
                consumer.close(autocommit=False)  # LeaveGroup: the next one joins a new generation
            except Exception as error:
                failures.append(f"join: {error!r}")
                time.sleep(0.05)

    committed_txns: list[int] = []

    def transact() -> None:
        from confluent_kafka import KafkaException

        producer = None
        number = 0
        while not stop.is_set():
            try:
                if producer is None:
                    producer = Producer({
                        "bootstrap.servers": broker.bootstrap, "transactional.id": "crash-txn",
                        "transaction.timeout.ms": 10_000, "reconnect.backoff.max.ms": 200,
                    })
                    producer.init_transactions(30)
                number += 1
                producer.begin_transaction()
                for i in range(TXN_RECORDS):
                    producer.produce("tx", b"%06d-%d" % (number, i), partition=0)
                producer.commit_transaction(30)
                committed_txns.append(number)
            except KafkaException as error:
                reason = error.args[0]
                if producer is not None and reason.txn_requires_abort():
                    try:
                        producer.abort_transaction(30)
                        continue
                    except KafkaException:
                        pass
                producer = None  # fatal, or the abort failed too: a new producer fences the old epoch
                time.sleep(0.05)

    workers = [threading.Thread(target=f) for f in (produce, commit, join, transact)]
    for worker in workers:
        worker.start()
    rounds = random.Random(SEED)
    try:
        for _ in range(ROUNDS):
            time.sleep(rounds.uniform(0.2, 1.2))
            before_values, before_commits = list(acked), dict(commits)
            before_generation, before_txns = max(generations, default=0), list(committed_txns)
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
            group = broker.get("/v1/groups/joiner") if before_generation else {"generation_id": 0}
            assert group["generation_id"] >= before_generation, (group["generation_id"], before_generation)
            visible = read_committed_txns(broker.bootstrap)
            partial = {n: c for n, c in visible.items() if c != TXN_RECORDS}
            assert not partial, f"transactions seen in part or twice: {dict(list(partial.items())[:3])}"
            lost = set(before_txns[:-1]) - set(visible)  # the newest may be the one read_committed_txns leaves out
            assert not lost, f"committed transactions not visible: {sorted(lost)[:3]}"
        stop.set()
        for worker in workers:
            worker.join(90)
        visible = read_committed_txns(broker.bootstrap, quiet=True)
        assert set(committed_txns) <= set(visible), sorted(set(committed_txns) - set(visible))[:3]
        assert all(count == TXN_RECORDS for count in visible.values()), visible
    finally:
        stop.set()
        for worker in workers:
            worker.join(90)
        broker.stop()
    assert len(acked) > 100 and sum(commits.values()) > 10
    print(f"rounds {ROUNDS}: {len(acked)} records, {len(generations)} generations, {len(committed_txns)} transactions")
    # A kill that leaves the joining member in the group holds the next joins until its session or the rebalance
    # timeout runs out (5-6 s): 26 to 122 generations in 20 rounds seen here before issue 29; since a restart brings
    # a rebalance in flight back at its last stored generation with its members (as Kafka's replay of its log does),
    # more kills land on a group that waits out a session: 5 to 165 seen. This only checks that the load ran.
    load = (len(generations), len(committed_txns), failures[-5:])
    assert len(generations) >= ROUNDS // 5 and len(committed_txns) > ROUNDS, load
    assert not [f for f in failures if "Fatal" in f or "fatal" in f], failures[:3]


def read_committed_txns(bootstrap: str, *, quiet: bool = False) -> dict[int, int]:
    """Transaction number -> how many of its records below the end offset a read_committed consumer of tx-0 sees.
    It reads to the end, or until it stops moving (below an open transaction it stops at the LSO); the newest
    transaction may be cut by the end offset, every older one must be whole (``quiet``: no producer is writing, so
    the newest is whole too)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "crash-reader", "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    seen: dict[int, int] = {}
    try:
        partition = TopicPartition("tx", 0, 0)
        consumer.assign([partition])
        _, end = consumer.get_watermark_offsets(partition, timeout=20, cached=False)
        moved, last = time.monotonic(), -1
        while time.monotonic() - moved < 1.5:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None and message.offset() < end:
                number = int(message.value().split(b"-")[0])
                seen[number] = seen.get(number, 0) + 1
            (position,) = consumer.position([TopicPartition("tx", 0)])
            if position.offset >= end:
                break
            if position.offset != last:
                moved, last = time.monotonic(), position.offset
    finally:
        consumer.close()
    if seen and not quiet:
        del seen[max(seen)]  # the newest: maybe cut by the end offset (the producer goes on while this reads)
    return seen
