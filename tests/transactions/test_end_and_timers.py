"""Transactions spec section 9, "EndTxn" (items 56-64) and "Timers and expiry" (items 79-83), at the transaction
coordinator. The data-plane halves (control batches in logs, LSO, Produce answers) belong to the API layer and
storage; here the markers handed to the completion callback stand for them.
"""

from __future__ import annotations

from broker.transactions.config import TxnConfig
from broker.transactions.messages import Completion, error_for_version
from broker.transactions.state import COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING
from tests.transactions.harness import T0, T1, T2, TIMEOUT_MS, E, Harness


def marked(completion: Completion) -> list[tuple[str, int, int, int, bool]]:
    return [(m.topic, m.partition, m.producer_id, m.producer_epoch, m.committed) for m in completion.markers]


# -- EndTxn -------------------------------------------------------------------------------------------------------


def test_item_56_tv1_commit_writes_commit_markers_and_keeps_the_epoch() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0, T1)
    assert h.add_offsets(pid, epoch, "g") is E.none
    result = h.end(pid, epoch)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.none, -1, -1)  # v0-4 carry no pair
    [completion] = h.completions
    assert marked(completion) == [("t", 0, pid, epoch, True), ("t", 1, pid, epoch, True)]
    assert completion.groups == ("g",)  # the offsets partition completes through its group, not a marker
    meta = h.meta()
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.partitions) == (COMPLETE_COMMIT, pid, epoch, set())
    assert h.add(pid, epoch, T2).error is E.none  # the next transaction goes on with the same pair


def test_item_57_tv2_commit_bumps_the_epoch_and_answers_it() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.add(pid, epoch, T0, tv=2).error is E.none
    result = h.end(pid, epoch, tv=2)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.none, pid, epoch + 1)
    assert marked(h.completions[0]) == [("t", 0, pid, epoch + 1, True)]
    assert (h.meta().state, h.meta().producer_epoch, h.meta().last_producer_epoch) == (COMPLETE_COMMIT, epoch + 1, 0)


def test_item_58_tv1_end_txn_in_empty_is_invalid_txn_state() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.end(pid, epoch, commit=True).error is E.invalid_txn_state
    assert h.end(pid, epoch, commit=False).error is E.invalid_txn_state
    assert h.meta().state is EMPTY and h.completions == []


def test_item_59_tv1_commit_retry_is_idempotent_and_abort_after_commit_is_refused() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    assert h.end(pid, epoch).error is E.none
    assert h.end(pid, epoch).error is E.none
    assert len(h.completions) == 1  # no second marker
    assert h.end(pid, epoch, commit=False).error is E.invalid_txn_state


def test_item_60_tv2_commit_retry_with_the_old_epoch_answers_the_stored_pair() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    assert h.end(pid, epoch, tv=2).producer_epoch == epoch + 1
    retry = h.end(pid, epoch, tv=2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, pid, epoch + 1)
    assert h.end(pid, epoch, commit=False, tv=2).error is E.invalid_txn_state
    assert len(h.completions) == 1


def test_item_61_tv2_abort_in_empty_bumps_without_markers_and_commit_is_refused() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.end(pid, epoch, commit=True, tv=2).error is E.invalid_txn_state
    result = h.end(pid, epoch, commit=False, tv=2)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.none, pid, epoch + 1)
    assert h.completions[0].markers == () and h.meta().state is COMPLETE_ABORT
    # From CompleteAbort with the current epoch: another empty abort, another bump.
    assert h.end(pid, epoch + 1, commit=False, tv=2).producer_epoch == epoch + 2


def test_item_62_wrong_epoch_is_fenced_and_an_unknown_id_unmapped() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    fenced = h.end(pid, epoch + 1).error
    assert fenced is E.producer_fenced
    assert error_for_version("EndTxn", 2, fenced) is E.producer_fenced
    assert error_for_version("EndTxn", 1, fenced) is E.invalid_producer_epoch
    assert h.end(pid, epoch + 1, tv=2).error is E.producer_fenced
    assert h.end(pid, epoch, tid="nobody").error is E.invalid_producer_id_mapping
    assert h.end(pid + 1, epoch).error is E.invalid_producer_id_mapping
    assert h.end(pid, epoch, tid="").error is E.invalid_request
    assert h.meta().state is ONGOING


def test_item_63_tv2_commit_at_an_exhausted_epoch_rotates_the_pid() -> None:
    h = Harness()
    pid, _ = h.ready()
    h.meta().producer_epoch = 32766
    assert h.add(pid, 32766, T0, tv=2).error is E.none
    result = h.end(pid, 32766, tv=2)
    assert result.error is E.none and result.producer_id != pid and result.producer_epoch == 0
    assert marked(h.completions[0]) == [("t", 0, pid, 32767, True)]
    meta = h.meta()
    assert (meta.producer_id, meta.prev_producer_id, meta.last_producer_epoch) == (result.producer_id, pid, 32766)
    retry = h.end(pid, 32766, tv=2)  # the overflow retry: old pid, epoch 32766
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, result.producer_id, 0)


