"""Transactions spec section 9, "Produce" (items 21-32): the transaction coordinator's side of the TV2 items.

Produce v12 (the implicit add) and EndTxn v5 are not offered on the wire (spec 2.3 choice B, TV1 only); the
coordinator still implements the TV2 add and ``_end_txn_v2``, so what it would answer is checked here. The wire
halves of the TV1 items are in ``tests/wire/test_txn_checklist_wire.py`` and ``tests/wire/test_transactions_api.py``.
"""

from __future__ import annotations

from broker.transactions.state import COMPLETE_COMMIT, ONGOING
from tests.transactions.harness import T0, T1, E, Harness


def test_item_24_tv2_implicit_add_opens_the_transaction() -> None:
    """Item 24 (coordinator side; Produce v12 is not offered): the TV2 add of a partition not in the transaction
    -> NONE, the partition joins, the state is Ongoing with the start time now, and the transaction is TV2."""
    h = Harness()
    pid, epoch = h.ready()
    h.advance(250)
    assert h.add(pid, epoch, T0, tv=2).partitions == ((T0, E.none),)
    meta = h.meta()
    assert (meta.state, meta.partitions, meta.txn_start_ms, meta.transaction_version) == (
        ONGOING,
        {T0},
        h.clock.now_ms(),
        2,
    )
    h.advance(250)
    assert h.add(pid, epoch, T1, tv=2).error is E.none  # a second partition: added, start time kept
    assert meta.partitions == {T0, T1} and meta.txn_start_ms == h.clock.now_ms() - 250


def test_items_30_31_tv2_next_transaction_uses_the_bumped_epoch() -> None:
    """Items 30 (TV2 half) and 31, coordinator side: after a TV2 commit the next transaction's add is accepted with
    epoch+1, and anything still carrying the pre-commit epoch is fenced (Produce answers it as
    INVALID_PRODUCER_EPOCH; the log's half is ``tests/storage/test_transactions_log.py``)."""
    h = Harness()
    pid, epoch = h.ready()
    assert h.add(pid, epoch, T0, tv=2).error is E.none
    ended = h.end(pid, epoch, tv=2)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, pid, epoch + 1)
    assert h.meta().state is COMPLETE_COMMIT
    assert h.add(pid, epoch, T0, tv=2).error is E.producer_fenced  # the late, pre-commit epoch
    assert h.add(pid, epoch + 1, T0, tv=2).error is E.none
    assert (h.meta().state, h.meta().producer_epoch) == (ONGOING, epoch + 1)
