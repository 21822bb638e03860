"""Rebalance analytics: the broker's JSON-lines event logs (docs/events.md) into Parquet tables, on Spark.

``group-broker analyze EVENTS... --out DIR`` (``broker/analytics/cli.py``) and ``spark-submit
broker/analytics/job.py EVENTS... --out DIR`` run the same job (``broker/analytics/job.py``); the tables and their
semantics are documented in docs/analytics.md. Nothing here is imported by the broker itself: pyspark is only
needed to analyse (``pip install 'kafka-group-broker[analytics]'``), so this package must not import it at the top.
"""

from __future__ import annotations

__all__ = ["TABLES"]

#: The Parquet tables the job writes under ``--out``, in the order it writes them.
TABLES = ("input", "rebalances", "members", "ownership", "summary")
