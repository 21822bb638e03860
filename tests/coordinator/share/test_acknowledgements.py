"""Acknowledgements on the manual clock (sections 6.5, 6.7, 8.4 and 9 of the KIP-932 spec, checklist items 42-50):
ACCEPT, REJECT, RELEASE and GAP, the SPSO following them, the owner and state checks, batch validation per
partition, and which partitions an answer carries."""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.modern.share.messages import PartitionAcks
from broker.coordinator.modern.share.partition import AckBatch, RecordState
from tests.coordinator.share.harness import (
    ACCEPT,
    GAP,
    GROUP,
    LOCK_MS,
    REJECT,
    RELEASE,
    Acks,
    E,
    ShareHarness,
    ack_error,
    acquired,
    offsets,
)


def start_offset(h: ShareHarness, topic: str = "t", partition: int = 0) -> int:
    """DescribeShareGroupOffsets' StartOffset (section 10.2), as the admin API reads it."""
    error, _, found = h.share.describe_offsets(GROUP, [(topic, [partition])], lambda _id, p: h.log().high_watermark)
    assert error is E.none
    ((_, _, (entry,)),) = found
    return entry.start_offset


def test_accept_finishes_and_the_spso_follows_contiguous_runs() -> None:
    """Item 42: ACCEPT -> ACKNOWLEDGED; the SPSO moves over the finished run at its start only, and
    DescribeShareGroupOffsets' StartOffset follows it."""
    h = ShareHarness()
    h.produce(5)
    h.fetch("m")
    assert start_offset(h) == 0
    answer = h.acknowledge("m", {("t", 0): [(1, 2, (ACCEPT,))]})
    assert answer.error is E.none and answer.partitions[0].error is E.none
    assert h.spart().records[1].state is RecordState.ACKNOWLEDGED
    assert start_offset(h) == 0  # offset 0 is still acquired
    h.acknowledge("m", {("t", 0): [(0, 0, (ACCEPT,))]})
    assert start_offset(h) == 3
    h.acknowledge("m", {("t", 0): [(3, 4, (ACCEPT,))]})
    assert start_offset(h) == 5 and h.spart().records == {} and h.spart().in_flight() == 0
    h.advance(LOCK_MS)
    assert acquired(h.fetch("m")) == []  # nothing comes back


def test_reject_archives_for_good() -> None:
    """Item 43: REJECT -> ARCHIVED, never redelivered, not after the lock duration either."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(0, 0, (REJECT,))]})
    assert h.spart().start_offset == 1
    h.advance(LOCK_MS)
    assert acquired(h.fetch("n")) == [(1, 1, 2)]
    h.advance(LOCK_MS)
    assert offsets(h.fetch("n")) == [1]


def test_reject_above_the_spso_stays_archived() -> None:
    """Item 43: a REJECTed record behind an unfinished one is ARCHIVED in flight and skipped by later fetches."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(1, 1, (REJECT,))]})
    assert h.spart().records[1].state is RecordState.ARCHIVED
    h.advance(LOCK_MS)
    assert offsets(h.fetch("n")) == [0, 2]


def test_release_is_available_at_once_and_comes_back_in_the_same_answer() -> None:
    """Item 44: RELEASE -> AVAILABLE at once (count kept); a ShareFetch carrying the RELEASE may receive the record
    again in its own answer, with count 2."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    released = h.acknowledge("m", {("t", 0): [(0, 0, (RELEASE,))]})
    assert released.partitions[0].error is E.none
    assert (h.spart().records[0].state, h.spart().records[0].delivery_count) == (RecordState.AVAILABLE, 1)
    assert acquired(h.fetch("n")) == [(0, 0, 2)]
    again = h.fetch("n", acks={("t", 0): [(0, 0, (RELEASE,))]})
    assert ack_error(again) is E.none and acquired(again) == [(0, 0, 3)]


def test_gap_archives_an_acquired_offset() -> None:
    """Item 45: GAP (type 0) on an acquired offset -> ARCHIVED (counted with the rejected ones)."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m")
    answer = h.acknowledge("m", {("t", 0): [(0, 2, (ACCEPT, GAP, ACCEPT))]})
    assert answer.partitions[0].error is E.none
    assert h.spart().start_offset == 3
    h2 = ShareHarness()
    h2.produce(3)
    h2.fetch("m")
    h2.acknowledge("m", {("t", 0): [(1, 1, (GAP,))]})
    assert h2.spart().records[1].state is RecordState.ARCHIVED
    h2.advance(LOCK_MS)
    assert offsets(h2.fetch("n")) == [0, 2]


