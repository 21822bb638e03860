"""The transaction coordinator's events (docs/events.md, "Transactions"), on a manual clock through a real hub.

Each opened transaction emits ``transaction_started`` (transactions spec section 3.5) and exactly one ending:
committed or aborted by the client's EndTxn (3.6, 3.7), timed out by the scan (3.9) or fenced by a newer
InitProducerId (3.4 step 2).
"""

from __future__ import annotations

from typing import Any

from broker.events import names
from broker.events.hub import EventHub, Record
from broker.transactions.config import TxnConfig
from broker.transactions.events import TXN_GROUP_ID, TxnEventLog, partitions_by_topic
from broker.transactions.messages import partition_for
from broker.transactions.state import COMPLETE_ABORT, COMPLETE_COMMIT
from tests.transactions.harness import T0, T1, T2, TID, TIMEOUT_MS, E, Harness

SCAN_MS = 10_000


def watched(config: TxnConfig | None = None) -> tuple[Harness, list[Record]]:
    """A harness whose coordinator emits into a real hub; the records it emitted, in order."""
    h = Harness(config or TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=SCAN_MS))
    hub = EventHub(h.clock)
    records: list[Record] = []
    hub.subscribe(records.append)
    h.tc.events = TxnEventLog(hub, h.clock)
    return h, records


def offsets_partition(h: Harness, group: str) -> int:
    return partition_for(group, h.config.offsets_topic_num_partitions)


def names_of(records: list[Record]) -> list[str]:
    return [r["event"] for r in records]


def own(record: Record) -> dict[str, Any]:
    """The event's own fields (without the common ones)."""
    return {k: v for k, v in record.items() if k not in names.COMMON}


def test_partitions_by_topic_sorts_topics_and_partitions() -> None:
    assert partitions_by_topic({("b", 2), ("a", 1), ("b", 0)}) == {"a": [1], "b": [0, 2]}
    assert partitions_by_topic(set()) == {}


def test_begin_then_commit_with_partitions_groups_and_duration() -> None:
    h, records = watched()
    pid, epoch = h.ready()
    assert records == []  # InitProducerId opens nothing
    h.advance(5)
    assert h.add(pid, epoch, T1, T0).error is E.none
    [started] = records
    assert started["event"] == names.TRANSACTION_STARTED
    assert started["group_id"] == TXN_GROUP_ID == ""
    assert own(started) == {
        "transactional_id": TID,
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_version": 1,
        "partitions": {"t": [0, 1]},
        "groups": [],
        "txn_timeout_ms": TIMEOUT_MS,
    }
    # Adding more to the open transaction is no new begin.
    assert h.add(pid, epoch, T2).error is E.none
    assert h.add_offsets(pid, epoch, "orders") is E.none
    assert h.add_offsets(pid, epoch, "audit") is E.none
    assert names_of(records) == [names.TRANSACTION_STARTED]
    h.advance(1_234)
    assert h.end(pid, epoch, commit=True).error is E.none
    committed = records[-1]
    assert committed["event"] == names.TRANSACTION_COMMITTED and committed["group_id"] == ""
    assert own(committed) == {
        "transactional_id": TID,
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_version": 1,
        "partitions": {"__consumer_offsets": sorted({offsets_partition(h, "audit"), offsets_partition(h, "orders")}),
                       "t": [0, 1, 2]},
        "groups": ["audit", "orders"],
        "duration_ms": 1_234,
    }
    assert h.meta().state is COMPLETE_COMMIT
    # An idempotent retry of the commit writes nothing and says nothing.
    assert h.end(pid, epoch, commit=True).error is E.none
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_COMMITTED]


def test_begin_by_add_offsets_carries_the_group() -> None:
    h, records = watched()
    pid, epoch = h.ready()
    assert h.add_offsets(pid, epoch, "orders") is E.none
    [started] = records
    assert started["groups"] == ["orders"]
    assert list(started["partitions"]) == ["__consumer_offsets"]


def test_client_abort_and_the_next_transaction_begins_again() -> None:
    h, records = watched()
    pid, epoch = h.ongoing(T0)
    h.advance(40)
    assert h.end(pid, epoch, commit=False).error is E.none
    assert h.meta().state is COMPLETE_ABORT
    aborted = records[-1]
    assert aborted["event"] == names.TRANSACTION_ABORTED
    assert (aborted["partitions"], aborted["duration_ms"], aborted["producer_epoch"]) == ({"t": [0]}, 40, epoch)
    assert h.add(pid, epoch, T1).error is E.none
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_ABORTED, names.TRANSACTION_STARTED]
    assert records[-1]["partitions"] == {"t": [1]}


