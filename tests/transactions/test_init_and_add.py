"""Transactions spec section 9, "Init and fencing" (items 2-12) and "AddPartitionsToTxn / AddOffsetsToTxn"
(items 13-20), at the transaction coordinator. Item 1 (FindCoordinator) is wire-level; the ACL halves of items
14 and 16 belong to the API layer, whose old-version rewrite (``error_for_version``) is checked here too.
"""

from __future__ import annotations

import pytest

from broker.transactions.config import TxnConfig
from broker.transactions.messages import (
    OFFSETS_TOPIC,
    AddPartitionsRequest,
    TxnOffsetCheckRequest,
    error_for_version,
    java_string_hash,
    partition_for,
)
from broker.transactions.state import (
    COMPLETE_ABORT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    IllegalStateTransition,
    TxnMetadata,
)
from tests.transactions.harness import T0, T1, T2, TID, TIMEOUT_MS, E, Harness

# -- Init and fencing ---------------------------------------------------------------------------------------------


def test_item_02_empty_transactional_id_is_invalid_request() -> None:
    h = Harness()
    result = h.init("")
    assert (result.error, result.producer_id, result.producer_epoch) == (E.invalid_request, -1, -1)
    assert h.tc.get("") is None


def test_item_03_transaction_timeout_bounds() -> None:
    h = Harness()
    assert h.init(timeout_ms=0).error is E.invalid_transaction_timeout
    assert h.init(timeout_ms=900_001).error is E.invalid_transaction_timeout
    assert h.tc.get(TID) is None  # a refused timeout creates nothing
    assert h.init(timeout_ms=900_000).error is E.none


def test_item_04_producer_id_without_epoch_is_invalid_request() -> None:
    h = Harness()
    assert h.init(pid=5, epoch=-1).error is E.invalid_request
    assert h.init(pid=-1, epoch=3).error is E.invalid_request


def test_item_05_new_id_starts_empty_at_epoch_0() -> None:
    h = Harness()
    result = h.init()
    assert result.error is E.none and result.producer_epoch == 0 and result.producer_id >= 0
    meta = h.meta()
    assert (meta.state, meta.txn_start_ms, meta.partitions) == (EMPTY, -1, set())


def test_item_06_same_id_again_bumps_the_epoch() -> None:
    h = Harness()
    first = h.init()
    second = h.init()
    assert (second.error, second.producer_id, second.producer_epoch) == (E.none, first.producer_id, 1)


def test_item_07_kip360_recovery_bumps_and_a_lost_answer_retry_does_not() -> None:
    h = Harness()
    pid, epoch = h.ready()
    bumped = h.init(pid=pid, epoch=epoch)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (E.none, pid, epoch + 1)
    again = h.init(pid=pid, epoch=epoch)  # the previous epoch: the retry of a call whose answer was lost
    assert (again.error, again.producer_id, again.producer_epoch) == (E.none, pid, epoch + 1)


def test_item_08_expected_epoch_neither_current_nor_previous_is_fenced() -> None:
    h = Harness()
    pid, _ = h.ready()
    h.init(pid=pid, epoch=0)  # epoch 1, last 0
    h.init(pid=pid, epoch=1)  # epoch 2, last 1
    result = h.init(pid=pid, epoch=0)
    assert result.error is E.producer_fenced and (result.producer_id, result.producer_epoch) == (-1, -1)
    assert error_for_version("InitProducerId", 4, result.error) is E.producer_fenced
    assert error_for_version("InitProducerId", 3, result.error) is E.invalid_producer_epoch


def test_item_09_unknown_expected_pid_is_fenced() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.init(pid=pid + 1000, epoch=epoch).error is E.producer_fenced
    assert h.meta().producer_epoch == epoch  # untouched