def test_acknowledging_another_members_record_applies_nothing() -> None:
    """Item 46: an offset acquired by another member -> INVALID_RECORD_STATE, and none of that partition's batches
    is applied (also the valid batch before the failing one)."""
    h = ShareHarness()
    h.produce(2)
    h.produce(2)
    assert offsets(h.fetch("a", max_records=1)) == [0, 1]
    assert offsets(h.fetch("b", max_records=1)) == [2, 3]
    answer = h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,)), (2, 2, (ACCEPT,))]})
    assert answer.error is E.none
    assert answer.partitions[0].error is E.invalid_record_state
    assert answer.partitions[0].error_message == "Member is not the owner of offset"  # SharePartition's words
    assert [h.spart().records[o].state for o in range(4)] == [RecordState.ACQUIRED] * 4
    assert h.spart().start_offset == 0


@pytest.mark.parametrize("kind", [ACCEPT, RELEASE, REJECT])
def test_acknowledging_an_available_record_above_the_spso(kind: int) -> None:
    """Item 47: an AVAILABLE in-flight offset -> INVALID_RECORD_STATE."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(1, 1, (RELEASE,))]})
    answer = h.acknowledge("m", {("t", 0): [(1, 1, (kind,))]})
    assert answer.partitions[0].error is E.invalid_record_state
    assert answer.partitions[0].error_message == "The offset cannot be acknowledged. The offset is not acquired."
    assert h.spart().records[1].state is RecordState.AVAILABLE


def test_acknowledging_a_finished_record_above_the_spso() -> None:
    """Item 47: an ACKNOWLEDGED or ARCHIVED offset above the SPSO -> INVALID_RECORD_STATE."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(1, 1, (ACCEPT,)), (2, 2, (REJECT,))]})
    for batch in ((1, 1), (2, 2)):
        answer = h.acknowledge("m", {("t", 0): [(*batch, (ACCEPT,))]})
        assert answer.partitions[0].error is E.invalid_record_state, batch
    assert h.spart().start_offset == 0


def test_acknowledging_below_the_spso_is_ignored() -> None:
    """Item 47: offsets below the SPSO are finished already: ignored, NONE; a batch straddling the SPSO applies
    to its part at or above it."""
    h = ShareHarness()
    h.produce(4)
    h.fetch("m")
    h.acknowledge("m", {("t", 0): [(0, 1, (ACCEPT,))]})
    assert h.spart().start_offset == 2
    below = h.acknowledge("m", {("t", 0): [(0, 1, (REJECT,))]})
    assert below.partitions[0].error is E.none
    straddling = h.acknowledge("m", {("t", 0): [(1, 2, (ACCEPT,))]})
    assert straddling.partitions[0].error is E.none
    assert h.spart().start_offset == 3


