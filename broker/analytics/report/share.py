"""The report's share groups (issue 28): the ``share_deliveries`` and ``share_in_flight`` tables, in one section.

``gather_share`` (``gather.py``) reduces them in Spark to the totals and the busiest share-partitions;
``share_section`` (``page.py``) writes the section: a line of totals and a table of those share-partitions, their
redeliveries by cause and how long their deliveries were in flight. No section when the logs had no share group.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from broker.analytics.report.style import duration

#: Share-partitions the table lists: the most delivered first.
ROWS_MAX = 50
#: The totals shown, summed over every share-partition (``share_deliveries`` columns).
TOTALS = (
    "deliveries",
    "redeliveries",
    "redeliveries_release",
    "redeliveries_lock_expired",
    "redeliveries_session_closed",
    "redeliveries_unknown",
    "lock_expiries",
    "archived",
    "acknowledged",
    "in_flight_at_end",
)

Row = dict[str, Any]


@dataclass
class ShareReport:
    """What the section shows: totals over every share-partition, the busiest of them with their times in flight
    (``in_flight_ms_*`` of every delivery that ended, ``acknowledged_ms_*`` of the acknowledged ones), and the
    time in flight of every share group's deliveries by how they ended."""

    partitions: int = 0
    groups: int = 0
    totals: Row = field(default_factory=dict)
    max_delivery_count: int | None = None
    rows: list[Row] = field(default_factory=list)
    ends: list[Row] = field(default_factory=list)


def gather_share(spark: SparkSession, out_dir: Path) -> ShareReport | None:
    """The section's data, or None when the job wrote no share table or the logs had no share record."""
    deliveries_path, flight_path = out_dir / "share_deliveries", out_dir / "share_in_flight"
    if not deliveries_path.exists() or not flight_path.exists():
        return None
    deliveries = spark.read.parquet(str(deliveries_path))
    flight = spark.read.parquet(str(flight_path))
    totals = deliveries.agg(
        F.count("*").alias("partitions"),
        F.countDistinct("group_id").alias("groups"),
        F.max("max_delivery_count").alias("max_delivery_count"),
        *(F.coalesce(F.sum(name), F.lit(0)).alias(name) for name in TOTALS),
    ).collect()[0]
    if not totals["partitions"]:
        return None
    report = ShareReport(
        partitions=int(totals["partitions"]),
        groups=int(totals["groups"]),
        totals={name: int(totals[name]) for name in TOTALS},
        max_delivery_count=totals["max_delivery_count"],
    )
    key = ["group_id", "run_id", "topic", "partition"]
    times = flight.where(F.col("topic").isNotNull())
    every = times.where(F.col("end") == "all").select(
        *key, *(F.col(f"in_flight_ms_{p}") for p in ("p50", "p95", "max"))
    )
    acknowledged = times.where(F.col("end") == "acknowledged").select(
        *key, F.col("in_flight_ms_p50").alias("acknowledged_ms_p50")
    )
    busiest = deliveries.orderBy(F.desc("deliveries"), "group_id", "run_id", "topic", "partition").limit(ROWS_MAX)
    joined = busiest.join(every, key, "left").join(acknowledged, key, "left")
    ordered = joined.orderBy(F.desc("deliveries"), "group_id", "run_id", "topic", "partition")
    report.rows = [row.asDict() for row in ordered.collect()]
    # Every group's deliveries by end: the (group, run) rows (topic null), their counts summed and the longest kept
    # (percentiles of different groups do not add up).
    by_end = (
        flight.where(F.col("topic").isNull())
        .groupBy("end")
        .agg(F.sum("deliveries").alias("deliveries"), F.max("in_flight_ms_max").alias("in_flight_ms_max"))
    )
    report.ends = [row.asDict() for row in by_end.orderBy(F.desc("deliveries"), "end").collect()]
    return report


