// The ownership timeline, drawn in SVG from a History (history.js): one lane per member, a coloured bar per owned
// partition, rebalances as labelled vertical markers, unowned spans shaded, the initial formation marked, broker
// restarts as marks of their own (how it stopped, what the start loaded and how long it took) over the time it was down.
// Members still in the group come first; members that left keep their lane below, faded, with how they left; a
// member that came back under its id (KIP-848) is live, its departure a red mark on its lane.
// Text is laid out once the SVG is in the page, measured: rebalance labels never overlap (markers close together
// share one label, labels take one of three rows, one that still does not fit is cut with an ellipsis, its full
// text in a tooltip), partition labels only where they fit their bar, the time axis's labels inside the picture.

import { el, formatMs } from "./api.js";

const LEFT = 230; // the lane labels
const RIGHT = 16;
const TOP = 62; // above the lanes: three rows of rebalance labels, then the band of gap and formation labels
const BAND = TOP - 6; // the baseline of the gap and formation labels
const LANE_PAD = 10;
const LANE_MIN = 48; // room for a lane's three lines of text
const LABELLED_MAX = 16; // up to this many partitions, a row is tall enough for its partition label
const LABEL_ROWS = 3; // rows of rebalance labels above the lanes
const LABEL_ROW = 14;
const MERGE_PX = 30; // markers closer than this (to the first of them) share one label
const LABEL_GAP = 6; // between two labels in a row
const MIN_LABEL = 18; // a label cut shorter than this is left out (its marker's tooltip still says it)
const INK = "#17202e";
const WHITE = "#ffffff";

const svg = (tag, attributes, ...children) => el(`svg:${tag}`, attributes, ...children);

// A colour per partition index, spread around the hue wheel so neighbours differ: light enough for dark text.
export function partitionColour(index, count) {
  const hue = Math.round((index * 360) / Math.max(count, 1) + (index % 2) * 23) % 360;
  return `hsl(${hue} 70% 72%)`;
}

function hslToRgb(h, s, l) {
  const a = s * Math.min(l, 1 - l);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    return 255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)));
  };
  return [f(0), f(8), f(4)];
}

