// The console's entry point: a tiny router over the two pages, and the status line.
//   #/ or /            the groups page
//   #/groups/<id>      one group (also served at /groups/<id>, the same page)

import { groupsPage } from "./groups.js";
import { groupPage } from "./group.js";
import { nodesStrip, watchCluster } from "./nodes.js";

const main = document.querySelector("[data-testid=main]");
const status = document.querySelector("[data-testid=status]");
let stopPage = null;
// The nodes strip stays across pages (a multi-node broker only): the group page has it mark its coordinator.
const strip = nodesStrip(document.querySelector("[data-testid=nodes-strip]"));
watchCluster();

function setStatus(text, level = "muted") {
  status.textContent = text;
  status.dataset.level = level;
}

function route() {
  const hash = location.hash.replace(/^#/, "");
  const fromHash = hash.match(/^\/groups\/(.+)$/);
  const fromPath = location.pathname.match(/^\/groups\/(.+)$/);
  const encoded = fromHash ? fromHash[1] : !hash && fromPath ? fromPath[1] : null;
  if (stopPage) stopPage();
  if (encoded !== null) {
    const groupId = decodeURIComponent(encoded);
    document.title = `${groupId} · group-broker console`;
    strip.focus(groupId);
    stopPage = groupPage(main, groupId, setStatus);
  } else {
    document.title = "group-broker console";
    strip.focus(null);
    stopPage = groupsPage(main, setStatus);
  }
}

window.addEventListener("hashchange", route);
route();
