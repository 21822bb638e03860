"""The console's timeline in a real headless Chromium: a KIP-848 member kicked and back under its id, and legible text.

A broker in this process, three bundled consumers (``python -m broker.chaos.consumer``, confluent-kafka with
``group.protocol=consumer``) in one consumer group over a 6-partition topic. On the group's page the test presses
Kick on one member and confirms: the broker fences it, librdkafka re-joins at epoch 0 under the same member id, so
its lane must be live again (not faded, no "kicked at" status, the kick a past mark on it) and own partitions.
Then Force rebalance from the page, so that several rebalance markers stand close together, and what the page
draws is measured (issue 26):

- the rebalance labels' boxes do not overlap one another (nor does any text of the timeline), each is inside the
  picture;
- every partition label is at least 11 px, inside its bar, with a WCAG contrast ratio of at least 4.5 against the
  bar's fill (both from the computed styles);
- with the time axis's last tick at the right edge (the page redrawn until it is), every tick label is inside the
  picture.

A second test has the console's own modules (as the control API serves them) draw a crowded classic history,
fifteen rebalances within 5 s, more labels than three rows have room for, at three widths: no text overlaps, the
four joins share one label ``formation: 4 joined``, a label cut short has its full text in a tooltip; 16
partitions get 11 px labels at 4.5:1 contrast on every hue, 40 get thin unlabelled rows.

Screenshots go to ``$TEST_ARTIFACTS/console`` (else the test's ``tmp_path``): ``rejoined-member.png`` the fixed
page, ``crowded-*.png`` the crowded ones. Every assertion here was checked to fail against the console before
issue 26's fixes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from broker.testing.embedded import EmbeddedBroker, run_broker
from tests.browser.devtools import Page, chromium_binary
from tests.browser.test_console_browser import (
    ALL,
    LANES,
    PARTITIONS,
    TOPIC,
    artifacts,
    consumers,
    find,
    in_browser,
    needs_chromium_and_confluent,
    shoot,
)

GROUP = "console-rejoin"

# Every shown rebalance label (its text, box and tooltip), every text of the timeline, the SVG's box (client
# coordinates).
MARKER_LABELS = """(() => {
  const svg = document.querySelector('[data-testid=timeline]').getBoundingClientRect();
  return {svg: [svg.left, svg.top, svg.right, svg.bottom],
          markers: document.querySelectorAll('[data-testid=timeline] .marker-line').length,
          labels: [...document.querySelectorAll('[data-testid=timeline] .marker-label')]
            .filter((t) => t.textContent.trim())
            .map((t) => { const r = t.getBoundingClientRect();
                          return {text: t.textContent, box: [r.left, r.top, r.right, r.bottom],
                                  title: t.parentElement.querySelector(':scope > title')?.textContent ?? ''}; }),
          texts: [...document.querySelectorAll('[data-testid=timeline] text')]
            .filter((t) => t.textContent.trim())
            .map((t) => { const r = t.getBoundingClientRect();
                          return {text: `${t.getAttribute('class')}: ${t.textContent}`,
                                  box: [r.left, r.top, r.right, r.bottom]}; })};
})()"""

# Every partition label with the bar it is drawn on: computed font size and colours, boxes.
BAR_LABELS = """[...document.querySelectorAll('[data-testid=timeline] .bar-label')].map((t) => {
  const bar = t.previousElementSibling;
  const r = t.getBoundingClientRect(), b = bar.getBoundingClientRect();
  return {text: t.textContent, size: parseFloat(getComputedStyle(t).fontSize), ink: getComputedStyle(t).fill,
          bar: bar.classList.contains('bar') ? bar.dataset.partition : null, fill: getComputedStyle(bar).fill,
          box: [r.left, r.right], barBox: [b.left, b.right]};
})"""

# Redraws the page (a change of the window select draws at once) and says whether the axis's last grid line is
# at the right end of the plot (within 4 px): then the last tick's label is where a centred label would be cut.
AXIS_AT_EDGE = """(() => {
  const select = document.querySelector('[data-testid=window]');
  select.dispatchEvent(new Event('change'));
  const svg = document.querySelector('[data-testid=timeline]');
  const width = Number(svg.getAttribute('width'));
  const xs = [...svg.querySelectorAll('.axis .grid')].map((l) => Number(l.getAttribute('x1')));
  return xs.length > 0 && Math.max(...xs) >= width - 16 - 4;
})()"""

TICKS = """(() => {
  const svg = document.querySelector('[data-testid=timeline]').getBoundingClientRect();
  return {svg: [svg.left, svg.right],
          ticks: [...document.querySelectorAll('[data-testid=timeline] .axis text')].map((t) => {
            const r = t.getBoundingClientRect(); return {text: t.textContent, box: [r.left, r.right]}; })};
})()"""


def rgb(computed: str) -> tuple[float, float, float]:
    match = re.fullmatch(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*[\d.]+)?\)", computed.strip())
    assert match, f"not an rgb() colour: {computed!r}"
    red, green, blue = (float(v) for v in match.groups())
    return red, green, blue


def luminance(colour: tuple[float, float, float]) -> float:
    def channel(value: float) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else float(((v + 0.055) / 1.055) ** 2.4)

    red, green, blue = (channel(c) for c in colour)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(one: str, other: str) -> float:
    """The WCAG 2 contrast ratio of two computed CSS colours."""
    high, low = sorted((luminance(rgb(one)), luminance(rgb(other))), reverse=True)
    return (high + 0.05) / (low + 0.05)


def overlap(a: list[float], b: list[float]) -> bool:
    """Whether two [left, top, right, bottom] boxes share any area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_contrast_and_overlap_helpers() -> None:
    assert contrast("rgb(0, 0, 0)", "rgb(255, 255, 255)") == pytest.approx(21)
    assert contrast("rgb(255, 255, 255)", "rgb(255, 255, 255)") == pytest.approx(1)
    assert 4.5 < contrast("rgb(118, 118, 118)", "rgb(255, 255, 255)") < 4.6  # the classic AA-passing grey
    assert overlap([0, 0, 10, 10], [9, 9, 20, 20]) and not overlap([0, 0, 10, 10], [10, 0, 20, 10])


