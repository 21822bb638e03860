"""One partition's records on disk (cluster-and-durability.md 3.3, 3.5 step 2, 3.6).

The partition's directory holds segment files named by their first offset (``%020d.log``, as Kafka names them), each
the stored record batches back to back, byte for byte what a Fetch returns (the broker's base offset and leader
epoch in place), and ``partition.metadata`` with the topic id (Kafka's file of that name), so a directory left by a
deleted topic of the same name is told apart. A segment rolls at ``segment_bytes``; retention and DeleteRecords
delete the segments wholly below the log start offset, as Kafka deletes segments.

Recovery reads every segment and checks each batch's length and CRC-32C (DefaultRecordBatch's, over attributes to
the end): a bad batch at the very end of the last segment is a torn tail, truncated with one log line; a bad batch
with data after it stops the start (``CorruptEntry``) naming the file and byte. The partition log is then rebuilt
from the batches (producer state, open transactions, the last stable offset and the aborted index: the same code
that appended them), so those need no files of their own. Fetches are served from memory, which holds the log as
it always did; there is no offset index file, since recovery reads segments whole.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

from broker.log import get_logger
from broker.storage.disk.errors import CorruptEntry
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.records import crc32c

_LOG_OVERHEAD = 12  # base offset (8) + batch length (4)
_CRC_AT = 17  # base offset, length, partition leader epoch, magic: then the CRC
_MIN_BATCH_LENGTH = 49
METADATA = "partition.metadata"

log = get_logger("data_dir")


def _problem(data: bytes, position: int) -> tuple[str | None, int]:
    """Why the batch at ``position`` is not whole, and where the next one starts."""
    if len(data) - position < _LOG_OVERHEAD:
        return "cut short", len(data)
    (length,) = struct.unpack_from(">i", data, position + 8)
    end = position + _LOG_OVERHEAD + length
    if length < _MIN_BATCH_LENGTH:
        return f"batch length {length}", len(data)
    if end > len(data):
        return "cut short", len(data)
    (crc,) = struct.unpack_from(">I", data, position + _CRC_AT)
    if crc32c(memoryview(data)[position + _CRC_AT + 4 : end]) != crc:
        return "CRC mismatch", end
    return None, end


class SegmentLog:
    def __init__(self, directory: Path, fsync: FsyncPolicy, segment_bytes: int) -> None:
        self.directory = directory
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self._bases = sorted(int(path.stem) for path in directory.glob("*.log") if path.stem.isdigit())
        self._fd = -1
        self._size = 0

    def _path(self, base_offset: int) -> Path:
        return self.directory / f"{base_offset:020d}.log"

    def topic_id(self) -> str | None:
        path = self.directory / METADATA
        return path.read_text().strip() if path.exists() else None

    def claim(self, topic_id: str) -> None:
        (self.directory / METADATA).write_text(topic_id + "\n")

    def batches(self) -> Iterator[bytes]:
        """Every stored batch in order; a torn tail of the last segment is truncated."""
        for index, base in enumerate(self._bases):
            path = self._path(base)
            data = path.read_bytes()
            position = 0
            while position < len(data):
                problem, end = _problem(data, position)
                if problem is not None:
                    last = index == len(self._bases) - 1
                    if not last or (problem == "CRC mismatch" and end < len(data)):
                        raise CorruptEntry(f"{path}: corrupt batch at byte {position} ({problem})")
                    with open(path, "r+b") as file:
                        file.truncate(position)
                    log.warning(
                        "data directory: torn tail truncated", file=str(path), offset=position,
                        bytes_dropped=len(data) - position,
                    )  # fmt: skip
                    break
                yield data[position:end]
                position = end

    def append(self, base_offset: int, data: bytes) -> None:
        if self._fd < 0:
            # The first append of this process: go on in the last segment unless it is full.
            last = self._bases[-1] if self._bases else None
            full = last is None or os.path.getsize(self._path(last)) >= self.segment_bytes
            self._open(base_offset if full or last is None else last)
        elif self._size >= self.segment_bytes:
            self._open(base_offset)
        os.write(self._fd, data)
        self.fsync.written(self._fd)
        self._size += len(data)

    def _open(self, base: int) -> None:
        self.close()
        if base not in self._bases:
            self._bases.append(base)
        self._fd = os.open(self._path(base), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    def delete_before(self, offset: int) -> None:
        """Drop the segments wholly below ``offset`` (the next segment starts at or below it); never the last."""
        while len(self._bases) > 1 and self._bases[1] <= offset:
            self._path(self._bases.pop(0)).unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd >= 0:
            self.fsync.forget(self._fd)
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