def test_item_63_with_a_completion_delay_the_answer_is_already_the_next_pair() -> None:
    h = Harness(TxnConfig(completion_delay_ms=100))
    pid, _ = h.ready()
    h.meta().producer_epoch = 32766
    h.add(pid, 32766, T0, tv=2)
    result = h.end(pid, 32766, tv=2)
    assert result.producer_id == h.meta().next_producer_id and result.producer_epoch == 0
    assert h.end(pid, 32766, tv=2).error is E.concurrent_transactions  # retry while still preparing
    h.advance(100)
    assert h.meta().producer_id == result.producer_id


def test_item_64_an_empty_transaction_needs_no_end_txn() -> None:
    """Clients skip EndTxn when nothing was added: the id stays Empty and the next transaction just starts."""
    h = Harness()
    pid, epoch = h.ready()
    h.advance(TIMEOUT_MS * 3)
    assert h.meta().state is EMPTY and h.completions == []
    assert h.add(pid, epoch, T0).error is E.none


def test_a_vanished_partition_gets_no_marker() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0, T2)
    h.topics["t"] = 1  # partitions 1 and 2 are gone
    h.end(pid, epoch)
    assert marked(h.completions[0]) == [("t", 0, pid, epoch, True)]


# -- Timers and expiry --------------------------------------------------------------------------------------------


def test_item_79_a_timed_out_transaction_is_aborted_within_one_scan_interval() -> None:
    h = Harness()
    interval = h.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
    pid, epoch = h.ongoing(T0, T1)
    h.advance(TIMEOUT_MS)
    assert h.meta().state is ONGOING  # not past the timeout yet
    h.advance(interval)
    [completion] = h.completions
    assert marked(completion) == [("t", 0, pid, epoch + 1, False), ("t", 1, pid, epoch + 1, False)]
    assert (h.meta().state, h.meta().producer_epoch) == (COMPLETE_ABORT, epoch + 1)


def test_item_80_after_a_timeout_abort_the_tv1_producer_is_fenced() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    h.advance(TIMEOUT_MS + h.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
    assert h.end(pid, epoch).error is E.producer_fenced
    assert error_for_version("EndTxn", 0, h.end(pid, epoch).error) is E.invalid_producer_epoch
    assert h.add(pid, epoch, T1).error is E.producer_fenced
    assert h.add_offsets(pid, epoch) is E.producer_fenced


def test_item_81_after_a_timeout_abort_tv2_commit_is_refused_and_abort_accepted() -> None:
    h = Harness()
    pid, epoch = h.ready()
    h.add(pid, epoch, T0, tv=2)
    h.advance(TIMEOUT_MS + h.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
    assert h.end(pid, epoch, commit=True, tv=2).error is E.invalid_txn_state
    result = h.end(pid, epoch, commit=False, tv=2)
    assert (result.error, result.producer_id, result.producer_epoch) == (E.none, pid, epoch + 1)
    assert len(h.completions) == 1


def test_item_82_an_idle_id_expires() -> None:
    expiration = 60_000
    h = Harness(
        TxnConfig(
            transactional_id_expiration_ms=expiration, transaction_remove_expired_transaction_cleanup_interval_ms=10_000
        )
    )
    pid, epoch = h.ongoing(T0)
    h.end(pid, epoch)
    h.advance(expiration + 10_000)
    assert h.tc.get("txn-1") is None
    assert h.add(pid, epoch, T0).error is E.invalid_producer_id_mapping
    assert h.end(pid, epoch).error is E.invalid_producer_id_mapping
    fresh = h.init(pid=pid, epoch=epoch)  # an expected pair is accepted against the recreated id (3.4 step 1)
    assert fresh.error is E.none and fresh.producer_id != pid and fresh.producer_epoch == 0


def test_item_83_an_ongoing_transaction_never_expires_by_id_expiration() -> None:
    h = Harness(
        TxnConfig(
            transactional_id_expiration_ms=1000,
            transaction_remove_expired_transaction_cleanup_interval_ms=1000,
            transaction_max_timeout_ms=3_600_000,
        )
    )
    result = h.init(timeout_ms=3_600_000)
    assert h.add(result.producer_id, result.producer_epoch, T0).error is E.none
    h.advance(600_000)  # 600 id-expiration scans, none of them touches an open transaction
    assert h.meta().state is ONGOING and h.meta().partitions == {T0}
