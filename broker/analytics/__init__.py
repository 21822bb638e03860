"""Rebalance analytics: the broker's JSON-lines event logs (docs/events.md) into Parquet tables, on Spark.

``group-broker analyze EVENTS... --out DIR`` (``cli.py``) and ``spark-submit broker/analytics/job.py EVENTS...
--out DIR`` run the same job (``job.py``); the tables and their semantics are documented in docs/analytics.md.
Nothing here is imported by the broker itself: pyspark is only needed to analyse (``pip install
'kafka-group-broker[analytics]'``), so this package must not import it at the top.

One module per concern, imports pointing one way (``cli`` -> ``job`` -> ``session``/``read``/``tables``;
``report`` -> ``session``; nobody imports ``cli``):

- ``arguments``: the job's flags and input checks, without pyspark (``sniff``: the look at a sample of local
  inputs for an event line); ``cli``: the ``group-broker`` command;
- ``job``: the job and its script entry; ``session``: the Spark session and settings; ``progress``: stderr lines;
- ``read``: lines in, parsed and classified; ``schema``: the Spark types of the input and of every table;
- ``tables/``: the windows and tables, one module per table family (``formation``: the one split of the
  rebalances that the summary and the report share);
- ``report/``: the HTML/PNG report (gather in Spark, plots, page), matplotlib only there;
- ``generate`` and ``synthetic/``: synthetic logs for tests and the benchmark, without Spark.
"""

from __future__ import annotations

__all__ = ["TABLES"]

#: The Parquet tables the job writes under ``--out``, in the order it writes them.
TABLES = (
    "input",
    "rebalances",
    "members",
    "ownership",
    "summary",
    "disturbances",
    "broker_disturbances",
    "share_deliveries",
    "share_in_flight",
)
