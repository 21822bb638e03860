"""Read-only views of the transaction coordinator's state: DescribeTransactions and ListTransactions.

Transactions spec sections 6.1 and 6.2 (Kafka's ``TransactionCoordinator.handleDescribeTransactions`` and
``TransactionStateManager.listTransactionStates``). Version-free: the API layer (``broker/api/txn_admin.py``) turns
these answers into responses. Nothing here changes a transaction's state. There is no authorizer, so the DESCRIBE
checks of both APIs never drop anything (the "No authorizer" row of the spec's decisions table).

ListTransactions v2's pattern is RE2 with whole-id matching, as Kafka's RE2/J ``matcher().matches()``; the RE2
binding is loaded by ``broker/re2_pattern.py`` on first use, so a broker never asked for a pattern never loads it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker import re2_pattern
from broker.transactions.state import DEAD, TxnMetadata, TxnState

E = ErrorCode

#: The wire names of section 3.2, which StateFilters are matched against exactly (``TransactionState.fromName``).
STATE_NAMES: Mapping[str, TxnState] = {state.value: state for state in TxnState}


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """One DescribeTransactions entry (section 6.1). An error entry keeps the defaults: state "", numbers 0."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()  # by topic, both sorted


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TxnList:
    """The ListTransactions answer (section 6.2): a top-level error, the unknown state filters, the listings."""

    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    listings: tuple[TxnListing, ...] = ()


def describe(transactions: Mapping[str, TxnMetadata], transactional_ids: Iterable[str]) -> list[TxnDescription]:
    """One entry per requested id, in request order (duplicates answered each time, as Kafka does)."""
    return [describe_one(transactions, tid) for tid in transactional_ids]


def describe_one(transactions: Mapping[str, TxnMetadata], transactional_id: str) -> TxnDescription:
    """Section 6.1: "" is INVALID_REQUEST, an unknown or Dead id TRANSACTIONAL_ID_NOT_FOUND; otherwise the stored
    state. The partition set is what the id holds now: every partition of an Ongoing transaction (the
    ``__consumer_offsets`` one included), those still waiting for markers in Prepare*, none when Empty or
    Complete* (the coordinator clears the set on completion, as Kafka does)."""
    if not transactional_id:
        return TxnDescription(transactional_id, E.invalid_request)
    meta = transactions.get(transactional_id)
    if meta is None or meta.state is DEAD:
        return TxnDescription(transactional_id, E.transactional_id_not_found)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in meta.partitions:
        by_topic.setdefault(topic, []).append(partition)
    return TxnDescription(
        transactional_id,
        E.none,
        meta.state.value,
        meta.txn_timeout_ms,
        meta.txn_start_ms,  # -1 when Empty; the last transaction's start for Complete*
        meta.producer_id,
        meta.producer_epoch,
        tuple((topic, tuple(sorted(partitions))) for topic, partitions in sorted(by_topic.items())),
    )


def list_matching(
    transactions: Mapping[str, TxnMetadata],
    now_ms: int,
    state_filters: Collection[str] = (),
    producer_id_filters: Collection[int] = (),
    duration_filter_ms: int = -1,
    pattern: str | None = None,
) -> TxnList:
    """Section 6.2: the filters combine with AND; Dead ids are never listed.

    An unknown state name is echoed back and matches nothing (so a request whose state filters are all unknown
    lists nothing); an empty filter list means every state. ``duration_filter_ms`` >= 0 keeps the transactions that
    started more than that long ago (an Empty id's start is -1, so it always passes, as in Kafka). ``pattern``:
    null or "" means no filter; one RE2 cannot compile is a top-level INVALID_REGULAR_EXPRESSION.
    """
    compiled: Any = None
    if pattern:
        try:
            compiled = re2_pattern.compiled(pattern)
        except re2_pattern.InvalidRegex:
            return TxnList(E.invalid_regular_expression)
    known = {STATE_NAMES[name] for name in state_filters if name in STATE_NAMES}
    unknown = tuple(dict.fromkeys(name for name in state_filters if name not in STATE_NAMES))
    pids = set(producer_id_filters)
    listings = tuple(
        TxnListing(meta.transactional_id, meta.producer_id, meta.state.value)
        for meta in transactions.values()
        if meta.state is not DEAD
        and (not state_filters or meta.state in known)
        and (not pids or meta.producer_id in pids)
        and (duration_filter_ms < 0 or now_ms - meta.txn_start_ms > duration_filter_ms)
        and (compiled is None or compiled.fullmatch(meta.transactional_id) is not None)
    )
    return TxnList(E.none, unknown, listings)