// [r, g, b] (0-255) of "#rrggbb", "rgb(r, g, b)" or "hsl(h s% l%)"; null for anything else (a pattern).
export function parseColour(text) {
  const value = String(text).trim();
  let m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(value);
  if (m) return m.slice(1).map((hex) => parseInt(hex, 16));
  m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/.exec(value);
  if (m) return m.slice(1).map(Number);
  m = /^hsl\(\s*([\d.]+)[\s,]+([\d.]+)%[\s,]+([\d.]+)%/.exec(value);
  if (m) return hslToRgb(Number(m[1]), Number(m[2]) / 100, Number(m[3]) / 100);
  return null;
}

// WCAG 2 relative luminance and contrast ratio (1 to 21).
function luminance([r, g, b]) {
  const lin = (c) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

export function contrast(one, other) {
  const [a, b] = [luminance(one), luminance(other)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}

// The text colour (dark ink or white) that reads best on `fill`; ink on a pattern (the hatch is mostly white).
export function textOn(fill) {
  const rgb = parseColour(fill);
  if (!rgb) return INK;
  return contrast(rgb, parseColour(INK)) >= contrast(rgb, parseColour(WHITE)) ? INK : WHITE;
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
  const labelled = partitions.length <= LABELLED_MAX;
  const row = labelled ? 14 : 7; // one partition's sub-row inside a lane
  const laneHeight = Math.max(rows * row + LANE_PAD, LANE_MIN);
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
      svg("text", { x: x(t), y: height - 10, class: "tick", "text-anchor": "middle", dataset: { testid: "tick" } }, clockTime(t)),
    );
  }
  root.append(axis);

  // The lanes.
  const barLabels = []; // [text, bar width]: measured once the SVG is in the page
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
        pastEnds: lane.pastEnds.map((p) => p.cause).join(" "),
      },
    });
    g.append(svg("rect", { x: 0, y, width, height: laneHeight, class: i % 2 ? "lane-bg odd" : "lane-bg" }));
    const title = lane.clientId || lane.memberId.slice(0, 18);
    g.append(svg("text", { x: 8, y: y + 14, class: "lane-title" }, title));
    const epoch = lane.epochs.length ? lane.epochs[lane.epochs.length - 1].epoch : null;
    const sub = [lane.host, epoch !== null ? `epoch ${epoch}` : null].filter(Boolean).join(" · ");
    g.append(svg("text", { x: 8, y: y + 27, class: "lane-sub" }, sub));
    const back = lane.pastEnds[lane.pastEnds.length - 1];
    if (!lane.active) {
      g.append(svg("text", { x: 8, y: y + 40, class: "lane-end" }, `${lane.endCause} at ${clockTime(lane.endMs)}`));
    } else if (lane.state && lane.state !== "stable") {
      g.append(svg("text", { x: 8, y: y + 40, class: "lane-end" }, lane.state.replaceAll("_", " ")));
    } else if (back) {
      g.append(svg("text", { x: 8, y: y + 40, class: "lane-note", dataset: { testid: "lane-note" } },
        `${back.cause}, rejoined at ${clockTime(back.back)}`));
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
      const at = index.get(bar.key) ?? 0;
      const bx = x(bar.start);
      const bw = Math.max(x(barEnd) - bx, 1);
      const fill = bar.pending ? "url(#hatch)" : partitionColour(at, partitions.length);
      const rect = svg("rect", {
        x: bx, y: y + LANE_PAD / 2 + at * row, width: bw, height: row - 1.5,
        fill,
        stroke: bar.pending ? partitionColour(at, partitions.length) : null,
        class: bar.pending ? "bar pending" : "bar",
        dataset: { testid: "bar", partition: bar.key, open: bar.end === null },
      }, svg("title", {}, `${bar.key}${bar.pending ? " (pending revocation)" : ""}: ${formatMs(barEnd - bar.start)}`));
      g.append(rect);
      if (labelled && bw > bar.key.length * 5 + 8) {
        const text = svg("text", {
          x: bx + 3, y: y + LANE_PAD / 2 + at * row + row - 4, class: "bar-label", fill: textOn(fill),
          dataset: { testid: "bar-label", partition: bar.key },
        }, bar.key);
        g.append(text);
        barLabels.push([text, bw]);
      }
    }
    for (const { ts, epoch: e } of lane.epochs) {
      if (ts < start) continue;
      g.append(svg("line", { x1: x(ts), x2: x(ts), y1: y + 2, y2: y + laneHeight - 2, class: "epoch-tick" },
        svg("title", {}, `member epoch ${e}`)));
    }
    for (const past of lane.pastEnds) {
      if (past.back < start) continue;
      const px = x(past.ts);
      g.append(svg("rect", { x: px - 1, y: y + 1, width: Math.max(x(past.back) - px, 0) + 2, height: laneHeight - 2, class: "past-end", dataset: { testid: "past-end", cause: past.cause } },
        svg("title", {}, `${past.cause} at ${clockTime(past.ts)}, rejoined at ${clockTime(past.back)}`)));
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
      svg("rect", { x: fx, y: BAND - 11, width: fw, height: height - BAND - 15, class: "formation", dataset: { testid: "formation" } },
        svg("title", {}, `initial formation: ${formatMs((f.end ?? end) - f.start)}`)),
    );
  }
  const bandLabels = []; // [text, room to its right]: the gaps' first, then the formation's, kept where they fit
  for (const gap of history.gaps) {
    const gx = x(gap.start);
    const gw = Math.max(x(gap.end ?? end) - gx, 1.5);
    if (gap.end !== null && gap.end < start) continue;
    root.append(
      svg("rect", {
        x: gx, y: BAND - 11, width: gw, height: height - BAND - 15, class: "gap",
        dataset: { testid: "gap", unowned: gap.unowned },
      },
      svg("title", {}, `${gap.unowned} partition(s) without an owner for ${formatMs((gap.end ?? end) - gap.start)}`)),
    );
    if (gw > 40) {
      const text = svg("text", { x: gx + 3, y: BAND, class: "gap-label" }, `${gap.unowned} unowned`);
      root.append(text);
      bandLabels.push([text, gw - 5]);
    }
  }
  if (history.formation) {
    const text = svg("text", { x: x(history.formation.start) + 3, y: BAND, class: "formation-label" }, "initial formation");
    root.append(text);
    bandLabels.push([text, width - 2 - x(history.formation.start) - 3]);
  }

  // Broker restarts: the span it was down (from the last event of the run before, or the clean stop), shaded.
  const restarts = history.restarts.filter((r) => r.shown).map((r) => ({ ...r, ts: r.startedMs ?? r.stoppedMs,
    restart: true, cause: "broker_restart", formation: false, ...restartText(r) }));
  for (const r of restarts) {
    if (r.downFromMs === null || (r.startedMs ?? end) < start) continue;
    const dx = x(r.downFromMs);
    root.append(svg("rect", { x: dx, y: 6, width: Math.max(x(r.startedMs ?? end) - dx, 1.5), height: height - 32,
      class: "broker-down", dataset: { testid: "broker-down" } }, svg("title", {}, r.detail)));
  }

  // The rebalance and restart markers, on top: a line each, one label per cluster of markers close together.
  const clusters = [];
  const marks = [...history.markers, ...restarts].sort((a, b) => a.ts - b.ts);
  for (const marker of marks) {
    if (marker.ts < start) continue;
    const mx = x(marker.ts);
    const last = clusters[clusters.length - 1];
    if (last && mx - last.x < MERGE_PX) last.markers.push(marker);
    else clusters.push({ x: mx, markers: [marker], lines: [] });
  }
  for (const cluster of clusters) {
    for (const marker of cluster.markers) {
      if (marker.restart) {
        const line = svg("line", { x1: x(marker.ts), x2: x(marker.ts), y1: 6, y2: height - 26, class: "restart-line" });
        cluster.lines.push(line);
        root.append(svg("g", { class: `restart ${marker.clean ? "clean" : "killed"}`, dataset: { testid: "restart",
          clean: marker.clean, started: marker.startedMs !== null, loadMs: marker.loadMs ?? "",
          loaded: JSON.stringify(marker.loaded ?? {}), label: marker.label } }, line, svg("title", {}, marker.detail)));
        continue;
      }
      const label = marker.formation ? `formation: ${marker.label}` : marker.label;
      const line = svg("line", { x1: x(marker.ts), x2: x(marker.ts), y1: 6, y2: height - 26, class: "marker-line" });
      cluster.lines.push(line);
      root.append(
        svg("g", { class: `marker cause-${marker.cause}`, dataset: { testid: "marker", cause: marker.cause ?? "", label } },
          line, svg("title", {}, `${clockTime(marker.ts)} ${label}${marker.reason ? `: ${marker.reason}` : ""}`)),
      );
    }
    cluster.text = clusterLabel(cluster.markers);
    cluster.label = svg("text", { x: cluster.x + 3, y: 13, class: "marker-label" }, cluster.text);
    const alert = cluster.markers.some((m) => ["member_expired", "member_kicked"].includes(m.cause));
    const restart = cluster.markers.some((m) => m.restart) ? " restart-text" : "";
    root.append(
      svg("g", { class: `${alert ? "marker-text alert" : "marker-text"}${restart}`, dataset: { testid: "marker-label", count: cluster.markers.length } },
        svg("title", {}, cluster.markers.map((m) => `${clockTime(m.ts)} ${m.formation ? "formation: " : ""}${m.restart ? m.detail : m.label}`).join("\n")),
        cluster.label),
    );
  }
  container.replaceChildren(root);

  // Text laid out now that it can be measured.
  for (const [text, bw] of barLabels) if (measure(text) > bw - 5) text.remove();
  const band = []; // [start, end] of the band's labels kept
  for (const [text, room] of bandLabels) {
    const s = Number(text.getAttribute("x"));
    const e = s + measure(text);
    if (e - s > room || band.some(([a, b]) => s < b + LABEL_GAP && a < e + LABEL_GAP)) text.remove();
    else band.push([s, e]);
  }
  for (const tick of axis.querySelectorAll("text")) {
    const half = measure(tick) / 2;
    const tx = Number(tick.getAttribute("x"));
    if (tx + half > width - 2) {
      tick.setAttribute("x", width - 2);
      tick.setAttribute("text-anchor", "end");
    } else if (tx - half < 2) {
      tick.setAttribute("x", 2);
      tick.setAttribute("text-anchor", "start");
    }
  }
  placeLabels(clusters, width);
}

