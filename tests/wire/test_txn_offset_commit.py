"""TxnOffsetCommit (28) through a real socket at every served version (0-4), and what OffsetFetch RequireStable sees
of it (``docs/spec/transactions.md`` 2.7, 5.1-5.4; checklist items 33, 35-37, 45-49).

The transaction itself is opened on the broker's own transaction coordinator in-process (InitProducerId and
AddOffsetsToTxn are other tests' APIs); the commit, the fetches and the answers cross the wire.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16, i32, i64

from broker.server.broker import BrokerServer
from broker.transactions.messages import AddOffsetsRequest, EndTxnRequest, InitProducerIdRequest
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.wire.client import Connect, WireClient, part, request

E = ErrorCode
TOPIC = "topic"  # 3 partitions
TID = "tx"
GROUP = "g"
VERSIONS = list(
    range(SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT][0], SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT][1] + 1)
)


def txn_offset_commit(
    version: int,
    topics: list[tuple[str, list[tuple[int, int]]]],
    *,
    producer_id: int,
    producer_epoch: int = 0,
    group_id: str = GROUP,
    transactional_id: str = TID,
    generation_id: int = -1,
    member_id: str = "",
    metadata: str | None = "m",
) -> Any:
    api = ApiKey.TXN_OFFSET_COMMIT
    return request(
        api,
        version,
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(producer_epoch),
        generation_id=i32(generation_id),
        member_id=member_id,
        group_instance_id=None,
        topics=tuple(
            part(
                api,
                version,
                "TxnOffsetCommitRequestTopic",
                name=name,
                partitions=tuple(
                    part(
                        api,
                        version,
                        "TxnOffsetCommitRequestPartition",
                        partition_index=i32(index),
                        committed_offset=i64(offset),
                        committed_leader_epoch=i32(4),
                        committed_metadata=metadata,
                    )
                    for index, offset in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


def errors(response: Any) -> list[tuple[str, int, ErrorCode]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


async def fetch_offsets(client: WireClient, partitions: list[int], *, stable: bool) -> list[tuple[int, ErrorCode]]:
    """OffsetFetch v7 (RequireStable, the last version of the single-group form)."""
    api = ApiKey.OFFSET_FETCH
    response = await client.call(
        request(
            api,
            7,
            group_id=GROUP,
            topics=(
                part(api, 7, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=tuple(map(i32, partitions))),
            ),
            require_stable=stable,
        )
    )
    assert response.error_code is E.none
    ((topic),) = response.topics
    return [(p.committed_offset, p.error_code) for p in topic.partitions]


def begin(server: BrokerServer, *, add_offsets: bool = True) -> tuple[int, int]:
    tc = server.transactions
    assert tc is not None
    started = tc.init_producer_id(InitProducerIdRequest(TID, 60_000))
    assert started.error is E.none, started
    if add_offsets:
        assert tc.add_offsets(AddOffsetsRequest(TID, started.producer_id, started.producer_epoch, GROUP)) is E.none
    return started.producer_id, started.producer_epoch


@pytest.mark.parametrize("version", VERSIONS)
async def test_commit_is_pending_until_the_transaction_commits(
    server: BrokerServer, connect: Connect, version: int
) -> None:
    client = await connect()
    pid, epoch = begin(server)
    response = await client.call(
        txn_offset_commit(version, [(TOPIC, [(0, 10), (1, 11)])], producer_id=pid, producer_epoch=epoch)
    )
    assert errors(response) == [(TOPIC, 0, E.none), (TOPIC, 1, E.none)]
    # Items 46-47: invisible without RequireStable, unstable with it.
    assert await fetch_offsets(client, [0, 1, 2], stable=False) == [(-1, E.none)] * 3
    assert await fetch_offsets(client, [0, 1, 2], stable=True) == [
        (-1, E.unstable_offset_commit),
        (-1, E.unstable_offset_commit),
        (-1, E.none),
    ]
    tc = server.transactions
    assert tc is not None
    assert tc.end_txn(EndTxnRequest(TID, pid, epoch, committed=True)).error is E.none
    # Item 48: committed with its leader epoch (v2+) and metadata.
    assert await fetch_offsets(client, [0, 1], stable=True) == [(10, E.none), (11, E.none)]


async def test_abort_drops_the_pending_offsets(server: BrokerServer, connect: Connect) -> None:
    client = await connect()
    pid, epoch = begin(server)
    response = await client.call(txn_offset_commit(4, [(TOPIC, [(0, 10)])], producer_id=pid, producer_epoch=epoch))
    assert errors(response) == [(TOPIC, 0, E.none)]
    tc = server.transactions
    assert tc is not None
    assert tc.end_txn(EndTxnRequest(TID, pid, epoch, committed=False)).error is E.none
    assert await fetch_offsets(client, [0], stable=True) == [(-1, E.none)]


@pytest.mark.parametrize("version", VERSIONS)
async def test_offsets_partition_not_in_the_transaction(server: BrokerServer, connect: Connect, version: int) -> None:
    """Item 33: without AddOffsetsToTxn, v0-3 -> INVALID_TXN_STATE, v4 -> TRANSACTION_ABORTABLE, everywhere."""
    client = await connect()
    pid, epoch = begin(server, add_offsets=False)
    response = await client.call(
        txn_offset_commit(version, [(TOPIC, [(0, 1), (2, 1)])], producer_id=pid, producer_epoch=epoch)
    )
    expected = E.transaction_abortable if version >= 4 else E.invalid_txn_state
    assert errors(response) == [(TOPIC, 0, expected), (TOPIC, 2, expected)]


@pytest.mark.parametrize("version", VERSIONS)
async def test_fenced_epoch_and_unknown_producer(server: BrokerServer, connect: Connect, version: int) -> None:
    """Item 45: a stale epoch -> INVALID_PRODUCER_EPOCH on every partition; a pid not matching the id -> 49."""
    client = await connect()
    pid, epoch = begin(server)
    response = await client.call(
        txn_offset_commit(version, [(TOPIC, [(0, 1)])], producer_id=pid, producer_epoch=epoch + 1)
    )
    assert errors(response) == [(TOPIC, 0, E.invalid_producer_epoch)]
    response = await client.call(txn_offset_commit(version, [(TOPIC, [(0, 1)])], producer_id=pid + 100))
    assert errors(response) == [(TOPIC, 0, E.invalid_producer_id_mapping)]


@pytest.mark.parametrize("version", VERSIONS)
async def test_unknown_topics_and_empty_group_id(server: BrokerServer, connect: Connect, version: int) -> None:
    """Items 35-36: unknown topics and partitions are answered first, per topic; group id "" -> INVALID_GROUP_ID
    for the rest, before the transaction is looked at."""
    client = await connect()
    pid, epoch = begin(server)
    only_unknown = txn_offset_commit(version, [("nope", [(0, 1)]), (TOPIC, [(9, 1)])], producer_id=pid, group_id="")
    assert errors(await client.call(only_unknown)) == [
        ("nope", 0, E.unknown_topic_or_partition),
        (TOPIC, 9, E.unknown_topic_or_partition),
    ]
    mixed = txn_offset_commit(version, [("nope", [(0, 1)]), (TOPIC, [(1, 1)])], producer_id=pid, group_id="")
    assert errors(await client.call(mixed)) == [
        ("nope", 0, E.unknown_topic_or_partition),
        (TOPIC, 1, E.invalid_group_id),
    ]
    good = txn_offset_commit(version, [("nope", [(0, 1)]), (TOPIC, [(1, 1)])], producer_id=pid, producer_epoch=epoch)
    assert errors(await client.call(good)) == [("nope", 0, E.unknown_topic_or_partition), (TOPIC, 1, E.none)]


async def test_unknown_group_with_a_generation(server: BrokerServer, connect: Connect) -> None:
    """Item 38, over the wire at v3 (the first version with group metadata)."""
    client = await connect()
    pid, epoch = begin(server)
    response = await client.call(
        txn_offset_commit(3, [(TOPIC, [(0, 1)])], producer_id=pid, producer_epoch=epoch, generation_id=3, member_id="m")
    )
    assert errors(response) == [(TOPIC, 0, E.illegal_generation)]
