// The group page: the ownership timeline, the members with their session bars, the event feed and the actions.
// History comes from GET /v1/groups/{group}/events, then live from /v1/events?group=...&since_seq=<last seen>, so
// nothing falls between the two, both with the broker's own start and stop events (broker_events=true) for the
// restart marks, and the run_id of the last seen: after a restart the new run is replayed from its start; the members table polls GET /v1/groups/{group} (heartbeat ages move every second).

import { api, ApiError, el, follow, formatMs } from "./api.js";
import { fenceInstance, faultPanel, forceRebalance, kickMember } from "./actions.js";
import { History } from "./history.js";
import { coordinatorOf, multiNode, subscribeCluster } from "./nodes.js";
import { shareEventSummary, sharePanel } from "./share.js";
import { renderTimeline } from "./timeline.js";

const FEED_LIMIT = 400;
const LAG_SAMPLES = 600; // one per poll (1 s): the last ten minutes the page was open
const LAG_LINES = 12; // per-partition lines drawn under the total when the group has at most this many
const OFFSET_HEADS = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"];
const WINDOWS = [["all", null], ["last 1 min", 60_000], ["last 5 min", 300_000], ["last 15 min", 900_000]];

function partitionsText(byTopic) {
  if (!byTopic) return "–";
  const parts = Object.entries(byTopic).filter(([, ps]) => ps.length).map(([topic, ps]) => `${topic} ${ps.join(",")}`);
  return parts.length ? parts.join("; ") : "none";
}

// The session bar: green, amber past half the session, red from 80% (near expiry).
export function sessionLevel(ageMs, sessionMs) {
  const fraction = sessionMs > 0 ? ageMs / sessionMs : 0;
  return fraction >= 0.8 ? "red" : fraction > 0.5 ? "amber" : "ok";
}

function sessionBar(ageMs, sessionMs) {
  const level = sessionLevel(ageMs, sessionMs);
  const fill = el("span", { class: `fill ${level}` });
  fill.style.width = `${Math.min(100, (100 * ageMs) / Math.max(sessionMs, 1)).toFixed(1)}%`;
  return el("div", { class: "session", dataset: { testid: "session-bar", level } },
    el("div", { class: "track" }, fill),
    el("span", { class: "session-text" }, `${formatMs(ageMs)} / ${formatMs(sessionMs)}`));
}

function eventSummary(record) {
  const share = shareEventSummary(record);
  if (share !== null) return share;
  const skip = new Set(["v", "seq", "ts_ms", "run_id", "event", "group_id", "group_type"]);
  return Object.entries(record)
    .filter(([name, value]) => !skip.has(name) && value !== null && value !== "")
    .map(([name, value]) => `${name}=${typeof value === "object" ? JSON.stringify(value) : value}`)
    .join("  ");
}

const dash = (value) => (value === null || value === undefined || value === "" ? "-" : String(value));

// The offsets table, with the columns of kafka-consumer-groups.sh --describe ("-" where Kafka's tool prints it).
function offsetRows(offsets) {
  if (!offsets.length) return [el("tr", {}, el("td", { colspan: OFFSET_HEADS.length, class: "muted" }, "no committed or owned partitions"))];
  return offsets.map((o) => el("tr", { dataset: { testid: "offset-row", topic: o.topic, partition: o.partition } },
    el("td", {}, o.topic), el("td", { class: "num" }, o.partition),
    el("td", { class: "num", dataset: { testid: "committed" } }, dash(o.committed_offset)),
    el("td", { class: "num", dataset: { testid: "log-end" } }, dash(o.log_end_offset)),
    el("td", { class: `num lag${o.lag > 0 ? " behind" : ""}`, dataset: { testid: "lag" } }, dash(o.lag)),
    el("td", {}, el("code", { class: "member-id" }, dash(o.member_id))), el("td", {}, dash(o.host)),
    el("td", {}, dash(o.client_id))));
}