def test_item_10_init_while_ongoing_aborts_at_epoch_plus_1_and_the_retry_gets_plus_2() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0, T2)
    assert h.init().error is E.concurrent_transactions
    [completion] = h.completions
    assert not completion.committed and completion.producer_epoch == epoch + 1
    assert [(m.topic, m.partition, m.producer_id, m.producer_epoch, m.committed) for m in completion.markers] == [
        ("t", 0, pid, epoch + 1, False),
        ("t", 2, pid, epoch + 1, False),
    ]
    assert h.meta().state is COMPLETE_ABORT
    retry = h.init()
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, pid, epoch + 2)


def test_item_11_exhausted_epoch_rotates_to_a_new_pid() -> None:
    h = Harness()
    pid, _ = h.ready()
    h.meta().producer_epoch = 32766
    result = h.init()
    assert result.error is E.none and result.producer_id != pid and result.producer_epoch == 0
    meta = h.meta()
    assert (meta.prev_producer_id, meta.last_producer_epoch) == (pid, -1)


def test_item_11_rotation_retry_with_the_old_pid_keeps_the_new_one() -> None:
    h = Harness()
    pid, _ = h.ready()
    h.meta().producer_epoch = 32766
    rotated = h.init(pid=pid, epoch=32766)
    assert rotated.producer_id != pid and rotated.producer_epoch == 0
    retry = h.init(pid=pid, epoch=32766)  # answer lost: the old pair is recognised as the one before rotation
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, rotated.producer_id, 0)


def test_item_12_null_transactional_id_gets_a_fresh_pid_and_nothing_is_stored() -> None:
    h = Harness()
    first, second = h.init(None), h.init(None)
    assert first.error is E.none and first.producer_epoch == 0
    assert second.producer_id != first.producer_id
    assert h.tc.transactions == {}


# -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------------------------


def test_item_13_unknown_transactional_id_is_unknown_producer_id_mapping_everywhere() -> None:
    h = Harness()
    result = h.add(0, 0, T0, T1)
    assert result.error is E.invalid_producer_id_mapping
    assert result.partitions == ((T0, E.invalid_producer_id_mapping), (T1, E.invalid_producer_id_mapping))
    assert h.add_offsets(0, 0) is E.invalid_producer_id_mapping


def test_item_14_wrong_pid_then_wrong_epoch() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.add(pid + 1, epoch, T0).error is E.invalid_producer_id_mapping
    fenced = h.add(pid, epoch + 1, T0).error
    assert fenced is E.producer_fenced
    assert error_for_version("AddPartitionsToTxn", 2, fenced) is E.producer_fenced
    assert error_for_version("AddPartitionsToTxn", 1, fenced) is E.invalid_producer_epoch
    assert error_for_version("AddOffsetsToTxn", 0, h.add_offsets(pid, epoch + 1)) is E.invalid_producer_epoch
    assert h.meta().state is EMPTY


def test_item_15_one_unknown_partition_rejects_the_whole_request() -> None:
    h = Harness()
    pid, epoch = h.ready()
    result = h.add(pid, epoch, T0, ("t", 7), ("missing", 0))
    assert result.partitions == (
        (T0, E.operation_not_attempted),
        (("t", 7), E.unknown_topic_or_partition),
        (("missing", 0), E.unknown_topic_or_partition),
    )
    assert h.meta().state is EMPTY and h.meta().partitions == set()


def test_item_16_consumer_offsets_is_not_write_authorized() -> None:
    h = Harness()
    pid, epoch = h.ready()
    result = h.add(pid, epoch, (OFFSETS_TOPIC, 3), T1)
    assert result.partitions == (((OFFSETS_TOPIC, 3), E.topic_authorization_failed), (T1, E.operation_not_attempted))
    assert h.meta().state is EMPTY


def test_item_17_valid_add_opens_the_transaction_and_later_adds_keep_its_start() -> None:
    h = Harness()
    pid, epoch = h.ready()
    h.advance(1000)
    start = h.clock.now_ms()
    assert h.add(pid, epoch, T0, T1).partitions == ((T0, E.none), (T1, E.none))
    assert (h.meta().state, h.meta().txn_start_ms) == (ONGOING, start)
    h.advance(5000)
    assert h.add(pid, epoch, T0, T1).error is E.none
    assert h.add(pid, epoch, T2).error is E.none
    assert h.meta().txn_start_ms == start and h.meta().partitions == {T0, T1, T2}


