"""The transaction coordinator on the wire: FindCoordinator key type 1, InitProducerId with a transactional id,
AddPartitionsToTxn 0-3, AddOffsetsToTxn 0-4, EndTxn 0-4 and transactional Produce (docs/spec/transactions.md
sections 2 and 4.3), every served version, through a real socket to an in-process broker."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from broker.server.broker import BrokerServer
from broker.storage.control import MarkerType
from broker.transactions.state import ONGOING
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient, part, request
from tests.wire.test_data_plane import produce_request
from tests.wire.test_txn_offset_commit import errors, txn_offset_commit

E = ErrorCode
TOPIC = "topic"  # 3 partitions (the server fixture)


def versions(api: ApiKey) -> list[int]:
    first, last = SUPPORTED_VERSIONS[api]
    return list(range(first, last + 1))


def test_served_ranges() -> None:
    # TV1 only (spec 2.3 choice B): EndTxn v5 and the broker form of AddPartitionsToTxn are not advertised.
    assert SUPPORTED_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 3)
    assert SUPPORTED_VERSIONS[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)
    assert SUPPORTED_VERSIONS[ApiKey.END_TXN] == (0, 4)
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] <= 11


# -- request builders ------------------------------------------------------------------------------


def init_request(version: int, tid: str | None, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> Any:
    return request(
        ApiKey.INIT_PRODUCER_ID,
        version,
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        producer_id=i64(pid),
        producer_epoch=i16(epoch),
    )


def add_partitions_request(version: int, tid: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> Any:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return request(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        version,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=tuple(
            part(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                version,
                "AddPartitionsToTxnTopic",
                name=name,
                partitions=tuple(map(i32, ps)),
            )
            for name, ps in topics.items()
        ),
    )


def add_offsets_request(version: int, tid: str, pid: int, epoch: int, group: str) -> Any:
    return request(
        ApiKey.ADD_OFFSETS_TO_TXN,
        version,
        transactional_id=tid,
        producer_id=i64(pid),
        producer_epoch=i16(epoch),
        group_id=group,
    )


def end_request(version: int, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    return request(
        ApiKey.END_TXN, version, transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(epoch), committed=commit
    )


def partition_errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.name, int(p.partition_index)): p.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


async def init(client: WireClient, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    response = await client.call(init_request(4, tid, timeout_ms))
    assert response.error_code is E.none
    return int(response.producer_id), int(response.producer_epoch)


def txn_batch(pid: int, epoch: int, sequence: int = 0, count: int = 1) -> bytes:
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True)


async def produce_txn(client: WireClient, version: int, tid: str | None, partition: int, batch: bytes) -> Any:
    response = await client.call(produce_request(version, [(partition, batch)], transactional_id=tid))
    return response.responses[0].partition_responses[0]


def markers(server: BrokerServer, partition: int) -> list[MarkerType]:
    log = server.topics.get(TOPIC).log(partition)  # type: ignore[union-attr]
    assert log is not None
    found = (log.marker_at(offset) for offset in range(log.log_start_offset, log.next_offset))
    return [m.type for m in found if m is not None]


# -- FindCoordinator and InitProducerId ------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
async def test_find_transaction_coordinator(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    answer = await client.call(
        request(ApiKey.FIND_COORDINATOR, version, key="txn", key_type=i8(1), coordinator_keys=("txn",))
    )
    located = answer if version < 4 else answer.coordinators[0]
    if version == 0:  # v0 has no key type: it asks for a group coordinator, which is this broker too
        assert located.error_code is E.none
        return
    assert (located.error_code, located.node_id, located.port) == (E.none, 1, server.port)


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
async def test_init_producer_id_transactional(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    tid = f"init-{version}"
    first = await client.call(init_request(version, tid))
    assert (first.error_code, first.producer_epoch) == (E.none, 0)
    again = await client.call(init_request(version, tid))  # a new instance fences the old: epoch + 1
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.none, first.producer_id, 1)
    idempotent = await client.call(init_request(version, None))
    assert idempotent.producer_id > first.producer_id  # one allocator for both kinds (spec 3.4)
    too_long = await client.call(init_request(version, tid, timeout_ms=900_001))
    assert (too_long.error_code, too_long.producer_id) == (E.invalid_transaction_timeout, -1)
    assert (await client.call(init_request(version, tid, timeout_ms=0))).error_code is E.invalid_transaction_timeout
    assert (await client.call(init_request(version, ""))).error_code is E.invalid_request
    if version >= 3:  # KIP-360: an expected pid/epoch; half-set is INVALID_REQUEST, a stranger's is fenced
        assert (await client.call(init_request(version, tid, pid=int(first.producer_id)))).error_code is (
            E.invalid_request
        )
        stale = await client.call(init_request(version, tid, pid=int(first.producer_id) + 100, epoch=0))
        assert stale.error_code is (E.producer_fenced if version >= 4 else E.invalid_producer_epoch)


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ---------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.ADD_PARTITIONS_TO_TXN))
async def test_add_partitions(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    tid = f"add-{version}"
    pid, epoch = await init(client, tid)
    added = await client.call(add_partitions_request(version, tid, pid, epoch, (TOPIC, 0), (TOPIC, 1)))
    assert partition_errors(added) == {(TOPIC, 0): E.none, (TOPIC, 1): E.none}
    bad = await client.call(
        add_partitions_request(version, tid, pid, epoch, (TOPIC, 2), (TOPIC, 9), ("__consumer_offsets", 0))
    )
    assert partition_errors(bad) == {
        (TOPIC, 2): E.operation_not_attempted,
        (TOPIC, 9): E.unknown_topic_or_partition,
        ("__consumer_offsets", 0): E.topic_authorization_failed,
    }
    unknown = await client.call(add_partitions_request(version, "nobody", pid, epoch, (TOPIC, 0)))
    assert partition_errors(unknown) == {(TOPIC, 0): E.invalid_producer_id_mapping}
    fenced = await client.call(add_partitions_request(version, tid, pid, epoch + 1, (TOPIC, 0)))
    assert partition_errors(fenced) == {(TOPIC, 0): E.producer_fenced if version >= 2 else E.invalid_producer_epoch}
    empty = await client.call(add_partitions_request(version, "", pid, epoch, (TOPIC, 0)))
    assert partition_errors(empty) == {(TOPIC, 0): E.invalid_request}


@pytest.mark.parametrize("version", versions(ApiKey.ADD_OFFSETS_TO_TXN))
async def test_add_offsets(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    tid = f"offsets-{version}"
    pid, epoch = await init(client, tid)
    assert (await client.call(add_offsets_request(version, tid, pid, epoch, "group"))).error_code is E.none
    assert (await client.call(add_offsets_request(version, tid, pid, epoch, ""))).error_code is E.none  # not looked up
    fenced = await client.call(add_offsets_request(version, tid, pid, epoch + 1, "group"))
    assert fenced.error_code is (E.producer_fenced if version >= 2 else E.invalid_producer_epoch)
    unknown = await client.call(add_offsets_request(version, "nobody", pid, epoch, "group"))
    assert unknown.error_code is E.invalid_producer_id_mapping
    meta = server.transactions.get(tid)
    assert meta is not None and meta.state is ONGOING


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
async def test_end_txn_commit_and_abort(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    tid = f"end-{version}"
    pid, epoch = await init(client, tid)
    nothing = await client.call(end_request(version, tid, pid, epoch, True))
    assert nothing.error_code is E.invalid_txn_state  # Empty: nothing to commit (spec 3.6)
    for round_, commit in enumerate((True, False)):
        await client.call(add_partitions_request(3, tid, pid, epoch, (TOPIC, 2)))
        written = await produce_txn(client, 11, tid, 2, txn_batch(pid, epoch, sequence=round_))
        assert written.error_code is E.none
        ended = await client.call(end_request(version, tid, pid, epoch, commit))
        assert ended.error_code is E.none
        retry = await client.call(end_request(version, tid, pid, epoch, commit))
        assert retry.error_code is E.none  # an idempotent retry writes no second marker
        wrong = await client.call(end_request(version, tid, pid, epoch, not commit))
        assert wrong.error_code is E.invalid_txn_state
    # TV1 never bumps the epoch on EndTxn (spec 8): the same pid/epoch carries on, and one marker per txn.
    assert markers(server, 2) == [MarkerType.COMMIT, MarkerType.ABORT]
    log = server.topics.get(TOPIC).log(2)  # type: ignore[union-attr]
    assert log is not None and log.last_stable_offset == log.high_watermark
    fenced = await client.call(end_request(version, tid, pid, epoch + 1, True))
    assert fenced.error_code is (E.producer_fenced if version >= 2 else E.invalid_producer_epoch)
    unknown = await client.call(end_request(version, "nobody", pid, epoch, True))
    assert unknown.error_code is E.invalid_producer_id_mapping


async def test_open_transaction_holds_the_lso(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = await init(client, "lso")
    await client.call(add_partitions_request(3, "lso", pid, epoch, (TOPIC, 0)))
    written = await produce_txn(client, 11, "lso", 0, txn_batch(pid, epoch, count=2))
    assert written.error_code is E.none
    log = server.topics.get(TOPIC).log(0)  # type: ignore[union-attr]
    assert log is not None and (log.last_stable_offset, log.high_watermark) == (0, 2)
    assert (await client.call(end_request(4, "lso", pid, epoch, True))).error_code is E.none
    assert (log.last_stable_offset, log.high_watermark) == (3, 3)


async def test_reinit_aborts_the_open_transaction(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = await init(client, "zombie")
    await client.call(add_partitions_request(3, "zombie", pid, epoch, (TOPIC, 1)))
    assert (await produce_txn(client, 11, "zombie", 1, txn_batch(pid, epoch))).error_code is E.none
    busy = await client.call(init_request(4, "zombie"))
    assert busy.error_code is E.concurrent_transactions  # aborted as the coordinator; the client retries
    again = await client.call(init_request(4, "zombie"))
    assert (again.error_code, again.producer_epoch) == (E.none, epoch + 2)
    assert markers(server, 1) == [MarkerType.ABORT]
    stale = await produce_txn(client, 11, "zombie", 1, txn_batch(pid, epoch, sequence=1))
    assert stale.error_code is E.invalid_producer_epoch


# -- transactional Produce (spec 2.10, 4.3) --------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_transactional_produce_verification(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    tid = f"produce-{version}"
    pid, epoch = await init(client, tid)
    not_added = await produce_txn(client, version, tid, 0, txn_batch(pid, epoch))
    assert not_added.error_code is (E.transaction_abortable if version >= 11 else E.invalid_txn_state)
    no_id = await produce_txn(client, version, None, 0, txn_batch(pid, epoch))
    assert no_id.error_code is E.transactional_id_authorization_failed
    unknown = await produce_txn(client, version, "nobody", 0, txn_batch(pid, epoch))
    assert unknown.error_code is E.invalid_producer_id_mapping
    await client.call(add_partitions_request(3, tid, pid, epoch, (TOPIC, 0)))
    old_epoch = await produce_txn(client, version, tid, 0, txn_batch(pid, epoch - 1 if epoch else epoch + 5))
    assert old_epoch.error_code is E.invalid_producer_epoch
    accepted = await produce_txn(client, version, tid, 0, txn_batch(pid, epoch))
    assert accepted.error_code is E.none
    following = await produce_txn(client, version, tid, 0, txn_batch(pid, epoch, sequence=1))
    assert following.error_code is E.none
    control = make_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=2, transactional=True)
    control = control[:22] + bytes([control[22] | 0x20]) + control[23:]
    refused = await produce_txn(client, version, tid, 0, control)
    assert refused.error_code in (E.invalid_record, E.corrupt_message)  # CRC covers attributes: either refusal
    assert (await client.call(end_request(4, tid, pid, epoch, True))).error_code is E.none
    assert markers(server, 0) == [MarkerType.COMMIT]


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
async def test_transactional_batches_of_two_producers_refuse_the_request(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    # Spec 2.10 step 3: INVALID_PRODUCER_ID_MAPPING on every partition, the one that failed step 2 included,
    # and nothing appended anywhere.
    client = await connect()
    a, b = f"mixed-a-{version}", f"mixed-b-{version}"
    pid_a, epoch_a = await init(client, a)
    pid_b, epoch_b = await init(client, b)
    await client.call(add_partitions_request(3, a, pid_a, epoch_a, (TOPIC, 0)))
    await client.call(add_partitions_request(3, b, pid_b, epoch_b, (TOPIC, 1)))
    logs = [server.topics.get(TOPIC).log(p) for p in range(3)]  # type: ignore[union-attr]
    ends = [log.next_offset for log in logs if log is not None]
    mixed = [(0, txn_batch(pid_a, epoch_a)), (1, txn_batch(pid_b, epoch_b)), (2, txn_batch(pid_a, epoch_a) * 2)]
    response = await client.call(produce_request(version, mixed, transactional_id=a))
    errors = [(int(p.index), p.error_code) for p in response.responses[0].partition_responses]
    assert errors == [
        (0, E.invalid_producer_id_mapping),
        (1, E.invalid_producer_id_mapping),
        (2, E.invalid_producer_id_mapping),
    ]
    assert [log.next_offset for log in logs if log is not None] == ends
    # Kafka counts (producer id, epoch) pairs: one id with two epochs is refused the same way.
    epochs = [(0, txn_batch(pid_a, epoch_a)), (1, txn_batch(pid_a, epoch_a + 1))]
    response = await client.call(produce_request(version, epochs, transactional_id=a))
    assert {p.error_code for p in response.responses[0].partition_responses} == {E.invalid_producer_id_mapping}
    assert [log.next_offset for log in logs if log is not None] == ends
    # One producer over two partitions, beside a plain batch without a producer id, is appended.
    one = [(0, txn_batch(pid_a, epoch_a)), (2, make_batch(1))]
    response = await client.call(produce_request(version, one, transactional_id=a))
    assert [p.error_code for p in response.responses[0].partition_responses] == [E.none, E.none]
    for tid, pid, epoch in ((a, pid_a, epoch_a), (b, pid_b, epoch_b)):
        assert (await client.call(end_request(4, tid, pid, epoch, False))).error_code is E.none


# -- fault rules -----------------------------------------------------------------------------------


async def test_fault_rule_answers_end_txn(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = await init(client, "faulty")
    await client.call(add_partitions_request(3, "faulty", pid, epoch, (TOPIC, 0)))
    server.faults.add({"api": "EndTxn", "action": "error", "error": "CONCURRENT_TRANSACTIONS", "count": 1})
    first = await client.call(end_request(4, "faulty", pid, epoch, False))
    assert first.error_code is E.concurrent_transactions
    second = await client.call(end_request(4, "faulty", pid, epoch, False))
    assert second.error_code is E.none
    server.faults.add(
        {"api": "AddPartitionsToTxn", "action": "error", "error": "COORDINATOR_NOT_AVAILABLE", "count": 1}
    )
    answered = await client.call(add_partitions_request(2, "faulty", pid, epoch, (TOPIC, 0), (TOPIC, 1)))
    assert partition_errors(answered) == {
        (TOPIC, 0): E.coordinator_not_available,
        (TOPIC, 1): E.coordinator_not_available,
    }
    server.faults.add({"api": "AddOffsetsToTxn", "action": "error", "error": "COORDINATOR_NOT_AVAILABLE", "count": 1})
    offsets = await client.call(add_offsets_request(0, "faulty", pid, epoch, "g"))
    assert offsets.error_code is E.coordinator_not_available


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
async def test_fault_rule_answers_init_producer_id_for_one_transactional_id(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    client = await connect()
    target, other = f"init-fault-{version}", f"init-spared-{version}"
    rule = server.faults.add(
        {
            "api": "InitProducerId",
            "action": "error",
            "error": "COORDINATOR_LOAD_IN_PROGRESS",
            "transactional_id": target,
        }
    )
    try:
        spared = await client.call(init_request(version, other))
        assert spared.error_code is E.none
        faulted = await client.call(init_request(version, target))
        assert (faulted.error_code, faulted.producer_id, faulted.producer_epoch) == (
            E.coordinator_load_in_progress,
            -1,
            -1,
        )
        assert rule.hits == 1
    finally:
        server.faults.delete(rule.id)


@pytest.mark.parametrize("version", versions(ApiKey.TXN_OFFSET_COMMIT))
async def test_fault_rule_answers_txn_offset_commit_on_every_partition(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    client = await connect()
    tid = f"offsets-fault-{version}"
    rule = server.faults.add(
        {"api": "TxnOffsetCommit", "action": "error", "error": "CONCURRENT_TRANSACTIONS", "transactional_id": tid}
    )
    try:
        commit = txn_offset_commit(version, [(TOPIC, [(0, 5), (2, 7)])], producer_id=1, transactional_id=tid)
        assert errors(await client.call(commit)) == [
            (TOPIC, 0, E.concurrent_transactions),
            (TOPIC, 2, E.concurrent_transactions),
        ]
    finally:
        server.faults.delete(rule.id)


async def test_close_and_delay_rules_on_the_transaction_apis(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    tid = "closed-and-delayed"
    pid, epoch = await init(client, tid)
    close = server.faults.add({"api": "AddOffsetsToTxn", "action": "close", "transactional_id": tid, "count": 1})
    await client.send_raw(client.encode(add_offsets_request(4, tid, pid, epoch, "g")))
    assert await client.closed_by_peer()
    assert close.hits == 1
    client = await connect()
    assert (await client.call(add_offsets_request(4, tid, pid, epoch, "g"))).error_code is E.none
    delay = server.faults.add({"api": "EndTxn", "action": "delay", "delay_ms": 300, "transactional_id": tid})
    try:
        started = asyncio.get_running_loop().time()
        assert (await client.call(end_request(4, tid, pid, epoch, True))).error_code is E.none
        assert asyncio.get_running_loop().time() - started >= 0.3
        assert delay.hits == 1
    finally:
        server.faults.delete(delay.id)
