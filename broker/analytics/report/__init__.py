"""The analytics report: one self-contained HTML page, and a PNG of each plot, from the job's Parquet tables.

``render(out_dir)`` reads the tables the job wrote under ``out_dir`` (``rebalances``, ``members``, ``summary``,
``input``, and ``summary.json`` when present) and writes ``out_dir/report.html`` and ``out_dir/plots/*.png``:
``gather.py`` reduces the tables in Spark, ``plots.py`` draws, ``page.py`` writes the HTML.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from broker.analytics.report.gather import ReportData, gather, local_dir
from broker.analytics.report.page import document
from broker.analytics.report.plots import PLOTS, draw
from broker.analytics.session import build_session

__all__ = ["PLOTS", "ReportData", "gather", "render"]


def render(
    out_dir: str | os.PathLike[str], spark: SparkSession | None = None, *, top: int = 10, slowest: int = 20
) -> Path:
    """Write ``out_dir/report.html`` and ``out_dir/plots/*.png`` from the job's tables; returns the page's path.

    ``spark``: the session to read with; without one, the active session (the job's, when its ``--report``
    renders), else one with the job's local defaults, made (and stopped) here.
    """
    out = local_dir(out_dir)
    session = spark or SparkSession.getActiveSession()
    own = session is None
    if session is None:
        session = build_session()
    try:
        data = gather(session, out, top=top, slowest=slowest)
    finally:
        if own:
            session.stop()
    images = draw(data)
    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for name, png in images.items():
        (plot_dir / f"{name}.png").write_bytes(png)
    report = out / "report.html"
    report.write_text(document(data, images), encoding="utf-8")
    return report
