"""One analyze run, every number the report and summary.json show about it, checked against each other (issue 26,
item 9): the REBALANCES card, the duration plot's legend (and its text alternative), the per-protocol, groups,
causes and outcomes tables, and the headline percentiles, all with formations and episodes without a protocol
counted apart, and adding up to the same rebalances.

A generated log (``generate-events``: eager, cooperative and consumer groups, restarts, groups that empty), the
real job on the analytics tests' shared SparkSession, the report rendered from what it wrote; the HTML is parsed as
a reader reads it.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (the `analytics` extra)")

from pyspark.sql import SparkSession

from broker.analytics import job, report
from broker.analytics.generate import generate
from broker.analytics.report import plots
from broker.analytics.report.gather import ReportData, gather
from broker.analytics.report.style import duration

PHRASE = re.compile(
    r"([\d,]+) eager, ([\d,]+) cooperative, ([\d,]+) consumer; \+([\d,]+) formations?, \+([\d,]+) with no protocol"
)
SERIES = ("eager", "cooperative", "consumer", "formations", "no_protocol")


def number(text: str) -> int:
    return int(text.replace(",", ""))


def text_of(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def section(page: str, name: str) -> str:
    return page.split(f'<section id="{name}"')[1].split("</section>")[0]


def table_rows(fragment: str) -> list[list[str]]:
    """The body rows of the tables in ``fragment``, as cell texts."""
    rows = []
    for body in re.findall(r"<tbody>(.*?)</tbody>", fragment, re.S):
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
            rows.append([text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)])
    return rows


def kpi(page: str, label: str) -> tuple[str, str]:
    found = re.search(
        rf'<div class="label">{re.escape(label)}</div><div class="value">(.*?)</div>'
        r'(?:<div class="sub">(.*?)</div>)?',
        page,
    )
    assert found is not None, label
    return html.unescape(found.group(1)), html.unescape(found.group(2) or "")


def split(text: str) -> dict[str, int]:
    found = PHRASE.search(text)
    assert found is not None, text
    return dict(zip(SERIES, (number(n) for n in found.groups()), strict=True))


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("counts")
    log = tmp / "events.jsonl"
    generate(log, 3000, seed=5)
    out = tmp / "analysis"
    job.run([str(log)], str(out), spark=spark)
    page = report.render(out, spark).read_text(encoding="utf-8")
    return out, page, json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.timeout(900)
def test_every_count_agrees(analysed: tuple[Path, str, dict[str, Any]], spark: SparkSession) -> None:
    out, page, summary = analysed
    overall = summary["overall"]
    total = overall["rebalances"]
    expected = {name: overall[name] for name in SERIES}
    assert sum(expected.values()) == total > 0, "the split adds up to every episode"
    assert expected["formations"] > 0 and expected["eager"] > 0 and expected["cooperative"] > 0
    assert expected["consumer"] > 0 and expected["no_protocol"] > 0

    # The card, the plot's text alternative and its legend.
    value, sub = kpi(page, "Rebalances")
    assert number(value) == total and split(sub) == expected
    alt = re.search(r'<img class="plot" alt="Rebalance duration: ([^"]*)"', page)
    assert alt is not None and split(html.unescape(alt.group(1))) == expected
    assert number(kpi(page, "Group formations")[0]) == expected["formations"]
    data = gather(spark, out)
    legend = plots._plot_durations(data).axes[0].get_legend()
    assert legend is not None
    labels = {}
    for text in legend.get_texts():
        found = re.fullmatch(r"(.*) \(([\d,]+)(?:, [\d,]+ open: not drawn)?\)", text.get_text())
        assert found is not None, text.get_text()
        labels[found.group(1)] = number(found.group(2))
    assert labels == {
        name: n
        for name, n in (
            ("eager", expected["eager"]), ("cooperative", expected["cooperative"]),
            ("consumer", expected["consumer"]), ("ended Empty or deleted (no protocol)", expected["no_protocol"]),
            ("group formation (from Empty)", expected["formations"]),
        )
        if n
    }  # fmt: skip

    # The per-protocol table: a row per series, and all of them.
    by_row = {row[0]: number(row[1]) for row in table_rows(section(page, "summary")) if len(row) == 7}
    assert by_row.pop("all rebalances") == total
    assert by_row == {
        name: n
        for name, n in (
            ("eager", expected["eager"]), ("cooperative", expected["cooperative"]),
            ("consumer", expected["consumer"]), ("none", expected["no_protocol"]),
            ("group formation (from Empty)", expected["formations"]),
        )
        if n
    }  # fmt: skip
    # Outcomes and causes count every episode too.
    outcomes = table_rows(section(page, "summary").split("<h2>Outcomes</h2>")[1].split("<h2>How members")[0])
    assert sum(number(n) for _, n in outcomes) == total
    causes = table_rows(section(page, "causes"))
    assert sum(number(row[1]) for row in causes) == total == sum(overall["causes"].values())

    # The groups table: each listed group's counts are its summary row's, and add up.
    groups = {row["group_id"]: row for row in spark.read.parquet(str(out / "summary")).collect() if row["group_id"]}
    listed = table_rows(section(page, "groups"))
    assert listed
    for cells in listed:
        row = groups[cells[0]]
        split_cells = [number(n) for n in cells[9].split(" / ")]
        assert number(cells[1]) == row["rebalances"] == number(cells[2]) + sum(split_cells)
        assert number(cells[2]) == row["formations"]
        assert split_cells == [row["eager"], row["cooperative"], row["consumer"], row["no_protocol"]]
        assert cells[3] == duration(row["rebalance_ms_p50"]) and cells[4] == duration(row["rebalance_ms_p99"])


@pytest.mark.timeout(900)
def test_the_headline_percentiles_are_summary_json_s(
    analysed: tuple[Path, str, dict[str, Any]], spark: SparkSession
) -> None:
    """One population (ended Stable, after formation) and one method (Spark's exact ``percentile``) for both."""
    out, page, summary = analysed
    overall = summary["overall"]
    data = gather(spark, out)
    assert data.steady is not None
    for key in ("rebalance_ms_p50", "rebalance_ms_p95", "rebalance_ms_p99", "rebalance_ms_max", "unowned_ps_p95"):
        assert data.steady[key] == overall[key], key
    assert kpi(page, "Duration p50")[0] == duration(overall["rebalance_ms_p50"])
    p95, p99 = kpi(page, "Duration p95 / p99")[0].split(" / ")
    assert (p95, p99) == (duration(overall["rebalance_ms_p95"]), duration(overall["rebalance_ms_p99"]))
    first = table_rows(section(page, "summary"))[0]
    assert first[0] == "Rebalance duration, after formation"
    assert first[1:] == [duration(overall[f"rebalance_ms_{p}"]) for p in ("p50", "p95", "p99", "max")]
    # The unowned time: after formation and of the formations, together summary.json's total.
    assert data.formation is not None
    together = data.steady["unowned_partition_seconds"] + data.formation["unowned_partition_seconds"]
    assert together == pytest.approx(overall["unowned_partition_seconds"], abs=0.01)
    assert data.formation["unowned_partition_seconds"] == pytest.approx(
        overall["formation_unowned_partition_seconds"], abs=0.01
    )
    value, sub = kpi(page, "Unowned partition-seconds")
    after = overall["unowned_partition_seconds"] - overall["formation_unowned_partition_seconds"]
    assert abs(number(value) - after) <= 1  # whole partition-seconds on the card
    found = re.search(r"\+([\d,]+) in formations, ([\d,]+) in all", sub)
    assert found is not None, sub
    assert abs(number(found.group(1)) - overall["formation_unowned_partition_seconds"]) <= 1
    assert abs(number(found.group(2)) - overall["unowned_partition_seconds"]) <= 1


def test_count_axes_have_whole_ticks_only(tmp_path: Path) -> None:
    """One or two rebalances, one expiry: matplotlib's default locator would put ticks at 0.5 of them."""
    t0 = 1_767_225_600_000
    data = ReportData(
        tmp_path,
        durations=[("eager", 30, 1), ("cooperative", 31, 2)],
        counts={"eager": 1, "cooperative": 2},
        detection_width_ms=100,
        detections=[(30, 1)],
        detection_range=(3_000, 3_050),
        first_ms=t0,
        last_ms=t0 + 60_000,
        bucket_ms=1_000,
        unowned=[(0, "eager", 3.0, 1), (5, "cooperative", 1.0, 2)],
    )
    figures = {
        "durations": plots._plot_durations(data).axes[0],
        "detections": plots._plot_detections(data).axes[0],
        "rebalances started": plots._plot_unowned(data).axes[1],  # the twin axis: a count
    }
    for name, axes in figures.items():
        axes.figure.canvas.draw()  # the locator runs at draw time
        low, high = axes.get_ylim()
        ticks = [t for t in axes.get_yticks() if low <= t <= high]
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), (name, ticks)
