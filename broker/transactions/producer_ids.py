"""The producer id allocator shared by idempotent and transactional producers (transactions.md 3.4), durable in
blocks as Kafka's ``ProducerIdManager`` takes them from the controller: a ``pid.block`` change records the end of
the block in use before any id of it is handed out, so after a restart ids go on from there and none is handed out
twice (cluster-and-durability.md 3.3). Memory-only: a plain counter, nothing written."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not imported at start-up: serve's first answer comes before any of this is used
    from broker.changes import Change, ChangeSink

BLOCK = "pid.block"
KEY = ("next",)
BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIds:
    def __init__(self) -> None:
        self._next = 0
        self._block_end = 0
        self.changes: ChangeSink | None = None  # memory only until the server hands it a data directory's

    def __iter__(self) -> ProducerIds:
        return self

    def __next__(self) -> int:
        producer_id = self._next
        if producer_id >= self._block_end and self.changes is not None and self.changes.enabled:
            self._block_end = producer_id + BLOCK_SIZE
            self.changes.put(BLOCK, KEY, {"next": self._block_end})
        self._next += 1
        return producer_id

    def load(self, changes: Iterable[Change]) -> None:
        for change in changes:
            if change.kind == BLOCK and change.value is not None:
                self._next = self._block_end = max(self._next, int(change.value["next"]))

    def durable_records(self) -> list[Change]:
        from broker.changes import Change

        return [Change(BLOCK, KEY, {"next": self._block_end})] if self._block_end else []
