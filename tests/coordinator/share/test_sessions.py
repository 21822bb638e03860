"""Share sessions on the manual clock (section 7 of the KIP-932 spec, checklist items 23-28): the epochs of
ShareFetch and ShareAcknowledge, opening, replacing and closing a session, the session cache's limit and the
connection that ends its session."""

from __future__ import annotations

from broker.coordinator.modern.share.partition import RecordState
from broker.coordinator.modern.share.sessions import ShareSession, next_epoch
from broker.timing.deferred import Deferred
from tests.coordinator.share.harness import ACCEPT, LOCK_MS, E, ShareHarness, acquired, offsets, share_config


def states(h: ShareHarness) -> dict[int, tuple[RecordState, str | None]]:
    return {o: (r.state, r.member_id) for o, r in h.spart().held()}


def test_initial_fetch_with_acknowledgements_is_invalid_request() -> None:
    """Item 23: SF(0) carrying acknowledgement batches -> INVALID_REQUEST, no session opened."""
    h = ShareHarness()
    h.produce(2)
    answer = h.fetch("m", acks={("t", 0): [(0, 0, (ACCEPT,))]}, epoch=0)
    assert answer.error is E.invalid_request
    assert answer.error_message == "Acknowledge data present on initial epoch of share session."
    assert answer.partitions == []
    assert h.share.sessions.get("share-group", "m") is None
    assert h.fetch("m", epoch=1).error is E.share_session_not_found


def test_epoch_errors() -> None:
    """Item 24: SF(1) without a session -> SHARE_SESSION_NOT_FOUND; SF(3) when 2 is expected ->
    INVALID_SHARE_SESSION_EPOCH; SA(0) -> INVALID_SHARE_SESSION_EPOCH. Errors are top-level, no partitions."""
    h = ShareHarness()
    h.produce(1)
    missing = h.fetch("m", epoch=1)
    assert (missing.error, missing.partitions) == (E.share_session_not_found, [])
    assert h.fetch("m", epoch=0).error is E.none
    assert h.fetch("m", epoch=1).error is E.none  # the session now expects 2
    wrong = h.fetch("m", epoch=3)
    assert (wrong.error, wrong.partitions) == (E.invalid_share_session_epoch, [])
    assert h.share.sessions.get("share-group", "m").epoch == 2  # type: ignore[union-attr]  # not moved
    initial_ack = h.acknowledge("m", {("t", 0): [(0, 0, (ACCEPT,))]}, epoch=0)
    assert initial_ack.error is E.invalid_share_session_epoch
    assert h.spart().records[0].state is RecordState.ACQUIRED  # nothing applied
    assert h.acknowledge("m", {("t", 0): [(0, 0, (ACCEPT,))]}, epoch=5).error is E.invalid_share_session_epoch
    assert h.acknowledge("ghost", {("t", 0): [(0, 0, (ACCEPT,))]}, epoch=1).error is E.share_session_not_found
    assert h.spart().records[0].state is RecordState.ACQUIRED
    # A top-level error is Kafka's ShareFetchRequest.getErrorResponse: AcquisitionLockTimeoutMs 0 (item 4 is about
    # answers without records; KafkaApis answers session errors through getErrorResponse).
    assert wrong.lock_duration_ms == missing.lock_duration_ms == initial_ack.lock_duration_ms == 0
    assert h.fetch("m", epoch=2).lock_duration_ms == LOCK_MS


def test_epochs_increment_on_fetch_and_acknowledge() -> None:
    """Item 25: each successful SF or SA moves the expected epoch by one; a failed one does not."""
    h = ShareHarness()

    def session_of() -> ShareSession:
        found = h.share.sessions.get("share-group", "m")
        assert found is not None
        return found

    assert h.fetch("m", epoch=0).error is E.none
    for expected in range(1, 6):
        assert session_of().epoch == expected
        if expected % 2:
            assert h.fetch("m", epoch=expected).error is E.none
        else:
            assert h.acknowledge("m", {}, epoch=expected).error is E.none
    assert h.fetch("m", epoch=99).error is E.invalid_share_session_epoch
    assert session_of().epoch == 6


