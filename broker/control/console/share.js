// A share group's page parts (KIP-932, issue 28): each share-partition's in-flight window from SPSO to SPEO with
// its records coloured by state, the counts by state, and the record table: per run of in-flight offsets its state,
// delivery count, the member holding it and the lock's time left. Read from GET /v1/groups/{group}/share-partitions
// at each of the group page's polls (and after each event); the locks count down in between.

import { api, ApiError, el, formatMs } from "./api.js";

const STATES = ["available", "acquired", "acknowledged", "archived"];
const PARTITION_HEADS = ["topic", "partition", "SPSO", "SPEO", "in-flight window", "in flight", ...STATES,
  "deliveries", "redeliveries"];
const RECORD_HEADS = ["topic", "partition", "offsets", "records", "state", "delivery count", "held by", "lock deadline",
  "lock left"];
const WINDOW_PX = 240;
const RECORDS_SHOWN = 200;

const range = (first, last) => (first === last ? String(first) : `${first}–${last}`);

// The window from SPSO to SPEO, one segment per run of records in one state, as wide as its share of the window.
export function windowBar(partition) {
  const runs = partition.records ?? [];
  const span = Math.max(partition.end_offset - partition.start_offset + 1, 0);
  const bar = el("div", { class: "share-window", dataset: { testid: "share-window", inFlight: partition.in_flight },
    title: span ? `offsets ${range(partition.start_offset, partition.end_offset)}` : "nothing in flight" });
  bar.style.width = `${WINDOW_PX}px`;
  if (!span) {
    bar.append(el("span", { class: "share-window-empty muted" }, "nothing in flight"));
    return bar;
  }
  for (const run of runs) {
    const left = (100 * (run.first_offset - partition.start_offset)) / span;
    const width = (100 * (run.last_offset - run.first_offset + 1)) / span;
    const segment = el("span", { class: `segment ${run.state}`, dataset: { testid: "share-segment", state: run.state },
      title: `${range(run.first_offset, run.last_offset)} ${run.state}, delivery count ${run.delivery_count}` });
    segment.style.left = `${left.toFixed(2)}%`;
    segment.style.width = `${width.toFixed(2)}%`;
    bar.append(segment);
  }
  return bar;
}

function partitionRow(p) {
  return el("tr", { dataset: { testid: "share-partition-row", topic: p.topic, partition: p.partition } },
    el("td", {}, p.topic), el("td", { class: "num" }, p.partition),
    el("td", { class: "num", dataset: { testid: "spso" } }, p.start_offset),
    el("td", { class: "num", dataset: { testid: "speo" } }, p.end_offset),
    el("td", {}, windowBar(p)),
    el("td", { class: "num", dataset: { testid: "in-flight" } }, p.in_flight),
    STATES.map((state) => el("td", { class: `num count ${state}`, dataset: { testid: `count-${state}` } }, p[state])),
    el("td", { class: "num" }, p.delivered_total),
    el("td", { class: "num" }, p.redelivered_total));
}

// A share-partition event (records_acquired, _released, _archived, _acknowledged) as the CLI prints it:
// "member_id=m1 cause=release partition=t-0 offsets=0-4 records=5 delivery_count=1 lock=30.0 s"; null for others.
export function shareEventSummary(record) {
  if (record.group_type !== "share" || record.topic === undefined || record.partition === undefined) return null;
  const runs = (list) => list.map(([first, last]) => (first === last ? String(first) : `${first}-${last}`)).join(",");
  const fields = [["member_id", record.member_id], ["cause", record.cause],
    ["partition", `${record.topic}-${record.partition}`]];
  if (record.ranges) fields.push(["offsets", runs(record.ranges)]);
  else if (record.offsets) fields.push(["offsets", runs(record.offsets)]);
  for (const key of ["records", "accepted", "rejected"]) if (key in record) fields.push([key, record[key]]);
  if (record.ranges) fields.push(["delivery_count", [...new Set(record.ranges.map((r) => r[2]))].join(",")]);
  else if ("delivery_count" in record) fields.push(["delivery_count", record.delivery_count]);
  if ("redelivered" in record) fields.push(["redelivered", record.redelivered]);
  if ("lock_duration_ms" in record) fields.push(["lock", formatMs(record.lock_duration_ms)]);
  return fields.filter(([, value]) => value !== null && value !== undefined).map(([k, v]) => `${k}=${v}`).join("  ");
}

