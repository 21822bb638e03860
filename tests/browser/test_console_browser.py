"""The web console in a real headless Chromium, against a real broker and three real consumer processes.

A broker in this process (``broker.testing.embedded``, control API on a free port, no initial rebalance delay),
three bundled consumers (``python -m broker.chaos.consumer``, confluent-kafka, 6 s sessions) in a group over a
6-partition topic. The test opens the group's page and asserts what it shows: three lanes owning all partitions;
after a fault rule added from the page's form (JoinGroup delayed, so the next rebalance is slow enough to see) and
a SIGKILL of one consumer, the expiry marker saying "expired" and the silence it took, the group mid-rebalance,
then two lanes owning all partitions; after pressing Kick on a member and confirming in the dialog, that member's
lane and row gone (its lane kept below, faded, ended "kicked"). No JavaScript exception, console error or failed
load along the way.

Screenshots go to ``$TEST_ARTIFACTS`` (else the test's ``tmp_path``); the test prints where. With
``CONSOLE_README_SCREENSHOT=docs/images/console.png`` it also writes the mid-rebalance one there, for the README.
Every wait is bounded: a wrong page fails the test, it never hangs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker
from tests.browser.devtools import Page, chromium, chromium_binary
from tests.conftest import ROOT

GROUP = "console-demo"
TOPIC = "orders"
PARTITIONS = 6
SESSION_MS = 6000
ALL = " ".join(sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS)))

# The partitions the page's active lanes own, sorted and joined, and how many active lanes there are.
LANES = """(() => {
  const lanes = [...document.querySelectorAll('[data-testid=lane]')];
  const owned = lanes.flatMap((l) => l.dataset.partitions.split(' ').filter(Boolean)).sort();
  return {count: lanes.length, owned: owned.join(' '), members: lanes.map((l) => l.dataset.member),
          each: lanes.map((l) => l.dataset.partitions)};
})()"""


def find(testid: str, member: str) -> str:
    """JavaScript for the element with this data-testid and data-member (null if none)."""
    return f"document.querySelector({json.dumps(f'[data-testid={testid}][data-member={json.dumps(member)}]')})"


def artifacts(tmp_path: Path) -> Path:
    where = os.environ.get("TEST_ARTIFACTS")
    folder = Path(where) / "console" if where else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def consumers(
    broker: EmbeddedBroker, folder: Path, count: int, group: str = GROUP, protocol: str = "classic", first: int = 0
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` bundled consumers, client ids ``console-c<first>`` on; killed when the block ends."""
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(first, first + count):
            argv = [
                sys.executable, "-m", "broker.chaos.consumer", "--client", "confluent",
                "--bootstrap", broker.bootstrap, "--group", group, "--topic", TOPIC, "--client-id", f"console-c{i}",
                "--out", str(folder / f"{group}-c{i}.out"), "--group-protocol", protocol,
            ]  # fmt: skip
            if protocol == "classic":  # a consumer group's timers are the broker's (consumer-groups spec 7)
                argv += ["--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", "500"]
            with (folder / f"{group}-c{i}.stderr").open("wb") as stderr:
                processes.append(subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr))
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def member_of(broker: EmbeddedBroker, client_id: str) -> str:
    for member in broker.group(GROUP)["members"]:
        if member["client_id"] == client_id:
            return str(member["member_id"])
    raise AssertionError(f"no member with client id {client_id} in {broker.group(GROUP)}")


async def shoot(page: Page, folder: Path, name: str, shots: list[Path]) -> bytes:
    await page.evaluate("window.scrollTo(0, 0)")  # a click may have scrolled: the timeline is at the top
    png = await page.screenshot()
    path = folder / name
    path.write_bytes(png)
    shots.append(path)
    return png


