"""kafka-python 3.0's transactional producer against a broker in this process (docs/spec/transactions.md section 8:
InitProducerId v0-4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn up to v3, TxnOffsetCommit v3 with the group's
generation and member, KIP-447): commits seen by a read_committed ``KafkaConsumer``, aborts hidden from it and shown
to a read_uncommitted one, a second instance with the same transactional id fencing the first (checklist item 95),
and consume-transform-produce whose offsets are committed by the transaction (checklist item 92's loop)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker

TOPIC = "kp-txn"
INPUT, OUTPUT = "kp-in", "kp-out"
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with run_broker(topics={TOPIC: 3, INPUT: 1, OUTPUT: 1}) as running:
        yield running


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def producer(broker: EmbeddedBroker, tid: str) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=tid, linger_ms=0, max_block_ms=int(TIMEOUT_S * 1000)
    )


def read(broker: EmbeddedBroker, topic: str, partition: int, isolation: str, until: bytes) -> list[bytes]:
    """The partition's values from the start as a ``KafkaConsumer`` with this isolation level reads them, up to
    and including ``until`` (a later committed record: whatever came before it has been decided)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, isolation_level=isolation, enable_auto_commit=False, group_id=None
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while until not in values:
            assert time.monotonic() < deadline, f"{until!r} never arrived ({isolation}); read {values}"
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                values.append(record.value)
    finally:
        consumer.close()
    return values


def test_commit_is_visible_to_read_committed(broker: EmbeddedBroker) -> None:
    p = producer(broker, unique("kp-commit"))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(TOPIC, b"kp-committed-1", partition=0)
        p.send(TOPIC, b"kp-committed-2", partition=0)
        p.commit_transaction()
        p.begin_transaction()  # TV1: the same pid and epoch go on, sequences continue
        p.send(TOPIC, b"kp-committed-3", partition=0)
        p.commit_transaction()
    finally:
        p.close()
    seen = read(broker, TOPIC, 0, "read_committed", b"kp-committed-3")
    assert [v for v in seen if v.startswith(b"kp-committed")] == [
        b"kp-committed-1",
        b"kp-committed-2",
        b"kp-committed-3",
    ]


def test_abort_is_hidden_from_read_committed_only(broker: EmbeddedBroker) -> None:
    p = producer(broker, unique("kp-abort"))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(TOPIC, b"kp-aborted", partition=1)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(TOPIC, b"kp-after-abort", partition=1)
        p.commit_transaction()
    finally:
        p.close()
    committed = read(broker, TOPIC, 1, "read_committed", b"kp-after-abort")
    assert b"kp-aborted" not in committed
    uncommitted = read(broker, TOPIC, 1, "read_uncommitted", b"kp-after-abort")
    assert uncommitted.index(b"kp-aborted") < uncommitted.index(b"kp-after-abort")


def test_a_second_instance_fences_the_first(broker: EmbeddedBroker) -> None:
    from kafka.errors import ProducerFencedError

    tid = unique("kp-fence")
    first, second = producer(broker, tid), producer(broker, tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(TOPIC, b"kp-zombie", partition=2).get(TIMEOUT_S)
        second.init_transactions()  # aborts the first's open transaction and bumps the epoch (spec 3.4)
        with pytest.raises(ProducerFencedError):
            first.commit_transaction()  # EndTxn with the old epoch: PRODUCER_FENCED (v2+), fatal
        second.begin_transaction()
        second.send(TOPIC, b"kp-survivor", partition=2)
        second.commit_transaction()
    finally:
        first.close(timeout=1)
        second.close()
    seen = read(broker, TOPIC, 2, "read_committed", b"kp-survivor")
    assert b"kp-zombie" not in seen


def test_a_fenced_producers_send_and_epoch_bump_are_refused(broker: EmbeddedBroker) -> None:
    """kafka-python takes Produce's INVALID_PRODUCER_EPOCH as recoverable and asks for an epoch bump (InitProducerId
    v3+ with its pid and epoch, KIP-360); the epoch it names is neither the current nor the previous one, so the
    bump is PRODUCER_FENCED (spec 3.4 step 3) and the producer ends in its fatal error state."""
    from kafka.errors import InvalidProducerEpochError, KafkaError

    tid = unique("kp-bump")
    first, second = producer(broker, tid), producer(broker, tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(TOPIC, b"kp-zombie", partition=2).get(TIMEOUT_S)
        second.init_transactions()
        with pytest.raises(InvalidProducerEpochError):
            first.send(TOPIC, b"kp-zombie-again", partition=2).get(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # until the bump's answer is in, the client refuses the call as an invalid transition
            with pytest.raises(KafkaError) as raised:
                first.commit_transaction()
            if "ProducerFenced" in str(raised.value):
                break
            assert time.monotonic() < deadline, f"never fenced: {raised.value!r}"
            time.sleep(0.05)
        second.begin_transaction()
        second.send(TOPIC, b"kp-bump-survivor", partition=2)
        second.commit_transaction()
    finally:
        first.close(timeout=1)
        second.close()
    seen = read(broker, TOPIC, 2, "read_committed", b"kp-bump-survivor")
    assert b"kp-zombie" not in seen and b"kp-zombie-again" not in seen


def test_consume_transform_produce_commits_the_groups_offsets(broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    plain = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for n in range(5):
        plain.send(INPUT, f"in-{n}".encode(), partition=0)
    plain.flush()
    plain.close()

    group = unique("kp-eos")
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    consumer.subscribe([INPUT])
    p = producer(broker, unique("kp-eos"))
    source = TopicPartition(INPUT, 0)
    try:
        p.init_transactions()
        consumed: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumed) < 5:
            assert time.monotonic() < deadline, f"consumed only {len(consumed)} of 5 input records"
            consumed += consumer.poll(timeout_ms=200).get(source, [])
        p.begin_transaction()
        for record in consumed:
            p.send(OUTPUT, record.value.upper(), partition=0)
        last = consumed[-1].offset
        offsets = {source: OffsetAndMetadata(last + 1, "", -1)}
        p.send_offsets_to_transaction(offsets, consumer.group_metadata())  # KIP-447: generation and member id
        p.commit_transaction()
        assert consumer.committed(source) == last + 1
    finally:
        p.close()
        consumer.close()
    output = read(broker, OUTPUT, 0, "read_committed", b"IN-4")
    assert output == [f"IN-{n}".encode() for n in range(5)]
