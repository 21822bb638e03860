"""kafka-python 3.0's KIP-664 transaction tooling against a broker in this process (docs/spec/transactions.md
section 6, items 84-91): ``list_transactions``, ``describe_transactions``, ``describe_producers``,
``find_hanging_transactions`` and ``abort_transaction`` (WriteTxnMarkers v1), over a transaction that a real
confluent-kafka (librdkafka) transactional producer opened. Each call's result is checked against the broker's own
state, read on its loop."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.storage.control import MarkerType
from broker.testing.embedded import EmbeddedBroker, run_broker
from broker.transactions.config import TxnConfig
from broker.transactions.state import ONGOING
from tests.clients.test_transactions_producer import log_summary

TOPIC = "admin-txn"
TIMEOUT_MS = 60_000  # librdkafka's transaction.timeout.ms default


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # The timed-out transaction scan is pushed out of the way: a test back-dates a transaction's start to make it
    # look hanging, and the broker must not abort it first.
    config = TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=3_600_000)
    with run_broker(topics={TOPIC: 3}, txn=config) as running:
        yield running


@pytest.fixture
def admin(broker: EmbeddedBroker) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def open_transaction(broker: EmbeddedBroker, tid: str, partition: int, count: int = 2) -> Any:
    """A confluent-kafka producer with ``count`` records of an open transaction on ``partition``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(10)
    producer.begin_transaction()
    for index in range(count):
        producer.produce(TOPIC, value=b"v%d" % index, partition=partition)
    assert producer.flush(10) == 0
    return producer


def log_state(broker: EmbeddedBroker, partition: int) -> tuple[list[MarkerType], int, int]:
    """(the partition's markers in order, its last stable offset, its high watermark)."""
    return log_summary(broker, partition, TOPIC)