#: How a delivery ended, in the section's words.
END_WORDS = {
    "all": "every delivery that ended",
    "acknowledged": "acknowledged (accepted or rejected)",
    "release": "released (RELEASE)",
    "lock_expired": "lock expired",
    "session_closed": "session closed",
    "archived": "archived at the delivery limit",
    "open": "still in flight at the end of the log",
}


def _n(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def share_section(report: ShareReport | None) -> str:
    """The page's section: totals, the busiest share-partitions, and the deliveries by how they ended."""
    if report is None:
        return ""
    e = html.escape
    t = report.totals
    unknown = ""
    if t["redeliveries_unknown"]:
        unknown = f", {_n(t['redeliveries_unknown'])} whose delivery before is not in the log"
    summary = (
        f"{_n(t['deliveries'])} deliveries over {report.partitions:,} share-partitions of {report.groups:,} share "
        f"groups; {_n(t['redeliveries'])} redeliveries ({_n(t['redeliveries_release'])} after a RELEASE, "
        f"{_n(t['redeliveries_lock_expired'])} after a lock expired, {_n(t['redeliveries_session_closed'])} after "
        f"a session closed{unknown}), {_n(t['lock_expiries'])} lock expiries, {_n(t['archived'])} records archived "
        f"at the delivery limit (highest delivery count {_n(report.max_delivery_count)}), {_n(t['in_flight_at_end'])} "
        "deliveries still in flight at the end."
    )
    heads = [
        ("group", False), ("run", False), ("partition", False), ("deliveries", True), ("redeliveries", True),
        ("after release / lock expired / session closed", True), ("lock expiries", True), ("archived", True),
        ("max delivery count", True), ("in flight p50", True), ("p95", True), ("max", True),
        ("acknowledged p50", True),
    ]  # fmt: skip
    head = "".join(f'<th class="num">{e(h)}</th>' if num else f"<th>{e(h)}</th>" for h, num in heads)
    body = []
    for row in report.rows:
        causes = " / ".join(
            _n(row[f"redeliveries_{c}"]) for c in ("release", "lock_expired", "session_closed")
        )
        cells = [
            f"<code>{e(str(row['group_id']))}</code>",
            f"<code>{e(str(row['run_id'])[:8])}</code>",
            f"<code>{e(str(row['topic']))}:{row['partition']}</code>",
            _n(row["deliveries"]),
            _n(row["redeliveries"]),
            causes,
            _n(row["lock_expiries"]),
            _n(row["archived"]),
            _n(row["max_delivery_count"]),
            duration(row.get("in_flight_ms_p50")),
            duration(row.get("in_flight_ms_p95")),
            duration(row.get("in_flight_ms_max")),
            duration(row.get("acknowledged_ms_p50")),
        ]
        body.append(
            "<tr>"
            + "".join(
                f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>"
                for cell, (_, num) in zip(cells, heads, strict=True)
            )
            + "</tr>"
        )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    ends = "".join(
        f'<tr><td>{e(END_WORDS.get(str(r["end"]), str(r["end"])))}</td><td class="num">{_n(r["deliveries"])}</td>'
        f'<td class="num">{duration(r["in_flight_ms_max"])}</td></tr>'
        for r in report.ends
    )
    ends_table = (
        '<table><thead><tr><th>ended</th><th class="num">deliveries</th><th class="num">longest in flight</th>'
        f"</tr></thead><tbody>{ends}</tbody></table>"
    )
    shown = (
        f"The {len(report.rows)} most delivered of them."
        if report.partitions > len(report.rows)
        else "Every share-partition."
    )
    note = (
        "KIP-932 share groups: each delivery is a record acquired by a member under a lock; it ends acknowledged, "
        "released (RELEASE, its lock expired, its member's share session closed) or archived at the delivery "
        "limit. In flight: from the acquisition to that end (an acknowledgement names no offset: a member's "
        f"acknowledgements end its deliveries in the order it was given them). {shown}"
    )
    return (
        f'<section id="share-groups"><h2>Share groups</h2><p class="note">{e(note)}</p><p>{e(summary)}</p>'
        f"{table}<h3>Deliveries by how they ended</h3>{ends_table}</section>"
    )
