"""The coordinator journal: every durable change (``broker/changes.py``) appended to one file, compacted into a
snapshot so that a long-lived directory does not grow without bound (cluster-and-durability.md 3.6).

Kafka appends its coordinators' records to ``__consumer_offsets`` and ``__transaction_state`` and lets log
compaction keep the last value per key; kfake keeps ``groups.log`` and ``pids.log`` framed by length and CRC. We
do what both amount to on one node: each entry is

    u32 length (of what follows the CRC) | u32 CRC-32C (of what follows it) | u8 version (1) | payload

with the payload compact JSON: a list of ``[kind, key, value-or-null]``, one change outside ``atomic()`` and every
change of an atomic block in one entry (a crash keeps all of them or none). A plain file rather than SQLite or
LMDB: the contract is an append of a few hundred bytes per acknowledged change, replayed once at start; a torn tail
must be cut with one log line and damage in the middle must stop the start naming the file and byte, which a file
format of our own says exactly (SQLite would hide both behind its own recovery).

Load: the snapshot, then the journal, into the live map. A bad entry with no valid entry after it is a torn tail
(the last write cut short: a power loss, or a crafted file), truncated with one warning; a bad entry with a valid
one after it is ``CorruptEntry``. Compaction: once the journal passes ``compact_bytes`` and twice the snapshot,
the live map is written to ``snapshot.tmp``, fsynced and renamed over ``snapshot.dat``, then the journal is
truncated. A crash between the rename and the truncate replays the old journal over the new snapshot: upserts and
tombstones of whole values, so the map comes out the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from broker.changes import Change, Key, LiveMap, Value
from broker.log import get_logger
from broker.storage.disk.errors import CorruptEntry
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.records import crc32c

VERSION = 1
_HEADER = struct.Struct(">II")
_HEADER_BYTES = _HEADER.size
_MAX_ENTRY = 256 * 1024 * 1024
_SNAPSHOT_CHUNK = 1000  # changes per snapshot entry
JOURNAL = "journal.log"
SNAPSHOT = "snapshot.dat"

log = get_logger("data_dir")
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def frame(changes: list[Change]) -> bytes:
    body = bytes((VERSION,)) + _encode([[c.kind, c.key, c.value] for c in changes]).encode()
    return _HEADER.pack(len(body), crc32c(body)) + body


def _entry_at(data: bytes | memoryview, position: int) -> tuple[list[Any], int] | str:
    """The entry at ``position`` and where the next one starts, or why it is not an entry."""
    if len(data) - position < _HEADER_BYTES + 1:
        return "cut short"
    length, crc = _HEADER.unpack_from(data, position)
    end = position + _HEADER_BYTES + length
    if length < 1 or length > _MAX_ENTRY:
        return f"length {length}"
    if end > len(data):
        return "cut short"
    body = data[position + _HEADER_BYTES : end]
    if crc32c(body) != crc:
        return "CRC mismatch"
    if body[0] != VERSION:
        return f"unknown version {body[0]}"
    try:
        payload = json.loads(bytes(body[1:]))
    except ValueError:
        return "payload is not JSON"
    if not isinstance(payload, list):
        return "payload is not a list"
    return payload, end


def _valid_entry_after(data: bytes, position: int) -> bool:
    """Whether any valid entry starts after ``position``: damage in the middle, not a torn tail."""
    return any(not isinstance(_entry_at(data, start), str) for start in range(position + 1, len(data)))


def read_entries(path: Path, *, torn_tail_allowed: bool) -> tuple[list[list[Any]], int, int]:
    """Every entry's changes in ``path``, the bytes of valid entries and the bytes of a torn tail after them."""
    data = path.read_bytes()
    entries: list[list[Any]] = []
    position = 0
    while position < len(data):
        found = _entry_at(data, position)
        if isinstance(found, str):
            if found.startswith("unknown version") or not torn_tail_allowed or _valid_entry_after(data, position):
                raise CorruptEntry(f"{path}: corrupt entry at byte {position} ({found})")
            return entries, position, len(data) - position
        payload, position = found
        entries.append(payload)
    return entries, position, 0


