// The nodes of a multi-node broker (`serve --nodes N`, issue 29): who is up, who leads what, who coordinates the
// group on screen. One watcher per page (watchCluster) reads GET /v1/cluster, again whenever the event stream says
// a node stopped or started, a leader moved or a coordinator was unloaded or loaded (docs/events.md, "Cluster"),
// and every few seconds besides; the strip under the header, the groups page's coordinator column and the group
// page's coordinator label all draw from what it last read. With one node there is nothing to tell: the strip stays
// hidden, the column and the label too, and no event stream is opened for it.

import { api, el, follow } from "./api.js";

export const OFFSETS_TOPIC = "__consumer_offsets";
export const TRANSACTION_TOPIC = "__transaction_state";
const CLUSTER_EVENTS = new Set(["node_stopped", "node_started", "leader_moved", "coordinator_unloaded", "coordinator_loaded"]);
const POLL_MS = 5000; // what the stream missed, and a loading partition's end if its event was lost

// Kafka's partitionFor (GroupCoordinatorService): Utils.abs(key.hashCode()) % partitions, String.hashCode over
// UTF-16 code units in wrapping 32-bit arithmetic (a JavaScript string is UTF-16 units already), and Utils.abs,
// which maps Integer.MIN_VALUE to 0. The same function as broker/cluster/hashing.py, checked against
// GET /v1/cluster/coordinators by tests/browser/test_console_nodes.py.
export function partitionFor(key, partitions) {
  let hash = 0;
  for (let i = 0; i < key.length; i += 1) hash = (Math.imul(31, hash) + key.charCodeAt(i)) | 0;
  return (hash === -2147483648 ? 0 : Math.abs(hash)) % partitions;
}

// Whether the cluster is worth showing: more than one node.
export const multiNode = (cluster) => !!cluster && cluster.nodes.length > 1;

// A group's coordinator: the leader of its __consumer_offsets partition, with that partition's epoch and state
// (active, loading: COORDINATOR_LOAD_IN_PROGRESS until the load delay ends, offline: no replica runs).
export function coordinatorOf(cluster, groupId) {
  const rows = cluster?.internal?.[OFFSETS_TOPIC] ?? [];
  if (!rows.length) return null;
  const partition = partitionFor(groupId, rows.length);
  const row = rows[partition];
  return { partition, node: row.leader, epoch: row.epoch, state: row.state };
}

// What each node leads: per internal topic and per ordinary topic, the partitions, and how many are loading.
export function leaderships(cluster) {
  const byNode = new Map(cluster.nodes.map((n) => [n.node_id, { offsets: [], transactions: [], topics: {}, loading: 0, count: 0 }]));
  const add = (leader, push) => {
    const node = byNode.get(leader);
    if (node) push(node);
  };
  for (const row of cluster.internal[OFFSETS_TOPIC] ?? []) add(row.leader, (n) => {
    n.offsets.push(row.partition);
    if (row.state === "loading") n.loading += 1;
  });
  for (const row of cluster.internal[TRANSACTION_TOPIC] ?? []) add(row.leader, (n) => {
    n.transactions.push(row.partition);
    if (row.state === "loading") n.loading += 1;
  });
  for (const [topic, rows] of Object.entries(cluster.topics ?? {})) {
    for (const row of rows) add(row.leader, (n) => {
      (n.topics[topic] ??= []).push(row.partition);
      n.count += 1;
    });
  }
  return byNode;
}

// How many partitions have no running replica (leader -1), every topic counted.
function offlineCount(cluster) {
  const rows = [...Object.values(cluster.internal), ...Object.values(cluster.topics ?? {})].flat();
  return rows.filter((row) => row.leader < 0).length;
}

// The watcher: subscribe(fn) calls fn(cluster) now (if read already) and after every new read.
const listeners = new Set();
let current = null;
let watching = false;

export function subscribeCluster(listener) {
  listeners.add(listener);
  if (current) listener(current);
  return () => listeners.delete(listener);
}

export function watchCluster() {
  if (watching) return;
  watching = true;
  let stream = null;
  let pending = null;
  async function read() {
    try {
      current = await api.cluster();
    } catch {
      return; // the groups pages say when the broker is unreachable; the strip keeps its last picture
    }
    for (const listener of listeners) listener(current);
    if (!stream && multiNode(current)) {
      stream = follow({
        onEvent: (record) => {
          if (record.group_id === "" && CLUSTER_EVENTS.has(record.event)) soon();
        },
        onStatus: (status) => {
          if (status === "live") soon(); // what happened while the stream was down
        },
      });
    }
  }
  // A stop moves dozens of leaders, one event each: one read per burst.
  function soon() {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      read();
    }, 100);
  }
  read();
  setInterval(read, POLL_MS);
}

