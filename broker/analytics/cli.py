"""``group-broker analyze``: the command ``group-broker`` wires (``add_arguments`` and ``run``).

The front door of the analytics job (``job.py``): it checks the inputs and that pyspark is there before anything
imports it, so that ``group-broker --help`` and a mistyped path work without Spark, then hands over to
``job.execute``. ``generate-events`` is ``broker/analytics/generate.py``'s own command line.
"""

from __future__ import annotations

import argparse

from broker.analytics.arguments import DESCRIPTION, add_arguments, error, inputs_exist

__all__ = ["DESCRIPTION", "MISSING_PYSPARK", "add_arguments", "run"]

MISSING_PYSPARK = "pyspark is not installed: pip install 'kafka-group-broker[analytics]'"


def run(args: argparse.Namespace) -> int:
    """0: the tables were written; 1: the job or the report failed; 2: bad input paths or no pyspark."""
    if not inputs_exist(args.events):
        return 2
    try:
        from broker.analytics import job
    except ImportError as failure:
        if (failure.name or "").split(".")[0] in ("pyspark", "py4j"):
            error(MISSING_PYSPARK)
            return 2
        raise
    return job.execute(args)
