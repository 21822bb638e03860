"""A data directory: its lock, its metadata and where each part lives (cluster-and-durability.md 3.3-3.5, 8.1).

    DIR/.lock              an exclusive flock held while a broker runs (its pid inside): one process per directory
    DIR/meta.json          {"format_version": 1, "cluster_id": ...}, as Kafka's meta.properties
    DIR/.clean-shutdown    written by a clean stop, removed at open (Kafka's .kafka_cleanshutdown)
    DIR/coordinator/       the journal of groups, offsets, transactions, producer ids and topics (journal.py)
    DIR/logs/TOPIC-P/      each partition's segments (segments.py)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from broker.storage.disk.errors import DataDirError
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.disk.journal import Journal, fsync_directory

FORMAT_VERSION = 1
META = "meta.json"
LOCK = ".lock"
CLEAN = ".clean-shutdown"


class DataDir:
    def __init__(self, path: Path, lock_fd: int, cluster_id: str, fsync: FsyncPolicy, clean: bool) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self.cluster_id = cluster_id
        self.fsync = fsync
        self.clean_shutdown = clean
        self.journal = Journal(path / "coordinator", fsync)

    @classmethod
    def open(cls, path: str | Path, *, cluster_id: str, cluster_id_given: bool, fsync: FsyncPolicy) -> DataDir:
        path = Path(path).absolute()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"cannot create it: {error.strerror}") from None
        meta = path / META
        if not meta.exists() and any(p.name not in (LOCK, CLEAN) for p in path.iterdir()):
            raise DataDirError(f"{path} is not empty and holds no {META}: not a group-broker data directory")
        lock_fd = _lock(path)
        try:
            stored = _read_meta(meta)
            fresh = stored is None
            if stored is None:
                _write_meta(meta, cluster_id)
            elif cluster_id_given and stored != cluster_id:
                raise DataDirError(f"{path} belongs to cluster {stored}, not {cluster_id} (--cluster-id)")
            else:
                cluster_id = stored
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


def _read_meta(meta: Path) -> str | None:
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
    return cluster_id


def _write_meta(meta: Path, cluster_id: str) -> None:
    temporary = meta.with_suffix(".tmp")
    with open(temporary, "w") as file:
        json.dump({"format_version": FORMAT_VERSION, "cluster_id": cluster_id}, file)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, meta)
    fsync_directory(meta.parent)
