"""The analytics report: rendered from Parquet tables, self-contained, and clean in a real (headless) Chromium.

The first tests build small tables with the job's exact schemas (``broker.analytics.schema``) so the report is
tested on its own; the last runs the real job over a generated log and renders what it wrote. Each browser test
loads ``report.html`` from ``file://`` in headless Chromium over the DevTools protocol, fails on any JavaScript
exception, console or log error, failed load or request that leaves the file (a self-contained page makes none),
checks every embedded plot decoded, and saves a full-page screenshot next to the report (``report.png``).
The SparkSession is the analytics tests' shared one (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (the `analytics` extra)")

from matplotlib import image as mimage
from pyspark.sql import SparkSession

from broker.analytics import job, report
from broker.analytics.generate import generate
from broker.analytics.schema import TABLE_SCHEMAS
from tests.browser.devtools import DevTools, chromium, chromium_binary

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOSTILE = '{"v":1,"seq":7,"event":"member_joined","group_id":"<script>alert(1)</script> & co"'


# -- tables with the job's schemas -------------------------------------------------------------------------------------


def write_table(spark: SparkSession, out: Path, name: str, rows: Sequence[dict[str, Any]]) -> None:
    """Rows as dicts; fields a row leaves out are null."""
    schema = TABLE_SCHEMAS[name]
    tuples = [tuple(row.get(f.name) for f in schema.fields) for row in rows]
    spark.createDataFrame(tuples, schema).coalesce(1).write.mode("overwrite").parquet(str(out / name))


def sample_tables(spark: SparkSession, out: Path) -> None:
    """Four groups over an hour: eager, cooperative and consumer-protocol (KIP-848) rebalances, expiries, a
    restart, bad input lines."""
    causes = ["member_joined", "member_expired", "member_left", "member_rejoined", "forced"]
    rebalances = []
    for g, group in enumerate(["orders-etl", "payments-ledger", "clicks-indexer"]):
        cooperative = g == 1
        for i in range(30 + 10 * g):
            start = T0 + i * 90_000 + g * 7_000
            duration = [2_500, 3_100, 45_003, 800, 6_000, 300_012][(i + g) % 6] + 17 * i
            open_ = group == "clicks-indexer" and i == 49
            rebalances.append(
                {
                    "group_id": group,
                    "run_id": "a1b2c3d4e5f6" if i < 20 else "0f9e8d7c6b5a",
                    "generation": (i % 20) + 1,
                    "previous_generation": i % 20,
                    "cause": causes[(i * (g + 1)) % len(causes)],
                    "trigger_member": f"consumer-{group}-{i % 3}-5b0e",
                    "restarts": 1 if i % 11 == 0 else 0,
                    "start_ms": start,
                    "end_ms": None if open_ else start + duration,
                    "duration_ms": None if open_ else duration,
                    "outcome": "open" if open_ else ("empty" if i == 7 else "stable"),
                    "members_before": 3,
                    "members_after": 2 if i % 4 == 1 else 3,
                    "partitions_moved": i % 5,
                    "partitions_unowned": (i % 3) if cooperative else 0,
                    "unowned_partition_seconds": 12 * duration / 1000,
                    "protocol": "cooperative-sticky" if cooperative else "range",
                    "rebalance_protocol": None if i == 7 else ("cooperative" if cooperative else "eager"),
                    "broker_rebalance_ms": None if open_ else duration,
                    "partitions": 12,
                }
            )
    for i in range(20):  # a consumer group: its rebalances are short but for one, the slowest of all
        start = T0 + i * 120_000 + 3_000
        duration = 400_000 if i == 13 else 150 + 40 * i
        rebalances.append(
            {
                "group_id": "orders-kip848", "run_id": "a1b2c3d4e5f6", "generation": i + 1,
                "previous_generation": i, "cause": ["member_joined", "member_expired", "metadata_changed"][i % 3],
                "trigger_member": f"m{i % 4}", "restarts": 0, "start_ms": start, "end_ms": start + duration,
                "duration_ms": duration, "outcome": "stable", "members_before": 3, "members_after": 3,
                "partitions_moved": i % 3, "unowned_partition_seconds": 0.3, "protocol": "uniform",
                "rebalance_protocol": "consumer", "partitions": 12, "revocations": i % 2,
            }
        )  # fmt: skip
    write_table(spark, out, "rebalances", rebalances)
    members = [
        {
            "group_id": "orders-etl",
            "run_id": "a1b2c3d4e5f6",
            "member_id": f"consumer-orders-etl-{i}-5b0e",
            "client_id": f"consumer-orders-etl-{i}",
            "client_host": "/10.0.0.7",
            "joined_ms": T0 + i * 1000,
            "ended_ms": T0 + 600_000 + i,
            "duration_ms": 600_000 - 999 * i,
            "end": ["expired", "left", "kicked", "open"][i % 4],
            "end_cause": ["session_timeout", "leave_group", "kicked", None][i % 4],
            "since_last_heartbeat_ms": [10_003, None, 1_200, None][i % 4] if i % 8 else 45_002,
            "session_timeout_ms": 10_000,
        }
        for i in range(24)
    ]
    write_table(spark, out, "members", members)
    ownership = [
        {
            "group_id": "orders-etl",
            "run_id": "a1b2c3d4e5f6",
            "topic": "orders",
            "partition": p,
            "member_id": "consumer-orders-etl-0-5b0e",
            "generation": 1,
            "start_ms": T0,
            "end_ms": T0 + 90_000,
            "duration_ms": 90_000,
            "end": "moved",
        }
        for p in range(12)
    ]
    write_table(spark, out, "ownership", ownership)
    stats = {
        "rebalance_ms_p50": 3100.0,
        "rebalance_ms_p95": 45003.0,
        "rebalance_ms_p99": 300012.0,
        "rebalance_ms_max": 300500.0,
        "detection_ms_p50": 10003.0,
        "detection_ms_p95": 45002.0,
        "detection_ms_p99": 45002.0,
        "detection_ms_max": 45002.0,
        "unowned_ps_p50": 37.2,
        "unowned_ps_p95": 540.0,
        "unowned_ps_p99": 3600.1,
        "unowned_ps_max": 3601.0,
    }
    summary = [
        {
            "scope": "group",
            "group_id": group,
            "rebalances": n,
            **stats,
            "unowned_partition_seconds": 1000.0 * n,
            "causes": {"member_joined": n // 2, "member_expired": n - n // 2},
            "expirations": 6,
            "eager": 0 if group in ("payments-ledger", "orders-kip848") else n,
            "cooperative": n if group == "payments-ledger" else 0,
            "consumer": n if group == "orders-kip848" else 0,
        }
        for group, n in (("orders-etl", 30), ("payments-ledger", 40), ("clicks-indexer", 50), ("orders-kip848", 20))
    ]
    summary.append(
        {
            "scope": "all",
            "group_id": None,
            "rebalances": 140,
            **stats,
            "unowned_partition_seconds": 120_000.0,
            "causes": {c: 24 for c in causes},
            "expirations": 18,
            "eager": 80,
            "cooperative": 39,
            "consumer": 20,
        }
    )
    write_table(spark, out, "summary", summary)
    write_table(
        spark,
        out,
        "input",
        [
            {"kind": "lines", "count": 5012, "examples": []},
            {"kind": "parsed", "count": 5009, "examples": []},
            {"kind": "malformed", "count": 2, "examples": [f"/logs/events.jsonl:17: {HOSTILE}", "/logs/x:9: oops"]},
            {"kind": "unknown_event", "count": 0, "examples": []},
            {"kind": "missing_field", "count": 1, "examples": ['/logs/events.jsonl:4: {"v":1,"event":"x"}']},
        ],
    )
    (out / "summary.json").write_text(json.dumps({"inputs": ["/logs/events.jsonl"]}), encoding="utf-8")


# -- headless Chromium over the DevTools protocol ----------------------------------------------------------------------


#: Every element of the page that scrolls its content (the Groups table was clipped behind a scrollbar, issue 26).
CLIPPED = """
Array.from(document.querySelectorAll("body *")).filter(e => {
  const style = getComputedStyle(e);
  const clips = v => v !== "visible";
  return (clips(style.overflowX) && e.scrollWidth > e.clientWidth + 1)
      || (clips(style.overflowY) && e.scrollHeight > e.clientHeight + 1);
}).map(e => `${e.tagName.toLowerCase()}#${e.id} ${e.scrollWidth}x${e.scrollHeight}`
          + ` in ${e.clientWidth}x${e.clientHeight}`)
