"""Fetch and ListOffsets with isolation level READ_COMMITTED through a real socket, on a log holding transactional
batches and markers (``docs/spec/transactions.md`` 4.4-4.7; checklist items 66, 68-76).

Batches and markers are appended straight to the broker's partition log (the Produce path is another test's), and a
marker append tells the delayed fetches, as the broker's transaction completion does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.server.broker import BrokerServer
from broker.storage.control import Marker, MarkerType
from broker.storage.partition_log import PartitionLog
from broker.storage.records import split_batches, validate_client_batch
from tests.storage import BASE_TIMESTAMP, make_batch
from tests.wire.client import Connect
from tests.wire.test_data_plane import (
    EARLIEST,
    LATEST,
    LIST_OFFSETS_V,
    MAX_TIMESTAMP,
    eventually,
    fetch_partition,
    fetch_request,
    list_offsets_request,
    topic_key,
)

E = ErrorCode
A, B = 1000, 2000
COMMITTED, UNCOMMITTED = 1, 0
FETCH_VERSIONS = [4, 11, 12, 16]  # the first with the fields, the last non-flexible, the first flexible, the newest


def log_of(server: BrokerServer, partition: int = 0) -> PartitionLog:
    topic = server.topics.get("topic")
    assert topic is not None
    log = topic.log(partition)
    assert log is not None
    return log


def append(log: PartitionLog, batch: bytes) -> int:
    ((header, data),) = split_batches(batch)
    return log.append(header, data, validate_client_batch(header, data, 1_048_588))


def end(server: BrokerServer, log: PartitionLog, producer_id: int, *, commit: bool) -> int:
    kind = MarkerType.COMMIT if commit else MarkerType.ABORT
    offset = log.append_marker(Marker(kind, producer_id, 0, 0), BASE_TIMESTAMP + 100)
    server.fetches.appended(log)  # what the broker's transaction completion does after each marker
    return offset


def txn(count: int, sequence: int, producer_id: int = A, start: int = 0) -> bytes:
    stamps = [BASE_TIMESTAMP + start + i for i in range(count)]
    return make_batch(
        count, timestamps=stamps, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, transactional=True
    )


def plain(count: int, start: int = 0) -> bytes:
    return make_batch(count, timestamps=[BASE_TIMESTAMP + start + i for i in range(count)])


def open_transaction(server: BrokerServer) -> PartitionLog:
    """Offsets 0-1 plain, 2-4 producer A's open transaction, 5-6 plain: LSO 2, HW 7 (item 66)."""
    log = log_of(server)
    assert append(log, plain(2, 0)) == 0
    assert append(log, txn(3, 0, start=2)) == 2
    assert append(log, plain(2, 5)) == 5
    assert (log.last_stable_offset, log.high_watermark) == (2, 7)
    return log


async def fetch(server: BrokerServer, connect: Connect, version: int, offset: int, isolation: int) -> Any:
    client = await connect()
    request = fetch_request(
        version, [(topic_key(server, version), [fetch_partition(version, 0, offset)])], isolation_level=isolation
    )
    response = await client.call(request)
    ((answer,),) = [t.partitions for t in response.responses]
    return answer


def base_offsets(records: bytes | None) -> list[int]:
    return [header.base_offset for header, _ in split_batches(records or b"")]


def aborted(answer: Any) -> list[tuple[int, int]] | None:
    if answer.aborted_transactions is None:
        return None
    return [(t.producer_id, t.first_offset) for t in answer.aborted_transactions]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
async def test_items_68_69_only_below_the_lso(server: BrokerServer, connect: Connect, version: int) -> None:
    open_transaction(server)
    answer = await fetch(server, connect, version, 0, COMMITTED)
    assert (answer.error_code, answer.high_watermark, answer.last_stable_offset) == (E.none, 7, 2)
    assert base_offsets(answer.records) == [0]
    assert aborted(answer) == []
    between = await fetch(server, connect, version, 3, COMMITTED)
    assert (between.error_code, base_offsets(between.records), aborted(between)) == (E.none, [], [])
    uncommitted = await fetch(server, connect, version, 0, UNCOMMITTED)
    assert base_offsets(uncommitted.records) == [0, 2, 5]
    assert (uncommitted.last_stable_offset, aborted(uncommitted)) == (2, None)  # item 72: null, not empty


