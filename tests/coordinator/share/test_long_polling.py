"""Incremental share sessions and long polling on the manual clock (sections 7 and 8.3 of the KIP-932 spec, around
checklist items 25, 34, 44 and 50): which partitions an incremental answer lists, ForgottenTopicsData, and a parked
ShareFetch answered by new data, a release, its MaxWaitMs or its connection's end."""

from __future__ import annotations

from broker.coordinator.modern.share.messages import ShareAnswer
from broker.coordinator.modern.share.partition import RecordState
from broker.timing.deferred import Deferred
from tests.coordinator.share.harness import ACCEPT, LOCK_MS, RELEASE, E, ShareHarness, acquired, offsets


def parked(answer: ShareAnswer | Deferred[ShareAnswer]) -> Deferred[ShareAnswer]:
    assert isinstance(answer, Deferred) and not answer.done, answer
    return answer


def test_incremental_answer_lists_added_partitions_once() -> None:
    """Item 25 / 8.3: a partition added by an incremental request is listed once even when empty, then only when it
    has something to say."""
    h = ShareHarness(topics={"t": 3})
    full = h.fetch("m", [("t", 0)])
    assert [p.partition for p in full.partitions] == [0]  # a full answer lists the session's partitions
    added = h.fetch("m", [("t", 1), ("t", 2)])
    assert sorted(p.partition for p in added.partitions) == [1, 2]
    assert all(p.acquired == [] and p.error is E.none for p in added.partitions)
    assert h.fetch("m").partitions == []
    h.produce(1, partition=2)
    answer = h.fetch("m")
    assert [(p.partition, p.acquired) for p in answer.partitions] == [(2, [(0, 0, 1)])]


def test_forgotten_partitions_leave_the_session_and_keep_their_locks() -> None:
    """No checklist item (next to item 25), section 7: ForgottenTopicsData removes partitions from the session: nothing
    more is acquired there; what the member holds of them stays locked (forgetting is not a release)."""
    h = ShareHarness(topics={"t": 2})
    h.produce(1, partition=0)
    h.produce(1, partition=1)
    assert sorted(offsets(h.fetch("m", [("t", 0), ("t", 1)]))) == [0, 0]
    h.fetch("m", forgotten=[("t", 1)])
    session = h.share.sessions.get("share-group", "m")
    assert session is not None and list(session.partitions) == [(h.tid("t"), 0)]
    h.produce(1, partition=1)
    assert acquired(h.fetch("m"), 1) == []
    assert h.spart(partition=1).records[0].state is RecordState.ACQUIRED
    h.fetch("m", epoch=-1)  # closing the session releases only the session's partitions
    assert h.spart(partition=1).records[0].state is RecordState.ACQUIRED
    h.advance(LOCK_MS)
    assert h.spart(partition=1).records[0].state is RecordState.AVAILABLE


def test_parked_fetch_answers_empty_at_max_wait() -> None:
    """No checklist item, section 8.3: nothing acquirable -> the fetch waits MaxWaitMs, then answers NONE with nothing
    acquired."""
    h = ShareHarness()
    h.fetch("m")
    waiting = parked(h.fetch_deferred("m", max_wait_ms=700))
    h.advance(699)
    assert not waiting.done
    h.advance(1)
    assert waiting.done and waiting.value.error is E.none and acquired(waiting.value) == []


def test_parked_fetch_woken_by_new_data() -> None:
    """No checklist item, section 8.3: records produced to a parked fetch's partition complete it at once with them."""
    h = ShareHarness(topics={"t": 2})
    h.fetch("m", [("t", 0), ("t", 1)])
    waiting = parked(h.fetch_deferred("m", max_wait_ms=10_000))
    h.produce(2, partition=1)
    assert waiting.done and acquired(waiting.value, 1) == [(0, 1, 1)]
    assert h.share.fetcher.parked == {}
    # Its MaxWaitMs deadline was cancelled with it: only the records' lock is left of the share deadlines.
    deadlines = h.purgatory.keys()
    shared = {key[0] for key in deadlines if isinstance(key, tuple) and str(key[0]).startswith("share")}
    assert shared == {"share-lock"}


def test_parked_fetch_woken_by_another_members_release() -> None:
    """8.3 and item 44: a RELEASE by another member completes a parked fetch with the record, count 2."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("a")
    h.fetch("b")
    waiting = parked(h.fetch_deferred("b", max_wait_ms=10_000))
    h.acknowledge("a", {("t", 0): [(0, 0, (RELEASE,))]})
    assert waiting.done and acquired(waiting.value) == [(0, 0, 2)]


def test_parked_fetch_not_woken_by_an_accept() -> None:
    """No checklist item, section 8.3: an acknowledgement that makes nothing acquirable leaves the fetch parked."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("a")
    h.fetch("b")
    waiting = parked(h.fetch_deferred("b", max_wait_ms=10_000))
    h.acknowledge("a", {("t", 0): [(0, 1, (ACCEPT,))]})
    assert not waiting.done
    h.advance(10_000)
    assert waiting.done and acquired(waiting.value) == []


