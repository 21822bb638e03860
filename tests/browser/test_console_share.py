"""A share group's page in a real headless Chromium (issue 28): the groups list with its type, the members (subscribed
topics, assignment, epoch), each share-partition's SPSO and SPEO with the in-flight window, and the record table:
who holds which offsets, the delivery counts, the lock deadlines. Live: an acknowledgement sent while the page is
open shows up without a reload.

The broker is embedded (``broker.testing.embedded``); the share group is driven over TCP by the raw share client
of the wire tests (ShareGroupHeartbeat, ShareFetch with acknowledgements), two members on two connections, so the
record states are exact: member m1 fetches offsets 0-4, ACCEPTs 0, RELEASEs 1, REJECTs 2 (ShareAcknowledge) and keeps
3-4; member m2 then fetches 1 again (delivery count 2).

Screenshots go to ``$TEST_ARTIFACTS`` (else the test's ``tmp_path``); with
``CONSOLE_SHARE_README_SCREENSHOT=docs/images/console-share.png`` the record view is also written there, for the
README.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker
from tests.browser.devtools import Page, chromium_binary
from tests.browser.test_console_browser import artifacts, in_browser, shoot
from tests.storage import make_batch
from tests.wire.client import WireClient
from tests.wire.share_client import Acks, acquired, heartbeat, set_group_config, share_acknowledge, share_fetch
from tests.wire.test_data_plane import produce_request

GROUP = "console-share"
TOPIC = "tasks"
ACCEPT, RELEASE, REJECT = 1, 2, 3
NONE = "\u2013"  # the console's en dash for "no value", and its offset ranges' separator

RECORDS = """[...document.querySelectorAll('[data-testid=share-record-row]')].map((r) =>
  [...r.cells].slice(0, 7).map((c) => c.textContent))"""
PARTITION = """[...document.querySelectorAll('[data-testid=share-partition-row]')].map((r) =>
  [...r.cells].map((c) => c.textContent))"""
MEMBERS = """[...document.querySelectorAll('[data-testid=member-row]')].map((r) => [r.dataset.member,
  r.querySelector('[data-testid=subscribed]')?.textContent, r.querySelector('[data-testid=assigned]')?.textContent,
  r.querySelector('[data-testid=member-epoch]')?.textContent]).sort()"""


async def drive_group(broker: EmbeddedBroker) -> tuple[WireClient, WireClient, Any]:
    """m1 and m2 in the group on their own connections, the records in the states the module docstring says."""
    one = await WireClient.connect(broker.port, "share-one")
    two = await WireClient.connect(broker.port, "share-two")
    join = await one.call(heartbeat(GROUP, "m1", 0, (TOPIC,)))
    topic_id = join.assignment.topic_partitions[0].topic_id
    assert (await two.call(heartbeat(GROUP, "m2", 0, (TOPIC,)))).member_epoch == 2
    assert (await one.call(heartbeat(GROUP, "m1", 1))).member_epoch == 2  # m1 reaches the new epoch too
    await set_group_config(one, GROUP, share_auto_offset_reset="earliest", share_record_lock_duration_ms="60000")
    await one.call(produce_request(11, [(0, make_batch(5))], topic=TOPIC))
    assert acquired(await one.call(share_fetch(GROUP, "m1", 0, topic_id, [0]))) == [(0, 4, 1)]
    acks: Acks = {0: [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 2, (REJECT,))]}
    await one.call(share_acknowledge(GROUP, "m1", 1, topic_id, acks))  # a fetch would take 1 back at once
    assert acquired(await two.call(share_fetch(GROUP, "m2", 0, topic_id, [0]))) == [(1, 1, 2)]
    return one, two, topic_id


async def share_scenario(page: Page, broker: EmbeddedBroker, folder: Path, shots: list[Path]) -> None:
    one, two, topic_id = await drive_group(broker)
    try:
        # The groups page lists the share group with its type.
        await page.navigate(broker.admin_url.rstrip("/") + "/")
        row = f"document.querySelector({json.dumps(f'[data-testid=group-row][data-group={json.dumps(GROUP)}]')})"
        cells = await page.wait_until(f"{row} && [...{row}.cells].map((c) => c.textContent)", 15, "the group's row")
        assert cells[:6] == [GROUP, "share", "Stable", "epoch 2 (target 2)", "2", NONE], cells  # no rebalances

        await page.click(f"[data-testid=group-row][data-group={json.dumps(GROUP)}] a")
        members = await page.wait_until(f"(() => {{ const m = {MEMBERS}; return m.length === 2 ? m : null; }})()",
                                        15, "two member rows")  # fmt: skip
        assert members == [["m1", TOPIC, f"{TOPIC} 0", "2"], ["m2", TOPIC, f"{TOPIC} 0", "2"]], members
        heads = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=members-table] th')].map((t) => t.textContent)"
        )
        assert heads[:4] == ["member", "subscribed", "assigned", "epoch"], heads
        facts = await page.evaluate("document.querySelector('[data-testid=group-facts]').textContent")
        assert facts == "shareStableepoch 2 · target 22 member(s)simple", facts  # no lag: it commits no offsets
        # A share group's page: an assignment timeline (each member's lane, the partition on both), no offsets and lag.
        lanes = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=lane]')].map((l) => [l.dataset.member, l.dataset.partitions])"
        )
        assert sorted(lanes) == [["m1", f"{TOPIC}-0"], ["m2", f"{TOPIC}-0"]], lanes  # both assigned the partition
        title = await page.evaluate("document.querySelector('[data-testid=timeline-title]').textContent")
        assert title == "Assignment timeline", title
        assert await page.evaluate("document.querySelector('[data-testid=offsets-section]').hidden")
        assert not await page.evaluate("document.querySelector('[data-testid=share-panel]').hidden")

        partitions = await page.wait_until(f"(() => {{ const p = {PARTITION}; return p.length ? p : null; }})()", 10,
                                           "the share-partition row")  # fmt: skip
        # topic, partition, SPSO, SPEO, window, in flight, available, acquired, acknowledged, archived, deliveries,
        # redeliveries: offset 0 is done, so the window is 1-4.
        assert partitions == [[TOPIC, "0", "1", "4", "", "4", "0", "3", "0", "1", "6", "1"]], partitions
        segments = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=share-segment]')].map((s) => [s.dataset.state,"
            " parseFloat(s.style.left), parseFloat(s.style.width)])"
        )
        assert segments == [["acquired", 0, 25], ["archived", 25, 25], ["acquired", 50, 50]], segments

        legend = await page.evaluate("document.querySelector('[data-testid=share-panel] .legend').textContent")
        assert legend.endswith("coloured by state:  available  acquired  acknowledged  archived "), legend
        records = await page.wait_until(f"(() => {{ const r = {RECORDS}; return r.length === 3 ? r : null; }})()",
                                        10, "three runs of records")  # fmt: skip
        assert records == [
            [TOPIC, "0", "1", "1", "acquired", "2", "share-two m2"],
            [TOPIC, "0", "2", "1", "archived", "1", NONE],
            [TOPIC, "0", f"3{NONE}4", "2", "acquired", "1", "share-one m1"],
        ], records
        left = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=lock-left]')].map((c) => c.textContent)"
        )
        assert left[1] == NONE and all(cell.endswith(" s") and 30 < float(cell[:-2]) <= 60 for cell in left[::2]), left
        await shoot(page, folder, "share-1-held.png", shots)
        await page.evaluate("document.querySelector('[data-testid=share-panel]').scrollIntoView()")
        path = folder / "share-2-records.png"
        png = await page.screenshot()
        path.write_bytes(png)
        shots.append(path)
        if readme := os.environ.get("CONSOLE_SHARE_README_SCREENSHOT"):
            Path(readme).write_bytes(png)

        # Live: m1 ACCEPTs 3-4 (ShareAcknowledge, as a consumer's commit_sync sends it); the page follows, no reload.
        await one.call(share_acknowledge(GROUP, "m1", 2, topic_id, {0: [(3, 4, (ACCEPT,))]}))
        records = await page.wait_until(
            f"(() => {{ const r = {RECORDS}; return r.length === 3 && r[2][4] === 'acknowledged' ? r : null; }})()",
            10, "3-4 acknowledged on the page",
        )  # fmt: skip
        assert records[2] == [TOPIC, "0", f"3{NONE}4", "2", "acknowledged", "1", NONE], records
        counts = await page.evaluate(
            "['available', 'acquired', 'acknowledged', 'archived'].map((s) => "
            "document.querySelector(`[data-testid=count-${s}]`).textContent)"
        )
        assert counts == ["0", "1", "2", "1"], counts
        feed = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=feed-row]')].map((r) => r.dataset.event)"
        )
        assert {"share_member_joined", "records_acquired", "records_released", "records_acknowledged"} <= set(feed)
        details = await page.evaluate(
            "[...document.querySelectorAll('[data-testid=feed-row][data-event=records_acquired] .detail')]"
            ".map((d) => d.textContent)"
        )
        wanted = (f"member_id=m2  partition={TOPIC}-0  offsets=1  records=1  delivery_count=2  redelivered=1  "
                  "lock=1.0 min")  # fmt: skip
        assert wanted in details, details
        assert page.problems() == [], page.problems()
    finally:
        await one.close()
        await two.close()


@pytest.mark.timeout(180)
def test_the_share_group_page_shows_members_partitions_and_who_holds_what(tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    folder = artifacts(tmp_path)
    with run_broker(topics={TOPIC: 1}) as broker:
        in_browser(binary, 90, folder, "share-failure.png",
                   lambda page, shots: share_scenario(page, broker, folder, shots))  # fmt: skip
