"""A broker restart on the group page's timeline, in a real headless Chromium (issue 27).

An embedded broker on a data directory, two bundled confluent-kafka consumers in a group, the group's page open.
The broker is restarted as a SIGKILL would have it (``EmbeddedBroker.restart()``: connections dropped, no
clean-shutdown marker) on the same ports and directory. The page's event stream reconnects with the old run's
``since_seq`` and ``run_id``; the new run numbers its events from 1 again, and the page must still take them: the
timeline gets a restart mark (killed, what the start loaded, how long it took) over the span the broker was down,
and a third consumer started after the restart appears (its ``member_joined`` in the feed, its lane owning
partitions). No JavaScript exception or console error; the only failed loads are the page's calls while the
broker was down. Screenshots go where the other browser tests put theirs.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from broker.testing.embedded import EmbeddedBroker, embedded_settings
from tests.browser.devtools import Page
from tests.browser.test_console_browser import (
    LANES,
    PARTITIONS,
    TOPIC,
    artifacts,
    consumers,
    in_browser,
    needs_chromium_and_confluent,
    shoot,
)

GROUP = "console-restart"
ALL = " ".join(sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS)))
# The restart mark's data attributes, as a plain object (a DOMStringMap comes back empty by value); null if none.
RESTART = "(() => { const d = document.querySelector('[data-testid=restart]')?.dataset; return d ? {...d} : null; })()"
SEQS = "[...document.querySelectorAll('[data-testid=feed-row]')].map((r) => Number(r.dataset.seq))"
JOINED_ROWS = """[...document.querySelectorAll('[data-testid=feed-row][data-event=member_joined]')]
  .map((r) => ({text: r.textContent, seq: Number(r.dataset.seq)}))"""


def owning_all(count: int) -> str:
    return f"(() => {{ const l = {LANES}; return l.count === {count} && l.owned === {ALL!r} ? l : null; }})()"


def unexpected(problems: list[str]) -> list[str]:
    """What the page reported, less the failed loads of its calls while the broker was down (connection refused,
    the stream cut off): those are the restart, not a fault of the page."""
    return [p for p in problems if "net::ERR_" not in p]


async def restart_scenario(page: Page, broker: EmbeddedBroker, folder: Path, shots: list[Path]) -> None:
    await page.navigate(f"{broker.admin_url.rstrip('/')}/groups/{GROUP}")
    before = await page.wait_until(owning_all(2), 30, "two lanes owning every partition")
    assert await page.evaluate(RESTART) is None, "a broker's first start is no restart"
    old_seq = await page.evaluate(f"Math.max(...{SEQS})")
    await shoot(page, folder, "restart-1-before.png", shots)

    began = time.monotonic()
    await asyncio.to_thread(broker.restart)  # as a SIGKILL: the data directory left without its clean marker
    restarted_in = time.monotonic() - began
    started = f"(() => {{ const d = {RESTART}; return d?.started === 'true' ? d : null; }})()"
    mark = await page.wait_until(started, 20, "the restart mark")
    assert mark["clean"] == "false" and mark["label"].startswith("restart (killed): "), mark
    loaded = json.loads(mark["loaded"])
    assert loaded["groups"] >= 1 and loaded["topics"] >= 1, loaded
    assert float(mark["loadMs"]) >= 0 and " loaded in " in mark["label"], mark
    # The span the broker was down: from the old run's last event the page had to the new run's start.
    assert await page.evaluate("document.querySelectorAll('[data-testid=broker-down]').length") == 1
    tooltip = await page.evaluate("document.querySelector('[data-testid=restart] title').textContent")
    assert tooltip.startswith("broker killed, down about ") and "started at " in tooltip, tooltip
    # The feed has the new run's broker_stopped (told at the start) and broker_started.
    feed = await page.evaluate(
        "[...document.querySelectorAll('[data-testid=feed-row]')].map((r) => r.dataset.event).slice(0, 5)"
    )
    assert "broker_started" in feed and "broker_stopped" in feed, feed
    # The group came back with its members and their generation: the lanes are still there.
    assert (await page.evaluate(LANES))["members"] == before["members"]
    await shoot(page, folder, "restart-2-marked.png", shots)

    # The page keeps following the new run, whose seq started again at 1: a consumer started now shows up.
    with consumers(broker, folder, 1, group=GROUP, first=2):
        lanes = await page.wait_until(owning_all(3), 60, "three lanes owning every partition after the restart")
        assert set(before["members"]) < set(lanes["members"]), lanes
        joined = await page.wait_until(
            f"(() => {{ const j = {JOINED_ROWS}.filter((r) => r.text.includes('console-c2'));"
            " return j.length ? j : null; })()",
            10,
            "the new member's member_joined in the feed",
        )
        # Numbered from 1 again: at or below what the old run had reached, so a resume by seq alone would skip it.
        assert joined[0]["seq"] <= old_seq, (joined, old_seq)
        status = await page.wait_until("document.querySelector('[data-testid=status]')?.textContent === 'live'"
                                       " && 'live'", 10, "the status live again")
        await asyncio.sleep(0.5)
        await shoot(page, folder, "restart-3-after.png", shots)
    print(f"console restart test: broker restarted in {restarted_in:.1f} s; status {status!r}")
    assert unexpected(page.problems()) == [], page.problems()


@pytest.mark.timeout(240)
def test_the_timeline_marks_a_broker_restart_and_follows_the_new_run(tmp_path: Path) -> None:
    binary = needs_chromium_and_confluent()
    folder = artifacts(tmp_path)
    settings = embedded_settings(topics={TOPIC: PARTITIONS}, data_dir=str(tmp_path / "data"))
    with EmbeddedBroker(settings) as broker, consumers(broker, folder, 2, group=GROUP):
        broker.wait_for(GROUP, state="Stable", members=2, timeout=60)
        in_browser(
            binary,
            180,
            folder,
            "restart-failure.png",
            lambda page, shots: restart_scenario(page, broker, folder, shots),
        )