def test_parked_fetch_of_a_closed_connection_acquires_nothing() -> None:
    """8.3 and item 28: the connection of a parked fetch closes -> it is answered empty and acquires nothing later."""
    h = ShareHarness()
    h.fetch("m", connection=5)
    waiting = parked(h.fetch_deferred("m", max_wait_ms=10_000, connection=5))
    h.share.connection_closed(5)
    assert waiting.done and acquired(waiting.value) == []
    h.produce(2)
    assert h.spart().records == {}  # nobody acquired the new records


def test_parked_fetch_carries_its_acknowledgement_results() -> None:
    """Item 50 with long polling: the acknowledgement results of a fetch that then parks are in its late answer."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("m")
    waiting = parked(h.fetch_deferred("m", acks={("t", 0): [(0, 0, (ACCEPT,))]}, max_wait_ms=1_000))
    h.advance(1_000)
    assert [(p.partition, p.acknowledge_error) for p in waiting.value.partitions] == [(0, E.none)]


def batch_bytes(count: int) -> int:
    """The stored size of one ``count``-record producer batch (what MinBytes counts)."""
    probe = ShareHarness(topics={"p": 1})
    probe.produce(count, topic="p")
    return probe.log("p").size_bytes


def test_min_bytes_waits_for_enough_data() -> None:
    """No checklist item, section 8.3 (DelayedShareFetch.isMinBytesSatisfied): with MinBytes above what is acquirable
    the fetch acquires nothing and waits; data reaching MinBytes completes it with everything acquirable."""
    h = ShareHarness()
    one = batch_bytes(1)
    h.produce(1)
    waiting = parked(h.fetch_deferred("m", max_wait_ms=10_000, min_bytes=2 * one + 1))
    assert h.spart().records == {}  # nothing acquired while it waits
    h.produce(1)
    assert not waiting.done
    h.produce(1)
    assert waiting.done and acquired(waiting.value) == [(0, 2, 1)]


def test_min_bytes_not_reached_acquires_at_max_wait() -> None:
    """No checklist item, section 8.3 (DelayedShareFetch.onComplete): at MaxWaitMs whatever is acquirable is acquired,
    MinBytes or not."""
    h = ShareHarness()
    h.produce(2)
    waiting = parked(h.fetch_deferred("m", max_wait_ms=500, min_bytes=1 << 20))
    h.advance(499)
    assert not waiting.done and h.spart().records == {}
    h.advance(1)
    assert waiting.done and acquired(waiting.value) == [(0, 1, 1)]


def test_min_bytes_met_answers_at_once() -> None:
    """No checklist item, section 8.3: MinBytes at or below the acquirable bytes -> no wait; MinBytes without MaxWaitMs
    -> no wait either."""
    h = ShareHarness()
    h.produce(3)
    exact = h.fetch("a", max_wait_ms=5_000, min_bytes=h.log().size_bytes)
    assert acquired(exact) == [(0, 2, 1)]
    h.produce(1)
    assert acquired(h.fetch("b", max_wait_ms=0, min_bytes=1 << 20)) == [(3, 3, 1)]


def test_min_bytes_counts_from_the_first_available_record() -> None:
    """No checklist item, section 8.3: the estimate runs from the next fetch offset (a released record far back counts
    the bytes after it, as Kafka's estimate assumes everything fetched is acquirable)."""
    h = ShareHarness()
    h.produce(1)
    h.produce(1)
    h.fetch("a")
    h.acknowledge("a", {("t", 0): [(0, 0, (RELEASE,))]})
    answer = h.fetch("b", max_wait_ms=5_000, min_bytes=h.log().size_bytes)
    assert acquired(answer) == [(0, 0, 2)]


def test_a_failed_acknowledgement_does_not_cut_the_wait_short() -> None:
    """No checklist item (next to item 50), section 8.3 (KafkaApis combines the acknowledgement result with the fetch
    result, the DelayedShareFetch waiting on its own): a ShareFetch whose piggy-backed acknowledgement failed still
    waits for records, then carries the error."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("m")
    waiting = parked(h.fetch_deferred("m", acks={("t", 0): [(0, 0, (9,))]}, max_wait_ms=1_000))
    h.produce(1)
    assert waiting.done
    ((entry),) = waiting.value.partitions
    assert (entry.acknowledge_error, entry.acquired) == (E.invalid_request, [(1, 1, 1)])