"""


@dataclass
class Browsed:
    problems: list[str] = field(default_factory=list)  # exceptions, errors, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    images: int = 0
    images_decoded: bool = False
    # Elements whose content is clipped behind a scrollbar (more to scroll than shown, overflow not visible):
    # "section#groups 1480x620 in 1074x620"
    scrolling: list[str] = field(default_factory=list)
    width: int = 0
    height: int = 0
    screenshot: bytes = b""


async def _browse(binary: str, page: Path, profile: Path) -> Browsed:
    async with chromium(binary, profile) as tools:
        return await _inspect(tools, page)


async def _inspect(tools: DevTools, page: Path) -> Browsed:
    target = await tools.send("Target.createTarget", {"url": "about:blank"})
    attached = await tools.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
    session = attached["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        await tools.send(f"{domain}.enable", session=session)
    metrics = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    await tools.send("Emulation.setDeviceMetricsOverride", metrics, session)
    tools.events.clear()
    navigated = await tools.send("Page.navigate", {"url": page.as_uri()}, session)
    result = Browsed()
    if navigated.get("errorText"):
        result.problems.append(f"navigation: {navigated['errorText']}")
        return result
    await tools.wait_for("Page.loadEventFired")
    checked = await tools.send(
        "Runtime.evaluate",
        {
            "expression": "[document.images.length,"
            " Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)]",
            "returnByValue": True,
        },
        session,
    )
    result.images, result.images_decoded = checked["result"]["value"]
    clipped = await tools.send("Runtime.evaluate", {"expression": CLIPPED, "returnByValue": True}, session)
    result.scrolling = clipped["result"]["value"]
    layout = await tools.send("Page.getLayoutMetrics", session=session)
    size = layout.get("cssContentSize") or layout["contentSize"]
    result.width, result.height = int(size["width"]), min(int(size["height"]) + 1, 20_000)
    await tools.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": result.height}, session)
    shot = await tools.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
    result.screenshot = base64.b64decode(shot["data"])
    await asyncio.sleep(0.2)  # late console messages and failed loads
    for event in tools.events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.exceptionThrown":
            result.problems.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            result.problems.append(f"console {params['type']}: {params.get('args')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
            result.problems.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
        elif method == "Network.loadingFailed":
            result.problems.append(f"failed load: {params.get('errorText')} ({params.get('requestId')})")
        elif method == "Network.requestWillBeSent":
            result.requests.append(params["request"]["url"])
    return result


def browse(page: Path) -> Browsed:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    # Chromium's helper processes may still write the profile for a moment after the browser exits: a leftover
    # file there is no finding about the report (seen once in CI as "Directory not empty: 'Default'").
    with tempfile.TemporaryDirectory(prefix="report-chromium-", ignore_cleanup_errors=True) as profile:
        return asyncio.run(_browse(binary, page, Path(profile)))


def check_in_browser(page: Path) -> Path:
    """Load the page in Chromium, assert it is clean and self-contained; the screenshot's path."""
    browsed = browse(page)
    assert browsed.problems == [], browsed.problems
    assert all(url.startswith(("file://", "data:")) for url in browsed.requests), browsed.requests
    assert browsed.images == len(report.PLOTS) and browsed.images_decoded, "every plot decodes"
    assert browsed.scrolling == [], "nothing is clipped behind a scrollbar: the tables are laid out at full size"
    screenshot = page.with_name("report.png")
    screenshot.write_bytes(browsed.screenshot)
    assert browsed.screenshot.startswith(b"\x89PNG\r\n\x1a\n") and len(browsed.screenshot) > 50_000
    pixels = mimage.imread(io.BytesIO(browsed.screenshot))
    height, width = pixels.shape[:2]
    assert width == 1280 and height == browsed.height > 2000, (width, height)
    rgb = pixels[..., :3]
    background = rgb[5, 5]
    differs = (abs(rgb - background).sum(axis=2) > 0.1).mean()
    assert differs > 0.05, f"the page is nearly blank ({differs:.1%} differs from the background)"
    colours = {tuple(round(float(c), 2) for c in px) for px in rgb[:: max(1, height // 200), ::16].reshape(-1, 3)}
    assert len(colours) > 40, "plots and text, not a flat page"
    return screenshot


# -- the tests ---------------------------------------------------------------------------------------------------------


def assert_self_contained(text: str) -> None:
    lowered = text.lower()
    assert "<script" not in lowered and "<link" not in lowered and "@import" not in lowered
    assert "http://" not in lowered and "https://" not in lowered and "//fonts" not in lowered
    assert lowered.count('src="data:image/png;base64,') == len(report.PLOTS)


@pytest.mark.timeout(600)  # Spark and Chromium start on a shared 2-core machine
def test_the_report_from_tables_is_self_contained_and_renders_cleanly(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    sample_tables(spark, out)
    page = report.render(out, spark, top=2, slowest=5)
    assert page == out / "report.html"
    text = page.read_text(encoding="utf-8")
    assert_self_contained(text)
    for name in report.PLOTS:
        png = (out / "plots" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000, name
    # Bad lines are visible, escaped: the hostile example is text, not markup.
    assert "3 of 5,012 lines were not used" in text
    assert html.escape(f"/logs/events.jsonl:17: {HOSTILE}") in text
    assert '{"v":1,"event":"x"}' in html.unescape(text)
    # Tables: the top groups, causes and the slowest rebalances.
    groups = text.split('id="groups"')[1].split('id="slowest"')[0]
    assert "clicks-indexer" in groups and "payments-ledger" in groups and "orders-etl" not in groups
    assert "member_expired" in text and "forced" in text
    assert text.count("<tr>") + text.count("<tr ") > 20
    assert "5.01 min" in text  # the slowest rebalance, 300,012 ms + 17 * 30 ... in a person's unit
    # The consumer protocol next to eager and cooperative: the counts, the groups' column, the slowest's tag.
    # Counted from the rebalances, formations (generation 0, or after Empty) and no protocol apart: 140 in all.
    assert "71 eager, 36 cooperative, 19 consumer; +11 formations, +3 with no protocol" in text
    assert "eager / coop / consumer / none" in groups
    slowest = text.split('id="slowest"')[1].split('id="input"')[0]
    assert "orders-kip848" in slowest and '<span class="tag consumer">consumer</span>' in slowest
    screenshot = check_in_browser(page)
    assert screenshot.exists()


@pytest.mark.timeout(600)
def test_empty_tables_render_a_page_that_says_so(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    for name in ("rebalances", "members", "ownership", "summary"):
        write_table(spark, out, name, [])
    write_table(spark, out, "input", [{"kind": "lines", "count": 0, "examples": []}])
    page = report.render(out, spark)
    text = page.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert "no rebalances" in text
    assert all((out / "plots" / f"{name}.png").stat().st_size > 2000 for name in report.PLOTS)


@pytest.mark.timeout(900)
def test_the_real_job_over_a_generated_log_then_its_report(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    generated = generate(log, 20_000, seed=11, bad_lines=3)
    out = tmp_path / "analysis"
    result = job.run([str(log)], str(out), spark=spark)
    assert result.rows["rebalances"] > 100
    page = report.render(out, spark)
    text = page.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert f"{generated.bad_lines} of {generated.events + generated.bad_lines:,} lines were not used" in text
    assert "member_expired" in text and "cooperative" in text and "eager" in text
    by_protocol = re.search(r"([\d,]+) eager, ([\d,]+) cooperative, ([\d,]+) consumer", text)
    assert by_protocol is not None and all(int(n.replace(",", "")) > 0 for n in by_protocol.groups()), "all three"
    check_in_browser(page)