async def scenario(page: Page, broker: EmbeddedBroker, processes: list[Any], folder: Path, shots: list[Path]) -> None:
    timings: dict[str, float] = {}
    began = time.monotonic()

    def lap(name: str) -> None:
        timings[name] = round(time.monotonic() - began, 1)

    # The groups page lists the group, Stable, with its rebalances so far; its link opens the group page.
    await page.navigate(broker.admin_url.rstrip("/") + "/")
    row = f"document.querySelector({json.dumps(f'[data-testid=group-row][data-group={json.dumps(GROUP)}]')})"
    cells = await page.wait_until(
        f"{row}?.dataset.state === 'Stable' && [...{row}.cells].map((c) => c.textContent)", 15, "the group's row"
    )
    assert cells[:3] == [GROUP, "classic", "Stable"] and cells[3].startswith("gen ") and cells[4] == "3", cells
    assert int(cells[5]) >= 1 and cells[6] == "joined", cells
    await page.click(f"[data-testid=group-row][data-group={json.dumps(GROUP)}] a")
    await page.wait_until(f"location.hash === '#/groups/{GROUP}'", 5, "the group page")
    # Three lanes, owning all six partitions between them.
    lanes = await page.wait_until(
        f"(() => {{ const l = {LANES}; return l.count === 3 && l.owned === {ALL!r} ? l : null; }})()",
        30,
        "three lanes owning every partition",
    )
    assert sorted(lanes["members"]) == sorted(m["member_id"] for m in broker.group(GROUP)["members"])
    assert await page.evaluate("document.querySelectorAll('[data-testid=member-row]').length") == 3
    assert await page.evaluate("!!document.querySelector('[data-testid=formation]')"), "the formation is marked"
    lap("three lanes")
    await shoot(page, folder, "1-three-lanes.png", shots)

    # A fault rule from the page's form: the next two JoinGroups of the group wait 2.5 s, so the rebalance after
    # the kill lasts long enough to be seen (and photographed) mid-way.
    await page.evaluate("document.querySelector('[data-testid=fault-api]').value = 'JoinGroup'")
    await page.evaluate("document.querySelector('[data-testid=fault-action]').value = 'delay'")
    await page.evaluate("document.querySelector('[data-testid=fault-delay]').value = '2500'")
    await page.evaluate("document.querySelector('[data-testid=fault-count]').value = '2'")
    await page.click("[data-testid=fault-add]")
    await page.wait_until("document.querySelector('[data-testid=confirm-dialog]').open", 5, "the confirm dialog")
    await page.click("[data-testid=confirm-ok]")
    await page.wait_until("document.querySelectorAll('[data-testid=fault-rule]').length === 1", 10, "the rule listed")
    rules = broker.faults()
    assert len(rules) == 1 and rules[0]["api"] == "JoinGroup" and rules[0]["delay_ms"] == 2500, rules
    assert rules[0]["group_id"] == GROUP

    # SIGKILL one consumer: nothing is said, the broker notices when its session runs out.
    victim = member_of(broker, "console-c0")
    processes[0].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    # Its session bar turns amber past half the session, then red near expiry, before the broker evicts it.
    bar = f"{find('member-row', victim)}?.querySelector('[data-testid=session-bar]')?.dataset.level"
    await page.wait_until(f"{bar} === 'amber'", SESSION_MS / 1000, "the silent member's bar amber")
    assert time.monotonic() - killed_at >= SESSION_MS / 2000 - 1.5
    await page.wait_until(f"{bar} === 'red'", SESSION_MS / 1000, "the silent member's bar red")
    marker = await page.wait_until(
        "(() => { const m = [...document.querySelectorAll('[data-testid=marker][data-cause=member_expired]')];"
        " return m.length ? m[m.length - 1].dataset.label : null; })()",
        SESSION_MS / 1000 + 15,
        "the expiry marker",
    )
    lap("expiry marker")
    assert marker.startswith("expired after ") and marker.endswith(" s silence"), marker
    silence = float(marker.removeprefix("expired after ").removesuffix(" s silence"))
    assert SESSION_MS / 1000 <= silence < SESSION_MS / 1000 + 3, marker
    assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1.5, "the broker waited for the session to run out"
    # Mid-rebalance: the survivors' JoinGroups are held back by the rule, the partitions shaded as unowned.
    await page.wait_until(
        "document.querySelector('[data-testid=group-state]')?.textContent === 'PreparingRebalance'"
        " && document.querySelectorAll('[data-testid=gap]').length > 0",
        5,
        "the group mid-rebalance, with its unowned partitions shaded",
    )
    await asyncio.sleep(1.0)  # let the shaded gap grow visibly
    png = await shoot(page, folder, "2-mid-rebalance.png", shots)
    if readme := os.environ.get("CONSOLE_README_SCREENSHOT"):
        Path(readme).write_bytes(png)
    lap("mid-rebalance")

    # The new layout: two lanes, all partitions between them; the victim's lane below, ended "expired".
    lanes = await page.wait_until(
        f"(() => {{ const l = {LANES}; return l.count === 2 && l.owned === {ALL!r} ? l : null; }})()",
        20,
        "two lanes owning every partition",
    )
    assert victim not in lanes["members"]
    departed = await page.evaluate(f"{find('lane-departed', victim)}?.dataset.ended")
    assert departed == "expired", departed
    lap("two lanes")
    await shoot(page, folder, "3-two-lanes.png", shots)

    # Kick one of the two from the members table, confirmed in the dialog.
    kicked = lanes["members"][0]
    await page.wait_until(f"!!{find('kick', kicked)}", 5, "the Kick button")
    await page.click(f"[data-testid=kick][data-member={json.dumps(kicked)}]")
    await page.wait_until("document.querySelector('[data-testid=confirm-dialog]').open", 5, "the confirm dialog")
    title = await page.evaluate("document.querySelector('[data-testid=confirm-title]').textContent")
    assert kicked in title, title
    await page.click("[data-testid=confirm-ok]")
    await page.wait_until(
        f"!{find('member-row', kicked)} && !{find('lane', kicked)}"
        f" && {find('lane-departed', kicked)}?.dataset.ended === 'kicked'",
        10,
        "the kicked member's row and lane gone",
    )
    assert kicked not in [m["member_id"] for m in broker.group(GROUP)["members"]]
    lap("kicked")
    await asyncio.sleep(0.5)
    await shoot(page, folder, "4-kicked.png", shots)
    assert page.problems() == [], page.problems()
    print(f"console browser test timings (s since the page opened): {timings}")


