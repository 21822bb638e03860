"""Transactions checklist items (``docs/spec/transactions.md`` section 9) that are about bytes on the wire and that
the other wire tests check only in part: FindCoordinator v4+ batched, transactional Produce error codes with what
stays out of the log, the marker as a Fetch returns it, and the timed-out producer's answers. Each test's docstring
names its item; ``/work/notes/txn-checklist-map.md`` maps every item to its test.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.server.broker import BrokerServer
from broker.storage.control import MarkerType
from broker.storage.partition_log import PartitionLog
from broker.transactions.config import TxnConfig
from broker.transactions.state import PREPARE_COMMIT
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.conftest import broker_settings
from tests.storage import ATTRIBUTES_AT, make_batch, patched
from tests.wire.client import Connect, WireClient, request
from tests.wire.test_data_plane import eventually, fetch_partition, fetch_request, produce_request, topic_key
from tests.wire.test_transactions_api import (
    TOPIC,
    add_offsets_request,
    add_partitions_request,
    end_request,
    init,
    init_request,
    markers,
    partition_errors,
    produce_txn,
    txn_batch,
)

E = ErrorCode
PRODUCE_FIRST, PRODUCE_LAST = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
TV1_PRODUCE_VERSIONS = list(range(PRODUCE_FIRST, min(PRODUCE_LAST, 10) + 1))  # v3-10: INVALID_TXN_STATE (4.3)


def log_of(server: BrokerServer, partition: int) -> PartitionLog:
    topic = server.topics.get(TOPIC)
    assert topic is not None
    log = topic.log(partition)
    assert log is not None
    return log


def snapshot(log: PartitionLog) -> tuple[int, int, int]:
    """(log end offset, last stable offset, high watermark)."""
    return log.next_offset, log.last_stable_offset, log.high_watermark


async def produce_many(client: WireClient, version: int, tid: str | None, batches: list[tuple[int, bytes]]) -> Any:
    response = await client.call(produce_request(version, batches, transactional_id=tid))
    ((topic,),) = [response.responses]
    return {int(p.index): p.error_code for p in topic.partition_responses}


async def started(settings_txn: TxnConfig) -> BrokerServer:
    broker = BrokerServer(broker_settings(txn=settings_txn))
    await broker.start()
    return broker


# -- Init and fencing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [v for v in range(4, SUPPORTED_VERSIONS[ApiKey.FIND_COORDINATOR][1] + 1)])
async def test_item_01_find_coordinator_batched(server: BrokerServer, connect: Connect, version: int) -> None:
    """Item 1: FindCoordinator v4+ KeyType 1 with several keys: one entry per key, in order, each naming this broker."""
    client = await connect()
    keys = ("txn-a", "txn-b", "txn-c")
    answer = await client.call(request(ApiKey.FIND_COORDINATOR, version, key_type=i8(1), coordinator_keys=keys))
    assert [(c.key, c.error_code, c.node_id, c.port) for c in answer.coordinators] == [
        (key, E.none, 1, server.port) for key in keys
    ]


# -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------------------------


async def test_item_19_add_offsets_for_an_unknown_group_creates_no_group(
    server: BrokerServer, connect: Connect
) -> None:
    """Item 19: AddOffsetsToTxn for a group nobody uses -> NONE; the group is neither looked up nor created, not even
    when the transaction commits."""
    client = await connect()
    pid, epoch = await init(client, "unknown-group")
    assert (await client.call(add_offsets_request(3, "unknown-group", pid, epoch, "never-seen"))).error_code is E.none
    assert (await client.call(end_request(3, "unknown-group", pid, epoch, True))).error_code is E.none
    assert "never-seen" not in server.coordinator.groups
    listed = await client.call(request(ApiKey.LIST_GROUPS, 4, states_filter=()))
    assert [g.group_id for g in listed.groups] == []


# -- Produce -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [PRODUCE_FIRST, PRODUCE_LAST])
async def test_item_21_transactional_batch_without_transactional_id(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    """Item 21: a transactional batch in a request whose TransactionalId is null -> 53 on every partition, the
    plain one included; nothing is appended anywhere."""
    client = await connect()
    pid, epoch = await init(client, "no-id")
    before = [snapshot(log_of(server, p)) for p in (0, 1)]
    answer = await produce_many(client, version, None, [(0, txn_batch(pid, epoch)), (1, make_batch(2))])
    assert answer == {0: E.transactional_id_authorization_failed, 1: E.transactional_id_authorization_failed}
    assert [snapshot(log_of(server, p)) for p in (0, 1)] == before


@pytest.mark.parametrize("version", TV1_PRODUCE_VERSIONS)
async def test_item_22_tv1_produce_to_a_partition_not_added(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    """Item 22: Produce v3-10 to a partition not in the transaction -> INVALID_TXN_STATE, nothing appended, the LSO
    unchanged (the transaction is Ongoing on another partition)."""
    client = await connect()
    tid = f"not-added-{version}"
    pid, epoch = await init(client, tid)
    assert partition_errors(await client.call(add_partitions_request(3, tid, pid, epoch, (TOPIC, 0)))) == {
        (TOPIC, 0): E.none
    }
    log = log_of(server, 1)
    before = snapshot(log)
    refused = await produce_txn(client, version, tid, 1, txn_batch(pid, epoch))
    assert refused.error_code is E.invalid_txn_state
    assert snapshot(log) == before and not log.has_ongoing_transaction(pid)


async def test_item_26_an_older_instance_is_fenced_at_produce(server: BrokerServer, connect: Connect) -> None:
    """Item 26: after a newer InitProducerId (here with no transaction open, so no marker told the partitions), the
    old producer's first transactional batch on a partition -> INVALID_PRODUCER_EPOCH, on a partition it wrote
    before and on a new one; AddPartitionsToTxn -> PRODUCER_FENCED."""
    client = await connect()
    pid, epoch = await init(client, "older")
    await client.call(add_partitions_request(3, "older", pid, epoch, (TOPIC, 0)))
    assert (await produce_txn(client, PRODUCE_LAST, "older", 0, txn_batch(pid, epoch))).error_code is E.none
    assert (await client.call(end_request(3, "older", pid, epoch, True))).error_code is E.none
    newer_pid, newer_epoch = await init(client, "older")
    assert (newer_pid, newer_epoch) == (pid, epoch + 1)
    for partition in (0, 2):
        before = snapshot(log_of(server, partition))
        stale = await produce_txn(client, PRODUCE_LAST, "older", partition, txn_batch(pid, epoch, sequence=1))
        assert stale.error_code is E.invalid_producer_epoch
        assert snapshot(log_of(server, partition)) == before
    fenced = await client.call(add_partitions_request(3, "older", pid, epoch, (TOPIC, 2)))
    assert partition_errors(fenced) == {(TOPIC, 2): E.producer_fenced}


async def test_item_27_plain_batch_while_the_producer_has_an_open_transaction(
    server: BrokerServer, connect: Connect
) -> None:
    """Item 27: a non-transactional batch from a pid with an open transaction on the partition -> INVALID_TXN_STATE."""
    client = await connect()
    pid, epoch = await init(client, "mixed")
    await client.call(add_partitions_request(3, "mixed", pid, epoch, (TOPIC, 0)))
    assert (await produce_txn(client, PRODUCE_LAST, "mixed", 0, txn_batch(pid, epoch, count=2))).error_code is E.none
    before = snapshot(log_of(server, 0))
    plain = make_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=2)
    assert (await produce_txn(client, PRODUCE_LAST, None, 0, plain)).error_code is E.invalid_txn_state
    assert snapshot(log_of(server, 0)) == before


@pytest.mark.parametrize("version", [PRODUCE_FIRST, PRODUCE_LAST])
async def test_item_28_client_control_batch_is_invalid_record(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    """Item 28: a control batch from a client, with a valid CRC (so only the control bit is wrong) -> INVALID_RECORD,
    whether or not the producer's transaction holds the partition."""
    client = await connect()
    pid, epoch = await init(client, f"control-{version}")
    await client.call(add_partitions_request(3, f"control-{version}", pid, epoch, (TOPIC, 0)))
    before = snapshot(log_of(server, 0))
    control = patched(txn_batch(pid, epoch), ATTRIBUTES_AT, ">h", 0x30)
    assert DefaultRecordBatch(control).validate_crc()
    answer = await produce_txn(client, version, f"control-{version}", 0, control)
    assert answer.error_code is E.invalid_record
    assert snapshot(log_of(server, 0)) == before