def test_list_describe_and_describe_producers(broker: EmbeddedBroker, admin: Any) -> None:
    from kafka import TopicPartition
    from kafka.admin._transactions import TransactionState
    from kafka.errors import TransactionalIdNotFoundError

    prefix = f"list-{uuid.uuid4().hex[:8]}"
    tid = f"{prefix}-a"
    _, _, first_offset = log_state(broker, 0)
    before_ms = int(time.time() * 1000)
    producer = open_transaction(broker, tid, 0)

    # ListTransactions: every broker's listing (one here), then each filter (items 86-88).
    listings = admin.list_transactions()
    assert list(listings) == [1]
    [mine] = [t for t in listings[1] if t.transactional_id == tid]
    assert mine.state is TransactionState.ONGOING
    pid = mine.producer_id
    assert [t.transactional_id for t in admin.list_transactions(producer_id_filters=[pid])[1]] == [tid]
    ongoing = admin.list_transactions(state_filters=["Ongoing"])[1]
    assert tid in {t.transactional_id for t in ongoing}
    assert {t.state for t in ongoing} == {TransactionState.ONGOING}
    assert admin.list_transactions(state_filters=["Ongoing"], duration_filter_ms=60_000)[1] == []
    matched = admin.list_transactions(transactional_id_pattern=f"{prefix}-.*")[1]
    assert [t.transactional_id for t in matched] == [tid]
    assert admin.list_transactions(transactional_id_pattern=prefix)[1] == []  # a whole-id match

    # DescribeTransactions (item 85), routed through FindCoordinator key type 1.
    described = admin.describe_transactions([tid])[tid]
    assert (described.coordinator_id, described.state, described.producer_id) == (1, TransactionState.ONGOING, pid)
    assert described.transaction_timeout_ms == TIMEOUT_MS
    assert before_ms <= described.transaction_start_time_ms <= int(time.time() * 1000)
    assert described.topic_partitions == {TopicPartition(TOPIC, 0)}
    epoch = described.producer_epoch
    with pytest.raises(TransactionalIdNotFoundError):  # item 84
        admin.describe_transactions([f"{prefix}-nobody"])

    # DescribeProducers (item 89): the open transaction's first offset, no marker yet.
    state = admin.describe_producers([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
    [active] = [p for p in state.active_producers if p.producer_id == pid]
    assert (active.producer_epoch, active.last_sequence) == (epoch, 1)
    assert (active.current_transaction_start_offset, active.coordinator_epoch) == (first_offset, -1)
    assert active.last_timestamp >= before_ms

    producer.commit_transaction(10)
    after = admin.describe_producers([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
    [committed] = [p for p in after.active_producers if p.producer_id == pid]
    assert (committed.current_transaction_start_offset, committed.coordinator_epoch) == (-1, 0)
    assert admin.describe_transactions([tid])[tid].state is TransactionState.COMPLETE_COMMIT
    markers, lso, hwm = log_state(broker, 0)
    assert markers[-1] is MarkerType.COMMIT and lso == hwm == first_offset + 3


def test_find_hanging_then_abort_transaction(broker: EmbeddedBroker, admin: Any) -> None:
    from kafka import TopicPartition
    from kafka.admin._transactions import AbortTransactionSpec, TransactionState

    tid = f"hanging-{uuid.uuid4().hex[:8]}"
    partition = TopicPartition(TOPIC, 1)
    _, _, first_offset = log_state(broker, 1)
    producer = open_transaction(broker, tid, 1, count=3)
    assert log_state(broker, 1)[1:] == (first_offset, first_offset + 3)  # the open transaction holds the LSO

    # Not hanging yet: it started a moment ago.
    assert tid not in {h["transactional_id"] for h in admin.find_hanging_transactions()}

    # Back-date its start by 30 minutes, past the tool's threshold (the 15-minute maximum timeout plus 5).
    def backdate() -> None:
        assert broker.server is not None
        meta = broker.server.transactions.get(tid)
        assert meta is not None
        meta.txn_start_ms -= 30 * 60 * 1000

    broker.call(backdate)
    [hanging] = [h for h in admin.find_hanging_transactions() if h["transactional_id"] == tid]
    assert hanging["state"] == "Ongoing"
    assert hanging["age_ms"] >= 30 * 60 * 1000
    assert hanging["topic_partitions"] == [partition]

    # kafka-transactions.sh abort: the producer state from DescribeProducers, then WriteTxnMarkers v1 (item 91).
    [active] = [
        p
        for p in admin.describe_producers([partition])[partition].active_producers
        if p.current_transaction_start_offset == first_offset
    ]
    assert active.producer_id == hanging["producer_id"]
    admin.abort_transaction(
        AbortTransactionSpec(partition, active.producer_id, active.producer_epoch, active.coordinator_epoch)
    )
    markers, lso, hwm = log_state(broker, 1)
    assert markers[-1] is MarkerType.ABORT
    assert lso == hwm == first_offset + 4  # three records and the marker; nothing open any more
    [after] = [
        p
        for p in admin.describe_producers([partition])[partition].active_producers
        if p.producer_id == active.producer_id
    ]
    assert after.current_transaction_start_offset == -1

    # The transaction coordinator was not told: the id is still Ongoing over the partition.
    def tc_state() -> tuple[Any, set[tuple[str, int]]]:
        assert broker.server is not None
        meta = broker.server.transactions.get(tid)
        assert meta is not None
        return meta.state, set(meta.partitions)

    assert broker.call(tc_state) == (ONGOING, {(TOPIC, 1)})
    assert admin.describe_transactions([tid])[tid].state is TransactionState.ONGOING

    # The producer ends it for the coordinator; its ABORT marker finds nothing open on the partition (item 32).
    producer.abort_transaction(10)
    assert admin.describe_transactions([tid])[tid].state is TransactionState.COMPLETE_ABORT
    markers, lso, hwm = log_state(broker, 1)
    assert markers[-2:] == [MarkerType.ABORT, MarkerType.ABORT] and lso == hwm == first_offset + 5
