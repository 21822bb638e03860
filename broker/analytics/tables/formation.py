"""Group formation, kept apart wherever rebalances are counted or their percentiles taken (docs/analytics.md).

The summary table (``summary.py``, hence ``summary.json``) and the report (``report/gather.py``) split the
rebalances the same way, with this module's two columns: an episode either formed its group (``formation``), or
came after the formation, by its ``rebalance_protocol`` (eager, cooperative, consumer, or ``none``: it ended
Empty or deleted before any sync). Every episode is in exactly one series, so the counts add up to the
rebalances everywhere (issue 26, item 9).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: The column ``with_formation`` adds, and the series of the formations.
FORMATION = "formation"
#: The series of episodes after formation that have no ``rebalance_protocol`` (ended Empty or deleted).
NO_PROTOCOL = "none"


def with_formation(rebalances: DataFrame) -> DataFrame:
    """The rebalances with ``formation``: the episode formed the group from Empty.

    The table has no column for it: an episode forms the group when it leaves generation (group epoch) 0, a new
    group, or when the episode before it in its (group, run) ended ``empty``. Classic groups wait
    ``group.initial.rebalance.delay.ms`` then (3 s by default, KIP-134; docs/spec/group-coordinator.md), and
    nobody owned anything before, so every partition is unowned all along: those episodes would dominate the
    percentiles and the unowned time, and blur eager against cooperative, which differ in what a *change* to a
    formed group costs. Consumer groups (KIP-848) have no initial delay, but their first target assigns every
    partition from nobody (docs/spec/consumer-groups.md section 4.11): kept apart alike.
    """
    order = Window.partitionBy("group_id", "run_id").orderBy("start_ms", F.col("end_ms").asc_nulls_last())
    after_empty = F.coalesce(F.lag("outcome").over(order) == "empty", F.lit(False))
    new_group = F.coalesce(F.col("previous_generation") == 0, F.lit(False))
    return rebalances.withColumn(FORMATION, new_group | after_empty)


def series() -> Column:
    """An episode's series (of rows ``with_formation`` marked): ``formation``, else its protocol or ``none``."""
    protocol = F.coalesce(F.col("rebalance_protocol"), F.lit(NO_PROTOCOL))
    return F.when(F.col(FORMATION), F.lit(FORMATION)).otherwise(protocol)