def test_epoch_wraps_to_one() -> None:
    """Item 25 (ShareRequestMetadata.nextEpoch): from Integer.MAX_VALUE the next epoch is 1, never 0 or -1."""
    assert next_epoch(2**31 - 1) == 1
    h = ShareHarness()
    h.fetch("m", epoch=0)
    session = h.share.sessions.get("share-group", "m")
    assert session is not None
    session.epoch = 2**31 - 1
    assert h.fetch("m", epoch=2**31 - 1).error is E.none
    assert session.epoch == 1
    assert h.fetch("m", epoch=1).error is E.none


def test_a_new_initial_fetch_replaces_the_session_without_releasing() -> None:
    """Item 25: a new SF(0) replaces the session (epoch 1 again, the new request's partitions); what the old
    session acquired stays acquired by the member (Kafka's newContext only removes the session) until its lock."""
    h = ShareHarness(topics={"t": 2})
    h.produce(3)
    first = h.fetch("m", [("t", 0), ("t", 1)], epoch=0)
    assert offsets(first) == [0, 1, 2]
    old = h.share.sessions.get("share-group", "m")
    again = h.fetch("m", [("t", 1)], epoch=0)
    assert again.error is E.none
    new = h.share.sessions.get("share-group", "m")
    assert new is not None and new is not old and new.epoch == 1
    assert list(new.partitions) == [(h.tid("t"), 1)]
    assert [p.partition for p in again.partitions] == [1]  # a full answer lists the session's partitions
    assert states(h) == {o: (RecordState.ACQUIRED, "m") for o in (0, 1, 2)}
    h.advance(LOCK_MS)
    assert states(h) == {o: (RecordState.AVAILABLE, None) for o in (0, 1, 2)}


def test_final_fetch_without_a_session() -> None:
    """Item 26: SF(-1) and SA(-1) without a session -> SHARE_SESSION_NOT_FOUND."""
    h = ShareHarness()
    assert h.fetch("m", epoch=-1).error is E.share_session_not_found
    assert h.acknowledge("m", {}, epoch=-1).error is E.share_session_not_found


def test_final_fetch_applies_acknowledgements_then_releases_the_rest() -> None:
    """Item 26: SF(-1) with a session: its acknowledgements are applied, nothing is fetched, the session is gone,
    and the member's other acquired records are AVAILABLE at once."""
    h = ShareHarness()
    h.produce(4)
    assert offsets(h.fetch("m", epoch=0)) == [0, 1, 2, 3]
    h.produce(2)
    final = h.fetch("m", acks={("t", 0): [(0, 1, (ACCEPT,))]}, epoch=-1)
    assert final.error is E.none
    assert [(p.partition, p.acknowledge_error, p.acquired) for p in final.partitions] == [(0, E.none, [])]
    assert h.share.sessions.get("share-group", "m") is None
    assert h.spart().start_offset == 2
    assert states(h) == {2: (RecordState.AVAILABLE, None), 3: (RecordState.AVAILABLE, None)}
    assert h.share.partitions.locks == {}  # the released records' lock is gone with them
    assert h.fetch("m", epoch=1).error is E.share_session_not_found
    other = h.fetch("other", epoch=0)
    assert acquired(other) == [(2, 3, 2), (4, 5, 1)]


def test_final_acknowledge_applies_then_releases() -> None:
    """Item 26 for ShareAcknowledge(-1): the same, whatever the session's expected epoch."""
    h = ShareHarness()
    h.produce(3)
    h.fetch("m", epoch=0)
    final = h.acknowledge("m", {("t", 0): [(0, 0, (ACCEPT,))]}, epoch=-1)
    assert final.error is E.none and [(p.partition, p.error) for p in final.partitions] == [(0, E.none)]
    assert h.share.sessions.get("share-group", "m") is None
    assert h.spart().start_offset == 1
    assert states(h) == {1: (RecordState.AVAILABLE, None), 2: (RecordState.AVAILABLE, None)}


def test_session_cache_limit() -> None:
    """Item 27: with group.share.max.share.sessions 2, a third SF(0) -> SHARE_SESSION_LIMIT_REACHED (MaxWaitMs 0
    answers at once); once a client's connection closes, a new session can be created."""
    h = ShareHarness(config=share_config(share_max_share_sessions=2))
    assert h.fetch("a", epoch=0, connection=1).error is E.none
    assert h.fetch("b", epoch=0, connection=2).error is E.none
    full = h.fetch("c", epoch=0, connection=3)
    assert (full.error, full.partitions) == (E.share_session_limit_reached, [])
    assert h.share.sessions.get("share-group", "c") is None
    # A member re-opening its own session is not refused: its old session goes first.
    assert h.fetch("a", epoch=0, connection=1).error is E.none
    h.share.connection_closed(2)
    assert h.share.sessions.get("share-group", "b") is None
    assert h.fetch("c", epoch=0, connection=3).error is E.none


