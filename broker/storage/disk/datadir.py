"""A data directory: its lock, its metadata and where each part lives (cluster-and-durability.md 3.3-3.5, 8.1).

    DIR/.lock              an exclusive flock held while a broker runs (its pid inside): one process per directory
    DIR/meta.json          {"format_version": 1, "cluster_id": ..., and the internal topics' partition counts},
                           as Kafka's meta.properties
    DIR/.clean-shutdown    written by a clean stop, removed at open (Kafka's .kafka_cleanshutdown)
    DIR/coordinator/       the journal of groups, offsets, transactions, producer ids and topics (journal.py)
    DIR/logs/TOPIC-P/      each partition's segments (segments.py)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.storage.disk.errors import DataDirError
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.disk.journal import Journal, fsync_directory

FORMAT_VERSION = 1
META = "meta.json"
LOCK = ".lock"
CLEAN = ".clean-shutdown"
# The partition counts fixed at creation (cluster-and-durability.md 8.1), by their meta.json key and flag: a group's
# coordinator is abs(hashCode) modulo the count (1.1), so another count would move every group and transaction.
PARTITION_COUNTS = {
    "offsets_topic_num_partitions": "--offsets-topic-num-partitions",
    "transaction_state_log_num_partitions": "--transaction-state-log-num-partitions",
}


class DataDir:
    def __init__(self, path: Path, lock_fd: int, cluster_id: str, fsync: FsyncPolicy, clean: bool) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self.cluster_id = cluster_id
        self.fsync = fsync
        self.clean_shutdown = clean
        self.journal = Journal(path / "coordinator", fsync)

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        cluster_id: str,
        cluster_id_given: bool,
        fsync: FsyncPolicy,
        partition_counts: Mapping[str, int] | None = None,
    ) -> DataDir:
        """Lock and open it (created if missing); ``partition_counts`` (``PARTITION_COUNTS`` keys) are stored at
        creation and must be the same at every later open."""
        path = Path(path).absolute()
        counts = dict(partition_counts or {})
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"cannot create it: {error.strerror}") from None
        meta = path / META
        if not meta.exists() and any(p.name not in (LOCK, CLEAN) for p in path.iterdir()):
            raise DataDirError(f"{path} is not empty and holds no {META}: not a group-broker data directory")
        lock_fd = _lock(path)
        try:
            content = _read_meta(meta)
            fresh = content is None
            if content is None:
                _write_meta(meta, cluster_id, counts)
            else:
                stored = content["cluster_id"]
                if cluster_id_given and stored != cluster_id:
                    raise DataDirError(f"{path} belongs to cluster {stored}, not {cluster_id} (--cluster-id)")
                cluster_id = stored
                _check_counts(path, content, counts)
                if any(key not in content for key in counts):  # a directory from before the counts were kept
                    _write_meta(meta, cluster_id, {**counts, **_stored_counts(content)})
            marker = path / CLEAN
            clean = fresh or marker.exists()
            marker.unlink(missing_ok=True)
            return cls(path, lock_fd, cluster_id, fsync, clean)
        except BaseException:
            os.close(lock_fd)  # releases the lock
            raise

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.path / "logs" / f"{topic}-{partition}"

    def close(self) -> None:
        """Flushed, marked cleanly shut down, unlocked."""
        if self._lock_fd < 0:
            return
        self.journal.close()
        (self.path / CLEAN).write_bytes(b"")
        if self.fsync.mode != "never":
            fsync_directory(self.path)
        os.close(self._lock_fd)
        self._lock_fd = -1


    def abandon(self) -> None:
        """Closed as a killed process leaves it: no clean-shutdown marker (tests of the recovery path)."""
        if self._lock_fd < 0:
            return
        self.journal.abandon()
        os.close(self._lock_fd)
        self._lock_fd = -1


def _lock(path: Path) -> int:
    fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = b""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0).strip()
        os.close(fd)
        raise DataDirError(f"{path} is in use by another broker (pid {holder.decode() or '?'})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _read_meta(meta: Path) -> dict[str, Any] | None:
    if not meta.exists():
        return None
    try:
        content = json.loads(meta.read_text())
        version, cluster_id = content["format_version"], content["cluster_id"]
    except (ValueError, KeyError, TypeError):
        raise DataDirError(f"{meta} is not a group-broker {META}") from None
    if version != FORMAT_VERSION:
        raise DataDirError(f"{meta}: unknown format version {version!r} (this broker reads {FORMAT_VERSION})")
    if not isinstance(cluster_id, str):
        raise DataDirError(f"{meta}: cluster_id is not text")
    for key in PARTITION_COUNTS:
        if key in content and (not isinstance(content[key], int) or isinstance(content[key], bool)):
            raise DataDirError(f"{meta}: {key} is not a number")
    return dict(content)


def _stored_counts(content: Mapping[str, Any]) -> dict[str, int]:
    return {key: int(content[key]) for key in PARTITION_COUNTS if key in content}


def _check_counts(path: Path, content: Mapping[str, Any], counts: Mapping[str, int]) -> None:
    """A partition count other than the stored one refuses the start (1.1: it would move every group)."""
    for key, stored in _stored_counts(content).items():
        given = counts.get(key)
        if given is not None and given != stored:
            raise DataDirError(
                f"{path} was created with {PARTITION_COUNTS[key]} {stored}, not {given}: the count cannot change "
                f"(every group id or transactional id would hash to another partition); start with "
                f"{PARTITION_COUNTS[key]} {stored} or use a new data directory"
            )


def _write_meta(meta: Path, cluster_id: str, counts: Mapping[str, int]) -> None:
    temporary = meta.with_suffix(".tmp")
    with open(temporary, "w") as file:
        json.dump({"format_version": FORMAT_VERSION, "cluster_id": cluster_id, **counts}, file)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, meta)
    fsync_directory(meta.parent)