// "formation: 3 joined", "joined, expired after 6.0 s silence": the words of markers that share a label.
export function clusterLabel(markers) {
  const counts = new Map();
  for (const m of markers) counts.set(m.label, (counts.get(m.label) ?? 0) + 1);
  const words = [...counts].map(([label, n]) => (n > 1 ? `${n} ${label}` : label)).join(", ");
  return markers.some((m) => m.formation) ? `formation: ${words}` : words;
}

const LOADED = [["topics", "topic"], ["groups", "group"], ["offsets", "offset"], ["records", "record"], ["transactions", "transaction"]];

// A restart's words: `label` on the timeline ("restart (killed): 1 group, 3 offsets, 300 records in 28 ms"),
// `detail` for its tooltip.
export function restartText(restart) {
  const how = restart.clean ? "stopped cleanly" : "killed";
  if (restart.startedMs === null) return { label: `broker ${how}`, detail: `broker ${how}, not started again yet` };
  const loaded = LOADED.filter(([key]) => restart.loaded?.[key] > 0)
    .map(([key, word]) => `${restart.loaded[key]} ${word}${restart.loaded[key] === 1 ? "" : "s"}`);
  const load = `${loaded.length ? loaded.join(", ") : "nothing"} loaded in ${formatMs(restart.loadMs ?? 0)}`;
  const down = restart.downFromMs === null ? ""
    : `, down ${restart.clean ? "" : "about "}${formatMs(restart.startedMs - restart.downFromMs)}`;
  return {
    label: `restart (${restart.clean ? "clean" : "killed"}): ${load}`,
    detail: `broker ${how}${down}; started at ${clockTime(restart.startedMs)}${restart.dataDir ? ` on ${restart.dataDir}` : ""}: ${load}`,
  };
}