// Lag over time: the group's total lag (and each partition's, thin, when there are few), one point per poll.
export function lagChart(samples, width = 520, height = 150) {
  const pad = { left: 44, right: 8, top: 10, bottom: 22 };
  const w = width - pad.left - pad.right;
  const h = height - pad.top - pad.bottom;
  const first = samples.length ? samples[0].ms : 0;
  const span = Math.max(samples.length ? samples[samples.length - 1].ms - first : 0, 1000);
  const keys = [...new Set(samples.flatMap((s) => Object.keys(s.parts)))].sort();
  const max = Math.max(1, ...samples.map((s) => s.total), ...samples.flatMap((s) => Object.values(s.parts)));
  const x = (ms) => (pad.left + (w * (ms - first)) / span).toFixed(1);
  const y = (lag) => (pad.top + h - (h * lag) / max).toFixed(1);
  const line = (values, attributes) => el("svg:polyline", { fill: "none",
    points: values.map(([ms, lag]) => `${x(ms)},${y(lag)}`).join(" "), ...attributes });
  const parts = keys.length <= LAG_LINES ? keys.map((key) => line(
    samples.filter((s) => key in s.parts).map((s) => [s.ms, s.parts[key]]),
    { class: "lag-part", dataset: { testid: "lag-part", partition: key } })) : [];
  const last = samples.length ? samples[samples.length - 1].total : null;
  return el("svg:svg", { class: "lag-chart", width, height, viewBox: `0 0 ${width} ${height}`,
    dataset: { testid: "lag-chart", points: samples.length, max, last: last ?? "" } },
    el("svg:line", { class: "lag-axis", x1: pad.left, y1: pad.top + h, x2: pad.left + w, y2: pad.top + h }),
    el("svg:line", { class: "lag-axis", x1: pad.left, y1: pad.top, x2: pad.left, y2: pad.top + h }),
    el("svg:text", { class: "lag-label", x: pad.left - 4, y: pad.top + 8, "text-anchor": "end" }, String(max)),
    el("svg:text", { class: "lag-label", x: pad.left - 4, y: pad.top + h, "text-anchor": "end" }, "0"),
    el("svg:text", { class: "lag-label", x: pad.left + w, y: height - 6, "text-anchor": "end" },
      `last ${formatMs(span)}${last === null ? "" : ` · total lag now ${last}`}`),
    ...parts, line(samples.map((s) => [s.ms, s.total]), { class: "lag-total", dataset: { testid: "lag-line" } }));
}