async def click_confirmed(page: Page, selector: str) -> None:
    await page.click(selector)
    await page.wait_until("document.querySelector('[data-testid=confirm-dialog]').open", 5, "the confirm dialog")
    await page.click("[data-testid=confirm-ok]")


async def rejoin_scenario(page: Page, broker: EmbeddedBroker, folder: Path, shots: list[Path]) -> None:
    await page.navigate(f"{broker.admin_url.rstrip('/')}/groups/{GROUP}")
    three = f"(() => {{ const l = {LANES}; return l.count === 3 && l.owned === {ALL!r} ? l : null; }})()"
    lanes = await page.wait_until(three, 30, "three lanes owning every partition")
    victim = lanes["members"][0]
    epoch = next(m["member_epoch"] for m in broker.group(GROUP)["members"] if m["member_id"] == victim)

    # Kick it from the members table. The broker fences it; librdkafka re-joins at epoch 0 under the same id.
    await page.wait_until(f"!!{find('kick', victim)}", 5, "the Kick button")
    await click_confirmed(page, f"[data-testid=kick][data-member={json.dumps(victim)}]")
    await page.wait_until(
        "!!document.querySelector('[data-testid=marker][data-cause=member_kicked]')", 10, "the kick's marker"
    )
    lanes = await page.wait_until(
        f"(() => {{ const l = {three}; return l && l.members.includes({json.dumps(victim)})"
        f" && !{find('lane-departed', victim)} && {find('lane', victim)}.dataset.partitions ? l : null; }})()",
        30,
        "the kicked member's lane live again, owning partitions, with three lanes owning every partition",
    )
    back = next(m for m in broker.group(GROUP)["members"] if m["member_id"] == victim)
    assert back["member_epoch"] > epoch, (epoch, back)  # the same id, a new epoch: it re-joined, it was not spared
    lane = await page.evaluate(
        f"(() => {{ const l = {find('lane', victim)}; return {{cls: l.getAttribute('class'),"
        " text: [...l.querySelectorAll(':scope > text')].map((t) => t.textContent).join(' | '),"
        " ends: l.querySelectorAll('.lane-end').length,"
        " past: [...l.querySelectorAll('[data-testid=past-end]')].map((p) => p.dataset.cause),"
        " opacity: getComputedStyle(l).opacity}; })()"
    )
    assert lane["cls"] == "lane" and lane["opacity"] == "1", lane
    assert "kicked at" not in lane["text"] and lane["ends"] == 0, lane
    assert lane["past"] == ["kicked"], lane  # the kick stays visible, as a past mark on its lane

    # Force a rebalance from the page: one more marker close to the others.
    await click_confirmed(page, "[data-testid=force-rebalance]")
    await page.wait_until(
        "!!document.querySelector('[data-testid=marker][data-cause=forced]')"
        " && document.querySelector('[data-testid=group-state]')?.textContent === 'Stable'"
        f" && {three}",
        30,
        "the forced rebalance's marker, the group Stable again",
    )

    # Rebalance labels: none overlaps another, each inside the picture, a cut one with its full text in a tooltip.
    shown = await page.evaluate(MARKER_LABELS)
    labels, box = shown["labels"], shown["svg"]
    assert shown["markers"] >= 5 and labels, shown  # three joins, the kick, the re-join (and the forced one)
    for i, one in enumerate(labels):
        assert box[0] <= one["box"][0] and one["box"][2] <= box[2] and box[1] <= one["box"][1], (one, box)
        if one["text"].endswith("…"):
            assert one["title"], one
        for other in labels[i + 1 :]:
            assert not overlap(one["box"], other["box"]), (one, other)
    # Nor does any text of the timeline run into another: lane titles, partition, gap and axis labels included.
    texts = shown["texts"]
    for i, one in enumerate(texts):
        for other in texts[i + 1 :]:
            assert not overlap(one["box"], other["box"]), (one, other)

    # Partition labels: 11 px or more, inside their bar, contrast 4.5 or more against its fill.
    bar_labels = await page.evaluate(BAR_LABELS)
    assert bar_labels, "no partition label drawn"
    for label in bar_labels:
        assert label["bar"] == label["text"], label
        assert label["size"] >= 11, label
        assert label["barBox"][0] <= label["box"][0] and label["box"][1] <= label["barBox"][1], label
        ratio = contrast(label["ink"], label["fill"])
        assert ratio >= 4.5, (ratio, label)
    await shoot(page, folder, "rejoined-member.png", shots)

    # The whole time axis: redrawn (last minute) until its last tick is at the right edge, every label inside.
    await page.evaluate("document.querySelector('[data-testid=window]').value = '1'")
    await page.wait_until(AXIS_AT_EDGE, 15, "the axis's last tick at the right edge")
    ticks = await page.evaluate(TICKS)
    assert ticks["ticks"], ticks
    for tick in ticks["ticks"]:
        assert ticks["svg"][0] <= tick["box"][0] and tick["box"][1] <= ticks["svg"][1], (tick, ticks["svg"])
    await shoot(page, folder, "rejoined-member-axis.png", shots)
    assert page.problems() == [], page.problems()