def needs_chromium_and_confluent() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    pytest.importorskip("confluent_kafka", reason="the bundled consumer runs confluent-kafka (the `clients` extra)")
    return binary


def in_browser(
    binary: str, seconds: float, folder: Path, failure: str, drive: Callable[[Page, list[Path]], Awaitable[None]]
) -> None:
    """``drive`` a fresh headless Chromium's page within ``seconds``; a screenshot named ``failure`` when it fails,
    and the screenshots' paths printed either way."""
    shots: list[Path] = []

    async def run(profile: Path) -> None:
        async with asyncio.timeout(seconds), chromium(binary, profile) as tools:
            page = await Page.open(tools, 1280, 900)
            try:
                await drive(page, shots)
            except BaseException:
                await shoot(page, folder, failure, shots)
                raise

    try:
        with tempfile.TemporaryDirectory(prefix="console-chromium-", ignore_cleanup_errors=True) as profile:
            asyncio.run(run(Path(profile)))
    finally:
        print(f"console screenshots: {', '.join(str(s) for s in shots)}")


@pytest.mark.timeout(240)
def test_the_console_shows_a_group_through_a_kill_and_a_kick(tmp_path: Path) -> None:
    binary = needs_chromium_and_confluent()
    folder = artifacts(tmp_path)
    with run_broker(topics={TOPIC: PARTITIONS}) as broker, consumers(broker, folder, 3) as processes:
        broker.wait_for(GROUP, state="Stable", members=3, timeout=60)
        in_browser(
            binary, 150, folder, "failure.png", lambda page, shots: scenario(page, broker, processes, folder, shots)
        )


async def consumer_group_scenario(
    page: Page, broker: EmbeddedBroker, group: str, folder: Path, shots: list[Path]
) -> None:
    # The page's own path (/groups/<id>), which serves the same page as /#/groups/<id>.
    await page.navigate(f"{broker.admin_url.rstrip('/')}/groups/{group}")
    lanes = await page.wait_until(
        f"(() => {{ const l = {LANES}; return l.count === 2 && l.owned === {ALL!r} ? l : null; }})()",
        30,
        "two lanes owning every partition",
    )
    detail = broker.group(group)
    assert detail["group_type"] == "consumer" and sorted(lanes["members"]) == sorted(
        m["member_id"] for m in detail["members"]
    )
    # Each lane shows its member's epoch (from member_reconciled), as the API has it once the group is Stable.
    await page.wait_until("document.querySelector('[data-testid=group-state]')?.textContent === 'Stable'", 10, "Stable")
    for member in broker.group(group)["members"]:
        shown = await page.wait_until(
            f"{find('lane', member['member_id'])}?.dataset.epoch === '{member['member_epoch']}'"
            f" && {find('lane', member['member_id'])}.textContent",
            10,
            f"the epoch of {member['member_id']} on its lane",
        )
        assert f"epoch {member['member_epoch']}" in shown, shown
    heads = await page.evaluate(
        "[...document.querySelectorAll('[data-testid=members-table] th')].map((t) => t.textContent)"
    )
    assert "epoch" in heads and "pending revocation" in heads, heads
    assert await page.evaluate("document.querySelector('[data-testid=group-facts]').textContent.includes('consumer')")
    await shoot(page, folder, "consumer-group.png", shots)
    assert page.problems() == [], page.problems()


@pytest.mark.timeout(180)
def test_the_console_shows_a_consumer_groups_member_epochs(tmp_path: Path) -> None:
    """A KIP-848 consumer group (librdkafka with group.protocol=consumer): lanes from member_reconciled, epochs."""
    binary = needs_chromium_and_confluent()
    folder = artifacts(tmp_path)
    group = "console-kip848"
    with (
        run_broker(topics={TOPIC: PARTITIONS}) as broker,
        consumers(broker, folder, 2, group=group, protocol="consumer"),
    ):
        broker.wait_for(group, state="Stable", members=2, timeout=60)
        in_browser(
            binary,
            90,
            folder,
            "consumer-group-failure.png",
            lambda page, shots: consumer_group_scenario(page, broker, group, folder, shots),
        )