def test_acknowledging_past_the_acquired_records_is_invalid_request() -> None:
    """Item 47 / 6.5: a batch running past the last offset ever acquired -> INVALID_REQUEST."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("m")
    h.produce(2)
    answer = h.acknowledge("m", {("t", 0): [(1, 2, (ACCEPT,))]})
    assert answer.partitions[0].error is E.invalid_request
    assert answer.partitions[0].error_message == (
        "Batch record not found. The last offset in request is past acquired records."
    )
    beyond = h.acknowledge("m", {("t", 0): [(2, 3, (ACCEPT,))]})
    assert beyond.partitions[0].error_message == (
        "Batch record not found. The first offset in request is past acquired records."
    )
    assert h.spart().records[1].state is RecordState.ACQUIRED


BAD_BATCHES: list[tuple[str, Acks]] = [
    ("first > last", [(2, 1, (ACCEPT,))]),
    ("overlapping", [(0, 2, (ACCEPT,)), (1, 1, (ACCEPT,))]),
    ("descending", [(2, 2, (ACCEPT,)), (0, 1, (ACCEPT,))]),
    ("touching the previous last", [(0, 1, (ACCEPT,)), (1, 1, (ACCEPT,))]),
    ("empty types", [(0, 1, ())]),
    ("wrong type count", [(0, 2, (ACCEPT, ACCEPT))]),
    ("type 4 in v1", [(0, 0, (4,))]),
    ("type 5", [(0, 0, (5,))]),
    ("negative type", [(0, 0, (-1,))]),
]


@pytest.mark.parametrize(("why", "batches"), BAD_BATCHES, ids=[why for why, _ in BAD_BATCHES])
def test_bad_batches_are_invalid_request_for_that_partition_only(why: str, batches: Acks) -> None:
    """Item 48: each malformed batch list -> INVALID_REQUEST for its partition; the other partition is processed.
    (The harness hands batches over in request order; the API layer sorts a partition's batches, see the wire
    tests for descending batches on the wire.)"""
    h = ShareHarness(topics={"t": 2})
    h.produce(3, partition=0)
    h.produce(3, partition=1)
    h.fetch("m", [("t", 0), ("t", 1)])
    answer = h.acknowledge("m", {("t", 0): batches, ("t", 1): [(0, 2, (ACCEPT,))]})
    assert answer.error is E.none
    errors = {p.partition: p.error for p in answer.partitions}
    assert errors == {0: E.invalid_request, 1: E.none}, why
    assert [h.spart(partition=0).records[o].state for o in range(3)] == [RecordState.ACQUIRED] * 3
    assert h.spart(partition=1).start_offset == 3


def test_share_acknowledge_two_partitions_one_invalid() -> None:
    """Item 49: per-partition ErrorCodes; the valid partition is applied, the invalid one not at all."""
    h = ShareHarness(topics={"t": 2})
    h.produce(2, partition=0)
    h.produce(2, partition=1)
    h.fetch("a", [("t", 0), ("t", 1)], max_records=2)
    h.produce(1, partition=1)
    answer = h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,))], ("t", 1): [(0, 2, (ACCEPT,))]})
    errors = {p.partition: p.error for p in answer.partitions}
    assert errors == {0: E.none, 1: E.invalid_request}
    assert h.spart(partition=0).start_offset == 2
    assert h.spart(partition=1).start_offset == 0


def test_piggy_backed_acknowledgements_always_answered() -> None:
    """Item 50: every partition that carried acknowledgements is in the ShareFetch answer with its
    AcknowledgeErrorCode, also NONE, also when nothing was fetched for it, also in an incremental answer."""
    h = ShareHarness(topics={"t": 2})
    h.produce(2, partition=0)
    h.produce(2, partition=1)
    h.fetch("m", [("t", 0), ("t", 1)])
    answer = h.fetch("m", acks={("t", 0): [(0, 1, (ACCEPT,))], ("t", 1): [(0, 0, (4,))]})
    shown = {p.partition: (p.acknowledge_error, p.acquired) for p in answer.partitions}
    assert shown == {0: (E.none, []), 1: (E.invalid_request, [])}
    quiet = h.fetch("m")
    assert quiet.partitions == []  # incremental and nothing to say: no partitions


def test_acknowledgement_of_a_partition_the_group_never_fetched() -> None:
    """Item 50 / SharePartitionManager.acknowledge: no share-partition for the group -> UNKNOWN_TOPIC_OR_PARTITION
    (nothing is created, nor initialised, by an acknowledgement); unknown topic id -> UNKNOWN_TOPIC_ID; an unknown
    partition of a known topic -> UNKNOWN_TOPIC_OR_PARTITION."""
    h = ShareHarness(topics={"t": 1, "u": 1}, reset=None)
    h.produce(3, topic="u")
    h.fetch("m")
    answer = h.fetch("m", acks={("u", 0): [(0, 0, (ACCEPT,))]}, max_records=0)  # MaxRecords 0: no acquisition
    assert ack_error(answer) is E.unknown_topic_or_partition
    assert h.share.partitions.get((GROUP, h.tid("u"), 0)) is None
    acked = h.acknowledge("m", {("u", 0): [(0, 0, (ACCEPT,))]})
    assert acked.partitions[0].error is E.unknown_topic_or_partition
    assert h.share.partitions.get((GROUP, h.tid("u"), 0)) is None
    h.produce(2, topic="u")
    h.fetch("m", [("u", 0)])  # the first fetch initialises at the high watermark then (latest)
    assert h.spart("u").start_offset == 5
    assert {p.partition: p.error for p in h.acknowledge("m", {("t", 3): [(0, 0, (ACCEPT,))]}).partitions} == {
        3: E.unknown_topic_or_partition
    }


def test_acknowledgement_checks_in_kafkas_order() -> None:
    """Items 48-50 (KafkaApis: the topic id is resolved, then validateAcknowledgementBatches, then the metadata
    check): an unknown topic id -> UNKNOWN_TOPIC_ID even with bad batches; an unknown partition of a known topic with
    bad batches -> INVALID_REQUEST, with good ones -> UNKNOWN_TOPIC_OR_PARTITION."""
    h = ShareHarness()
    bad, good = (AckBatch(2, 1, (ACCEPT,)),), (AckBatch(0, 0, (ACCEPT,)),)

    def answer(topic_id: uuid.UUID, partition: int, batches: tuple[AckBatch, ...]) -> E:
        error, _ = h.share.fetcher.acknowledge_partition(GROUP, "m", PartitionAcks(topic_id, partition, batches, True),
                                                         False)  # fmt: skip
        return error

    assert answer(uuid.UUID(int=0xDEAD), 0, bad) is E.unknown_topic_id
    assert answer(h.tid("t"), 3, bad) is E.invalid_request
    assert answer(h.tid("t"), 3, good) is E.unknown_topic_or_partition