export function sharePanel(groupId, setStatus) {
  let view = null; // the last answer of /share-partitions
  let fetchedAt = 0;
  let members = new Map(); // member id -> client id, from the group's detail
  const partitionsBody = el("tbody");
  const recordsBody = el("tbody");
  const recordsNote = el("p", { class: "muted legend", dataset: { testid: "records-note" } });
  const panel = el("div", { class: "share", dataset: { testid: "share-panel" } },
    el("h3", {}, "Share partitions"),
    el("table", { class: "members share-partitions", dataset: { testid: "share-partitions-table" } },
      el("thead", {}, el("tr", {}, PARTITION_HEADS.map((h) => el("th", {}, h)))), partitionsBody),
    el("p", { class: "legend muted" }, "In-flight window: the offsets from the share-partition start offset (SPSO) ",
      "to its end offset (SPEO), coloured by state: ",
      STATES.flatMap((state) => [el("span", { class: `swatch ${state}` }), ` ${state} `])),
    el("h3", {}, "In-flight records"),
    el("table", { class: "members share-records", dataset: { testid: "share-records-table" } },
      el("thead", {}, el("tr", {}, RECORD_HEADS.map((h) => el("th", {}, h)))), recordsBody),
    recordsNote);

  function holder(memberId) {
    if (!memberId) return "–";
    const client = members.get(memberId);
    return [client ? el("strong", {}, client) : null, client ? " " : null, el("code", { class: "member-id" }, memberId)];
  }

  function lockLeft(run) {
    if (run.lock_expires_in_ms === null) return "–";
    return formatMs(Math.max(run.lock_expires_in_ms - (Date.now() - fetchedAt), 0));
  }

  function draw() {
    const partitions = view?.partitions ?? [];
    partitionsBody.replaceChildren(...partitions.map(partitionRow));
    if (!partitions.length) {
      partitionsBody.replaceChildren(el("tr", {}, el("td", { colspan: PARTITION_HEADS.length, class: "muted" },
        "no share-partitions yet: no member has fetched")));
    }
    const runs = partitions.flatMap((p) => (p.records ?? []).map((run) => ({ ...run, topic: p.topic, partition: p.partition })));
    recordsBody.replaceChildren(...runs.slice(0, RECORDS_SHOWN).map((run) => el("tr", { dataset: {
      testid: "share-record-row", topic: run.topic, partition: run.partition, first: run.first_offset,
      last: run.last_offset, state: run.state, member: run.member_id ?? "" } },
    el("td", {}, run.topic), el("td", { class: "num" }, run.partition),
    el("td", { class: "num", dataset: { testid: "offsets" } }, range(run.first_offset, run.last_offset)),
    el("td", { class: "num" }, run.last_offset - run.first_offset + 1),
    el("td", {}, el("span", { class: `record-state ${run.state}`, dataset: { testid: "record-state" } }, run.state)),
    el("td", { class: `num${run.delivery_count > 1 ? " redelivered" : ""}`, dataset: { testid: "delivery-count" } },
      run.delivery_count),
    el("td", { dataset: { testid: "holder" } }, holder(run.member_id)),
    el("td", {}, run.lock_deadline_ms === null ? "–" : new Date(run.lock_deadline_ms).toISOString().slice(11, 23)),
    el("td", { class: "num", dataset: { testid: "lock-left" } }, lockLeft(run)))));
    if (!runs.length) {
      recordsBody.replaceChildren(el("tr", {}, el("td", { colspan: RECORD_HEADS.length, class: "muted" },
        "no records in flight")));
    }
    recordsNote.textContent = runs.length > RECORDS_SHOWN ? `the first ${RECORDS_SHOWN} of ${runs.length} runs` : "";
  }

  // The locks' time left, between two reads.
  function tick() {
    if (!view) return;
    const cells = recordsBody.querySelectorAll("[data-testid=lock-left]");
    const runs = view.partitions.flatMap((p) => p.records ?? []);
    cells.forEach((cell, i) => {
      if (runs[i]) cell.textContent = lockLeft(runs[i]);
    });
  }

  async function refresh(detail) {
    members = new Map((detail?.members ?? []).map((m) => [m.member_id, m.client_id]));
    if (!detail) {
      view = null;
      draw();
      return;
    }
    try {
      view = await api.sharePartitions(groupId);
      fetchedAt = Date.now();
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) setStatus(`could not read the share-partitions: ${error.message}`, "error");
      view = null;
    }
    draw();
  }

  const ticker = setInterval(tick, 250);
  return { panel, refresh, stop: () => clearInterval(ticker) };
}
