"""The events of the transaction coordinator, one method per event (``docs/events.md``, "Transactions").

The same hub and format as the groups' events (``broker/coordinator/group_events.py``): the coordinator says
what happened, this module says how it is written down. A transaction is no group's, so its records carry
``group_id: ""``; the groups whose offsets it carries (AddOffsetsToTxn, transactions spec section 2.6) are its
``groups``. Every transaction that opens (section 3.5, the id going Ongoing) ends in exactly one of
``transaction_committed``, ``transaction_aborted`` (both ended by the client's EndTxn, 3.6/3.7),
``transaction_timed_out`` (the broker's scan, 3.9) or ``transaction_fenced`` (a newer InitProducerId, 3.4 step 2).
Field names avoid those of the groups' events, so no reader of those (the analytics job) mistakes them.
"""

from __future__ import annotations

from typing import Any

from broker.events import names
from broker.events.hub import GroupEvents, LoggedEvents
from broker.timing.clock import Clock
from broker.transactions.state import TxnMetadata

__all__ = ["TXN_GROUP_ID", "TxnEventLog", "partitions_by_topic"]

#: The ``group_id`` of every transaction record: a transaction belongs to no group.
TXN_GROUP_ID = ""


def partitions_by_topic(partitions: set[tuple[str, int]]) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}``, topics and partitions sorted (the consumer groups' events' shape)."""
    shown: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        shown.setdefault(topic, []).append(partition)
    return shown


class TxnEventLog:
    """Writes each transaction event into the hub (``GroupEvents``), which decides where records go."""

    __slots__ = ("_clock", "_hub")

    def __init__(self, hub: GroupEvents | None, clock: Clock) -> None:
        self._hub: GroupEvents = hub if hub is not None else LoggedEvents()
        self._clock = clock

    def _fields(self, meta: TxnMetadata) -> dict[str, Any]:
        return {
            "transactional_id": meta.transactional_id,
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "transaction_version": meta.transaction_version,
            "partitions": partitions_by_topic(meta.partitions),
            "groups": sorted(meta.groups),
        }

    def _duration(self, meta: TxnMetadata) -> int:
        return max(self._clock.now_ms() - meta.txn_start_ms, 0) if meta.txn_start_ms >= 0 else 0

    def started(self, meta: TxnMetadata) -> None:
        """The id went Ongoing (section 3.5): its first partition or group offsets were added."""
        fields = self._fields(meta)
        fields["txn_timeout_ms"] = meta.txn_timeout_ms
        self._hub.emit(names.TRANSACTION_STARTED, TXN_GROUP_ID, fields)

    def ended(self, meta: TxnMetadata, committed: bool) -> None:
        """The client's EndTxn completed the transaction (3.8): emitted once its markers are handed over.

        ``producer_epoch`` is the markers' (with TV2, already the bumped one: section 3.7).
        """
        fields = self._fields(meta)
        fields["duration_ms"] = self._duration(meta)
        self._hub.emit(names.TRANSACTION_COMMITTED if committed else names.TRANSACTION_ABORTED, TXN_GROUP_ID, fields)

    def fenced(self, meta: TxnMetadata, fenced_epoch: int, timed_out: bool) -> None:
        """The coordinator fences the producer and aborts its open transaction (``prepareFenceProducerEpoch``).

        ``timed_out``: the scan of section 3.9 found it past its timeout; otherwise a newer InitProducerId for the
        id (3.4 step 2). ``producer_epoch`` is the bumped epoch of the abort markers, ``fenced_epoch`` the
        producer's, refused from now on.
        """
        fields = self._fields(meta)
        fields["fenced_epoch"] = fenced_epoch
        fields["duration_ms"] = self._duration(meta)
        fields["txn_timeout_ms"] = meta.txn_timeout_ms
        self._hub.emit(names.TRANSACTION_TIMED_OUT if timed_out else names.TRANSACTION_FENCED, TXN_GROUP_ID, fields)
