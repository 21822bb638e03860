// The control API, as the console uses it: JSON calls, and the /v1/events stream read over fetch.
//
// The stream is read with fetch rather than EventSource: EventSource hands named events ("event: sync_completed")
// only to a listener registered for that name, and new event names may appear within a schema version
// (docs/events.md), so the console parses the text/event-stream itself and sees every event. On a break it
// reconnects with since_seq, which replays what it missed from the broker's ring buffers, and run_id: a broker that
// restarted numbers its events from 1 again under a new run_id, and replays its whole buffer to a resume point from
// another run (docs/control-api.yaml), which is then taken as new however small its seq.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, body) {
  const options = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data && typeof data.error === "string" ? data.error : `${method} ${path}: ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return data;
}

const seg = (value) => encodeURIComponent(value);

export const api = {
  groups: () => call("GET", "/v1/groups").then((d) => d.groups),
  group: (id) => call("GET", `/v1/groups/${seg(id)}`),
  // With the broker's own broker_started / broker_stopped: the timeline marks restarts.
  // A share group's share-partitions with their in-flight records (who holds what, delivery counts, locks).
  sharePartitions: (id) => call("GET", `/v1/groups/${seg(id)}/share-partitions`),
  events: (id) => call("GET", `/v1/groups/${seg(id)}/events?broker_events=true`).then((d) => d.events),
  kick: (id, member) => call("POST", `/v1/groups/${seg(id)}/members/${seg(member)}/kick`),
  fence: (id, instance) => call("POST", `/v1/groups/${seg(id)}/instances/${seg(instance)}/fence`),
  rebalance: (id) => call("POST", `/v1/groups/${seg(id)}/rebalance`),
  faults: () => call("GET", "/v1/faults").then((d) => d.faults),
  // The nodes of `serve --nodes N`: who is up, the controller, every partition's leader (nodes.js).
  cluster: () => call("GET", "/v1/cluster"),
  addFault: (spec) => call("POST", "/v1/faults", spec),
  deleteFault: (rule) => call("DELETE", `/v1/faults/${seg(rule)}`),
};

// Follows /v1/events (one group's, or every group's) until stop() is called. onEvent gets every record once, in
// seq order (within a run of the broker); onStatus gets "live", "reconnecting" or "stopped". sinceSeq null: only
// what happens from now on; runId: the run sinceSeq counts in. brokerEvents: a group's stream with the broker's own.
export function follow({ group = null, sinceSeq = null, runId = null, brokerEvents = false, onEvent, onStatus = () => {} }) {
  const controller = new AbortController();
  let lastSeq = sinceSeq;
  let lastRun = runId;
  let stopped = false;

  async function readOnce() {
    const query = new URLSearchParams();
    if (group !== null) query.set("group", group);
    if (group !== null && brokerEvents) query.set("broker_events", "true");
    if (lastSeq !== null) query.set("since_seq", String(lastSeq));
    if (lastSeq !== null && lastRun !== null) query.set("run_id", lastRun);
    const response = await fetch(`/v1/events?${query}`, {
      signal: controller.signal,
      headers: { Accept: "text/event-stream" },
    });
    if (!response.ok || !response.body) throw new ApiError(response.status, "the event stream refused");
    onStatus("live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trimStart())
          .join("\n");
        if (!data) continue; // a comment: keep-alive, or "n events dropped"
        const record = JSON.parse(data);
        const sameRun = lastRun === null || record.run_id === lastRun;
        if (lastSeq !== null && sameRun && record.seq <= lastSeq) continue;
        lastSeq = record.seq;
        lastRun = record.run_id ?? lastRun;
        onEvent(record);
      }
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await readOnce();
      } catch (error) {
        if (stopped) break;
      }
      if (stopped) break;
      onStatus("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    onStatus("stopped");
  })();

  return {
    stop() {
      stopped = true;
      controller.abort();
    },
  };
}

// A duration for people: 850 ms, 6.0 s, 2.5 min.
export function formatMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

// Builds an element: el("td", { class: "x", dataset: { testid: "row" } }, "text", child, ...).
export function el(tag, attributes = {}, ...children) {
  const svg = tag.startsWith("svg:");
  const node = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") {
      for (const [key, data] of Object.entries(value)) node.dataset[key] = String(data);
    } else if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "text") {
      node.textContent = String(value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
