// The console: hash-routed tabs (#documents, #ask, #graph, #entities, #stats), the tenant
// switcher (only when GET /tenants says switchable) and the token prompt (on a 401).

import { asking, changed, get, stats, takeTokenFromUrl, tenant, token, whenUnauthorized } from "./api.js";
import { clear, h } from "./dom.js";
// Each view's module is loaded when it is first shown: the first load reads neither cytoscape nor
// uPlot unless a graph or the ledger is on screen.
const LOADERS = {
  documents: () => import("./documents.js"), ask: () => import("./ask.js"), graph: () => import("./graph.js"),
  entities: () => import("./entities.js"), stats: () => import("./stats.js"),
};
const VIEWS = {}; // name -> the view (mount, show, reset), once loaded
const DEFAULT = "documents";
const mounted = new Set();
let current = null;

function viewOf(hash) {
  const name = hash.replace(/^#/, "").split(/[/&?]/)[0];
  return name in LOADERS ? name : DEFAULT;
}

async function show(name, { focus = false } = {}) {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const selected = tab.dataset.view === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    document.getElementById("view-" + tab.dataset.view).hidden = !selected;
  }
  const panel = document.getElementById("view-" + name);
  current = name;
  if (focus) document.getElementById("tab-" + name).focus();
  if (!mounted.has(name)) {
    VIEWS[name] = VIEWS[name] || (await LOADERS[name]()).default;
    if (mounted.has(name)) return; // mounted meanwhile, by a quicker call
    VIEWS[name].mount(panel);
    mounted.add(name);
  }
  if (current === name) VIEWS[name].show();
}

function go(name, focus) {
  if (location.hash !== "#" + name) history.pushState(null, "", "#" + name);
  show(name, { focus });
}

function keyboard(event) {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const at = tabs.indexOf(document.activeElement);
  if (at < 0) return;
  const moves = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 };
  if (!(event.key in moves)) return;
  event.preventDefault();
  const next = tabs[(moves[event.key] + tabs.length) % tabs.length];
  go(next.dataset.view, true);
}

async function tenants() {
  try {
    await tenantSwitcher();
  } finally {
    // the header is whole (with or without the switcher): what the keyboard reaches is known
    document.body.dataset.tenants = "known";
  }
}

async function tenantSwitcher() {
  let body;
  try {
    body = await get("/tenants");
  } catch {
    return; // no tenant route on this server: no switcher
  }
  const box = document.getElementById("tenant-box");
  const select = document.getElementById("tenant-select");
  askAs(body);
  if (!body || !body.switchable) {
    box.hidden = true;
    return;
  }
  const picked = tenant.get() ?? body.current;
  clear(select, body.tenants.map((id) => h("option", { value: id, text: id || "(default)" })));
  select.value = picked;
  box.hidden = false;
  select.onchange = () => {
    tenant.set(select.value);
    for (const name of mounted) VIEWS[name].reset?.();
    changed();
    show(current);
  };
}

// A local store's operator asks as other principals (GET /tenants says ask_as): every view
// answers as they would see the store; empty: the operator again.
function askAs(body) {
  const box = document.getElementById("ask-as-box");
  const input = document.getElementById("ask-as-input");
  box.hidden = !(body && body.ask_as);
  if (box.hidden) {
    asking.set(null);
    return;
  }
  input.value = asking.get() || "";
  box.onsubmit = (event) => {
    event.preventDefault();
    asking.set(input.value.trim());
    for (const name of mounted) VIEWS[name].reset?.();
    changed();
    show(current);
  };
}

async function storeLine() {
  const line = document.getElementById("store-line");
  try {
    const body = await stats();
    const picked = tenant.get();
    line.textContent = `${body.documents} documents · ${body.layers.length} layers · ${body.embedder}` +
      (picked !== null && picked !== undefined ? ` · tenant ${picked || "(default)"}` : "") +
      (asking.get() ? ` · asking as ${asking.get()}` : "");
  } catch (error) {
    line.textContent = error.message;
  }
}

function tokenPrompt() {
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  whenUnauthorized(() => {
    if (!dialog.open) {
      input.value = "";
      dialog.showModal();
    }
  });
  document.getElementById("token-form").addEventListener("submit", () => {
    token.set(input.value.trim());
    storeLine();
    tenants();
    show(current);
  });
  document.getElementById("token-cancel").addEventListener("click", () => dialog.close());
}

function start() {
  takeTokenFromUrl();
  tokenPrompt();
  document.getElementById("tabs").addEventListener("keydown", keyboard);
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    tab.addEventListener("click", () => go(tab.dataset.view, false));
  }
  window.addEventListener("popstate", () => show(viewOf(location.hash)));
  window.addEventListener("eragraph:changed", () => storeLine());
  show(viewOf(location.hash));
  storeLine();
  tenants();
}

start();