@pytest.fixture
async def slow_completion() -> AsyncIterator[BrokerServer]:
    """A broker whose transactions stay in Prepare* for a minute (the completion-delay test knob of 3.8)."""
    broker = await started(TxnConfig(completion_delay_ms=60_000))
    yield broker
    await broker.stop()


async def test_item_29_later_batches_are_not_verified(slow_completion: BrokerServer) -> None:
    """Item 29: once a transaction's first batch is in a partition, the next ones are appended without asking the TC.
    With the transaction held in PrepareCommit, a TC check answers CONCURRENT_TRANSACTIONS (Produce:
    NOT_ENOUGH_REPLICAS): the partition with data takes another batch, the added-but-unwritten one does not."""
    server = slow_completion
    client = await WireClient.connect(server.port, "item-29")
    try:
        pid, epoch = await init(client, "unverified")
        await client.call(add_partitions_request(3, "unverified", pid, epoch, (TOPIC, 0), (TOPIC, 1)))
        assert (await produce_txn(client, PRODUCE_LAST, "unverified", 0, txn_batch(pid, epoch))).error_code is E.none
        assert (await client.call(end_request(3, "unverified", pid, epoch, True))).error_code is E.none
        meta = server.transactions.get("unverified")
        assert meta is not None and meta.state is PREPARE_COMMIT
        second = await produce_txn(client, PRODUCE_LAST, "unverified", 0, txn_batch(pid, epoch, sequence=1))
        assert (second.error_code, second.base_offset) == (E.none, 1)
        first_on_1 = await produce_txn(client, PRODUCE_LAST, "unverified", 1, txn_batch(pid, epoch))
        assert first_on_1.error_code is E.not_enough_replicas
        assert log_of(server, 1).next_offset == 0
    finally:
        await client.close()