def test_item_18_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.add_offsets(pid, epoch, "g") is E.none
    assert java_string_hash("g") == 103 and partition_for("g", 50) == 3
    assert h.meta().partitions == {(OFFSETS_TOPIC, 3)} and h.meta().state is ONGOING
    # Java's String.hashCode, negative and overflowing values included.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648 and partition_for("polygenelubricants", 50) == 0


def test_item_19_add_offsets_for_an_unknown_group_is_accepted() -> None:
    h = Harness()
    pid, epoch = h.ready()
    assert h.add_offsets(pid, epoch, "never-seen") is E.none
    assert h.add_offsets(pid, epoch, "") is E.none
    assert h.end(pid, epoch).error is E.none
    [completion] = h.completions
    assert completion.groups == ("", "never-seen") and completion.markers == ()


def test_item_20_add_during_prepare_commit_is_concurrent_transactions() -> None:
    h = Harness(TxnConfig(completion_delay_ms=500))
    pid, epoch = h.ongoing(T0)
    assert h.end(pid, epoch).error is E.none
    assert h.meta().state is PREPARE_COMMIT and h.completions == []
    assert h.add(pid, epoch, T1).error is E.concurrent_transactions
    assert h.add_offsets(pid, epoch) is E.concurrent_transactions
    assert h.init().error is E.concurrent_transactions
    assert h.end(pid, epoch).error is E.concurrent_transactions  # TV1 retry of the same result
    assert h.end(pid, epoch, commit=False).error is E.invalid_txn_state
    h.advance(500)
    assert len(h.completions) == 1 and h.add(pid, epoch, T1).error is E.none


# -- TxnOffsetCommit's TC side and VerifyOnly (sections 2.5 step 6, 5.1 step 4) ---------------------------------------


def check(h: Harness, pid: int, epoch: int, version: int, group: str = "g") -> E:
    return h.tc.check_txn_offset_commit(TxnOffsetCheckRequest(TID, pid, epoch, group, version))


def test_txn_offset_commit_verifies_before_v5_and_adds_at_v5() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    assert check(h, pid, epoch, 3) is E.invalid_txn_state
    assert check(h, pid, epoch, 4) is E.transaction_abortable
    assert check(h, pid, epoch + 1, 4) is E.invalid_producer_epoch  # PRODUCER_FENCED answered as 47
    assert check(h, pid, epoch, 5) is E.none and (OFFSETS_TOPIC, 3) in h.meta().partitions
    assert check(h, pid, epoch, 4) is E.none
    assert h.end(pid, epoch).error is E.none and h.completions[0].groups == ("g",)


def test_verify_only_answers_per_partition() -> None:
    h = Harness()
    pid, epoch = h.ongoing(T0)
    result = h.tc.verify_partitions(AddPartitionsRequest(TID, pid, epoch, (T0, T1)))
    assert result.partitions == ((T0, E.none), (T1, E.transaction_abortable))
    assert h.tc.verify_partitions(AddPartitionsRequest(TID, pid, epoch + 1, (T0,))).error is E.producer_fenced
    assert h.meta().partitions == {T0}  # verifying adds nothing


def test_the_state_table_refuses_illegal_transitions() -> None:
    meta = TxnMetadata(TID, 1, TIMEOUT_MS, 0)
    with pytest.raises(IllegalStateTransition):
        meta.transition_to(PREPARE_COMMIT, 0)  # only from Ongoing
    with pytest.raises(IllegalStateTransition):
        meta.transition_to(COMPLETE_ABORT, 0)
    with pytest.raises(IllegalStateTransition):
        meta.transition_to(PREPARE_ABORT, 0)  # an abort with nothing open is TV2 only
    meta.transaction_version = 2
    meta.transition_to(PREPARE_ABORT, 5)
    assert meta.last_update_ms == 5
