"""``--fsync never|batch|interval`` (cluster-and-durability.md 3.4).

Kafka does not fsync per write (``log.flush.interval.messages`` is Long.MAX_VALUE): what was handed to the OS
survives a SIGKILL of the broker, and replication covers the loss of a machine. One process has no replicas, so
``batch`` fsyncs each write before its acknowledgement (kfake's ``SyncWrites``) and ``interval`` every
``interval_ms`` (the server's keyed timer calls ``tick``); ``never``, the default, is Kafka's behaviour.
"""

from __future__ import annotations

import os

MODES = ("never", "batch", "interval")


class FsyncPolicy:
    def __init__(self, mode: str = "never", interval_ms: int = 1000) -> None:
        if mode not in MODES:
            raise ValueError(f"fsync: expected one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.interval_ms = interval_ms
        self.batch = mode == "batch"
        self._interval = mode == "interval"
        self._dirty: set[int] = set()
        self.fsyncs = 0  # how many fsync calls were made: tests and the benchmark read it

    def written(self, fd: int) -> None:
        """After each write to ``fd``: fsync it now (batch) or at the next tick (interval)."""
        if self.batch:
            os.fsync(fd)
            self.fsyncs += 1
        elif self._interval:
            self._dirty.add(fd)

    def tick(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for fd in dirty:
            try:
                os.fsync(fd)
                self.fsyncs += 1
            except OSError:  # closed since it was written (a deleted topic's segment): nothing left to keep
                pass

    def forget(self, fd: int) -> None:
        """``fd`` is about to be closed: fsync it first if a tick owes it one."""
        if fd in self._dirty:
            self._dirty.discard(fd)
            os.fsync(fd)
            self.fsyncs += 1