async def test_item_32_a_partition_added_but_never_written_gets_a_marker(
    server: BrokerServer, connect: Connect
) -> None:
    """Item 32: EndTxn appends a marker to a partition that joined the transaction but got no data: one offset,
    LSO = HW, nothing in the aborted index (the written partition's aborted transaction is indexed)."""
    client = await connect()
    pid, epoch = await init(client, "unwritten")
    await client.call(add_partitions_request(3, "unwritten", pid, epoch, (TOPIC, 0), (TOPIC, 1)))
    assert (await produce_txn(client, PRODUCE_LAST, "unwritten", 0, txn_batch(pid, epoch))).error_code is E.none
    assert snapshot(log_of(server, 1)) == (0, 0, 0)
    assert (await client.call(end_request(3, "unwritten", pid, epoch, False))).error_code is E.none
    assert markers(server, 1) == [MarkerType.ABORT]
    assert snapshot(log_of(server, 1)) == (1, 1, 1)
    assert log_of(server, 1).aborted_transactions(0, 1) == []
    assert [(t.producer_id, t.first_offset) for t in log_of(server, 0).aborted_transactions(0, 2)] == [(pid, 0)]


# -- Log, LSO, Fetch, ListOffsets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 16])
async def test_item_65_commit_marker_as_fetched(server: BrokerServer, connect: Connect, version: int) -> None:
    """Item 65: the COMMIT marker an EndTxn writes, as a Fetch returns it: attributes 0x30, baseSequence -1, the
    producer's pid and epoch, one record with key 00 00 00 01 and value 00 00 + coordinator epoch 0."""
    client = await connect()
    pid, epoch = await init(client, "marker-bytes")
    await client.call(add_partitions_request(3, "marker-bytes", pid, epoch, (TOPIC, 2)))
    assert (await produce_txn(client, PRODUCE_LAST, "marker-bytes", 2, txn_batch(pid, epoch))).error_code is E.none
    assert (await client.call(end_request(3, "marker-bytes", pid, epoch, True))).error_code is E.none
    fetched = await client.call(
        fetch_request(version, [(topic_key(server, version), [fetch_partition(version, 2, 1)])], isolation_level=1)
    )
    ((answer,),) = [t.partitions for t in fetched.responses]
    assert (answer.error_code, answer.high_watermark, answer.last_stable_offset) == (E.none, 2, 2)
    records = answer.records
    assert records is not None
    (length,) = struct.unpack_from(">i", records, 8)
    marker = records[: 12 + length]
    assert struct.unpack_from(">qbh", marker, 0)[0] == 1  # base offset 1, right after the data
    assert struct.unpack_from(">h", marker, ATTRIBUTES_AT)[0] == 0x30
    batch = DefaultRecordBatch(marker)
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, -1)
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert (record.key, record.value, record.headers) == (b"\x00\x00\x00\x01", b"\x00\x00" + bytes(4), [])


# -- Timers and expiry ---------------------------------------------------------------------------------------------


@pytest.fixture
async def quick_abort() -> AsyncIterator[BrokerServer]:
    """A broker whose timed-out transaction scan runs every 20 ms (spec section 7 suggests shrinking it)."""
    broker = await started(TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=20))
    yield broker
    await broker.stop()


async def test_item_80_after_a_timeout_abort_the_producer_is_fenced(quick_abort: BrokerServer) -> None:
    """Item 80: after the broker aborted a timed-out transaction, the TV1 producer's EndTxn(commit) ->
    PRODUCER_FENCED (47 at v0-1), its Produce -> INVALID_PRODUCER_EPOCH, AddPartitionsToTxn -> PRODUCER_FENCED."""
    server = quick_abort
    client = await WireClient.connect(server.port, "item-80")
    try:
        response = await client.call(init_request(4, "timed-out", timeout_ms=50))
        pid, epoch = int(response.producer_id), int(response.producer_epoch)
        await client.call(add_partitions_request(3, "timed-out", pid, epoch, (TOPIC, 0)))
        assert (await produce_txn(client, PRODUCE_LAST, "timed-out", 0, txn_batch(pid, epoch))).error_code is E.none
        await eventually(lambda: markers(server, 0) == [MarkerType.ABORT], timeout=5.0)
        log = log_of(server, 0)
        assert log.last_stable_offset == log.high_watermark == 2
        assert (await client.call(end_request(3, "timed-out", pid, epoch, True))).error_code is E.producer_fenced
        assert (await client.call(end_request(1, "timed-out", pid, epoch, True))).error_code is E.invalid_producer_epoch
        late = await produce_txn(client, PRODUCE_LAST, "timed-out", 0, txn_batch(pid, epoch, sequence=1))
        assert late.error_code is E.invalid_producer_epoch
        fenced = await client.call(add_partitions_request(3, "timed-out", pid, epoch, (TOPIC, 1)))
        assert partition_errors(fenced) == {(TOPIC, 1): E.producer_fenced}
        assert snapshot(log) == (2, 2, 2)
    finally:
        await client.close()
