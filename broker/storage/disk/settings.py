"""The data directory's settings (cluster-and-durability.md 8.1), declared by their owner and collected by
``broker/config/settings.py``. A leaf: it imports only ``broker.setting``."""

from __future__ import annotations

from broker.setting import Setting

DATA_DIR = Setting(
    "data_dir", None, str,
    "keep offsets, groups, records, producer ids and transactions in this directory across restarts "
    "(none: memory only)",
)
FSYNC = Setting(
    "fsync", "never", str,
    "when to fsync the data directory: never (survives SIGKILL, not power loss: Kafka's default), batch (before "
    "each acknowledgement) or interval (every fsync_interval_ms)",
    choices=("never", "batch", "interval"),
)
FSYNC_INTERVAL_MS = Setting("fsync_interval_ms", 1000, int, "how often `--fsync interval` fsyncs")
