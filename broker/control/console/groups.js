// The groups page: every group with its type, state, generation or epoch, members, rebalances so far and the
// last rebalance's cause and duration, and on a multi-node broker its coordinator node (nodes.js); filtered by
// state; refreshed when the event stream says a group changed, redrawn when a coordinator moves.

import { api, el, follow, formatMs } from "./api.js";
import { causeLabel } from "./history.js";
import { coordinatorOf, multiNode, subscribeCluster } from "./nodes.js";

const STATES = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Assigning", "Reconciling"];
// A share group (KIP-932) has no rebalances: its assignor just reassigns.
const rebalancesOf = (g) => (g.group_type === "share" ? "–" : g.rebalances ?? "–");
const HEADS = ["group", "type", "state", "generation / epoch", "members", "rebalances", "last rebalance", "took"];

// The coordinator cell: its node, amber while it loads the group, red when no replica of its partition runs.
function coordinatorCell(cluster, groupId) {
  const found = coordinatorOf(cluster, groupId);
  if (!found) return el("td", {}, "–");
  const title = `${found.state === "offline" ? "no running replica of" : "the leader of"} __consumer_offsets ` +
    `partition ${found.partition} (leader epoch ${found.epoch})`;
  return el("td", { class: `coordinator-cell ${found.state}`, title,
    dataset: { testid: "group-coordinator-cell", node: found.node, partition: found.partition } },
  found.node < 0 ? "offline" : `node ${found.node}${found.state === "loading" ? " (loading)" : ""}`);
}

export function groupsPage(root, setStatus) {
  let filter = "";
  let groups = [];
  let refreshing = null;
  let cluster = null;

  const select = el("select", { dataset: { testid: "state-filter" }, "aria-label": "filter by state" },
    el("option", { value: "" }, "every state"),
    STATES.map((state) => el("option", { value: state }, state)));
  select.addEventListener("change", () => {
    filter = select.value;
    draw();
  });
  const body = el("tbody");
  const head = el("thead");
  const table = el("table", { class: "groups", dataset: { testid: "groups-table" } }, head, body);
  const empty = el("p", { class: "muted", dataset: { testid: "no-groups" } }, "No groups yet: start a consumer.");
  root.replaceChildren(
    el("section", { class: "page" },
      el("div", { class: "toolbar" }, el("h2", {}, "Groups"), el("label", {}, "State ", select)),
      table, empty),
  );

  function draw() {
    const shown = groups.filter((g) => !filter || g.state === filter);
    const nodes = multiNode(cluster); // one node coordinates everything: no column
    head.replaceChildren(el("tr", {}, [...HEADS, ...(nodes ? ["coordinator"] : [])].map((h) => el("th", {}, h))));
    body.replaceChildren(
      ...shown.map((g) => {
        const last = g.last_rebalance;
        const epoch = g.group_type === "consumer" || g.group_type === "share"
          ? `epoch ${g.group_epoch} (target ${g.assignment_epoch})` : `gen ${g.generation_id}`;
        return el("tr", { dataset: { testid: "group-row", group: g.group_id, state: g.state } },
          el("td", {}, el("a", { href: `#/groups/${encodeURIComponent(g.group_id)}` }, g.group_id)),
          el("td", {}, el("span", { class: `tag ${g.group_type}` }, g.group_type)),
          el("td", {}, el("span", { class: `state state-${g.state}` }, g.state)),
          el("td", {}, epoch),
          el("td", { class: "num" }, g.members),
          el("td", { class: "num" }, rebalancesOf(g)),
          el("td", {}, last ? causeLabel(last.cause) : "–"),
          el("td", { class: "num" }, last ? (last.duration_ms === null ? "in progress" : formatMs(last.duration_ms)) : "–"),
          nodes ? coordinatorCell(cluster, g.group_id) : null);
      }),
    );
    empty.hidden = shown.length > 0;
    table.hidden = shown.length === 0;
  }

  async function refresh() {
    try {
      groups = await api.groups();
      draw();
    } catch (error) {
      setStatus(`could not list the groups: ${error.message}`, "error");
    }
  }

  // Many events come in bursts (a rebalance is a dozen): one refresh per burst.
  function soon() {
    if (refreshing) return;
    refreshing = setTimeout(() => {
      refreshing = null;
      refresh();
    }, 150);
  }

  refresh();
  const unsubscribe = subscribeCluster((read) => {
    cluster = read;
    draw();
  });
  const stream = follow({
    onEvent: (record) => {
      if (record.group_id) soon();
    },
    onStatus: (status) => setStatus(status === "live" ? "live" : status, status === "live" ? "ok" : "warn"),
  });
  const timer = setInterval(refresh, 5000); // in-progress durations and anything the stream missed
  return () => {
    stream.stop();
    unsubscribe();
    clearInterval(timer);
    if (refreshing) clearTimeout(refreshing);
  };
}
