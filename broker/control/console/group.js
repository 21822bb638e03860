// The group page: the ownership timeline, the members with their session bars, the event feed and the actions.
// History comes from GET /v1/groups/{group}/events, then live from /v1/events?group=...&since_seq=<last seen>, so
// nothing falls between the two; the members table polls GET /v1/groups/{group} (heartbeat ages move every second).

import { api, ApiError, el, follow, formatMs } from "./api.js";
import { fenceInstance, faultPanel, forceRebalance, kickMember } from "./actions.js";
import { History } from "./history.js";
import { renderTimeline } from "./timeline.js";

const FEED_LIMIT = 400;
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
  const skip = new Set(["v", "seq", "ts_ms", "run_id", "event", "group_id", "group_type"]);
  return Object.entries(record)
    .filter(([name, value]) => !skip.has(name) && value !== null && value !== "")
    .map(([name, value]) => `${name}=${typeof value === "object" ? JSON.stringify(value) : value}`)
    .join("  ");
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

  const title = el("h2", { dataset: { testid: "group-title" } }, groupId);
  const facts = el("div", { class: "facts", dataset: { testid: "group-facts" } });
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
    "expired) before it re-joined under its id. Vertical lines: rebalances, labelled with their cause.");
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

  root.replaceChildren(
    el("section", { class: "page" },
      el("p", {}, el("a", { href: "#/" }, "← all groups")),
      el("div", { class: "toolbar" }, title, facts, el("span", { class: "spacer" }),
        el("label", {}, "Window ", windowSelect), rebalanceButton),
      el("h3", {}, "Ownership timeline"), timeline, legend,
      el("h3", {}, "Members"), membersTable,
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
    const consumer = detail.group_type === "consumer";
    facts.replaceChildren(
      el("span", { class: `tag ${detail.group_type}` }, detail.group_type),
      el("span", { class: `state state-${detail.state}`, dataset: { testid: "group-state" } }, detail.state),
      el("span", {}, consumer ? `epoch ${detail.group_epoch} · target ${detail.assignment_epoch}` : `generation ${detail.generation_id}`),
      el("span", { dataset: { testid: "member-count" } }, `${detail.members.length} member(s)`),
      detail.protocol ? el("span", {}, detail.protocol) : null,
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
    const heads = ["member", "instance", consumer ? "assigned" : "assignment"];
    if (consumer) heads.push("epoch", "state", "pending revocation");
    heads.push("since last heartbeat / session", "");
    membersHead.replaceChildren(el("tr", {}, heads.map((h) => el("th", {}, h))));
    const rows = (detail?.members ?? []).map((m) => {
      const age = m.last_heartbeat_age_ms === null ? null : m.last_heartbeat_age_ms + elapsed;
      const cells = [
        el("td", {}, el("strong", {}, m.client_id || "–"), " ", el("span", { class: "muted" }, m.client_host || ""),
          el("br"), el("code", { class: "member-id" }, m.member_id)),
        el("td", {}, m.group_instance_id ?? "–"),
        el("td", {}, partitionsText(m.assignment)),
      ];
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
    drawFacts();
    drawMembers();
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
      onEvent: (record) => {
        skew = record.ts_ms - Date.now();
        if (!history.add(record)) return;
        events.push(record);
        if (events.length > 5000) events.splice(0, events.length - 5000);
        scheduleDraw();
        detailSoon();
      },
      onStatus: (status) => setStatus(status === "live" ? "live" : status, status === "live" ? "ok" : "warn"),
    });
  }

  start();
  const ticker = setInterval(draw, 1000); // the timeline's right edge is now
  const barTicker = setInterval(drawMembers, 250); // session bars move smoothly between two polls
  const poller = setInterval(loadDetail, 1000);
  return () => {
    stream?.stop();
    faults.stop();
    clearInterval(ticker);
    clearInterval(barTicker);
    clearInterval(poller);
    if (detailTimer) clearTimeout(detailTimer);
  };
}
