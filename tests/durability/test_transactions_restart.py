"""Transactions across a SIGKILL of a broker with ``--data-dir`` (issue 27; cluster-and-durability.md section 9,
items 12 and 13), with confluent-kafka's transactional producer and read_committed consumers.

12: a transaction left open by the kill (records and TxnOffsetCommit sent, no EndTxn) stays Ongoing after the load,
as Kafka's TransactionStateManager loads it: its offsets are not visible, read_committed consumers do not see its
records, and the timeout scan aborts it, after which the last stable offset moves past it.

13: a kill between PrepareCommit and the markers. A real EndTxn writes both before it answers, so the kill's moment
is made in the directory: the open transaction's ``txn.id`` entry is appended again in state PREPARE_COMMIT, which is
what the journal holds when the broker dies after writing PrepareCommit. The load completes it (Kafka resends the
markers of a Prepare* transaction it loads): its records and offsets become visible once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.storage.disk.datadir import DataDir
from broker.storage.disk.fsync import FsyncPolicy
from broker.transactions.durable import KIND as TXN_KIND
from tests.durability.broker_process import BrokerProcess

TOPIC, GROUP, TXN_ID = "t", "txn-group", "restart-txn"
RECORDS = 10
#: The scan that aborts timed-out transactions, every 500 ms here (Kafka: 10 s) so that the test waits little.
SCAN_FLAGS = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "500")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", "--topic", f"{TOPIC}:1", "--topic", "in:1", *SCAN_FLAGS)
    process.start()
    yield process
    process.stop()


def open_transaction(bootstrap: str, timeout_ms: int) -> Any:
    """A transactional producer that produced RECORDS records and sent GROUP's offset for in-0 (TxnOffsetCommit),
    every request answered, and no EndTxn."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "transaction.timeout.ms": timeout_ms}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(TOPIC, b"txn-%02d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        metadata = consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 7)], metadata, 30)
    finally:
        consumer.close()
    return producer


def committed(bootstrap: str) -> int:
    """GROUP's committed offset for in-0 (-1001: none), as a client asks for it (OffsetFetch, require_stable)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        (found,) = consumer.committed([TopicPartition("in", 0)], timeout=20)
        return int(found.offset)
    finally:
        consumer.close()


def read_committed(bootstrap: str) -> tuple[list[bytes], int]:
    """Every record of t-0 a read_committed consumer gets, and the partition's end offset (high watermark). It reads
    until its position reaches the end, or for 3 s (below an open transaction it stops at the LSO)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
         "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        partition = TopicPartition(TOPIC, 0, 0)
        consumer.assign([partition])
        _, end = consumer.get_watermark_offsets(partition, timeout=20, cached=False)
        values: list[bytes] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(bytes(message.value()))
            (position,) = consumer.position([TopicPartition(TOPIC, 0)])
            if position.offset >= end:
                break
        return values, int(end)
    finally:
        consumer.close()


def test_an_open_transaction_survives_the_kill_unseen_and_is_aborted_after_its_timeout(
    broker: BrokerProcess,
) -> None:
    producer = open_transaction(broker.bootstrap, timeout_ms=4000)
    del producer  # the application dies with the broker: no EndTxn ever comes
    broker.kill()
    broker.start()
    killed = time.monotonic()
    described = broker.get("/v1/transactions")
    assert [(t["transactional_id"], t["state"]) for t in described["transactions"]] == [(TXN_ID, "Ongoing")], described
    assert committed(broker.bootstrap) < 0  # the pending TxnOffsetCommit is not visible
    values, _ = read_committed(broker.bootstrap)
    assert values == []
    # The timeout scan aborts it (4 s after its start, scanned every 500 ms): the abort marker moves the LSO past it.
    deadline = killed + 30
    while time.monotonic() < deadline:
        states = [t["state"] for t in broker.get("/v1/transactions")["transactions"]]
        if states == ["CompleteAbort"]:
            break
        time.sleep(0.2)
    assert states == ["CompleteAbort"], states
    values, end = read_committed(broker.bootstrap)
    assert values == [] and end == RECORDS + 1  # ten aborted records and their abort marker
    assert committed(broker.bootstrap) < 0


def test_a_kill_between_prepare_commit_and_the_markers_commits_once_on_load(broker: BrokerProcess) -> None:
    producer = open_transaction(broker.bootstrap, timeout_ms=60_000)
    del producer
    broker.kill()
    assert broker.data_dir is not None
    directory = DataDir.open(broker.data_dir, cluster_id="", cluster_id_given=False, fsync=FsyncPolicy())
    try:
        (ongoing,) = directory.journal.changes(TXN_KIND)
        assert ongoing.value is not None and ongoing.value["state"] == "ONGOING", ongoing
        # What EndTxn(commit) writes first (TransactionMetadata.prepareComplete), and where the kill stops it.
        directory.journal.put(TXN_KIND, ongoing.key, {**ongoing.value, "state": "PREPARE_COMMIT"})
    finally:
        directory.abandon()  # as the killed broker left it: no clean-shutdown marker
    broker.start()
    described = broker.get("/v1/transactions")["transactions"]
    assert [(t["transactional_id"], t["state"]) for t in described] == [(TXN_ID, "CompleteCommit")], described
    values, end = read_committed(broker.bootstrap)
    assert values == [b"txn-%02d" % i for i in range(RECORDS)]  # once each, in order
    assert end == RECORDS + 1  # and one commit marker
    assert committed(broker.bootstrap) == 7
    # A second restart finds it complete: nothing written again.
    broker.kill()
    broker.start()
    assert read_committed(broker.bootstrap) == (values, end)
    assert committed(broker.bootstrap) == 7
