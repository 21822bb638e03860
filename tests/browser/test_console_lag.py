"""The group page's offsets and lag in a real headless Chromium (issue 26): Kafka's columns per partition, the total
lag, and the lag-over-time chart sampled from the page's polls, against an embedded broker with a real kafka-python
producer and a consumer that commits. Records produced while the page is open raise the lag it shows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker.testing.embedded import run_broker
from tests.browser.devtools import Page, chromium_binary
from tests.browser.test_console_browser import artifacts, in_browser, shoot

GROUP = "console-lag"
TOPIC = "lagging"
ROWS = """[...document.querySelectorAll('[data-testid=offset-row]')].map((r) =>
  [...r.cells].map((c) => c.textContent))"""
CHART = "document.querySelector('[data-testid=lag-chart]')?.dataset"


def produce(bootstrap: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for partition, count in counts.items():
        for n in range(count):
            producer.send(TOPIC, f"r{n}".encode(), partition=partition)
    producer.flush()
    producer.close()


async def lag_scenario(
    page: Page, admin_url: str, bootstrap: str, member: str, folder: Path, shots: list[Path]
) -> None:
    await page.navigate(f"{admin_url.rstrip('/')}/groups/{GROUP}")
    rows = await page.wait_until(f"(() => {{ const r = {ROWS}; return r.length === 3 ? r : null; }})()", 15, "3 rows")
    heads = await page.evaluate(
        "[...document.querySelectorAll('[data-testid=offsets-table] th')].map((t) => t.textContent)"
    )
    assert heads == [
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert rows == [
        [TOPIC, "0", "6", "10", "4", member, "/127.0.0.1", "lag-page"],
        [TOPIC, "1", "3", "3", "0", member, "/127.0.0.1", "lag-page"],
        [TOPIC, "2", "-", "0", "-", member, "/127.0.0.1", "lag-page"],
    ]
    assert await page.evaluate("document.querySelector('[data-testid=total-lag]').textContent") == "lag 4"
    # A second poll, then more records: the lag rises on the page and its chart's last point follows.
    await page.wait_until(f"Number({CHART}?.points) >= 2", 10, "two samples of lag")
    produce(bootstrap, {0: 6})
    await page.wait_until(
        "document.querySelector('[data-testid=offset-row][data-partition=\"0\"] [data-testid=lag]')?.textContent"
        " === '10'",
        10,
        "the new lag of partition 0",
    )
    chart = await page.wait_until(f"{CHART}?.last === '10' && {{...{CHART}}}", 10, "the chart's last total")
    assert chart["max"] == "10" and int(chart["points"]) >= 3, chart
    points = await page.evaluate(
        "document.querySelector('[data-testid=lag-line]').getAttribute('points').split(' ').length"
    )
    assert points >= int(chart["points"]) >= 3  # a poll may have added one between the two reads
    parts = await page.evaluate(
        "[...document.querySelectorAll('[data-testid=lag-part]')].map((p) => p.dataset.partition)"
    )
    assert parts == [f"{TOPIC}-0", f"{TOPIC}-1"], parts  # partition 2 has no lag yet: nothing committed
    await shoot(page, folder, "lag-top.png", shots)
    await page.evaluate("document.querySelector('[data-testid=offsets-table]').scrollIntoView()")
    path = folder / "lag.png"  # the offsets table and the chart, scrolled into view
    path.write_bytes(await page.screenshot())
    shots.append(path)
    assert page.problems() == [], page.problems()


@pytest.mark.timeout(180)
def test_the_group_page_shows_offsets_lag_and_lag_over_time(tmp_path: Path) -> None:
    binary = chromium_binary()
    assert binary is not None, "no Chromium binary (/usr/bin/chromium)"
    folder = artifacts(tmp_path)
    with run_broker(topics={TOPIC: 3}) as broker:
        produce(broker.bootstrap, {0: 10, 1: 3})
        consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=broker.bootstrap,
            group_id=GROUP,
            client_id="lag-page",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        try:
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < 3:
                assert time.monotonic() < deadline, "the consumer was not assigned the topic"
                consumer.poll(timeout_ms=200, max_records=1)
            consumer.commit(
                {
                    TopicPartition(TOPIC, 0): OffsetAndMetadata(6, "", -1),
                    TopicPartition(TOPIC, 1): OffsetAndMetadata(3, "", -1),
                }
            )
            (member,) = broker.group(GROUP)["members"]
            in_browser(
                binary,
                90,
                folder,
                "lag-failure.png",
                lambda page, shots: lag_scenario(
                    page, broker.admin_url, broker.bootstrap, member["member_id"], folder, shots
                ),
            )
            print(json.dumps(broker.group(GROUP)["offsets"]))
        finally:
            consumer.close()