@pytest.mark.parametrize("version", FETCH_VERSIONS)
async def test_items_70_73_aborted_transactions(server: BrokerServer, connect: Connect, version: int) -> None:
    log = open_transaction(server)
    assert end(server, log, A, commit=False) == 7
    assert append(log, txn(2, 0, producer_id=B, start=8)) == 8
    assert end(server, log, B, commit=True) == 10  # a committed transaction is never listed (item 73)
    assert append(log, txn(1, 3, start=11)) == 11
    assert end(server, log, A, commit=False) == 12
    answer = await fetch(server, connect, version, 0, COMMITTED)
    assert answer.last_stable_offset == answer.high_watermark == 13
    assert base_offsets(answer.records) == [0, 2, 5, 7, 8, 10, 11, 12]  # aborted data and markers stay in
    assert aborted(answer) == [(A, 2), (A, 11)]  # in ABORT-marker order
    inside = await fetch(server, connect, version, 3, COMMITTED)  # item 71
    assert aborted(inside) == [(A, 2), (A, 11)]
    later = await fetch(server, connect, version, 8, COMMITTED)
    assert aborted(later) == [(A, 11)]
    assert aborted(await fetch(server, connect, version, 0, UNCOMMITTED)) is None


async def test_item_74_parked_read_committed_fetch_wakes_on_the_marker(server: BrokerServer, connect: Connect) -> None:
    log = open_transaction(server)
    client = await connect()
    loop = asyncio.get_running_loop()
    version = 16
    request = fetch_request(
        version,
        [(topic_key(server, version), [fetch_partition(version, 0, 2)])],
        max_wait_ms=5000,
        isolation_level=COMMITTED,
    )
    started = loop.time()
    await client.send_raw(client.encode(request, 74))
    await eventually(lambda: len(server.fetches) == 1)  # parked: nothing below the LSO past offset 2
    end(server, log, A, commit=True)
    correlation, response = client.decode(1, version, await client.read_frame(timeout=2.0))
    elapsed = loop.time() - started
    assert correlation == 74
    assert elapsed < 1.0, f"the parked fetch took {elapsed:.3f}s: the marker did not wake it"
    ((answer,),) = [t.partitions for t in response.responses]
    assert answer.last_stable_offset == 8
    assert base_offsets(answer.records) == [2, 5, 7]
    assert len(server.fetches) == 0


async def test_items_75_76_list_offsets(server: BrokerServer, connect: Connect) -> None:
    log = open_transaction(server)
    client = await connect()

    async def listed(timestamp: int, isolation: int) -> tuple[int, int]:
        response = await client.call(list_offsets_request(LIST_OFFSETS_V, [(0, timestamp)], isolation_level=isolation))
        ((answer,),) = [t.partitions for t in response.topics]
        assert answer.error_code is E.none
        return answer.offset, answer.timestamp

    assert await listed(LATEST, COMMITTED) == (2, -1)
    assert await listed(LATEST, UNCOMMITTED) == (7, -1)
    assert await listed(EARLIEST, COMMITTED) == (0, -1)
    # Item 76: a match at or past the LSO is not given under READ_COMMITTED.
    assert await listed(BASE_TIMESTAMP + 1, COMMITTED) == (1, BASE_TIMESTAMP + 1)
    assert await listed(BASE_TIMESTAMP + 5, COMMITTED) == (-1, -1)
    assert await listed(BASE_TIMESTAMP + 5, UNCOMMITTED) == (5, BASE_TIMESTAMP + 5)
    assert await listed(MAX_TIMESTAMP, COMMITTED) == (-1, -1)
    assert await listed(MAX_TIMESTAMP, UNCOMMITTED) == (6, BASE_TIMESTAMP + 6)
    end(server, log, A, commit=True)
    assert await listed(LATEST, COMMITTED) == (8, -1)
    assert await listed(BASE_TIMESTAMP + 5, COMMITTED) == (5, BASE_TIMESTAMP + 5)
