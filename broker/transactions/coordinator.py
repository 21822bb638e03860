"""The transaction coordinator: Kafka's ``TransactionCoordinator`` over ``TransactionMetadata``, on one node.

Transactions spec section 3. Every method runs to completion: it validates in Kafka's order, changes the id's
state and answers. Completing a transaction (section 3.8) happens in the same call: Prepare*, the markers and
group completions handed to ``on_complete``, then Complete*. Only the completion-delay test knob parks it in
Prepare* (through the purgatory), which is the one way CONCURRENT_TRANSACTIONS for Prepare* is ever answered.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import NULL_CHANGES, Change, ChangeSink
from broker.events.hub import GroupEvents
from broker.timing.clock import Clock
from broker.timing.keys import TXN_ABORT_TIMED_OUT, TXN_ID_EXPIRATION, txn_completion_key
from broker.timing.purgatory import Purgatory
from broker.transactions import durable
from broker.transactions.config import TxnConfig
from broker.transactions.events import TxnEventLog
from broker.transactions.messages import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    AddOffsetsRequest,
    AddPartitionsRequest,
    Completion,
    EndTxnRequest,
    EndTxnResult,
    InitProducerIdRequest,
    InitProducerIdResult,
    PartitionsResult,
    TopicPartition,
    TxnMarker,
    TxnOffsetCheckRequest,
    partition_for,
)
from broker.transactions.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    MAX_EPOCH,
    NO_EPOCH,
    NO_PRODUCER_ID,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TxnMetadata,
    epoch_exhausted,
)

E = ErrorCode
PartitionExists = Callable[[str, int], bool]
OnComplete = Callable[[Completion], None]


class TransactionCoordinator:
    """Every transactional id's state, and the requests that change it.

    ``partition_exists`` answers whether a topic partition exists (the data plane's topic registry);
    ``next_producer_id`` is the pid allocator shared with idempotent producers (section 3.4);
    ``on_complete`` applies a finished transaction (section 3.8 step 2).
    """

    def __init__(
        self,
        clock: Clock,
        purgatory: Purgatory,
        partition_exists: PartitionExists,
        on_complete: OnComplete,
        config: TxnConfig | None = None,
        next_producer_id: Callable[[], int] | None = None,
        events: GroupEvents | None = None,
        changes: ChangeSink = NULL_CHANGES,
    ) -> None:
        self.clock = clock
        self.changes = changes  # issue 27: txn.id, written at every state change before the answer
        self.purgatory = purgatory
        self.config = config or TxnConfig()
        self._partition_exists = partition_exists
        self._on_complete = on_complete
        self._next_producer_id = next_producer_id or itertools.count().__next__
        self.transactions: dict[str, TxnMetadata] = {}
        self.failures = 0  # scan steps that raised (each logged)
        self.log = structlog.get_logger("transactions")
        self.events = TxnEventLog(events, clock)  # docs/events.md, "Transactions"

    def start(self) -> None:
        """Arm the two periodic scans of section 3.9."""
        self._schedule_abort_scan()
        self._schedule_expiration_scan()

    def stop(self) -> None:
        self.purgatory.cancel(TXN_ABORT_TIMED_OUT)
        self.purgatory.cancel(TXN_ID_EXPIRATION)

    # -- durable state (issue 27) ----------------------------------------------------------------------------

    def _store(self, meta: TxnMetadata) -> None:
        if self.changes.enabled:
            self.changes.put(durable.KIND, (meta.transactional_id,), durable.txn_value(meta))

    def durable_records(self) -> Iterator[Change]:
        for tid, meta in self.transactions.items():
            yield Change(durable.KIND, (tid,), durable.txn_value(meta))

    def load(self, changes: Iterable[Change]) -> None:
        """Every transactional id as stored: an Ongoing transaction stays open (its timeout still runs from its
        start), a Prepare* one waits for ``complete_loaded``."""
        for change in changes:
            if change.kind == durable.KIND and change.value is not None:
                meta = durable.txn_from(change.value)
                self.transactions[meta.transactional_id] = meta

    def complete_loaded(self) -> None:
        """transactions.md 3.10: a transaction loaded in PrepareCommit or PrepareAbort gets its markers now."""
        for meta in list(self.transactions.values()):
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._complete(meta, by_client=False)

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.transactions.get(transactional_id)

    # -- InitProducerId (sections 2.4 and 3.4) ----------------------------------------------------------------

    def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResult:
        expected = request.producer_id != NO_PRODUCER_ID
        if expected != (request.producer_epoch != NO_EPOCH):
            return InitProducerIdResult(E.invalid_request)  # 2.4 step 2: pid and epoch half-set
        tid = request.transactional_id
        if tid is None:
            # 2.4 step 3: an idempotent-only producer gets a fresh pid and nothing is stored.
            return InitProducerIdResult(E.none, self._next_producer_id(), 0)
        if tid == "":
            return InitProducerIdResult(E.invalid_request)
        if not 0 < request.transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(E.invalid_transaction_timeout)
        now = self.clock.now_ms()
        meta = self.transactions.get(tid)
        if meta is None:
            # 3.4 step 4: a brand-new id gets a pid and epoch -1, which step 3 bumps to 0.
            meta = TxnMetadata(tid, self._next_producer_id(), request.transaction_timeout_ms, now)
            self.transactions[tid] = meta
        # 3.4 step 1: an expected pid must be this id's (or the one before a rotation, on a retry).
        if expected and not (
            meta.producer_epoch == NO_EPOCH
            or request.producer_id == meta.producer_id
            or (request.producer_id == meta.prev_producer_id and epoch_exhausted(request.producer_epoch))
        ):
            return InitProducerIdResult(E.producer_fenced)
        # 3.4 step 2.
        if meta.state.preparing:
            return InitProducerIdResult(E.concurrent_transactions)
        if meta.state is ONGOING:
            # Fence the open transaction and abort it as the coordinator; the client's retry bumps again.
            self._fence_and_abort(meta, timed_out=False)
            return InitProducerIdResult(E.concurrent_transactions)
        # 3.4 step 3: Empty or Complete*.
        if epoch_exhausted(meta.producer_epoch) and (not expected or request.producer_epoch == meta.producer_epoch):
            meta.last_producer_epoch = meta.producer_epoch if expected else NO_EPOCH
            meta.prev_producer_id = meta.producer_id
            meta.producer_id = self._next_producer_id()
            meta.producer_epoch = 0
        elif not expected:
            meta.producer_epoch += 1  # a fresh instance fences every older one
            meta.last_producer_epoch = NO_EPOCH
        elif request.producer_epoch == meta.producer_epoch or meta.producer_epoch == NO_EPOCH:
            meta.last_producer_epoch = meta.producer_epoch  # KIP-360 recovery
            meta.producer_epoch += 1
        elif request.producer_epoch != meta.last_producer_epoch:
            return InitProducerIdResult(E.producer_fenced)
        # (an expected epoch equal to the last one: a retry whose answer was lost keeps the current epoch)
        meta.txn_timeout_ms = request.transaction_timeout_ms
        meta.partitions.clear()
        meta.groups.clear()
        meta.txn_start_ms = -1
        meta.transition_to(EMPTY, now)
        self._store(meta)
        return InitProducerIdResult(E.none, meta.producer_id, meta.producer_epoch)

    # -- AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit's TC side (2.5-2.7, 3.5, 5.1) -------------------

    def add_partitions(self, request: AddPartitionsRequest) -> PartitionsResult:
        """AddPartitionsToTxn (v0-3, or one transaction of v4+ without VerifyOnly) and TV2 implicit adds.

        ``error`` is the TC's one answer, copied to every partition; OPERATION_NOT_ATTEMPTED when a bad
        partition kept the TC from being asked (2.5 step 2: the state is not touched).
        """
        failed: dict[TopicPartition, ErrorCode] = {}
        for topic, partition in request.partitions:
            if topic in INTERNAL_TOPICS:
                failed[(topic, partition)] = E.topic_authorization_failed  # never write-authorized
            elif not self._partition_exists(topic, partition):
                failed[(topic, partition)] = E.unknown_topic_or_partition
        if failed:
            answers = tuple((tp, failed.get(tp, E.operation_not_attempted)) for tp in request.partitions)
            return PartitionsResult(E.operation_not_attempted, answers)
        error = self._add(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.partitions,
            request.transaction_version,
            None,
        )
        return PartitionsResult(error, tuple((tp, error) for tp in request.partitions))

    def add_offsets(self, request: AddOffsetsRequest) -> ErrorCode:
        """AddOffsetsToTxn (2.6): the group's ``__consumer_offsets`` partition joins the transaction.

        The group is neither looked up nor created: an unknown or empty group id is accepted.
        """
        offsets_partition = (OFFSETS_TOPIC, partition_for(request.group_id, self.config.offsets_topic_num_partitions))
        return self._add(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            (offsets_partition,),
            request.transaction_version,
            request.group_id,
        )

    def verify_partitions(self, request: AddPartitionsRequest) -> PartitionsResult:
        """AddPartitionsToTxn v4+ VerifyOnly (2.5 step 6): NONE per partition in the txn, else TRANSACTION_ABORTABLE."""
        meta, error = self._producer(request.transactional_id, request.producer_id, request.producer_epoch)
        if error is E.none and meta is not None and meta.state.preparing:
            error = E.concurrent_transactions
        if error is not E.none or meta is None:
            return PartitionsResult(error, tuple((tp, error) for tp in request.partitions))
        answers = tuple((tp, E.none if tp in meta.partitions else E.transaction_abortable) for tp in request.partitions)
        return PartitionsResult(E.none, answers)

    def check_txn_offset_commit(self, request: TxnOffsetCheckRequest) -> ErrorCode:
        """The TC check of TxnOffsetCommit (5.1 step 4): v0-3 and v4 verify, v5 adds (TV2).

        PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH. On success the group is remembered for the
        completion even when its offsets partition was added for another group (two groups may share one).
        """
        offsets_partition = (OFFSETS_TOPIC, partition_for(request.group_id, self.config.offsets_topic_num_partitions))
        if request.api_version >= 5:
            error = self._add(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                (offsets_partition,),
                2,
                request.group_id,
            )
        else:
            meta, error = self._producer(request.transactional_id, request.producer_id, request.producer_epoch)
            if error is E.none and meta is not None:
                if meta.state.preparing:
                    error = E.concurrent_transactions
                elif offsets_partition not in meta.partitions:
                    error = E.transaction_abortable if request.api_version >= 4 else E.invalid_txn_state
                else:
                    meta.groups.add(request.group_id)
        return E.invalid_producer_epoch if error is E.producer_fenced else error

    def _producer(self, tid: str | None, producer_id: int, epoch: int) -> tuple[TxnMetadata | None, ErrorCode]:
        """The id's state if the producer is its current one: the shared checks of 2.5 step 3-4 and 3.6."""
        if not tid:
            return None, E.invalid_request
        meta = self.transactions.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return meta, E.invalid_producer_id_mapping
        if meta.producer_epoch != epoch:
            return meta, E.producer_fenced
        return meta, E.none

    def _add(
        self,
        tid: str | None,
        producer_id: int,
        epoch: int,
        partitions: tuple[TopicPartition, ...],
        transaction_version: int,
        group_id: str | None,
    ) -> ErrorCode:
        meta, error = self._producer(tid, producer_id, epoch)
        if error is not E.none or meta is None:
            return error
        if meta.state.preparing:
            return E.concurrent_transactions
        if meta.state is ONGOING and meta.partitions.issuperset(partitions):
            if group_id is not None:
                meta.groups.add(group_id)
            return E.none  # nothing changes, not even the last update time
        # 3.5: the start time is set when a transaction opens; later adds never extend its timeout window.
        now = self.clock.now_ms()
        if meta.state is not ONGOING:
            meta.txn_start_ms = now
        meta.partitions.update(partitions)
        if group_id is not None:
            meta.groups.add(group_id)
        meta.transaction_version = transaction_version
        opened = meta.state is not ONGOING
        meta.transition_to(ONGOING, now)
        self._store(meta)
        if opened:
            self.events.started(meta)
        return E.none

    # -- EndTxn (2.8, 3.6, 3.7) -------------------------------------------------------------------------------

    def end_txn(self, request: EndTxnRequest) -> EndTxnResult:
        if request.transaction_version >= 2:
            return self._end_txn_v2(request)
        # 3.6, TV1: the epoch never changes, so the next transaction continues with the same pid/epoch.
        meta, error = self._producer(request.transactional_id, request.producer_id, request.producer_epoch)
        if error is not E.none or meta is None:
            return EndTxnResult(error)
        state, commit = meta.state, request.committed
        if state is ONGOING:
            self._prepare(meta, commit)
            return EndTxnResult(E.none)
        if state in (PREPARE_COMMIT, PREPARE_ABORT):
            same = (state is PREPARE_COMMIT) == commit
            return EndTxnResult(E.concurrent_transactions if same else E.invalid_txn_state)
        if state in (COMPLETE_COMMIT, COMPLETE_ABORT) and (state is COMPLETE_COMMIT) == commit:
            return EndTxnResult(E.none)  # an idempotent retry: no new markers
        return EndTxnResult(E.invalid_txn_state)

    def _end_txn_v2(self, request: EndTxnRequest) -> EndTxnResult:
        """3.7, TV2: every EndTxn bumps the epoch (or rotates the pid at overflow) and answers the new pair."""
        tid, pid, e, commit = request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        if not tid:
            return EndTxnResult(E.invalid_request)
        meta = self.transactions.get(tid)
        if meta is None:
            return EndTxnResult(E.invalid_producer_id_mapping)
        stored = meta.producer_epoch
        overflow_retry = pid == meta.prev_producer_id and e == MAX_EPOCH - 1 and stored == 0
        if pid != meta.producer_id and not overflow_retry:
            return EndTxnResult(E.invalid_producer_id_mapping)
        retry = overflow_retry or (pid == meta.producer_id and e == stored - 1)
        current = pid == meta.producer_id and e == stored
        state = meta.state
        valid = current if state in (ONGOING, EMPTY) else retry if state.preparing else current or retry
        if not valid:
            return EndTxnResult(E.producer_fenced)
        matching = state in ((PREPARE_COMMIT, COMPLETE_COMMIT) if commit else (PREPARE_ABORT, COMPLETE_ABORT))
        if state.preparing:
            return EndTxnResult(E.concurrent_transactions if matching else E.invalid_txn_state)
        if retry:  # Complete*: the previous EndTxn already happened
            if not matching:
                return EndTxnResult(E.invalid_txn_state)
            return EndTxnResult(E.none, meta.producer_id, meta.producer_epoch)
        if state is not ONGOING:
            if commit:
                return EndTxnResult(E.invalid_txn_state)
            # An abort with nothing open: an empty transaction that starts now and writes no markers.
            meta.txn_start_ms = self.clock.now_ms()
            meta.transaction_version = 2
        self._bump_for_end(meta)
        self._prepare(meta, commit)
        if meta.next_producer_id != NO_PRODUCER_ID:  # still in Prepare* (completion delay): answer the next pair
            return EndTxnResult(E.none, meta.next_producer_id, 0)
        return EndTxnResult(E.none, meta.producer_id, meta.producer_epoch)

    def _bump_for_end(self, meta: TxnMetadata) -> None:
        """``prepareAbortOrCommit`` with TV2: epoch+1, or epoch 32767 now and a new pid at 0 on completion."""
        meta.last_producer_epoch = meta.producer_epoch
        if epoch_exhausted(meta.producer_epoch):
            meta.next_producer_id = self._next_producer_id()
            meta.producer_epoch = MAX_EPOCH
        else:
            meta.producer_epoch += 1

    # -- completion (3.8) -------------------------------------------------------------------------------------

    def _fence_and_abort(self, meta: TxnMetadata, timed_out: bool) -> None:
        """``prepareFenceProducerEpoch`` then an abort as the coordinator: ABORT markers at the bumped epoch.

        The bump is returned to nobody, so the producer that owned the transaction is fenced (3.4 step 2, 3.9).
        """
        meta.transition_to(PREPARE_EPOCH_FENCE, self.clock.now_ms())
        fenced_epoch = meta.producer_epoch
        if meta.producer_epoch < MAX_EPOCH:  # Kafka refuses to overflow; the next InitProducerId rotates the pid
            meta.producer_epoch += 1
        self.events.fenced(meta, fenced_epoch, timed_out)
        self._prepare(meta, False, by_client=False)

    def _prepare(self, meta: TxnMetadata, commit: bool, by_client: bool = True) -> None:
        """3.8 step 1, then steps 2-3 in the same call unless the completion-delay knob holds them back."""
        meta.transition_to(PREPARE_COMMIT if commit else PREPARE_ABORT, self.clock.now_ms())
        self._store(meta)  # before any marker: a restart completes it (3.10)
        delay_ms = self.config.completion_delay_ms
        if delay_ms > 0:
            key = txn_completion_key(meta.transactional_id)
            self.purgatory.schedule(key, delay_ms, lambda: self._complete(meta, by_client))
        else:
            self._complete(meta, by_client)

    def _complete(self, meta: TxnMetadata, by_client: bool) -> None:
        commit = meta.state is PREPARE_COMMIT
        markers = tuple(
            TxnMarker(topic, partition, meta.producer_id, meta.producer_epoch, commit)
            for topic, partition in sorted(meta.partitions)
            # The group partitions are completed through their groups; a vanished partition is dropped.
            if topic != OFFSETS_TOPIC and self._partition_exists(topic, partition)
        )
        completion = Completion(
            meta.transactional_id, meta.producer_id, meta.producer_epoch, commit, markers, tuple(sorted(meta.groups))
        )
        self._on_complete(completion)
        if by_client:  # a fenced or timed-out transaction had its event when the coordinator took it over
            self.events.ended(meta, commit)
        if meta.next_producer_id != NO_PRODUCER_ID:  # TV2 overflow: the markers used the old pid at 32767
            meta.prev_producer_id = meta.producer_id
            meta.producer_id = meta.next_producer_id
            meta.next_producer_id = NO_PRODUCER_ID
            meta.producer_epoch = 0
        meta.partitions.clear()
        meta.groups.clear()
        meta.transition_to(COMPLETE_COMMIT if commit else COMPLETE_ABORT, self.clock.now_ms())
        self._store(meta)

    # -- timers (3.9) -----------------------------------------------------------------------------------------

    def _schedule_abort_scan(self) -> None:
        interval_ms = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self.purgatory.schedule(TXN_ABORT_TIMED_OUT, interval_ms, self._abort_timed_out)

    def _schedule_expiration_scan(self) -> None:
        interval_ms = self.config.transaction_remove_expired_transaction_cleanup_interval_ms
        self.purgatory.schedule(TXN_ID_EXPIRATION, interval_ms, self._expire_ids)

    def _abort_timed_out(self) -> None:
        """``abortTimedOutTransactions``: fence and abort every Ongoing txn past its timeout; always re-armed."""
        try:
            now = self.clock.now_ms()
            for meta in list(self.transactions.values()):
                if meta.state is ONGOING and meta.txn_start_ms + meta.txn_timeout_ms < now:
                    try:
                        self._fence_and_abort(meta, timed_out=True)
                    except Exception:
                        self.failures += 1
                        self.log.exception("aborting a timed-out transaction failed", txn=meta.transactional_id)
        finally:
            self._schedule_abort_scan()

    def _expire_ids(self) -> None:
        """``removeExpiredTransactionalIds``: idle ids untouched for transactional.id.expiration.ms go Dead."""
        try:
            horizon = self.clock.now_ms() - self.config.transactional_id_expiration_ms
            for tid, meta in list(self.transactions.items()):
                if meta.state.expiration_allowed and meta.last_update_ms <= horizon:
                    meta.transition_to(DEAD, self.clock.now_ms())
                    del self.transactions[tid]
                    if self.changes.enabled:
                        self.changes.delete(durable.KIND, (tid,))
        finally:
            self._schedule_expiration_scan()