export function groupPage(root, groupId, setStatus) {
  const events = [];
  let history = new History();
  let detail = null;
  let fetchedAt = 0;
  let skew = 0; // the broker's clock minus ours, from the newest live event
  let windowMs = null;
  let feedFilter = "";
  let drawPending = false;
  let stream = null;
  let live = false; // the event stream is connected

  const title = el("h2", { dataset: { testid: "group-title" } }, groupId);
  const facts = el("div", { class: "facts", dataset: { testid: "group-facts" } });
  // Who coordinates the group (a multi-node broker): the leader of its __consumer_offsets partition, from the
  // nodes watcher, so it changes the moment a stop or a move is told in events; the strip marks the same node.
  const coordinatorLabel = el("span", { class: "coordinator", dataset: { testid: "group-coordinator" }, hidden: true });
  const windowSelect = el("select", { "aria-label": "time window", dataset: { testid: "window" } },
    WINDOWS.map(([label], i) => el("option", { value: String(i) }, label)));
  windowSelect.addEventListener("change", () => {
    windowMs = WINDOWS[Number(windowSelect.value)][1];
    draw();
  });
  const rebalanceButton = el("button", { type: "button", dataset: { testid: "force-rebalance" } }, "Force rebalance");
  rebalanceButton.addEventListener("click", async () => {
    await forceRebalance(groupId, setStatus);
    loadDetail();
  });
  const timeline = el("div", { class: "timeline-box", dataset: { testid: "timeline-box" } });
  const legend = el("p", { class: "legend muted" },
    "Bars: partitions owned (hatched: pending revocation). Red shade: partitions without an owner. ",
    "Grey hatch on a lane: the silence before an expiry. Red box on a live lane: the time a member was out (kicked, ",
    "expired) before it re-joined under its id. Vertical lines: rebalances, labelled with their cause. ",
    "Thick purple line: a broker restart (dashed: it was killed), with what its start loaded and how long that took; ",
    "purple shade: the time the broker was down.");
  const membersBody = el("tbody");
  const membersHead = el("thead");
  const membersTable = el("table", { class: "members", dataset: { testid: "members-table" } }, membersHead, membersBody);
  const feedSelect = el("select", { "aria-label": "event kind", dataset: { testid: "feed-filter" } });
  feedSelect.addEventListener("change", () => {
    feedFilter = feedSelect.value;
    drawFeed();
  });
  const feed = el("ol", { class: "feed", dataset: { testid: "feed" } });
  const faults = faultPanel(groupId, setStatus);
  const offsetsBody = el("tbody");
  const offsetsTable = el("table", { class: "members offsets", dataset: { testid: "offsets-table" } },
    el("thead", {}, el("tr", {}, OFFSET_HEADS.map((head) => el("th", {}, head)))), offsetsBody);
  const lagBox = el("div", { class: "lag-box", dataset: { testid: "lag-box" } });
  const lagSamples = [];
  const share = sharePanel(groupId, setStatus);
  // A share group (KIP-932): its lanes show what each member is assigned (members share partitions), and it
  // commits no offsets: its share-partitions and in-flight records take the place of the offsets and lag.
  const timelineTitle = el("h3", { dataset: { testid: "timeline-title" } }, "Ownership timeline");
  const shareLegend = el("p", { class: "legend muted", hidden: true },
    "Share group: each lane shows the partitions its member is assigned; several members may be assigned one ",
    "partition and read it together. Who holds which records is below, under In-flight records.");
  const timelineSection = el("div", { dataset: { testid: "timeline-section" } }, timelineTitle, timeline, legend,
    shareLegend);
  const offsetsSection = el("div", { dataset: { testid: "offsets-section" } },
    el("h3", {}, "Offsets and lag"), el("div", { class: "lag-columns" }, offsetsTable, lagBox));
  share.panel.hidden = true;

  root.replaceChildren(
    el("section", { class: "page" },
      el("p", {}, el("a", { href: "#/" }, "← all groups")),
      el("div", { class: "toolbar" }, title, facts, coordinatorLabel, el("span", { class: "spacer" }),
        el("label", {}, "Window ", windowSelect), rebalanceButton),
      timelineSection,
      el("h3", {}, "Members"), membersTable,
      share.panel, offsetsSection,
      el("div", { class: "columns" },
        el("div", {}, el("div", { class: "toolbar" }, el("h3", {}, "Events"), el("label", {}, "Kind ", feedSelect)), feed),
        el("div", {}, el("h3", {}, "Fault rules"), faults.panel))),
  );

  const now = () => Math.max(Date.now() + skew, history.lastMs ?? 0);

  function drawFacts() {
    if (!detail) {
      facts.replaceChildren(el("span", { class: "state" }, "no such group (now)"));
      return;
    }
    const consumer = detail.group_type === "consumer" || detail.group_type === "share"; // epochs, no generation
    facts.replaceChildren(
      el("span", { class: `tag ${detail.group_type}` }, detail.group_type),
      el("span", { class: `state state-${detail.state}`, dataset: { testid: "group-state" } }, detail.state),
      el("span", {}, consumer ? `epoch ${detail.group_epoch} · target ${detail.assignment_epoch}` : `generation ${detail.generation_id}`),
      el("span", { dataset: { testid: "member-count" } }, `${detail.members.length} member(s)`),
      ...(detail.group_type === "share" ? [] : [el("span", { dataset: { testid: "total-lag" } }, `lag ${detail.lag ?? "-"}`)]),
      ...(detail.protocol ? [el("span", {}, detail.protocol)] : []),
    );
  }

  // Rows are rebuilt only when the members change (a button must not vanish under the pointer); the session
  // bars move every second in place, from the age the API gave plus the time since.
  let membersShown = "";
  const bars = new Map(); // member id -> its session bar's cell

  function drawMembers() {
    const elapsed = Date.now() - fetchedAt;
    const signature = JSON.stringify((detail?.members ?? []).map((m) => ({ ...m, last_heartbeat_age_ms: 0, session_expires_in_ms: 0 })));
    if (signature === membersShown) {
      for (const m of detail?.members ?? []) {
        const cell = bars.get(m.member_id);
        if (cell && m.last_heartbeat_age_ms !== null) cell.replaceChildren(sessionBar(m.last_heartbeat_age_ms + elapsed, m.session_timeout_ms));
      }
      return;
    }
    membersShown = signature;
    bars.clear();
    const consumer = detail?.group_type === "consumer";
    const shared = detail?.group_type === "share"; // no instance ids, no revocation: what each subscribed to
    const heads = shared ? ["member", "subscribed", "assigned", "epoch"] : ["member", "instance", consumer ? "assigned" : "assignment"];
    if (consumer) heads.push("epoch", "state", "pending revocation");
    heads.push("since last heartbeat / session", "");
    membersHead.replaceChildren(el("tr", {}, heads.map((h) => el("th", {}, h))));
    const rows = (detail?.members ?? []).map((m) => {
      const age = m.last_heartbeat_age_ms === null ? null : m.last_heartbeat_age_ms + elapsed;
      const cells = [
        el("td", {}, el("strong", {}, m.client_id || "–"), " ", el("span", { class: "muted" }, m.client_host || ""),
          el("br"), el("code", { class: "member-id" }, m.member_id)),
        shared ? el("td", { dataset: { testid: "subscribed" } }, (m.subscribed_topic_names ?? []).join(", ") || "–")
          : el("td", {}, m.group_instance_id ?? "–"),
        el("td", { dataset: { testid: "assigned" } }, partitionsText(m.assignment)),
      ];
      if (shared) cells.push(el("td", { class: "num", dataset: { testid: "member-epoch" } }, m.member_epoch));
      if (consumer) {
        cells.push(el("td", { class: "num" }, m.member_epoch), el("td", {}, m.state), el("td", {}, partitionsText(m.pending_revocation)));
      }
      const barCell = el("td", {}, age === null ? "–" : sessionBar(age, m.session_timeout_ms));
      bars.set(m.member_id, barCell);
      cells.push(barCell);
      const kick = el("button", { type: "button", class: "small danger", dataset: { testid: "kick", member: m.member_id } }, "Kick");
      kick.addEventListener("click", async () => {
        await kickMember(groupId, m, setStatus);
        loadDetail();
      });
      const buttons = [kick];
      if (m.group_instance_id) {
        const fence = el("button", { type: "button", class: "small", dataset: { testid: "fence", instance: m.group_instance_id } }, "Fence");
        fence.addEventListener("click", async () => {
          await fenceInstance(groupId, m, setStatus);
          loadDetail();
        });
        buttons.push(fence);
      }
      cells.push(el("td", { class: "actions" }, buttons));
      return el("tr", { dataset: { testid: "member-row", member: m.member_id } }, cells);
    });
    membersBody.replaceChildren(...rows);
    if (!rows.length) membersBody.replaceChildren(el("tr", {}, el("td", { colspan: heads.length, class: "muted" }, "no members")));
  }

  function drawFeed() {
    const kinds = [...new Set(events.map((e) => e.event))].sort();
    const current = feedSelect.value;
    feedSelect.replaceChildren(el("option", { value: "" }, "every kind"), kinds.map((k) => el("option", { value: k }, k)));
    feedSelect.value = kinds.includes(current) ? current : "";
    feedFilter = feedSelect.value;
    const shown = events.filter((e) => !feedFilter || e.event === feedFilter).slice(-FEED_LIMIT).reverse();
    feed.replaceChildren(...shown.map((e) => el("li", { dataset: { testid: "feed-row", event: e.event, seq: e.seq } },
      el("time", {}, new Date(e.ts_ms).toISOString().slice(11, 23)), " ",
      el("span", { class: `kind kind-${e.event}` }, e.event), " ",
      el("span", { class: "detail" }, eventSummary(e)))));
  }

  function draw() {
    drawPending = false;
    renderTimeline(timeline, history, { nowMs: now(), windowMs, width: Math.max(timeline.clientWidth || 1100, 700) });
  }

  function scheduleDraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => {
      draw();
      drawFeed();
    });
  }

  async function loadDetail() {
    try {
      detail = await api.group(groupId);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) {
        setStatus(`could not read the group: ${error.message}`, "error");
        return;
      }
      detail = null;
    }
    fetchedAt = Date.now();
    const shared = detail?.group_type === "share";
    share.panel.hidden = !shared;
    offsetsSection.hidden = shared;
    timelineTitle.textContent = shared ? "Assignment timeline" : "Ownership timeline";
    shareLegend.hidden = !shared;
    drawFacts();
    drawMembers();
    drawOffsets();
    if (shared) await share.refresh(detail);
  }

  // Sampled at each poll while the page is open: the broker keeps no history of lag.
  function drawOffsets() {
    const offsets = detail?.offsets ?? [];
    offsetsBody.replaceChildren(...offsetRows(offsets));
    if (detail) {
      const parts = {};
      for (const o of offsets) if (o.lag !== null) parts[`${o.topic}-${o.partition}`] = o.lag;
      lagSamples.push({ ms: fetchedAt, total: detail.lag ?? 0, parts });
      if (lagSamples.length > LAG_SAMPLES) lagSamples.splice(0, lagSamples.length - LAG_SAMPLES);
    }
    lagBox.replaceChildren(lagChart(lagSamples));
  }

  let detailTimer = null;
  function detailSoon() {
    if (detailTimer) return;
    detailTimer = setTimeout(() => {
      detailTimer = null;
      loadDetail();
    }, 100);
  }

  async function start() {
    await loadDetail();
    let initial = [];
    try {
      initial = await api.events(groupId);
    } catch (error) {
      setStatus(`no events for ${groupId}: ${error.message}`, "warn");
    }
    events.push(...initial);
    history = History.from(initial, detail?.group_type ?? "classic");
    draw();
    drawFeed();
    stream = follow({
      group: groupId,
      sinceSeq: history.lastSeq,
      runId: history.runId,
      brokerEvents: true,
      onEvent: (record) => {
        skew = record.ts_ms - Date.now();
        if (!history.add(record)) return;
        events.push(record);
        if (events.length > 5000) events.splice(0, events.length - 5000);
        scheduleDraw();
        detailSoon();
      },
      onStatus: (status) => {
        if (status === "reconnecting" && live) history.streamLost(now()); // where a killed broker's down span starts
        live = status === "live";
        setStatus(live ? "live" : status, live ? "ok" : "warn");
      },
    });
  }

  function drawCoordinator(cluster) {
    const found = multiNode(cluster) ? coordinatorOf(cluster, groupId) : null;
    coordinatorLabel.hidden = found === null;
    if (found === null) return;
    coordinatorLabel.className = `coordinator ${found.state}`;
    coordinatorLabel.dataset.node = String(found.node);
    coordinatorLabel.dataset.partition = String(found.partition);
    coordinatorLabel.dataset.state = found.state;
    coordinatorLabel.title = `the leader of __consumer_offsets partition ${found.partition}, leader epoch ${found.epoch}`;
    const what = found.node < 0 ? "offline (no replica of its partition runs)"
      : `node ${found.node}${found.state === "loading" ? " · loading" : ""}`;
    coordinatorLabel.replaceChildren(el("span", { class: "muted" }, "coordinator "), el("strong", {}, what));
  }

  start();
  const unsubscribeCluster = subscribeCluster(drawCoordinator);
  const ticker = setInterval(draw, 1000); // the timeline's right edge is now
  const barTicker = setInterval(drawMembers, 250); // session bars move smoothly between two polls
  const poller = setInterval(loadDetail, 1000);
  return () => {
    stream?.stop();
    unsubscribeCluster();
    faults.stop();
    share.stop();
    clearInterval(ticker);
    clearInterval(barTicker);
    clearInterval(poller);
    if (detailTimer) clearTimeout(detailTimer);
  };
}
