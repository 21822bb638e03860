"""``group-broker analyze``: the command ``group-broker`` wires (``add_arguments`` and ``run``).

The front door of the analytics job (``job.py``): before anything starts Spark it checks the inputs (they exist;
small local ones have a line that could be an event) and that Java 17+ and pyspark are there, so that ``group-broker
--help``, a mistyped path, a README given by mistake and a machine without Java each get a line saying so. Then it
runs ``job.run``, and fails when no line of the input was an event (issue 18: that made an empty report, exit 0).
``generate-events`` is ``broker/analytics/generate.py``'s own command line.
"""

from __future__ import annotations

import argparse

from broker.analytics.arguments import (
    DESCRIPTION,
    add_arguments,
    error,
    inputs_exist,
    java_problem,
    no_events,
    surely_no_events,
)

__all__ = ["DESCRIPTION", "MISSING_PYSPARK", "add_arguments", "no_events", "run"]

MISSING_PYSPARK = "pyspark is not installed: pip install 'kafka-group-broker[analytics]'"


def run(args: argparse.Namespace) -> int:
    """0: the tables were written; 1: the job or the report failed; 2: bad input (no such path, no event in it),
    or no Java or pyspark to run Spark with."""
    if not inputs_exist(args.events):
        return 2
    empty = surely_no_events(args.events)
    if empty is not None:
        error(empty)
        return 2
    try:
        from broker.analytics import job
    except ImportError as failure:
        if (failure.name or "").split(".")[0] in ("pyspark", "py4j"):
            error(MISSING_PYSPARK)
            return 2
        raise
    problem = java_problem()  # pyspark would fail to start its JVM with a trace that does not say why
    if problem is not None:
        error(problem)
        return 2
    return job.execute(args)  # the same run, errors and report as spark-submit's