const list = (partitions) => partitions.join(" ");

function nodeDetail(node, leads) {
  const rows = [
    [OFFSETS_TOPIC, leads.offsets],
    [TRANSACTION_TOPIC, leads.transactions],
    ...Object.entries(leads.topics).sort(([a], [b]) => a.localeCompare(b)),
  ].filter(([, partitions]) => partitions.length);
  return el("div", { class: "node-detail", dataset: { testid: "node-detail" } },
    el("p", { class: "muted" }, `node ${node.node_id} at ${node.host}:${node.port}`, node.up ? "" : " · stopped: leads nothing"),
    rows.length
      ? el("dl", {}, rows.flatMap(([topic, partitions]) => [el("dt", {}, topic), el("dd", {}, list(partitions))]))
      : el("p", { class: "muted" }, "no leaderships"));
}

function nodeChip(cluster, node, leads, coordinator, groupId, open) {
  const coordinates = coordinator !== null && coordinator.node === node.node_id;
  const controller = cluster.controller === node.node_id;
  const topics = leads.count;
  const counts = `${leads.offsets.length} · ${leads.transactions.length} · ${topics}`;
  const title = node.up
    ? `node ${node.node_id} leads ${leads.offsets.length} of ${cluster.internal[OFFSETS_TOPIC].length} ${OFFSETS_TOPIC} ` +
      `partitions (the coordinator of every group hashed to them), ${leads.transactions.length} of ` +
      `${cluster.internal[TRANSACTION_TOPIC].length} ${TRANSACTION_TOPIC} partitions and ${topics} partitions of ` +
      "ordinary topics. Click for which."
    : `node ${node.node_id} is stopped: not in Metadata, its port refuses connections`;
  // Two short lines, so that a few nodes fit on one row: who and what state, then where and what it leads.
  const summary = el("summary", { title },
    el("span", { class: "line" },
      el("span", { class: "dot" }),
      el("strong", {}, `node ${node.node_id}`),
      el("span", { class: "state-word" }, node.up ? "up" : "stopped"),
      controller ? el("span", { class: "tag controller", title: "the controller Metadata names" }, "controller") : null,
      coordinates ? el("span", { class: "coordinates-badge", title: `the coordinator of ${groupId}`,
        dataset: { testid: "node-coordinates" } }, "coordinator") : null),
    el("span", { class: "line small" },
      el("span", { class: "addr", dataset: { testid: "node-address" } }, `${node.host}:${node.port}`),
      node.up ? el("span", { class: "leads", dataset: { testid: "node-leads" } }, el("span", { class: "muted" }, "leads "), counts) : null,
      leads.loading ? el("span", { class: "loading", title: "partitions whose new coordinator is still loading" }, `${leads.loading} loading`) : null));
  const chip = el("details", {
    class: `node ${node.up ? "up" : "down"}${coordinates ? " coordinates" : ""}`,
    open: open || null,
    dataset: {
      testid: "node", node: node.node_id, up: node.up, controller, coordinator: coordinates,
      offsets: leads.offsets.length, transactions: leads.transactions.length, topics,
    },
  }, summary, nodeDetail(node, leads));
  return chip;
}

// The strip: one chip per node. focus(groupId or null) marks who coordinates the group on screen.
export function nodesStrip(root) {
  let groupId = null;
  let cluster = null;
  function draw() {
    root.hidden = !multiNode(cluster);
    if (root.hidden) {
      root.replaceChildren();
      return;
    }
    const open = new Set([...root.querySelectorAll("details[open]")].map((d) => d.dataset.node));
    const byNode = leaderships(cluster);
    const coordinator = groupId === null ? null : coordinatorOf(cluster, groupId);
    const up = cluster.nodes.filter((n) => n.up).length;
    const offline = offlineCount(cluster);
    root.replaceChildren(...[
      el("span", { class: "nodes-title", dataset: { testid: "nodes-summary" },
        title: "leads a · b · c: partitions of __consumer_offsets (group coordinators) · __transaction_state · ordinary topics" },
      `${up} of ${cluster.nodes.length} nodes up`),
      ...cluster.nodes.map((node) => nodeChip(cluster, node, byNode.get(node.node_id), coordinator, groupId,
        open.has(String(node.node_id)))),
      offline ? el("span", { class: "offline", dataset: { testid: "nodes-offline" } }, `${offline} partitions offline`) : null,
      el("span", { class: "spacer" }),
      el("span", { class: "muted legend-leads" }, "leads: offsets · txn · topics"),
    ].filter((child) => child !== null));
  }
  subscribeCluster((read) => {
    cluster = read;
    draw();
  });
  return {
    focus(group) {
      groupId = group;
      draw();
    },
  };
}