def test_session_limit_answer_waits_out_max_wait() -> None:
    """Item 27: Kafka parks a ShareFetch refused a session for its MaxWaitMs (SharePartitionManager
    createIdleShareFetchTimerTask) so that a client cannot spin on the broker; then SHARE_SESSION_LIMIT_REACHED."""
    h = ShareHarness(config=share_config(share_max_share_sessions=1))
    assert h.fetch("a", epoch=0, connection=1).error is E.none
    parked = h.fetch_deferred("c", epoch=0, max_wait_ms=500, connection=3)
    assert isinstance(parked, Deferred) and not parked.done
    h.advance(499)
    assert not parked.done
    h.advance(1)
    assert parked.done and parked.value.error is E.share_session_limit_reached
    assert h.share.sessions.get("share-group", "c") is None


def test_closed_connection_releases_at_once_with_count_plus_one() -> None:
    """Item 28: the session of a closed connection ends and its acquired records are AVAILABLE at once (before
    the lock); the next delivery has delivery count 2 (4.2 keeps the count on a session release)."""
    h = ShareHarness()
    h.produce(3)
    assert acquired(h.fetch("a", epoch=0, connection=7)) == [(0, 2, 1)]
    assert acquired(h.fetch("b", epoch=0, connection=8)) == []
    h.share.connection_closed(7)
    assert h.share.sessions.get("share-group", "a") is None
    assert states(h) == {o: (RecordState.AVAILABLE, None) for o in (0, 1, 2)}
    assert h.share.partitions.locks == {}
    assert acquired(h.fetch("b")) == [(0, 2, 2)]
    assert h.share.sessions.get("share-group", "b") is not None  # another connection's session is untouched


def test_closed_connection_wakes_a_parked_fetch_of_another_member() -> None:
    """Item 28 with long polling: the released records complete a ShareFetch parked on the partition."""
    h = ShareHarness()
    h.produce(2)
    h.fetch("a", epoch=0, connection=1)
    h.fetch("b", epoch=0, connection=2)
    parked = h.fetch_deferred("b", max_wait_ms=10_000, connection=2)
    assert isinstance(parked, Deferred) and not parked.done
    h.share.connection_closed(1)
    assert parked.done and acquired(parked.value) == [(0, 1, 2)]


def test_closing_a_connection_leaves_a_session_reopened_elsewhere() -> None:
    """Item 28 (ShareSessionCache's stale mapping): a member that re-opened its session on a new connection keeps
    it when the old connection closes."""
    h = ShareHarness()
    h.produce(1)
    h.fetch("m", epoch=0, connection=1)
    h.fetch("m", epoch=0, connection=2)
    h.share.connection_closed(1)
    session = h.share.sessions.get("share-group", "m")
    assert session is not None and session.connection == 2
    assert h.spart().records[0].state is RecordState.ACQUIRED  # nothing released by the old connection


def test_a_connection_ends_only_the_latest_session_it_created() -> None:
    """Item 28 (section 7: the cache maps a connection id to the session it created last, ShareSessionCache's
    connectionIdToSessionMap.put): two members' sessions opened on one connection, the connection closes -> the
    later session ends and its records come back; the earlier one stays, its records held until their lock."""
    h = ShareHarness(topics={"t": 2})
    h.produce(1, partition=0)
    h.produce(1, partition=1)
    assert offsets(h.fetch("m1", [("t", 0)], epoch=0, connection=1)) == [0]
    assert offsets(h.fetch("m2", [("t", 1)], epoch=0, connection=1)) == [0]
    h.share.connection_closed(1)
    assert h.share.sessions.get("share-group", "m2") is None
    assert h.spart(partition=1).records[0].state is RecordState.AVAILABLE
    assert h.share.sessions.get("share-group", "m1") is not None
    assert h.spart(partition=0).records[0].state is RecordState.ACQUIRED
    h.advance(LOCK_MS)
    assert h.spart(partition=0).records[0].state is RecordState.AVAILABLE
