"""The console's nodes strip in a real headless Chromium, against a real ``serve --nodes 3`` process (issue 29).

The broker runs in its own process (tests/cluster/harness.py's ``Cluster``: node i on port + i, topic ``t`` with 6
partitions), a bundled confluent-kafka consumer (``python -m broker.chaos.consumer``) makes a classic group whose
coordinator is node 2. The test opens the console and asserts what it shows against the control API and the wire:

- the strip: three nodes up, node 1 the controller, each node's count of ``__consumer_offsets``,
  ``__transaction_state`` and ordinary-topic leaderships as ``GET /v1/cluster`` has them, and a node's detail
  (opened by a click) listing exactly the partitions it leads;
- the console's ``partitionFor`` giving ``GET /v1/cluster/coordinators``'s partition for ASCII, accented, surrogate
  pair and Integer.MIN_VALUE-hashing keys;
- the groups page's coordinator column and the group page's coordinator label naming the node FindCoordinator
  names at every node, and the strip marking that node;
- after ``POST /v1/cluster/nodes/2/stop`` (kill): without a reload, node 2 shown stopped and leading nothing, the
  label and the strip's mark on the new coordinator (what FindCoordinator at the two live nodes answers); after
  ``/start``: node 2 up again, leading nothing, the coordinator where it moved (no preferred election); after
  ``POST /v1/cluster/coordinators`` back to node 2 with a 3 s load delay: node 2 labelled loading, then not.

A second test: with one node, the strip, the coordinator column and the coordinator label stay hidden.
Screenshots go to ``$TEST_ARTIFACTS/console`` (else the test's ``tmp_path``): ``nodes-*.png``. With
``CONSOLE_NODES_README_SCREENSHOT=docs/images/console-nodes.png`` the top of the page after the kill (the strip,
the label) is also written there, for the README.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from broker.testing.embedded import run_broker
from tests.browser.devtools import Page, chromium_binary
from tests.browser.test_console_browser import artifacts, in_browser, needs_chromium_and_confluent, shoot
from tests.cluster.harness import TOPIC, Cluster
from tests.conftest import ROOT

OFFSETS, TRANSACTIONS = "__consumer_offsets", "__transaction_state"

# Every chip of the strip as the page shows it.
CHIPS = """[...document.querySelectorAll('[data-testid=nodes-strip] [data-testid=node]')].map((n) => ({
  node: Number(n.dataset.node), up: n.dataset.up === 'true', controller: n.dataset.controller === 'true',
  coordinator: n.dataset.coordinator === 'true', offsets: Number(n.dataset.offsets),
  transactions: Number(n.dataset.transactions), topics: Number(n.dataset.topics),
  text: n.querySelector('summary').textContent}))"""
LABEL = "document.querySelector('[data-testid=group-coordinator]')"
HEADS = "[...document.querySelectorAll('[data-testid=groups-table] th')].map((t) => t.textContent)"


def expected_chips(cluster: dict[str, Any], coordinator: int | None) -> list[dict[str, Any]]:
    """What the strip must show, counted here from ``GET /v1/cluster`` (not from the page's own code)."""

    def led(rows: list[dict[str, Any]], node: int) -> int:
        return sum(1 for row in rows if row["leader"] == node)

    topics = [row for rows in cluster["topics"].values() for row in rows]
    return [
        {"node": n["node_id"], "up": n["up"], "controller": n["node_id"] == cluster["controller"],
         "coordinator": n["node_id"] == coordinator,
         "offsets": led(cluster["internal"][OFFSETS], n["node_id"]),
         "transactions": led(cluster["internal"][TRANSACTIONS], n["node_id"]), "topics": led(topics, n["node_id"])}
        for n in cluster["nodes"]
    ]  # fmt: skip


def chips_match(expected: list[dict[str, Any]]) -> str:
    """JavaScript: the chips if they match ``expected`` (the summary text left out), else null."""
    return (
        f"(() => {{ const c = {CHIPS}; const want = {json.dumps(expected)};"
        " return JSON.stringify(c.map(({text, ...rest}) => rest)) === JSON.stringify(want) ? c : null; })()"
    )


@contextmanager
def consumer(bootstrap: str, group: str, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    argv = [
        sys.executable, "-m", "broker.chaos.consumer", "--client", "confluent", "--bootstrap", bootstrap,
        "--group", group, "--topic", TOPIC, "--client-id", "nodes-c0", "--out", str(folder / f"{group}.out"),
        "--session-timeout-ms", "10000", "--heartbeat-interval-ms", "500",
    ]  # fmt: skip
    with (folder / f"{group}.stderr").open("wb") as stderr:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


async def find_coordinator_everywhere(cluster: Cluster, group: str, live: list[int]) -> set[int]:
    """The node ids FindCoordinator answers for ``group`` at each of the ``live`` nodes (error 0 asserted)."""
    answers = [await asyncio.to_thread(cluster.find_coordinator, node, group) for node in live]
    assert all(error == 0 for error, _node in answers), answers
    return {node for _error, node in answers}


async def nodes_scenario(page: Page, cluster: Cluster, group: str, folder: Path, shots: list[Path]) -> None:
    admin = f"http://127.0.0.1:{cluster.admin_port}"
    described = await asyncio.to_thread(cluster.describe)
    assert [n["node_id"] for n in described["nodes"]] == [1, 2, 3] and described["controller"] == 1
    coordinator = await asyncio.to_thread(cluster.coordinator, group)
    assert coordinator == 2  # the group was chosen so
    assert await find_coordinator_everywhere(cluster, group, [1, 2, 3]) == {2}

    # The groups page: the strip with three nodes up and their leaderships, the group's coordinator column.
    await page.navigate(admin + "/")
    expected = expected_chips(described, None)
    assert [(c["offsets"], c["transactions"], c["topics"]) for c in expected] == [(17, 17, 2), (17, 17, 2), (16, 16, 2)]
    chips = await page.wait_until(chips_match(expected), 15, f"the strip showing {expected}")
    assert "controller" in chips[0]["text"] and all("controller" not in c["text"] for c in chips[1:]), chips
    assert all("up" in c["text"] and "leads 1" in c["text"] for c in chips), chips
    for chip, node in zip(chips, described["nodes"], strict=True):  # each node's advertised address
        assert f"{node['host']}:{node['port']}" in chip["text"] and node["port"] == cluster.port_of(node["node_id"])
    strip_text = await page.evaluate("document.querySelector('[data-testid=nodes-strip]').textContent")
    assert "null" not in strip_text and "undefined" not in strip_text, strip_text
    summary = await page.evaluate("document.querySelector('[data-testid=nodes-summary]').textContent")
    assert summary == "3 of 3 nodes up", summary
    row = f"[data-testid=group-row][data-group={json.dumps(group)}]"
    cell = f"document.querySelector('{row} [data-testid=group-coordinator-cell]')"
    shown = await page.wait_until(f"{cell}?.textContent", 15, "the group's coordinator cell")
    assert shown == "node 2", shown
    heads = await page.evaluate(HEADS)
    assert heads[-1] == "coordinator", heads

    # The console's partitionFor is Kafka's (and the broker's): the partition the API names, for awkward keys too.
    keys = [group, "orders-app", "café-ü", "emoji-\U0001f600-key", "polygenelubricants", ""]
    wanted = {}
    for key in keys:
        query = urlencode({"type": "group", "key": key})
        answer = await asyncio.to_thread(cluster.ctl._json, "GET", f"/v1/cluster/coordinators?{query}")
        wanted[key] = answer["partition"]
    computed = await page.evaluate(
        f"(async () => {{ const {{partitionFor}} = await import('/console/nodes.js');"
        f" return Object.fromEntries({json.dumps(keys)}.map((k) => [k, partitionFor(k, 50)])); }})()"
    )
    assert computed == wanted, (computed, wanted)
    assert wanted["polygenelubricants"] == 0  # its String.hashCode is Integer.MIN_VALUE: Utils.abs makes it 0

    # A node's detail: exactly the partitions it leads.
    await page.click("[data-testid=node][data-node='3'] summary")
    detail = await page.wait_until(
        "(() => { const d = document.querySelector('[data-testid=node][data-node=\"3\"] [data-testid=node-detail]');"
        " return d && d.checkVisibility() ? [...d.querySelectorAll('dt')].map((t) => [t.textContent,"
        " t.nextElementSibling.textContent]) : null; })()",
        5,
        "node 3's detail",
    )
    led = {
        OFFSETS: [r["partition"] for r in described["internal"][OFFSETS] if r["leader"] == 3],
        TRANSACTIONS: [r["partition"] for r in described["internal"][TRANSACTIONS] if r["leader"] == 3],
        TOPIC: [r["partition"] for r in described["topics"][TOPIC] if r["leader"] == 3],
    }
    assert dict(detail) == {topic: " ".join(map(str, partitions)) for topic, partitions in led.items()}, detail
    await shoot(page, folder, "nodes-1-detail.png", shots)
    await page.click("[data-testid=node][data-node='3'] summary")  # closed again

    # The group's page: the coordinator label and the strip's mark on node 2.
    await page.click(f"{row} a")
    label = await page.wait_until(
        f"{LABEL} && !{LABEL}.hidden && {LABEL}.dataset.node === '2' && {LABEL}.textContent",
        15,
        "the coordinator label",
    )
    assert label == "coordinator node 2", label
    await page.wait_until(chips_match(expected_chips(described, 2)), 10, "the strip marking node 2")
    marked = await page.evaluate("document.querySelectorAll('[data-testid=node-coordinates]').length === 1"
        " && document.querySelector('[data-testid=node-coordinates]').textContent")
    assert marked == "coordinator", marked
    await page.wait_until(
        "document.querySelector('[data-testid=group-state]')?.textContent === 'Stable'", 30, "the group Stable"
    )
    await shoot(page, folder, "nodes-2-group.png", shots)

    # Kill node 2 through the control API: the page follows without a reload.
    await page.evaluate("window.notReloaded = true")
    stopped = await asyncio.to_thread(cluster.stop, 2)
    moved_to = await asyncio.to_thread(cluster.coordinator, group)
    assert moved_to in (1, 3) and [OFFSETS, wanted[group], moved_to] in stopped["moved_coordinators"], stopped
    assert await find_coordinator_everywhere(cluster, group, [1, 3]) == {moved_to}
    after = await asyncio.to_thread(cluster.describe)
    expected = expected_chips(after, moved_to)
    assert expected[1]["up"] is False and expected[1]["offsets"] == expected[1]["topics"] == 0, expected
    # Within 3 s, well inside the watcher's 5 s poll: the node_stopped / leader_moved events bring it.
    chips = await page.wait_until(chips_match(expected), 3, f"the strip showing node 2 stopped: {expected}")
    assert "stopped" in chips[1]["text"] and "leads" not in chips[1]["text"], chips
    label = await page.wait_until(
        f"{LABEL}.dataset.node === '{moved_to}' && {LABEL}.textContent", 3, f"the label naming node {moved_to}"
    )
    assert label == f"coordinator node {moved_to}", label
    assert await page.evaluate("window.notReloaded === true"), "the page reloaded"
    assert await page.evaluate("document.querySelector('[data-testid=nodes-summary]').textContent") == "2 of 3 nodes up"
    await page.wait_until(
        "document.querySelector('[data-testid=group-state]')?.textContent === 'Stable'", 30, "the group Stable again"
    )
    await shoot(page, folder, "nodes-3-stopped.png", shots)
    if readme := os.environ.get("CONSOLE_NODES_README_SCREENSHOT"):  # the strip and the label
        clip = {"x": 0, "y": 0, "width": 1280, "height": 210, "scale": 1}
        shot = await page.send("Page.captureScreenshot", {"format": "png", "clip": clip})
        Path(readme).write_bytes(base64.b64decode(shot["data"]))

    # Start it again: up, leading nothing (no preferred election), the coordinator where it moved.
    await asyncio.to_thread(cluster.start, 2)
    assert await asyncio.to_thread(cluster.coordinator, group) == moved_to
    expected = expected_chips(await asyncio.to_thread(cluster.describe), moved_to)
    assert expected[1]["up"] is True and expected[1]["offsets"] == 0, expected
    await page.wait_until(chips_match(expected), 3, f"the strip showing node 2 up again: {expected}")
    assert await page.evaluate(f"{LABEL}.dataset.node") == str(moved_to)
    assert await find_coordinator_everywhere(cluster, group, [1, 2, 3]) == {moved_to}
    await shoot(page, folder, "nodes-4-restarted.png", shots)

    # Move the coordinator back to node 2 with a 3 s load delay: "loading" from leader_moved until
    # coordinator_loaded (the broker says it when the delay ends), then node 2 plainly.
    await asyncio.to_thread(cluster.load_delay, 3000)
    await asyncio.to_thread(cluster.move, group, 2)
    label = await page.wait_until(
        f"{LABEL}.dataset.node === '2' && {LABEL}.dataset.state === 'loading' && {LABEL}.textContent",
        2.5,
        "the label naming node 2, loading",
    )
    assert label == "coordinator node 2 · loading", label
    loading = await page.evaluate(f"{CHIPS}[1]")
    assert loading["coordinator"] and "1 loading" in loading["text"], loading
    await shoot(page, folder, "nodes-5-loading.png", shots)
    await page.wait_until(
        f"{LABEL}.dataset.node === '2' && {LABEL}.dataset.state === 'active'", 6, "node 2 done loading"
    )
    assert await page.evaluate(f"{LABEL}.textContent") == "coordinator node 2"
    await asyncio.to_thread(cluster.load_delay, 0)
    moved_to = 2

    # Back on the groups page (a hash change, no reload): the column names the new coordinator.
    await page.click("a[href='#/']")
    shown = await page.wait_until(f"{cell}?.textContent", 15, "the group's coordinator cell")
    assert shown == f"node {moved_to}", shown
    assert await page.evaluate("window.notReloaded === true"), "the page reloaded"
    assert page.problems() == [], page.problems()


@pytest.mark.timeout(240)
def test_the_nodes_strip_follows_a_killed_coordinator_node_and_its_restart(tmp_path: Path) -> None:
    binary = needs_chromium_and_confluent()
    folder = artifacts(tmp_path)
    cluster = Cluster(tmp_path)
    try:
        group = cluster.groups_on(2, "console-nodes", 1)[0]
        with consumer(cluster.bootstrap, group, folder) as process:

            def stable() -> bool:
                try:
                    found = cluster.group(group)
                except Exception:  # not there yet
                    return False
                return found["state"] == "Stable" and len(found["members"]) == 1

            for _ in range(300):
                if stable():
                    break
                assert process.poll() is None, (folder / f"{group}.stderr").read_text()[-2000:]
                time.sleep(0.1)
            assert stable(), cluster.group(group)
            in_browser(
                binary, 150, folder, "nodes-failure.png",
                lambda page, shots: nodes_scenario(page, cluster, group, folder, shots),
            )  # fmt: skip
    finally:
        cluster.close()


@pytest.mark.timeout(120)
def test_with_one_node_the_strip_and_the_coordinator_stay_hidden(tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    folder = artifacts(tmp_path)
    # The watcher has read GET /v1/cluster (and drawn: the read's listeners run before the next task).
    read = "performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/v1/cluster')"

    async def drive(page: Page, shots: list[Path]) -> None:
        await page.navigate(f"{broker.admin_url.rstrip('/')}/")
        await page.wait_until(f"{read} && !!document.querySelector('[data-testid=groups-table] th')", 15, "a read")
        await asyncio.sleep(0.3)
        strip = await page.evaluate(
            "(() => { const s = document.querySelector('[data-testid=nodes-strip]');"
            " return {hidden: s.hidden, height: s.getBoundingClientRect().height, chips: s.children.length}; })()"
        )
        assert strip == {"hidden": True, "height": 0, "chips": 0}, strip
        heads = await page.evaluate(HEADS)
        assert "coordinator" not in heads, heads
        assert page.problems() == [], page.problems()  # on the page of a group that does not exist, 404s follow
        await page.navigate(f"{broker.admin_url.rstrip('/')}/groups/lonely")
        await page.wait_until(f"{read} && !!{LABEL}", 15, "the group page after a read")
        await asyncio.sleep(0.3)
        assert await page.evaluate(f"{LABEL}.hidden && {LABEL}.getBoundingClientRect().width === 0")
        assert await page.evaluate("document.querySelector('[data-testid=nodes-strip]').hidden")
        await shoot(page, folder, "nodes-single.png", shots)

    with run_broker() as broker:
        in_browser(binary, 90, folder, "nodes-single-failure.png", drive)
