"""Durable changes (issue 27): what the stateful owners hand to the data directory, and the one contract between
them and the disk.

Kafka's coordinators answer each write with a ``CoordinatorResult``: the records of what changed, appended to
``__consumer_offsets`` (or ``__transaction_state``) before the answer goes out, and replayed into a fresh state
machine when the partition is loaded (``GroupMetadataManager.replay``, ``OffsetMetadataManager.replay``). Ours do
the same with one simplification that makes compaction generic: **every change is an upsert of one key's whole
durable value, or its tombstone** (Kafka's own records are, but for the transaction markers, which we turn into
the upserts and tombstones they cause). So

* the live state of a data directory is a map ``(kind, key) -> value``: the last value put for each key, minus
  the deleted ones, in first-put order; a snapshot is that map written out, and replaying the journal over the
  snapshot gives the same map again (log compaction, as ``cleanup.policy=compact`` does for Kafka's own topic);
* an owner rebuilds itself from that map in one ``load`` call, and ``durable_records`` re-emits what its state
  holds, so a test can check that what was put equals what the state says (nothing forgotten, nothing stale).

``kind`` names the owner and the thing, dotted: ``classic.group``, ``consumer.group``, ``consumer.member``,
``consumer.target``, ``offsets.commit``, ``offsets.pending``, ``txn.id``, ``pid.block``, ``topics.topic``,
``log.start``. ``key`` is a tuple of str and int; ``value`` a JSON-able dict (str, int, float, bool, None, list,
dict; bytes as ``b64`` text).

The coordinators stay free of I/O: they call an injected ``ChangeSink``. Memory-only brokers get ``NULL_CHANGES``
(``enabled`` False: owners test it before building a value, so memory-only costs nothing); ``MemoryChanges`` keeps
the map in memory for tests; ``broker/storage/disk/journal.py`` writes it to the data directory, synchronously,
before the call returns: the answer of the request that caused the change goes out after that, so nothing is
acknowledged that was not handed to the OS (cluster-and-durability.md 3.4). ``atomic()`` groups the puts of one
operation into one journal entry, as Kafka appends one operation's records in one batch: after a crash either all of
them are there or none.

A stdlib-only leaf of rank 1 (tests/test_layout.py), imported by coordinator/, storage/ and transactions/ alike.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

Key = tuple[str | int, ...]
Value = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """One record: ``value`` None is a tombstone (the key is gone)."""

    kind: str
    key: Key
    value: Value | None


class ChangeSink(Protocol):
    """Where owners put what changed. ``put`` of a value equal to the key's current one writes nothing."""

    @property
    def enabled(self) -> bool: ...

    def put(self, kind: str, key: Key, value: Value) -> None: ...

    def delete(self, kind: str, key: Key) -> None: ...

    def atomic(self) -> AbstractContextManager[object]: ...


class Durable(Protocol):
    """An owner of durable state: what it holds as changes, and itself rebuilt from them."""

    def durable_records(self) -> Iterator[Change]: ...

    def load(self, changes: Iterable[Change]) -> None: ...


class NullChanges:
    """Memory only: nothing is kept. ``enabled`` is False, so owners skip building values at all."""

    enabled = False

    def put(self, kind: str, key: Key, value: Value) -> None:
        pass

    def delete(self, kind: str, key: Key) -> None:
        pass

    def atomic(self) -> AbstractContextManager[object]:
        return nullcontext()


NULL_CHANGES = NullChanges()


class LiveMap:
    """The live map of a data directory: the last value per ``(kind, key)``, in first-put order. Shared by
    ``MemoryChanges`` and the journal, so both skip an unchanged put the same way."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, Key], Value] = {}

    def apply(self, change: Change) -> bool:
        """Apply one change; False when it changes nothing (an equal put, a delete of an absent key)."""
        slot = (change.kind, change.key)
        if change.value is None:
            return self.values.pop(slot, None) is not None
        if self.values.get(slot) == change.value:
            return False
        self.values[slot] = change.value
        return True

    def changes(self, prefix: str = "") -> Iterator[Change]:
        """The live records whose kind starts with ``prefix``, in first-put order."""
        for (kind, key), value in self.values.items():
            if kind.startswith(prefix):
                yield Change(kind, key, value)


class MemoryChanges:
    """A sink that keeps the live map and every change in memory: for tests (replay a run into a fresh owner and
    compare) and for measuring what a run writes."""

    enabled = True

    def __init__(self) -> None:
        self.live = LiveMap()
        self.log: list[Change] = []  # every change that changed something, in order
        self._depth = 0

    def put(self, kind: str, key: Key, value: Value) -> None:
        change = Change(kind, key, value)
        if self.live.apply(change):
            self.log.append(change)

    def delete(self, kind: str, key: Key) -> None:
        change = Change(kind, key, None)
        if self.live.apply(change):
            self.log.append(change)

    def atomic(self) -> AbstractContextManager[object]:
        return nullcontext()

    def changes(self, prefix: str = "") -> list[Change]:
        return list(self.live.changes(prefix))


def b64(data: bytes | None) -> str | None:
    """Bytes in a value (a classic member's subscription and assignment, a transaction's metadata)."""
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def of_kind(changes: Iterable[Change], prefix: str) -> Iterator[Change]:
    """The changes whose kind starts with ``prefix`` (``"consumer."``): what an owner's ``load`` is handed."""
    return (change for change in changes if change.kind.startswith(prefix))


def jsonable(value: Any) -> Any:
    """``value`` with tuples turned to lists, as it comes back from the journal: an owner compares like with like."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value