// The width of a text element as drawn (an estimate when the page does not lay it out, e.g. a hidden tab).
function measure(text) {
  const length = text.getComputedTextLength();
  return length > 0 || !text.textContent ? length : text.textContent.length * 6.5;
}

// Cuts a label to `room` pixels with an ellipsis (the longest start that fits, found by halving); empty when not
// even one letter fits.
function cut(text, full, room) {
  text.textContent = full;
  if (measure(text) <= room) return;
  const fits = (n) => {
    text.textContent = `${full.slice(0, n).trimEnd()}…`;
    return measure(text) <= room;
  };
  if (!fits(1)) {
    text.textContent = "";
    return;
  }
  let [lo, hi] = [1, full.length - 1];
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  fits(lo);
}

// Left to right, each cluster's label where it reads whole: right of its line, else left of it (near the right
// edge), in the first row where it does not touch the label before; failing that cut to the room right of its
// line; with no free row, the row's last label is cut short to make room, or failing that this one goes after it,
// cut to fit.
function placeLabels(clusters, width) {
  const rows = Array.from({ length: LABEL_ROWS }, () => ({ end: -Infinity, last: null }));
  const right = width - 2;
  const freeRow = (s) => rows.findIndex((row) => row.end + LABEL_GAP <= s);
  for (const cluster of clusters) {
    const { label, text } = cluster;
    const w = measure(label);
    const candidates = []; // [start, room]: room null when the whole label fits
    if (cluster.x + 3 + w <= right) candidates.push([cluster.x + 3, null]);
    if (cluster.x - 3 - w >= LEFT) candidates.push([cluster.x - 3 - w, null]);
    if (right - cluster.x - 3 >= 60) candidates.push([cluster.x + 3, right - cluster.x - 3]);
    if (!candidates.length) candidates.push([LEFT, right - LEFT]); // wider than the plot
    const found = candidates.find(([start]) => freeRow(start) >= 0);
    let [s, room] = found ?? candidates[0];
    if (room !== null) cut(label, text, room);
    let r = freeRow(s);
    if (r < 0) {
      const byEnd = [...rows.keys()].sort((a, b) => rows[a].end - rows[b].end);
      r = byEnd.find((k) => rows[k].last && rows[k].last.s + MIN_LABEL + LABEL_GAP <= s) ?? -1;
      if (r >= 0) {
        const prev = rows[r].last;
        cut(prev.cluster.label, prev.cluster.text, s - LABEL_GAP - prev.s);
      } else {
        r = byEnd[0];
        s = rows[r].end + LABEL_GAP;
        cut(label, text, right - s);
        if (measure(label) < MIN_LABEL) label.textContent = "";
      }
    }
    label.setAttribute("x", s);
    label.setAttribute("y", 13 + r * LABEL_ROW);
    for (const line of cluster.lines) line.setAttribute("y1", 3 + r * LABEL_ROW);
    rows[r] = { end: s + measure(label), last: { s, cluster } };
  }
}
