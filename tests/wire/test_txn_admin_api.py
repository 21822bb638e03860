"""The transaction admin APIs on the wire: DescribeTransactions 0, ListTransactions 0-2, DescribeProducers 0 and
WriteTxnMarkers 1 (docs/spec/transactions.md sections 2.9 and 6, checklist items 84-91), every served version,
through a real socket to an in-process broker. Transactions are opened by hand with kio-encoded requests."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.server.broker import BrokerServer
from broker.storage.control import MarkerType
from broker.storage.partition_log import PartitionLog
from broker.storage.records import read_header
from broker.transactions.messages import OFFSETS_TOPIC, partition_for
from broker.transactions.state import ONGOING
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.storage import make_batch
from tests.wire.client import Connect, WireClient, part, request
from tests.wire.test_data_plane import produce_request
from tests.wire.test_transactions_api import (
    TOPIC,
    add_offsets_request,
    add_partitions_request,
    end_request,
    init,
    init_request,
    markers,
    produce_txn,
    txn_batch,
)

E = ErrorCode


def versions(api: ApiKey) -> list[int]:
    first, last = SUPPORTED_VERSIONS[api]
    return list(range(first, last + 1))


def ms(value: datetime.datetime) -> int:
    return round(value.timestamp() * 1000)


def topic_log(server: BrokerServer, partition: int) -> PartitionLog:
    topic = server.topics.get(TOPIC)
    assert topic is not None
    log = topic.log(partition)
    assert log is not None
    return log


async def open_txn(client: WireClient, tid: str, partition: int, count: int = 1) -> tuple[int, int]:
    """InitProducerId, AddPartitionsToTxn and one transactional batch: a transaction open on ``partition``."""
    pid, epoch = await init(client, tid)
    added = await client.call(add_partitions_request(3, tid, pid, epoch, (TOPIC, partition)))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code is E.none
    assert (await produce_txn(client, 11, tid, partition, txn_batch(pid, epoch, count=count))).error_code is E.none
    return pid, epoch


def describe_txns(*ids: str) -> Any:
    return request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=ids)


async def call_describe(client: WireClient, *ids: str) -> Any:
    """DescribeTransactions v0, its answer decoded with kafka-python's schema: kio refuses the -1 start time that
    Kafka writes for an Empty id (its datetime type has no negative timestamps)."""
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse  # type: ignore[import-untyped]

    await client.send_raw(client.encode(describe_txns(*ids), correlation_id=77))
    frame = await client.read_frame()
    response = DescribeTransactionsResponse.decode(frame, version=0, header=True)
    assert response.header.correlation_id == 77
    return response


def list_txns(version: int, **filters: Any) -> Any:
    return request(ApiKey.LIST_TRANSACTIONS, version, **filters)


def describe_producers(*topics: tuple[str, tuple[int, ...]]) -> Any:
    return request(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        topics=tuple(
            part(ApiKey.DESCRIBE_PRODUCERS, 0, "TopicRequest", name=name, partition_indexes=tuple(map(i32, ps)))
            for name, ps in topics
        ),
    )


def write_markers(*markers_: tuple[int, int, bool, int, tuple[tuple[str, tuple[int, ...]], ...]]) -> Any:
    """WriteTxnMarkers v1: (pid, epoch, commit?, coordinator epoch, topics) per marker."""
    return request(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        markers=tuple(
            part(
                ApiKey.WRITE_TXN_MARKERS,
                1,
                "WritableTxnMarker",
                producer_id=i64(pid),
                producer_epoch=epoch,
                transaction_result=commit,
                coordinator_epoch=i32(coordinator_epoch),
                topics=tuple(
                    part(
                        ApiKey.WRITE_TXN_MARKERS,
                        1,
                        "WritableTxnMarkerTopic",
                        name=name,
                        partition_indexes=tuple(map(i32, ps)),
                    )
                    for name, ps in topics
                ),
            )
            for pid, epoch, commit, coordinator_epoch, topics in markers_
        ),
    )


def marker_errors(response: Any) -> list[tuple[int, str, int, ErrorCode]]:
    return [
        (int(m.producer_id), t.name, int(p.partition_index), p.error_code)
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    ]


def producers_of(response: Any, topic: str, partition: int) -> dict[int, Any]:
    [entry] = [p for t in response.topics if t.name == topic for p in t.partitions if p.partition_index == partition]
    assert entry.error_code is E.none
    return {int(p.producer_id): p for p in entry.active_producers}


def test_served_ranges() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_TRANSACTIONS] == (0, 0)
    assert SUPPORTED_VERSIONS[ApiKey.LIST_TRANSACTIONS] == (0, 2)
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)
    assert SUPPORTED_VERSIONS[ApiKey.WRITE_TXN_MARKERS] == (1, 1)  # v0 removed in Kafka 4.0; v2 is TV2's


async def test_api_versions_lists_the_admin_apis(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    answer = await client.call(request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
    assert served[27] == (1, 1) and served[61] == (0, 0) and served[65] == (0, 0) and served[66] == (0, 2)


# -- DescribeTransactions (items 5, 84, 85) --------------------------------------------------------


async def test_describe_transactions(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    before = ms(datetime.datetime.now(datetime.UTC))
    pid, epoch = await open_txn(client, "describe-open", 2)
    assert (await client.call(add_offsets_request(4, "describe-open", pid, epoch, "g"))).error_code is E.none
    idle_pid, idle_epoch = await init(client, "describe-idle")
    answer = await call_describe(client, "nobody", "describe-open", "", "describe-idle")
    states = answer.transaction_states
    assert [(s.transactional_id, s.error_code) for s in states] == [
        ("nobody", E.transactional_id_not_found),
        ("describe-open", E.none),
        ("", E.invalid_request),
        ("describe-idle", E.none),
    ]
    unknown, opened, empty_id, idle = states
    for error_entry in (unknown, empty_id):  # the defaults: state "", numbers 0, no topics
        assert (error_entry.transaction_state, error_entry.producer_id, error_entry.producer_epoch) == ("", 0, 0)
        assert (error_entry.transaction_timeout_ms, error_entry.transaction_start_time_ms) == (0, 0)
        assert error_entry.topics == []
    assert (opened.transaction_state, opened.producer_id, opened.producer_epoch) == ("Ongoing", pid, epoch)
    assert opened.transaction_timeout_ms == 60_000
    assert before <= opened.transaction_start_time_ms <= ms(datetime.datetime.now(datetime.UTC))
    assert {(t.topic, tuple(t.partitions)) for t in opened.topics} == {
        (TOPIC, (2,)),
        (OFFSETS_TOPIC, (partition_for("g", 50),)),
    }
    # Item 5: a new id is Empty, start -1, no topics.
    assert (idle.transaction_state, idle.producer_id, idle.producer_epoch) == ("Empty", idle_pid, idle_epoch)
    assert (idle.transaction_start_time_ms, idle.topics) == (-1, [])
    # After the commit: CompleteCommit, the last start kept, no partitions.
    assert (await client.call(end_request(4, "describe-open", pid, epoch, True))).error_code is E.none
    [done] = (await call_describe(client, "describe-open")).transaction_states
    assert (done.transaction_state, done.transaction_start_time_ms, done.topics) == (
        "CompleteCommit",
        opened.transaction_start_time_ms,
        [],
    )


# -- ListTransactions (items 12, 86-88) ------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.LIST_TRANSACTIONS))
async def test_list_transactions(server: BrokerServer, connect: Connect, version: int) -> None:
    client = await connect()
    open_pid, _ = await open_txn(client, f"app-open-{version}", 0)
    await init(client, f"app-idle-{version}")
    await client.call(init_request(4, None))  # item 12: an idempotent producer is never listed
    everything = await client.call(list_txns(version))
    assert (everything.error_code, everything.unknown_state_filters) == (E.none, ())
    rows = {t.transactional_id: (int(t.producer_id), t.transaction_state) for t in everything.transaction_states}
    assert rows[f"app-open-{version}"] == (open_pid, "Ongoing")
    assert rows[f"app-idle-{version}"][1] == "Empty"
    filtered = await client.call(list_txns(version, state_filters=("Ongoing", "Foo")))
    assert (filtered.error_code, filtered.unknown_state_filters) == (E.none, ("Foo",))
    assert {t.transaction_state for t in filtered.transaction_states} == {"Ongoing"}
    assert f"app-open-{version}" in {t.transactional_id for t in filtered.transaction_states}
    by_pid = await client.call(list_txns(version, producer_id_filters=(i64(open_pid),)))
    assert [t.transactional_id for t in by_pid.transaction_states] == [f"app-open-{version}"]
    if version >= 1:  # item 87: a transaction started a moment ago is not older than 60 s
        old = await client.call(list_txns(version, state_filters=("Ongoing",), duration_filter=i64(60_000)))
        assert (old.error_code, old.transaction_states) == (E.none, ())
        young = await client.call(list_txns(version, state_filters=("Ongoing",), duration_filter=i64(0)))
        assert f"app-open-{version}" in {t.transactional_id for t in young.transaction_states}
    if version >= 2:  # item 88: RE2, whole-id match; an invalid pattern is a top-level error
        matched = await client.call(list_txns(version, transactional_id_pattern=f"app-.*-{version}"))
        assert {t.transactional_id for t in matched.transaction_states} == {
            f"app-open-{version}",
            f"app-idle-{version}",
        }
        assert (await client.call(list_txns(version, transactional_id_pattern="open"))).transaction_states == ()
        bad = await client.call(list_txns(version, transactional_id_pattern="("))
        assert (bad.error_code, bad.transaction_states) == (E.invalid_regular_expression, ())


# -- DescribeProducers (items 89, 90) --------------------------------------------------------------


async def test_describe_producers_open_then_committed(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    # An idempotent producer on the same partition is listed too (section 6.3).
    idem = await client.call(init_request(4, None))
    idem_pid = int(idem.producer_id)
    plain = make_batch(2, producer_id=idem_pid, producer_epoch=0, base_sequence=0)
    produced = await client.call(produce_request(11, [(1, plain)]))
    assert produced.responses[0].partition_responses[0].error_code is E.none
    pid, epoch = await init(client, "producers")
    await client.call(add_partitions_request(3, "producers", pid, epoch, (TOPIC, 1)))
    batch = txn_batch(pid, epoch, count=3)
    assert (await produce_txn(client, 11, "producers", 1, batch)).error_code is E.none
    first_offset = 2  # after the idempotent producer's two records

    during = producers_of(await client.call(describe_producers((TOPIC, (1,)))), TOPIC, 1)
    assert set(during) == {idem_pid, pid}
    txn = during[pid]
    assert (txn.producer_epoch, txn.last_sequence, txn.coordinator_epoch, txn.current_txn_start_offset) == (
        epoch,
        2,
        -1,
        first_offset,
    )
    assert txn.last_timestamp == read_header(batch).max_timestamp
    other = during[idem_pid]
    assert (other.producer_epoch, other.last_sequence, other.coordinator_epoch, other.current_txn_start_offset) == (
        0,
        1,
        -1,
        -1,
    )
    assert other.last_timestamp == read_header(plain).max_timestamp

    assert (await client.call(end_request(4, "producers", pid, epoch, True))).error_code is E.none
    after = producers_of(await client.call(describe_producers((TOPIC, (1,)))), TOPIC, 1)[pid]
    # TV1: the marker has the same epoch, so the sequence is kept; the marker's coordinator epoch is 0.
    assert (after.producer_epoch, after.last_sequence, after.coordinator_epoch, after.current_txn_start_offset) == (
        epoch,
        2,
        0,
        -1,
    )
    assert after.last_timestamp >= txn.last_timestamp  # the marker's write time


async def test_describe_producers_unknown_topic_and_partition(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    answer = await client.call(describe_producers(("no-such-topic", (0, 1)), (TOPIC, (0, 7))))
    errors = {
        (t.name, int(p.partition_index)): (p.error_code, p.error_message) for t in answer.topics for p in t.partitions
    }
    unknown = (E.unknown_topic_or_partition, "This server does not host this topic-partition.")
    assert errors == {
        ("no-such-topic", 0): unknown,
        ("no-such-topic", 1): unknown,
        (TOPIC, 0): (E.none, None),
        (TOPIC, 7): unknown,
    }
    assert [t.name for t in answer.topics] == ["no-such-topic", TOPIC]  # request order
    assert server.topics.get("no-such-topic") is None  # never auto-created


# -- WriteTxnMarkers (item 91) ---------------------------------------------------------------------


async def test_admin_abort_of_a_hanging_transaction(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = await open_txn(client, "hanging", 0, count=2)
    log = topic_log(server, 0)
    start = log.next_offset - 2
    assert (log.last_stable_offset, log.high_watermark) == (start, start + 2)
    # kafka-transactions.sh abort: pid, epoch and coordinator epoch from DescribeProducers (-1: no marker yet).
    answer = await client.call(write_markers((pid, epoch, False, -1, ((TOPIC, (0,)),))))
    assert marker_errors(answer) == [(pid, TOPIC, 0, E.none)]
    assert markers(server, 0)[-1] is MarkerType.ABORT
    assert log.last_stable_offset == log.high_watermark == start + 3  # the LSO moves past the marker
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(start, start + 3)] == [
        (pid, start, start + 2)
    ]
    # The transaction coordinator is not told: the id is still Ongoing with its partition.
    meta = server.transactions.get("hanging")
    assert meta is not None and meta.state is ONGOING and (TOPIC, 0) in meta.partitions
    [described] = (await call_describe(client, "hanging")).transaction_states
    assert described.transaction_state == "Ongoing"
    producer = producers_of(await client.call(describe_producers((TOPIC, (0,)))), TOPIC, 0)[pid]
    assert (producer.current_txn_start_offset, producer.coordinator_epoch) == (-1, -1)
    # The producer can still end its transaction: the COMMIT marker finds nothing open (item 32) and moves nothing.
    assert (await client.call(end_request(4, "hanging", pid, epoch, True))).error_code is E.none
    assert log.last_stable_offset == log.high_watermark == start + 4


async def test_write_txn_markers_per_partition_errors(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = await open_txn(client, "markers", 1)
    answer = await client.call(
        write_markers(
            (pid, epoch - 1 if epoch else -2, False, -1, ((TOPIC, (1,)),)),  # a stale epoch: refused
            (pid, epoch, False, 0, ((TOPIC, (1, 9)), ("no-such-topic", (0,)), (OFFSETS_TOPIC, (0,)))),
            (pid, epoch, True, -1, ((TOPIC, (2,)),)),  # coordinator epoch -1 below the stored 0 on t-1 is fine
        )
    )
    assert marker_errors(answer) == [
        (pid, TOPIC, 1, E.invalid_producer_epoch),
        (pid, TOPIC, 1, E.none),
        (pid, TOPIC, 9, E.unknown_topic_or_partition),
        (pid, "no-such-topic", 0, E.unknown_topic_or_partition),
        (pid, OFFSETS_TOPIC, 0, E.unknown_topic_or_partition),
        (pid, TOPIC, 2, E.none),  # no transaction open there: still appended, moves nothing (item 32)
    ]
    assert markers(server, 1)[-1] is MarkerType.ABORT
    assert markers(server, 2)[-1] is MarkerType.COMMIT
    # A coordinator epoch below the one stored by the last marker on t-1 (0) is fenced (section 4.2).
    fenced = await client.call(write_markers((pid, epoch, False, -1, ((TOPIC, (1,)),))))
    assert marker_errors(fenced) == [(pid, TOPIC, 1, E.transaction_coordinator_fenced)]
    empty = await client.call(write_markers((pid, epoch, False, 0, ())))
    assert [(int(m.producer_id), m.topics) for m in empty.markers] == [(pid, ())]