@pytest.mark.timeout(180)
def test_a_kicked_consumer_group_member_that_rejoins_is_drawn_live_and_labels_are_legible(tmp_path: Path) -> None:
    binary = needs_chromium_and_confluent()
    folder = artifacts(tmp_path)
    with (
        run_broker(topics={TOPIC: PARTITIONS}) as broker,
        consumers(broker, folder, 3, group=GROUP, protocol="consumer") as processes,
    ):
        broker.wait_for(GROUP, state="Stable", members=3, timeout=60)
        assert all(p.poll() is None for p in processes)
        in_browser(
            binary,
            120,
            folder,
            "rejoined-member-failure.png",
            lambda page, shots: rejoin_scenario(page, broker, folder, shots),
        )


# The console's own modules, as the control API serves them, drawing a crowded classic history into a test box of
# the page: rebalances every 0.4 s with long causes (more labels than rows have room for), 16 or 40 partitions.
# Returns what test_a_crowded_timeline checks: every text's box, the rebalance labels with their tooltips, the
# partition labels with their bars' fills.
CROWDED = """(async ({partitions, width}) => {
  const {History} = await import('/console/history.js');
  const {renderTimeline} = await import('/console/timeline.js');
  const t0 = 1800000000000;
  const events = [];
  const add = (at, event, fields) => events.push({v: 2, seq: events.length + 1, ts_ms: t0 + at, run_id: 'r',
                                                  group_id: 'crowded', event, ...fields});
  const members = ['m-a', 'm-b', 'm-c', 'm-d'];
  members.forEach((m, i) => {
    add(i * 50, 'member_joined', {member_id: m, client_id: `client-${m}`, client_host: '/10.0.0.1'});
    add(i * 50, 'rebalance_started', {cause: 'member_joined', member_id: m, generation_id: i});
  });
  const assignments = {};
  for (let p = 0; p < partitions; p += 1) {
    const m = members[p % members.length];
    (assignments[m] ??= {orders: []}).orders.push(p);
  }
  add(300, 'sync_completed', {generation_id: 4, assignments, rebalance_protocol: 'eager'});
  const causes = ['member_expired', 'sync_timeout', 'static_member_replaced', 'member_left', 'metadata_changed',
                  'member_expired', 'forced', 'member_kicked', 'member_fenced', 'sync_timeout', 'forced'];
  causes.forEach((cause, i) => {
    const at = 1000 + i * 400;
    if (cause === 'member_expired') {
      add(at, 'member_expired', {member_id: 'm-x' + i, since_last_heartbeat_ms: 10000 + i, cause: 'session_timeout'});
    }
    add(at, 'rebalance_started', {cause, member_id: 'm-x' + i, generation_id: 5 + i, reason: `cause ${cause}`});
    add(at + 100, 'sync_completed', {generation_id: 5 + i, assignments, rebalance_protocol: 'eager'});
  });
  const box = document.createElement('div');
  box.dataset.testid = 'crowded';
  document.body.prepend(box);
  renderTimeline(box, History.from(events, 'classic'), {nowMs: t0 + 9000, windowMs: null, width});
  const svg = box.querySelector('svg');
  const s = svg.getBoundingClientRect();
  const rect = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const result = {
    svg: [s.left, s.top, s.right, s.bottom],
    markers: svg.querySelectorAll('[data-testid=marker]').length,
    texts: [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim())
      .map((t) => ({text: `${t.getAttribute('class')}: ${t.textContent}`, box: rect(t)})),
    labels: [...svg.querySelectorAll('.marker-label')].map((t) => ({
      text: t.textContent, title: t.parentElement.querySelector(':scope > title')?.textContent ?? ''})),
    bars: svg.querySelectorAll('.bar').length,
    rowHeight: Number(svg.querySelector('.bar')?.getAttribute('height')),
    barLabels: [...svg.querySelectorAll('.bar-label')].map((t) => ({
      ink: getComputedStyle(t).fill, fill: getComputedStyle(t.previousElementSibling).fill,
      size: parseFloat(getComputedStyle(t).fontSize)})),
  };
  return result;
})"""


