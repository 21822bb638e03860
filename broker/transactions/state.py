"""The states of a transactional id and its per-id state (Kafka's ``TransactionState`` and ``TransactionMetadata``).

Transactions spec section 3.1 (the fields) and 3.2 (states and their valid previous states). Transitions are
applied directly (no ``__transaction_state`` log), so ``pendingState`` is never observable (section 3.1).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Short.MAX_VALUE: the epoch after which a producer id cannot be bumped again.
MAX_EPOCH = 32767
NO_PRODUCER_ID = -1
NO_EPOCH = -1


def epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: one bump short of Short.MAX_VALUE (section 3.4 step 3)."""
    return epoch >= MAX_EPOCH - 1


class TxnState(enum.Enum):
    """The value is the state's wire name (DescribeTransactions, ListTransactions)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    #: Only ever a pending state in Kafka (section 3.2); here it is passed through inside one call.
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def expiration_allowed(self) -> bool:
        """Section 3.2 "expiration allowed": only ids with no transaction in flight may expire."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


EMPTY = TxnState.EMPTY
ONGOING = TxnState.ONGOING
PREPARE_COMMIT = TxnState.PREPARE_COMMIT
PREPARE_ABORT = TxnState.PREPARE_ABORT
COMPLETE_COMMIT = TxnState.COMPLETE_COMMIT
COMPLETE_ABORT = TxnState.COMPLETE_ABORT
DEAD = TxnState.DEAD
PREPARE_EPOCH_FENCE = TxnState.PREPARE_EPOCH_FENCE

_IDLE = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})

#: ``TransactionState.validPreviousStates`` (section 3.2). PrepareAbort from Empty/Complete* is TV2 only
#: (an EndTxn abort with nothing open); ``TxnMetadata.transition_to`` checks that rule too.
VALID_PREVIOUS_STATES: Mapping[TxnState, frozenset[TxnState]] = {
    EMPTY: _IDLE,
    ONGOING: _IDLE | {ONGOING},
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}) | _IDLE,
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    DEAD: _IDLE,
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table forbids: a coordinator bug (Kafka's IllegalStateException)."""


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id's state (section 3.1)."""

    transactional_id: str
    producer_id: int
    txn_timeout_ms: int
    last_update_ms: int
    prev_producer_id: int = NO_PRODUCER_ID  # the pid before the last rotation
    next_producer_id: int = NO_PRODUCER_ID  # TV2 overflow: the pid the Complete* state switches to
    producer_epoch: int = NO_EPOCH  # -1 right after creation
    last_producer_epoch: int = NO_EPOCH  # the previous epoch, to recognise retries
    state: TxnState = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)  # the groups whose offsets are in the txn (their partition too)
    txn_start_ms: int = -1
    transaction_version: int = 1  # the TV of the transaction in progress (clientTransactionVersion)

    def transition_to(self, state: TxnState, now_ms: int) -> None:
        """Move to ``state``, checked against the table; every transition refreshes the last update time (3.9)."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(f"{self.transactional_id}: {self.state.value} -> {state.value}")
        if state is PREPARE_ABORT and self.state in _IDLE and self.transaction_version < 2:
            raise IllegalStateTransition(f"{self.transactional_id}: an abort with nothing open needs TV2")
        self.state = state
        self.last_update_ms = now_ms