class Journal:
    """The data directory's ``ChangeSink``: writes each change before ``put``/``delete`` return."""

    enabled = True

    def __init__(self, directory: Path, fsync: FsyncPolicy, *, compact_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = directory
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self.live = LiveMap()
        self._pending: list[Change] = []
        self._depth = 0
        self.loaded_entries = 0
        self.loaded_bytes = 0
        self.truncated_tail = 0
        self.compactions = 0
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        self.snapshot_bytes = self._load()
        self.load_ms = (time.perf_counter() - started) * 1000
        self._fd = os.open(directory / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size

    # -- load -------------------------------------------------------------------------------------------------

    def _load(self) -> int:
        snapshot = self.directory / SNAPSHOT
        snapshot_bytes = 0
        (self.directory / (SNAPSHOT + ".tmp")).unlink(missing_ok=True)  # a compaction the kill cut short
        if snapshot.exists():
            entries, snapshot_bytes, _ = read_entries(snapshot, torn_tail_allowed=False)  # renamed whole or not
            self._apply(entries)
        journal = self.directory / JOURNAL
        if journal.exists():
            entries, valid, torn = read_entries(journal, torn_tail_allowed=True)
            self._apply(entries)
            self.loaded_bytes += valid
            if torn:
                with open(journal, "r+b") as file:
                    file.truncate(valid)
                self.truncated_tail = torn
                log.warning(
                    "data directory: torn tail truncated", file=str(journal), offset=valid, bytes_dropped=torn
                )
        self.loaded_bytes += snapshot_bytes
        return snapshot_bytes

    def _apply(self, entries: list[list[Any]]) -> None:
        apply = self.live.apply
        for entry in entries:
            self.loaded_entries += 1
            for kind, key, value in entry:
                apply(Change(kind, tuple(key), value))

    # -- the sink -------------------------------------------------------------------------------------------

    def put(self, kind: str, key: Key, value: Value) -> None:
        change = Change(kind, key, value)
        if self.live.apply(change):
            self._append(change)

    def delete(self, kind: str, key: Key) -> None:
        change = Change(kind, key, None)
        if self.live.apply(change):
            self._append(change)

    def _append(self, change: Change) -> None:
        if self._depth:
            self._pending.append(change)
        else:
            self._write([change])

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._pending:
                # Written even when the operation raised: what it changed is in memory already.
                pending, self._pending = self._pending, []
                self._write(pending)

    def _write(self, changes: list[Change]) -> None:
        if self._fd < 0:  # closed: the broker is stopping, and unloading the groups writes nothing (Kafka's too)
            return
        data = frame(changes)
        os.write(self._fd, data)
        self.fsync.written(self._fd)
        self.size += len(data)
        if self.size > self.compact_bytes and self.size > 2 * self.snapshot_bytes:
            self.compact()

    # -- the map --------------------------------------------------------------------------------------------

    def changes(self, prefix: str = "") -> list[Change]:
        return list(self.live.changes(prefix))

    def compact(self) -> None:
        """The live map into a new snapshot, then an empty journal."""
        temporary = self.directory / (SNAPSHOT + ".tmp")
        live = list(self.live.changes())
        written = 0
        with open(temporary, "wb") as file:
            for start in range(0, len(live), _SNAPSHOT_CHUNK):
                data = frame(live[start : start + _SNAPSHOT_CHUNK])
                file.write(data)
                written += len(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.directory / SNAPSHOT)
        fsync_directory(self.directory)
        os.ftruncate(self._fd, 0)
        self.fsync.written(self._fd)
        self.size = 0
        self.snapshot_bytes = written
        self.compactions += 1

    def abandon(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            if self.fsync.mode != "never":
                self.fsync.forget(self._fd)
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def fsync_directory(directory: Path) -> None:
    """A rename is durable once its directory is fsynced (POSIX)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