@pytest.mark.timeout(120)
def test_a_crowded_timeline_has_no_overlapping_text_and_readable_partition_labels(tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    folder = artifacts(tmp_path)

    async def drive(page: Page, shots: list[Path]) -> None:
        await page.navigate(f"{broker.admin_url.rstrip('/')}/")
        for partitions, width in ((16, 900), (16, 700), (40, 1100)):
            drawn = await page.evaluate(f"{CROWDED}({json.dumps({'partitions': partitions, 'width': width})})")
            assert drawn["markers"] == 15, drawn["markers"]  # four joins and eleven more rebalances
            what = f"{partitions} partitions, {width} px"
            texts = drawn["texts"]
            for i, one in enumerate(texts):
                box = drawn["svg"]
                assert box[0] <= one["box"][0] and one["box"][2] <= box[2], (what, one, box)
                for other in texts[i + 1 :]:
                    assert not overlap(one["box"], other["box"]), (what, one, other)
            await shoot(page, folder, f"crowded-{partitions}-{width}.png", shots)
            await page.evaluate("document.querySelector('[data-testid=crowded]').remove()")
            labels = drawn["labels"]
            assert labels[0]["text"] == "formation: 4 joined", (what, labels)  # four joins 50 ms apart: one label
            cut = [label for label in labels if label["text"].endswith("…")]
            assert cut, (what, labels)  # crowded enough that some label had to be cut
            for label in cut:
                assert label["text"][:-1].rstrip() and label["title"], (what, label)
            if partitions <= 16:
                assert drawn["barLabels"] and drawn["rowHeight"] >= 12, (what, drawn["rowHeight"])
                for label in drawn["barLabels"]:
                    assert label["size"] >= 11, (what, label)
                    assert contrast(label["ink"], label["fill"]) >= 4.5, (what, label)
            else:  # too many rows for an 11 px label each: thin rows, the bar's tooltip names the partition
                assert not drawn["barLabels"] and drawn["rowHeight"] < 11, (what, drawn)
        assert page.problems() == [], page.problems()

    with run_broker() as broker:
        in_browser(binary, 90, folder, "crowded-failure.png", drive)