def test_tv2_commit_reports_the_bumped_epoch_of_its_markers() -> None:
    h, records = watched()
    pid, epoch = h.ready()
    assert h.add(pid, epoch, T0, tv=2).error is E.none
    assert records[-1]["transaction_version"] == 2 and records[-1]["producer_epoch"] == epoch
    assert h.end(pid, epoch, tv=2).error is E.none
    assert records[-1]["event"] == names.TRANSACTION_COMMITTED
    assert records[-1]["producer_epoch"] == epoch + 1  # section 3.7: the epoch the markers carry


def test_tv2_abort_with_nothing_open_is_an_aborted_empty_transaction() -> None:
    h, records = watched()
    pid, epoch = h.ready()
    assert h.end(pid, epoch, commit=False, tv=2).error is E.none
    [aborted] = records
    assert aborted["event"] == names.TRANSACTION_ABORTED
    assert (aborted["partitions"], aborted["groups"], aborted["duration_ms"]) == ({}, [], 0)


def test_timeout_is_one_timed_out_event_with_the_fenced_epoch() -> None:
    h, records = watched()
    pid, epoch = h.ongoing(T0, T2)
    assert h.add_offsets(pid, epoch, "orders") is E.none
    h.advance(TIMEOUT_MS)  # not yet past it: the scan needs start + timeout < now (section 3.9)
    assert names_of(records) == [names.TRANSACTION_STARTED]
    h.advance(SCAN_MS)
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_TIMED_OUT]
    timed_out = records[-1]
    assert own(timed_out) | {"partitions": None} == {
        "transactional_id": TID,
        "producer_id": pid,
        "producer_epoch": epoch + 1,  # the abort markers' epoch: the producer is fenced
        "fenced_epoch": epoch,
        "transaction_version": 1,
        "partitions": None,
        "groups": ["orders"],
        "duration_ms": TIMEOUT_MS + SCAN_MS,
        "txn_timeout_ms": TIMEOUT_MS,
    }
    assert set(timed_out["partitions"]) == {"t", "__consumer_offsets"}
    assert timed_out["partitions"]["t"] == [0, 2]
    assert h.meta().state is COMPLETE_ABORT
    # The next scans find nothing more to say.
    h.advance(SCAN_MS * 3)
    assert len(records) == 2
    assert h.add(pid, epoch, T1).error is E.producer_fenced


def test_fence_by_a_newer_init_producer_id() -> None:
    h, records = watched()
    pid, epoch = h.ongoing(T1)
    h.advance(300)
    assert h.init().error is E.concurrent_transactions  # 3.4 step 2: fenced and aborted, the client retries
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_FENCED]
    fenced = records[-1]
    assert (fenced["producer_id"], fenced["fenced_epoch"], fenced["producer_epoch"]) == (pid, epoch, epoch + 1)
    assert (fenced["partitions"], fenced["duration_ms"], fenced["txn_timeout_ms"]) == ({"t": [1]}, 300, TIMEOUT_MS)
    # The retry gets a new epoch; nothing is open, so no event. The old producer's EndTxn is refused: no event.
    result = h.init()
    assert result.error is E.none and result.producer_epoch == epoch + 2
    assert h.end(pid, epoch).error is E.producer_fenced
    assert len(records) == 2


def test_an_init_producer_id_on_an_idle_id_emits_nothing() -> None:
    h, records = watched()
    h.ready()
    h.ready()  # bumps the epoch with no transaction open: nothing to fence-and-abort
    assert records == []


def test_completion_delay_emits_the_ending_when_the_markers_are_written() -> None:
    h, records = watched(TxnConfig(completion_delay_ms=100))
    pid, epoch = h.ongoing(T0)
    assert h.end(pid, epoch).error is E.none
    assert names_of(records) == [names.TRANSACTION_STARTED]  # still PrepareCommit
    h.advance(100)
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_COMMITTED]
    assert records[-1]["duration_ms"] == 100


def test_timed_out_with_completion_delay_is_announced_once() -> None:
    h, records = watched(
        TxnConfig(completion_delay_ms=50, transaction_abort_timed_out_transaction_cleanup_interval_ms=SCAN_MS)
    )
    h.ongoing(T0)
    h.advance(TIMEOUT_MS + SCAN_MS)
    h.advance(SCAN_MS)
    assert names_of(records) == [names.TRANSACTION_STARTED, names.TRANSACTION_TIMED_OUT]
    assert h.meta().state is COMPLETE_ABORT


def test_every_event_is_a_named_event_of_the_format() -> None:
    assert names.TRANSACTION_EVENTS <= names.EVENTS
    assert set(names.TRANSACTION_ENDINGS.values()) == {"committed", "aborted", "timed_out", "fenced"}
