"""Transactions spec section 9, "Admin" (items 84-88), at the read-only views over the transaction coordinator
(``broker/transactions/describe.py``, sections 6.1 and 6.2), on a manual clock."""

from __future__ import annotations

from broker.transactions.describe import describe, describe_one, list_matching
from broker.transactions.messages import OFFSETS_TOPIC, partition_for
from broker.transactions.state import DEAD
from tests.transactions.harness import T0, T1, T2, TID, TIMEOUT_MS, E, Harness


def listed(h: Harness, **filters: object) -> dict[str, str]:
    answer = list_matching(h.tc.transactions, h.clock.now_ms(), **filters)  # type: ignore[arg-type]
    assert answer.error is E.none
    return {listing.transactional_id: listing.state for listing in answer.listings}


def test_item_5_new_id_is_empty_with_no_start_and_no_topics() -> None:
    h = Harness()
    pid, epoch = h.ready()
    entry = describe_one(h.tc.transactions, TID)
    assert (entry.error, entry.state, entry.start_ms, entry.partitions) == (E.none, "Empty", -1, ())
    assert (entry.producer_id, entry.producer_epoch, entry.timeout_ms) == (pid, epoch, TIMEOUT_MS)


def test_item_84_unknown_and_empty_ids_in_request_order() -> None:
    h = Harness()
    h.ready()
    answers = describe(h.tc.transactions, ["nobody", TID, "", TID])
    assert [(a.transactional_id, a.error) for a in answers] == [
        ("nobody", E.transactional_id_not_found),
        (TID, E.none),
        ("", E.invalid_request),
        (TID, E.none),
    ]
    # An error entry keeps the defaults: state "", numbers 0, no topics.
    unknown = answers[0]
    assert (unknown.state, unknown.timeout_ms, unknown.start_ms, unknown.producer_id, unknown.producer_epoch) == (
        "",
        0,
        0,
        0,
        0,
    )
    assert unknown.partitions == ()


def test_item_84_dead_id_is_not_found() -> None:
    h = Harness()
    h.ready()
    h.meta().state = DEAD  # expiration in progress (section 3.2): never described, never listed
    assert describe_one(h.tc.transactions, TID).error is E.transactional_id_not_found
    assert listed(h) == {}


def test_item_85_ongoing_lists_every_partition_including_the_offsets_one() -> None:
    h = Harness()
    h.advance(5_000)
    pid, epoch = h.ongoing(T2, T0)
    assert h.add_offsets(pid, epoch, "g") is E.none
    h.advance(1_000)
    entry = describe_one(h.tc.transactions, TID)
    assert (entry.error, entry.state, entry.timeout_ms) == (E.none, "Ongoing", TIMEOUT_MS)
    assert entry.start_ms == h.clock.now_ms() - 1_000  # when the first partition was added (3.5)
    assert (entry.producer_id, entry.producer_epoch) == (pid, epoch)
    assert entry.partitions == ((OFFSETS_TOPIC, (partition_for("g", 50),)), ("t", (0, 2)))


def test_complete_keeps_the_last_start_and_no_partitions() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    started = h.meta().txn_start_ms
    h.advance(100)
    assert h.end(pid, epoch).error is E.none
    entry = describe_one(h.tc.transactions, TID)
    assert (entry.state, entry.start_ms, entry.partitions) == ("CompleteCommit", started, ())


def test_item_86_state_filters_with_an_unknown_name() -> None:
    h = Harness()
    h.ongoing(T0, tid="open")
    h.ready("idle")
    answer = list_matching(h.tc.transactions, h.clock.now_ms(), state_filters=["Ongoing", "Foo", "Foo"])
    assert answer.error is E.none
    assert answer.unknown_state_filters == ("Foo",)
    assert [(t.transactional_id, t.state) for t in answer.listings] == [("open", "Ongoing")]
    # No filter lists every state; only unknown names match nothing.
    assert listed(h) == {"open": "Ongoing", "idle": "Empty"}
    assert listed(h, state_filters=["Bar"]) == {}
    assert listed(h, state_filters=["Empty"]) == {"idle": "Empty"}


def test_item_87_producer_id_and_duration_filters() -> None:
    h = Harness()
    old_pid, _ = h.ongoing(T0, tid="old")
    h.advance(59_000)
    h.ongoing(T1, tid="young")
    h.ready("idle")
    h.advance(1_000)  # "old" started 60 s ago, "young" 1 s ago
    assert listed(h, producer_id_filters=[old_pid]) == {"old": "Ongoing"}
    assert listed(h, producer_id_filters=[12345]) == {}
    # Strictly longer than the filter: 60 000 ms is not more than 60 000 ms; Empty ids (start -1) always pass.
    assert listed(h, duration_filter_ms=60_000) == {"idle": "Empty"}
    assert listed(h, duration_filter_ms=59_999) == {"old": "Ongoing", "idle": "Empty"}
    assert listed(h, duration_filter_ms=-1) == {"old": "Ongoing", "young": "Ongoing", "idle": "Empty"}
    # Filters combine with AND.
    assert listed(h, duration_filter_ms=500, state_filters=["Ongoing"]) == {"old": "Ongoing", "young": "Ongoing"}


def test_item_88_pattern_full_match_and_invalid_pattern() -> None:
    h = Harness()
    for tid in ("app-1", "app-2", "my-app-3", "app"):
        h.ready(tid)
    assert set(listed(h, pattern="app-.*")) == {"app-1", "app-2"}  # whole id, as RE2/J matches()
    assert set(listed(h, pattern="")) == {"app-1", "app-2", "my-app-3", "app"}  # "" is no filter
    assert set(listed(h, pattern=None)) == {"app-1", "app-2", "my-app-3", "app"}
    bad = list_matching(h.tc.transactions, h.clock.now_ms(), pattern="(")
    assert (bad.error, bad.listings, bad.unknown_state_filters) == (E.invalid_regular_expression, (), ())


def test_describe_changes_nothing() -> None:
    h = Harness()
    h.ongoing(T0)
    before = (h.meta().state, h.meta().last_update_ms, set(h.meta().partitions))
    h.advance(10)
    describe(h.tc.transactions, [TID])
    listed(h)
    assert (h.meta().state, h.meta().last_update_ms, set(h.meta().partitions)) == before
