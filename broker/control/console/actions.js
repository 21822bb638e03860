// The group page's actions: kick a member, fence a static instance, force a rebalance, add and delete fault rules.
// The same control API calls the CLI makes (group-broker kick, fence, rebalance, fault add/delete). Every one asks
// first in a real <dialog>, so a person (or the browser test) confirms or cancels on the page itself.

import { api, el } from "./api.js";

const dialog = () => document.querySelector("[data-testid=confirm-dialog]");

// Resolves true when "Confirm" is pressed, false on "Cancel" or Escape.
export function confirmAction(title, detail) {
  const box = dialog();
  box.querySelector("[data-testid=confirm-title]").textContent = title;
  box.querySelector("[data-testid=confirm-detail]").textContent = detail;
  return new Promise((resolve) => {
    const done = () => {
      box.removeEventListener("close", done);
      resolve(box.returnValue === "confirm");
    };
    box.returnValue = "";
    box.addEventListener("close", done);
    box.showModal();
  });
}

// Runs `action` once confirmed; the outcome goes to the status line.
export async function confirmed(title, detail, action, setStatus) {
  if (!(await confirmAction(title, detail))) {
    setStatus(`cancelled: ${title}`, "muted");
    return false;
  }
  try {
    const result = await action();
    setStatus(`done: ${title}`, "ok");
    return result ?? true;
  } catch (error) {
    setStatus(`${title} failed: ${error.message}`, "error");
    return false;
  }
}

export function kickMember(groupId, member, setStatus) {
  const who = member.client_id ? `${member.client_id} (${member.member_id})` : member.member_id;
  return confirmed(`Kick ${who}`, `Evict the member from ${groupId} now, as a session expiry would.`,
    () => api.kick(groupId, member.member_id), setStatus);
}

export function fenceInstance(groupId, member, setStatus) {
  return confirmed(`Fence instance ${member.group_instance_id}`,
    `Replace the member id of static instance ${member.group_instance_id}: the old id gets FENCED_INSTANCE_ID.`,
    () => api.fence(groupId, member.group_instance_id), setStatus);
}

export function forceRebalance(groupId, setStatus) {
  return confirmed(`Force a rebalance of ${groupId}`, "Every member must rejoin (a consumer group bumps its epoch).",
    () => api.rebalance(groupId), setStatus);
}

// The APIs a fault rule may name that matter to a group (any API the broker serves is accepted by the server).
const FAULT_APIS = ["", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
  "FindCoordinator", "ConsumerGroupHeartbeat", "Fetch"];
const FAULT_ACTIONS = ["delay", "error", "close", "swallow_heartbeats"];

function field(label, control) {
  return el("label", { class: "field" }, el("span", {}, label), control);
}

// The fault rule form and the list of rules, with a delete button each.
export function faultPanel(groupId, setStatus) {
  const api_ = el("select", { name: "api", dataset: { testid: "fault-api" } },
    FAULT_APIS.map((name) => el("option", { value: name }, name || "any")));
  const action = el("select", { name: "action", dataset: { testid: "fault-action" } },
    FAULT_ACTIONS.map((name) => el("option", { value: name }, name)));
  const error = el("input", { name: "error", placeholder: "REBALANCE_IN_PROGRESS", dataset: { testid: "fault-error" } });
  const delay = el("input", { name: "delay_ms", type: "number", min: 0, placeholder: "ms", dataset: { testid: "fault-delay" } });
  const member = el("input", { name: "member_id", placeholder: "any member", dataset: { testid: "fault-member" } });
  const client = el("input", { name: "client_id", placeholder: "any client", dataset: { testid: "fault-client" } });
  const count = el("input", { name: "count", type: "number", min: 1, placeholder: "unlimited", dataset: { testid: "fault-count" } });
  const duration = el("input", { name: "duration_ms", type: "number", min: 1, placeholder: "forever", dataset: { testid: "fault-duration" } });
  const list = el("ul", { class: "faults", dataset: { testid: "fault-list" } });

  const spec = () => {
    const body = { action: action.value, group_id: groupId };
    if (api_.value) body.api = api_.value;
    if (error.value.trim()) body.error = error.value.trim();
    for (const [name, input] of [["delay_ms", delay], ["count", count], ["duration_ms", duration]]) {
      if (input.value !== "") body[name] = Number(input.value);
    }
    if (member.value.trim()) body.member_id = member.value.trim();
    if (client.value.trim()) body.client_id = client.value.trim();
    return body;
  };

  async function refresh() {
    try {
      const rules = await api.faults();
      list.replaceChildren(...rules.map((rule) => el("li", { dataset: { testid: "fault-rule", rule: rule.id } },
        el("code", {}, rule.id), " ",
        `${rule.action}${rule.api ? ` ${rule.api}` : ""}${rule.error ? ` ${rule.error}` : ""}` +
          `${rule.delay_ms !== null ? ` ${rule.delay_ms} ms` : ""}` +
          `${rule.group_id ? ` group ${rule.group_id}` : ""}${rule.member_id ? ` member ${rule.member_id}` : ""}` +
          `${rule.client_id ? ` client ${rule.client_id}` : ""} · ${rule.hits} hit(s)${rule.active ? "" : " · lapsed"}`,
        " ",
        el("button", { type: "button", class: "small", dataset: { testid: "fault-delete" }, on: {
          click: async () => {
            await confirmed(`Delete fault rule ${rule.id}`, "The broker stops applying it at once.",
              () => api.deleteFault(rule.id), setStatus);
            refresh();
          },
        } }, "Delete"))));
      if (!rules.length) list.replaceChildren(el("li", { class: "muted" }, "no fault rules"));
    } catch (failure) {
      setStatus(`could not list fault rules: ${failure.message}`, "error");
    }
  }

  const form = el("form", { class: "fault-form", dataset: { testid: "fault-form" } },
    field("API", api_), field("action", action), field("error", error), field("delay", delay),
    field("member id", member), field("client id", client), field("count", count), field("for (ms)", duration),
    el("button", { type: "submit", dataset: { testid: "fault-add" } }, "Add fault rule"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = spec();
    await confirmed(`Add a fault rule (${body.action}${body.api ? ` ${body.api}` : ""})`, JSON.stringify(body),
      () => api.addFault(body), setStatus);
    refresh();
  });
  refresh();
  const timer = setInterval(refresh, 3000); // hits count up as the rules fire
  const panel = el("div", { class: "fault-panel" }, form, list);
  return { panel, refresh, stop: () => clearInterval(timer) };
}
