// The ownership timeline, drawn in SVG from a History (history.js): one lane per member, a coloured bar per owned
// partition, rebalances as labelled vertical markers, unowned spans shaded, the initial formation marked.
// Members still in the group come first; members that left keep their lane below, faded, with how they left.

import { el, formatMs } from "./api.js";

const LEFT = 230; // the lane labels
const RIGHT = 16;
const TOP = 44; // marker labels and the time axis
const ROW = 7; // one partition's sub-row inside a lane
const LANE_PAD = 10;

const svg = (tag, attributes, ...children) => el(`svg:${tag}`, attributes, ...children);

// A colour per partition index, spread around the hue wheel so neighbours differ.
export function partitionColour(index, count) {
  const hue = Math.round((index * 360) / Math.max(count, 1) + (index % 2) * 23) % 360;
  return `hsl(${hue} 65% 50%)`;
}

function niceStep(spanMs, pixels) {
  const target = (spanMs / Math.max(pixels, 1)) * 110;
  for (const step of [100, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000]) {
    if (step >= target) return step;
  }
  return 1_800_000;
}

function clockTime(ms) {
  const date = new Date(ms);
  return date.toISOString().slice(11, 19);
}

// Renders the history into `container` (replacing what was there). `nowMs`: the right edge (the broker's clock as
// best known); `windowMs`: how much time to show, null for all of the buffered history.
export function renderTimeline(container, history, { nowMs, windowMs = null, width = 1100 }) {
  const partitions = history.sortedPartitions();
  const index = new Map(partitions.map((p, i) => [`${p.topic}-${p.partition}`, i]));
  const rows = Math.max(partitions.length, 1);
  const laneHeight = rows * ROW + LANE_PAD;
  const active = history.activeLanes().sort((a, b) => a.startMs - b.startMs);
  const departed = history.departedLanes().sort((a, b) => b.endMs - a.endMs);
  const lanes = [...active, ...departed];
  const height = TOP + Math.max(lanes.length, 1) * (laneHeight + 6) + 30;
  const end = Math.max(nowMs, history.lastMs ?? nowMs);
  const first = history.firstMs ?? end - 60_000;
  const start = windowMs === null ? Math.min(first, end - 5_000) : end - windowMs;
  const plot = width - LEFT - RIGHT;
  const x = (ms) => LEFT + ((Math.min(Math.max(ms, start), end) - start) / Math.max(end - start, 1)) * plot;

  const root = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    class: "timeline",
    role: "img",
    "aria-label": "partition ownership over time",
    dataset: { testid: "timeline", activeLanes: active.length, partitions: partitions.length },
  });
  const defs = svg("defs", {},
    svg("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      svg("rect", { width: 6, height: 6, class: "hatch-bg" }),
      svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch-line" })),
  );
  root.append(defs);

  // The time axis.
  const axis = svg("g", { class: "axis" });
  const step = niceStep(end - start, plot);
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) {
    axis.append(
      svg("line", { x1: x(t), x2: x(t), y1: TOP - 4, y2: height - 26, class: "grid" }),
      svg("text", { x: x(t), y: height - 10, class: "tick", "text-anchor": "middle" }, clockTime(t)),
    );
  }
  root.append(axis);

  // The lanes.
  lanes.forEach((lane, i) => {
    const y = TOP + i * (laneHeight + 6);
    const owned = lane.owned();
    const g = svg("g", {
      class: lane.active ? "lane" : "lane departed",
      dataset: {
        testid: lane.active ? "lane" : "lane-departed",
        member: lane.memberId,
        client: lane.clientId,
        partitions: owned.sort().join(" "),
        ended: lane.endCause ?? "",
        epoch: lane.epochs.length ? lane.epochs[lane.epochs.length - 1].epoch : "",
        pending: lane.pending().sort().join(" "),
      },
    });
    g.append(svg("rect", { x: 0, y, width, height: laneHeight, class: i % 2 ? "lane-bg odd" : "lane-bg" }));
    const title = lane.clientId || lane.memberId.slice(0, 18);
    g.append(svg("text", { x: 8, y: y + 14, class: "lane-title" }, title));
    const epoch = lane.epochs.length ? lane.epochs[lane.epochs.length - 1].epoch : null;
    const sub = [lane.host, epoch !== null ? `epoch ${epoch}` : null].filter(Boolean).join(" · ");
    g.append(svg("text", { x: 8, y: y + 27, class: "lane-sub" }, sub));
    if (!lane.active) {
      g.append(svg("text", { x: 8, y: y + 40, class: "lane-end" }, `${lane.endCause} at ${clockTime(lane.endMs)}`));
    } else if (lane.state && lane.state !== "stable") {
      g.append(svg("text", { x: 8, y: y + 40, class: "lane-end" }, lane.state.replaceAll("_", " ")));
    }
    if (lane.silence) {
      const sx = x(lane.silence.start);
      g.append(
        svg("rect", { x: sx, y: y + 2, width: Math.max(x(lane.silence.end) - sx, 1), height: laneHeight - 4, class: "silence", dataset: { testid: "silence" } },
          svg("title", {}, `no heartbeat for ${formatMs(lane.silence.end - lane.silence.start)}`)),
      );
    }
    for (const bar of lane.bars) {
      const barEnd = bar.end ?? end;
      if (barEnd < start) continue;
      const row = index.get(bar.key) ?? 0;
      const bx = x(bar.start);
      const bw = Math.max(x(barEnd) - bx, 1);
      const rect = svg("rect", {
        x: bx, y: y + LANE_PAD / 2 + row * ROW, width: bw, height: ROW - 1.5,
        fill: bar.pending ? "url(#hatch)" : partitionColour(row, partitions.length),
        stroke: bar.pending ? partitionColour(row, partitions.length) : null,
        class: bar.pending ? "bar pending" : "bar",
        dataset: { testid: "bar", partition: bar.key, open: bar.end === null },
      }, svg("title", {}, `${bar.key}${bar.pending ? " (pending revocation)" : ""}: ${formatMs(barEnd - bar.start)}`));
      g.append(rect);
      if (bw > 46) {
        g.append(svg("text", { x: bx + 3, y: y + LANE_PAD / 2 + row * ROW + ROW - 2, class: "bar-label" }, bar.key));
      }
    }
    for (const { ts, epoch: e } of lane.epochs) {
      if (ts < start) continue;
      g.append(svg("line", { x1: x(ts), x2: x(ts), y1: y + 2, y2: y + laneHeight - 2, class: "epoch-tick" },
        svg("title", {}, `member epoch ${e}`)));
    }
    root.append(g);
  });
  if (!lanes.length) {
    root.append(svg("text", { x: LEFT + 10, y: TOP + 24, class: "lane-sub" }, "no members in the buffered events"));
  }

  // The formation, then the unowned gaps, translucent over the lanes.
  if (history.formation) {
    const f = history.formation;
    const fx = x(f.start);
    const fw = Math.max(x(f.end ?? end) - fx, 2);
    root.append(
      svg("rect", { x: fx, y: TOP - 6, width: fw, height: height - TOP - 20, class: "formation", dataset: { testid: "formation" } }),
      svg("text", { x: fx + 3, y: height - 30, class: "formation-label" }, "initial formation"),
    );
  }
  for (const gap of history.gaps) {
    const gx = x(gap.start);
    const gw = Math.max(x(gap.end ?? end) - gx, 1.5);
    if (gap.end !== null && gap.end < start) continue;
    root.append(
      svg("rect", {
        x: gx, y: TOP - 6, width: gw, height: height - TOP - 20, class: "gap",
        dataset: { testid: "gap", unowned: gap.unowned },
      },
      svg("title", {}, `${gap.unowned} partition(s) without an owner for ${formatMs((gap.end ?? end) - gap.start)}`)),
    );
    if (gw > 56) root.append(svg("text", { x: gx + 3, y: TOP + 4, class: "gap-label" }, `${gap.unowned} unowned`));
  }

  // The rebalance markers, on top, labels staggered so neighbours do not overlap.
  let lastX = -Infinity;
  let level = 0;
  for (const marker of history.markers) {
    if (marker.ts < start) continue;
    const mx = x(marker.ts);
    level = mx - lastX < 150 ? (level + 1) % 3 : 0;
    lastX = mx;
    const label = marker.formation ? `formation: ${marker.label}` : marker.label;
    root.append(
      svg("g", { class: `marker cause-${marker.cause}`, dataset: { testid: "marker", cause: marker.cause ?? "", label } },
        svg("line", { x1: mx, x2: mx, y1: 6 + level * 12, y2: height - 26, class: "marker-line" }),
        // A label that would run off the right edge is written leftwards of its line (~6.5 px a character).
        mx + 3 + label.length * 6.5 > width
          ? svg("text", { x: mx - 3, y: 14 + level * 12, class: "marker-label", "text-anchor": "end" }, label)
          : svg("text", { x: mx + 3, y: 14 + level * 12, class: "marker-label" }, label),
        svg("title", {}, `${clockTime(marker.ts)} ${label}${marker.reason ? `: ${marker.reason}` : ""}`)),
    );
  }
  container.replaceChildren(root);
}
