"""The data directory wired to the broker (issue 27, cluster-and-durability.md 3.5 and 8.1).

``BrokerServer`` opens it in ``start`` before any listener binds (a directory locked by another broker, of another
cluster or of an unknown format refuses the start with one line and nothing is bound), then builds its owners on
it: the topics with a ``SegmentLog`` per partition, and the group and transaction coordinators with the journal as
their ``ChangeSink``. Loading follows Kafka's order at start-up: the partition logs (producer state, the epoch
cache, the last stable offset and the aborted index rebuilt from their batches), then the group coordinator's
records (``GroupMetadataManager.replay`` and ``onLoaded``: fresh session timers), then the transaction state, whose
PrepareCommit/PrepareAbort transactions are completed by writing their markers (transactions.md 3.10).

Everything but ApiVersions waits for the load (``api/dispatch.py``'s ``before_load``), so no client sees
COORDINATOR_LOAD_IN_PROGRESS after a restart (2.6: aiokafka 0.14 ends its heartbeat task on one).
Memory-only brokers never import this module's data-directory classes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config.settings import Settings

if TYPE_CHECKING:
    from broker.changes import Change, ChangeSink
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.storage.disk.datadir import DataDir
    from broker.storage.disk.segments import SegmentLog
    from broker.storage.topics import TopicRegistry
    from broker.transactions.coordinator import TransactionCoordinator
    from broker.transactions.producer_ids import ProducerIds

class StartRefused(OSError):
    """The data directory refused the start: ``serve`` prints the message as it is, one line, and exits 1."""

    whole_line = True


class DurableState:
    """One broker's open data directory: its journal (the coordinators' sink), its partition directories, its fsync
    timer, and what the last load found."""

    def __init__(self, settings: Settings) -> None:
        from broker.storage.disk.datadir import DataDir
        from broker.storage.disk.errors import DataDirError
        from broker.storage.disk.fsync import FsyncPolicy

        assert settings.data_dir is not None
        self.fsync = FsyncPolicy(settings.fsync, settings.fsync_interval_ms)
        try:
            self.directory: DataDir = DataDir.open(
                Path(settings.data_dir),
                cluster_id=settings.cluster_id,
                cluster_id_given="cluster_id" in settings.given,
                fsync=self.fsync,
                # Fixed at creation (issue 29; cluster-and-durability.md 8.1): another count refuses the start.
                partition_counts={
                    "offsets_topic_num_partitions": settings.cluster.offsets_topic_num_partitions,
                    "transaction_state_log_num_partitions": settings.cluster.transaction_state_log_num_partitions,
                },
            )
        except DataDirError as error:
            raise StartRefused(f"data directory {settings.data_dir}: {error}") from None
        self.report: dict[str, int | float] = {}

    @property
    def cluster_id(self) -> str:
        return self.directory.cluster_id

    @property
    def changes(self) -> ChangeSink:
        return self.directory.journal

    def stored(self, prefix: str) -> list[Change]:
        """What the directory holds of one kind (the cluster layout reads its leaderships at start: issue 29)."""
        return self.directory.journal.changes(prefix)

    @property
    def clean_shutdown(self) -> bool:
        return self.directory.clean_shutdown

    def segments(self, topic: str, partition: int, segment_bytes: int) -> SegmentLog:
        from broker.storage.disk.segments import SegmentLog

        return SegmentLog(self.directory.partition_dir(topic, partition), self.fsync, segment_bytes)

    def load(
        self,
        topics: TopicRegistry,
        coordinator: GroupCoordinator,
        transactions: TransactionCoordinator,
        producer_ids: ProducerIds,
    ) -> dict[str, int | float]:
        """Rebuild every owner from the directory, in Kafka's order; what was loaded, for ``broker_started``."""
        from broker.storage.disk.errors import DataDirError

        journal = self.directory.journal
        started = time.perf_counter()
        try:
            from broker.storage.durable_topics import DurableTopics

            durable_topics = DurableTopics(topics, journal, self.segments, self.directory.path / "logs")
            durable_topics.load([*journal.changes("topics."), *journal.changes("log.")])
            topics.durable = durable_topics
            coordinator.load(
                [
                    *journal.changes("classic."),
                    *journal.changes("consumer."),
                    *journal.changes("share."),
                    *journal.changes("group."),  # the per-group configs (share.auto.offset.reset, lock duration, ...)
                    *journal.changes("offsets."),
                ]
            )
            producer_ids.load(journal.changes("pid."))
            transactions.load(journal.changes("txn."))
        except DataDirError as error:
            raise StartRefused(f"data directory {self.directory.path}: {error}") from None
        transactions.complete_loaded()  # PrepareCommit/PrepareAbort: their markers, now that logs and groups exist
        counts = {"topics": 0, "groups": 0, "offsets": 0, "transactions": 0}
        for change in journal.changes():
            family = change.kind.partition(".")[0]
            if change.kind in ("classic.group", "consumer.group", "share.group"):
                counts["groups"] += 1
            elif change.kind == "offsets.commit":
                counts["offsets"] += 1
            elif family == "txn":
                counts["transactions"] += 1
            elif change.kind == "topics.topic":
                counts["topics"] += 1
        records = 0
        for topic in topics.all():
            for partition in range(topic.partitions):
                partition_log = topic.log(partition)
                if partition_log is not None:
                    records += partition_log.high_watermark - partition_log.log_start_offset
        self.report = {
            **counts,
            "records": records,
            "journal_entries": journal.loaded_entries,
            "journal_bytes": journal.loaded_bytes,
            "torn_tail_bytes": journal.truncated_tail,
            "load_ms": round(journal.load_ms + (time.perf_counter() - started) * 1000, 1),
        }
        return self.report

    def tick(self) -> None:
        """``--fsync interval``: fsync what was written since the last tick."""
        self.fsync.tick()

    def close(self) -> None:
        self.directory.close()
