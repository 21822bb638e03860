"""The tables: rebalance episodes, membership intervals, partition ownership and the summary.

Everything is DataFrame operations, so the job runs the same on a laptop and a cluster. One module per table
family, each on the ordered events (``events.py``: one shuffle, then windows within each (group, run)): every
group's history is computed within its run (``run_id``). A memory-only broker starts every group afresh at a
restart; a broker with a data directory does not, and where its ``broker_started``/``broker_stopped`` say so
``restarts.py`` ties a run to the one before it (the intervals the stop ended, the restart's disturbances); no
other state crosses runs.
docs/analytics.md says what each column means and where the broker's words end and the analysis begins.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from broker.analytics.tables.events import Events, sequence_events
from broker.analytics.tables.members import members_table
from broker.analytics.tables.ownership import Ownership, ownership_table
from broker.analytics.tables.rebalances import episodes, rebalances_table

__all__ = ["Events", "Tables", "build", "sequence_events"]


@dataclass
class Tables:
    members: DataFrame
    ownership: Ownership
    rebalances: DataFrame
    episodes: DataFrame  # kept (persisted) while the rebalances are written: ``unpersist`` it after


def build(events: DataFrame) -> Tables:
    """The tables from the ordered events (``sequence_events``); nothing is computed until written or collected.

    ``events`` is best a materialised copy (the job checkpoints it): every table reads it several times, and a
    plan that starts from it is short to analyse. The summary is left out: ``summary_table`` is best built on the
    rebalances as written (a short plan to analyse) than on the whole lineage.
    """
    members = members_table(events)
    ownership = ownership_table(events, members)
    # The rebalances read the episodes three times (their rows, and the bounds of the classic and the consumer
    # groups' unowned time): kept, they are one sort and aggregate of the events, not three (issue 17).
    episode_rows = episodes(events).persist(StorageLevel.MEMORY_AND_DISK)
    rebalances = rebalances_table(episode_rows, ownership)
    return Tables(members, ownership, rebalances, episode_rows)
