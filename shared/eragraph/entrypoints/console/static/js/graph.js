// The summary graph: each layer a band (GET /stats for the layers, GET /graph/layers/{n} paged
// and sampled for their nodes), summaries and chunks as nodes, each linked to its parent; a
// click (or the lists beside it) opens a node (GET /nodes/{id}) and its members down to the
// chunks' text; the re-summarized summaries of an upload are highlighted layer by layer with
// their calls and tokens against the rebuild estimate (GET /changes).
//
// Nothing on screen is made again unless what it shows changed: the graph is drawn again only
// when its layers' nodes changed, the layer list and the trail are keyed (dom.keyed), and the
// node opened is drawn only from the answer to the last click (an earlier answer arriving later
// is dropped), and not at all when it is the node already shown, unchanged. ``#node-detail``
// says what it shows: data-state "loading" while a node is read, "ready" once ``data-node`` (its
// id) is drawn (the browser tests wait on it).

import cytoscape from "../vendor/cytoscape/cytoscape.esm.min.mjs";
import { get, query, stats as readStats } from "./api.js";
import { clear, h, keyed, readersText, say } from "./dom.js";
import { changeGroups, costPanel } from "./changes.js";
import { bandLayout } from "./layout.js";

const PER_LAYER = 150; // nodes drawn per band (a page; the route samples a large layer)
const BAND = 170;
const FIT_ZOOM = 1.6; // the largest zoom a first fit takes
const ui = {};
let cy = null;
let bands = []; // {layer, total, nodes, next_cursor, sampled}
let groups = [];
let trail = []; // the nodes opened, from the first to the one shown
let drawn = null; // the signature of the nodes the graph draws (drawn again only when it changes)
let opening = 0; // the number of the last node asked for: only its answer is drawn
let shown = null; // the signature of the node on screen

function mount(panel) {
  ui.panel = panel;
  ui.message = h("p", { class: "message", id: "graph-message", role: "status" });
  ui.canvas = h("div", { class: "graph", id: "summary-graph", role: "img", "aria-label": "Summary graph: layers as bands, nodes linked to their parent summary" });
  ui.bands = h("ul", { class: "bands", id: "graph-bands", "aria-label": "Layers" });
  ui.node = h("div", { id: "node-detail", class: "node-detail", "aria-live": "polite", tabindex: -1, "aria-label": "The node opened" });
  ui.trail = h("ol", { class: "trail", id: "node-trail", "aria-label": "Path from the summary opened" });
  ui.changeSelect = h("select", { id: "change-select" });
  ui.cost = h("div", { id: "change-cost" });
  panel.append(h("h2", {}, "Summary graph"), ui.message,
    h("div", { class: "split wide" },
      h("section", { class: "card graph-card", "aria-label": "Layers" }, ui.canvas, ui.bands),
      h("section", { class: "card", "aria-labelledby": "node-title" },
        h("h3", { id: "node-title" }, "Node"), ui.trail, ui.node,
        h("h3", { id: "change-title" }, "What an upload changed"),
        ui.changeRow = h("div", { class: "row" }, h("label", { for: "change-select" }, "Change"), ui.changeSelect,
          h("button", { type: "button", id: "change-refresh", onclick: () => changes() }, "Refresh")),
        ui.cost)));
  ui.changeSelect.addEventListener("change", () => highlight(groups[Number(ui.changeSelect.value)]));
  hint();
}

async function show() {
  ui.panel.dataset.state = "loading";
  await draw();
  await changes();
}

function reset() {
  trail = [];
  clear(ui.trail);
  drawn = null; // another tenant: its graph is drawn whatever it holds
  opening += 1; // and no node of the tenant before is drawn (nor an answer still on its way)
  shown = null;
  hint();
}

function hint() {
  clear(ui.node, h("p", { class: "hint", text: "Click a summary (or pick one from a layer below) to see its members." }));
  delete ui.node.dataset.node;
  ui.node.dataset.state = "ready";
}

async function draw() {
  let stats;
  try {
    stats = await readStats();
  } catch (error) {
    say(ui.message, `Could not read the layers: ${error.message}`, "error");
    ui.panel.dataset.state = "ready";
    return;
  }
  const layers = stats.layers.map((l) => l.layer).sort((a, b) => b - a);
  bands = await Promise.all(layers.map((layer) => get(`/graph/layers/${layer}` + query({ limit: PER_LAYER })).catch((error) => {
    const size = stats.layers.find((l) => l.layer === layer);
    return { layer, total: size.nodes, nodes: [], next_cursor: null, sampled: false, error: error.message };
  })));
  const missing = bands.find((b) => b.error);
  say(ui.message, missing ? `The layers' nodes could not be read (${missing.error}); the counts come from GET /stats.` :
    "Layers top to bottom; an edge joins a node to the summary of its segment. Click a summary to open it.", missing ? "error" : "info");
  const signature = JSON.stringify(bands.map((b) => [b.layer, b.total, b.sampled, b.nodes]));
  if (signature !== drawn || !cy) render();
  drawn = signature;
  listBands();
  ui.panel.dataset.nodes = String(bands.reduce((n, b) => n + b.nodes.length, 0));
  ui.panel.dataset.state = "ready"; // its layers are drawn (eragraph bench console waits for it)
}

function elements() {
  const out = [];
  const present = new Set(bands.flatMap((b) => b.nodes.map((n) => n.id)));
  // rows far enough apart that a wide graph, fitted to the view, still shows its bands apart
  const flat = bandLayout(bands, { band: BAND, fold: 3 });
  const wide = Math.max(0, ...[...flat.values()].map((p) => p.x));
  const rowGap = Math.max(BAND, (0.55 * wide) / Math.max(1, bands.length - 1));
  const at = new Map([...flat].map(([id, p]) => [id, { ...p, y: (p.y / BAND) * rowGap }]));
  // the bands' labels stay legible when a wide graph is fitted to the view
  const font = Math.max(14, wide / 40);
  bands.forEach((band) => {
    if (!band.nodes.length) return;
    out.push({ data: { id: "band-" + band.layer, font, label: `Layer ${band.layer} · ${band.total} nodes${band.sampled || band.nodes.length < band.total ? ` (${band.nodes.length} drawn)` : ""}` }, classes: "band" });
    band.nodes.forEach((node) => {
      out.push({ data: { id: node.id, parent: "band-" + band.layer, label: node.label, layer: node.layer, members: node.members },
        position: at.get(node.id), classes: (node.members ? "summary" : "chunk") + (at.get(node.id).folded ? " folded" : "") });
      if (node.parent && present.has(node.parent)) out.push({ data: { id: `e-${node.id}`, source: node.id, target: node.parent } });
    });
  });
  return out;
}

const STYLE = [
  { selector: "node", style: { width: 10, height: 10, "background-color": "#4a7ab0", label: "", "font-size": 9 } },
  { selector: "node.summary", style: { width: 22, height: 22, shape: "round-rectangle", "background-color": "#2f6b4f" } },
  { selector: "node.band", style: { shape: "round-rectangle", "background-color": "#eef2f6", "background-opacity": 1, "border-width": 1,
    "border-color": "#c5ced8", label: "data(label)", "text-valign": "top", "text-halign": "center", "font-size": "data(font)", "text-margin-y": -4, padding: 18 } },
  { selector: "node.summary.folded", style: { width: 8, height: 8, "background-color": "#8fb5a2" } },
  { selector: "edge", style: { width: 1, "line-color": "#b8c2cc", "curve-style": "straight" } },
  { selector: "node.changed", style: { "background-color": "#d9480f", "border-width": 3, "border-color": "#7a2604" } },
  { selector: "node.open", style: { "border-width": 3, "border-color": "#111" } },
];

function render() {
  const total = bands.reduce((n, b) => n + b.nodes.length, 0);
  if (cy) cy.destroy();
  cy = cytoscape({ container: ui.canvas, elements: elements(), style: STYLE, layout: { name: "preset" },
    textureOnViewport: total > 2000, hideEdgesOnViewport: total > 2000, minZoom: 0.05, maxZoom: 4 });
  cy.fit(undefined, 20);
  if (cy.zoom() > FIT_ZOOM) { // a small store is not blown up to fill the view
    cy.zoom(FIT_ZOOM);
    cy.center();
  }
  cy.on("tap", "node.summary, node.chunk", (event) => open(event.target.id(), true));
  if (trail.length) cy.getElementById(trail[trail.length - 1].id).addClass("open");
  const picked = groups[Number(ui.changeSelect.value)];
  if (picked) for (const id of picked.summaries) cy.getElementById(id).addClass("changed");
  window.eragraphSummaryGraph = cy; // for the browser tests and the curious
}

function listBands() {
  // keyed by layer: a band whose nodes are unchanged keeps its picker (and the choice made in it)
  keyed(ui.bands, bands, { key: (band) => band.layer,
    sign: (band) => JSON.stringify([band.total, band.sampled, band.next_cursor, band.nodes.map((n) => [n.id, n.label, n.members])]),
    make: (band) => h("li", {},
    h("span", { text: `Layer ${band.layer}: ${band.total} nodes` + (band.nodes.length < band.total ? `, ${band.nodes.length} drawn${band.sampled ? " (sampled)" : ""}` : "") }),
    band.nodes.length ? nodePicker(band) : null,
    band.next_cursor ? h("button", { type: "button", onclick: () => more(band) }, `Draw ${PER_LAYER} more of layer ${band.layer}`) : null) });
}

function nodePicker(band) {
  const id = `layer-pick-${band.layer}`;
  const select = h("select", { id }, band.nodes.map((n) => h("option", { value: n.id, text: `${n.label.slice(0, 60)}${n.members ? ` (${n.members} members)` : ""}` })));
  return h("span", { class: "row" }, h("label", { for: id, class: "visually-hidden" }, `A node of layer ${band.layer}`), select,
    h("button", { type: "button", "aria-label": `Open the node picked in layer ${band.layer}`, onclick: () => open(select.value, true) }, "Open"));
}

async function more(band) {
  const page = await get(`/graph/layers/${band.layer}` + query({ limit: PER_LAYER, cursor: band.next_cursor }));
  band.nodes.push(...page.nodes);
  band.next_cursor = page.next_cursor;
  drawn = null;
  render();
  listBands();
}

async function open(id, fresh) {
  const asked = ++opening;
  ui.node.dataset.state = "loading";
  ui.node.setAttribute("aria-busy", "true");
  let node;
  try {
    node = await get("/nodes/" + encodeURIComponent(id));
  } catch (error) {
    if (asked !== opening) return; // a later click is being answered
    shown = null;
    clear(ui.node, h("p", { class: "error", role: "alert", text: `Could not open ${id}: ${error.message}` }));
    settle(id);
    return;
  }
  if (asked !== opening) return;
  const at = trail.findIndex((n) => n.id === node.id);
  if (fresh) trail = [node];
  else if (at >= 0) trail = trail.slice(0, at + 1);
  else trail = [...trail, node];
  if (cy) {
    cy.nodes(".open").removeClass("open");
    cy.getElementById(node.id).addClass("open");
  }
  keyed(ui.trail, trail, { key: (n) => n.id, sign: (n) => `L${n.layer} ${n.id}`,
    make: (n) => h("li", {}, h("button", { type: "button", class: "link", onclick: () => open(n.id, false) }, `L${n.layer} ${n.id}`)) });
  const signature = JSON.stringify([node.id, node.layer, node.tokens, node.source, node.text,
    (node.children || []).map((c) => [c.id, c.layer, c.label])]);
  if (signature !== shown) {
    shown = signature;
    drawNode(node);
  }
  settle(node.id);
  // the button that opened it went with the node it was in: the keyboard goes on from the node opened
  if (!document.activeElement || document.activeElement === document.body) ui.node.focus();
}

function settle(id) {
  ui.node.dataset.node = id;
  ui.node.dataset.state = "ready";
  ui.node.removeAttribute("aria-busy");
}

// Who may read a node's document (a summary: its partition's documents): "*" is the whole tenant.
function readersBadge(readers) {
  const who = readersText(readers);
  return who ? h("span", { class: "badge readers", id: "node-readers", text: `readers: ${who}` }) : null;
}

function drawNode(node) {
  clear(ui.node,
    h("p", { class: "badges" }, h("span", { class: "badge", text: node.layer === 0 ? "chunk" : `summary, layer ${node.layer}` }),
      h("span", { class: "badge", text: `${node.tokens} tokens` }), node.source ? h("span", { class: "badge", text: node.source }) : null,
      readersBadge(node.readers)),
    h("p", { class: "node-text", id: "node-text", text: node.text }),
    node.children && node.children.length ? h("div", {}, h("h4", { text: `Members (${node.children.length})` }),
      h("ul", { class: "members", id: "node-members" }, node.children.map((c) => h("li", {},
        h("button", { type: "button", class: "link", dataset: { id: c.id }, onclick: () => open(c.id, false) }, `L${c.layer} · ${c.label}`))))) : null);
}

async function changes() {
  try {
    const body = await get("/changes" + query({ limit: 50 }));
    const picked = groups[Number(ui.changeSelect.value)];
    groups = changeGroups(body.changes);
    // keyed by the record that started the change: the list read again keeps the change picked
    keyed(ui.changeSelect, groups, { key: (g) => g.head.id, sign: (g) => g.title,
      make: (g) => h("option", { text: g.title }) });
    groups.forEach((g, i) => { ui.changeSelect.options[i].value = String(i); });
    const again = picked ? groups.findIndex((g) => g.head.id === picked.head.id) : -1;
    ui.changeSelect.value = String(Math.max(0, again));
    ui.rebuild = body.rebuild;
    ui.changeRow.hidden = !groups.length;
    if (groups.length) highlight(groups[Math.max(0, again)]);
    else costShown(null, () => clear(ui.cost, h("p", { class: "hint", text: "No change recorded yet: upload a document and come back." })));
  } catch (error) {
    costShown(null, () => clear(ui.cost, h("p", { class: "hint", text: `Changes are not available here (GET /changes: ${error.message}).` })));
  }
}

function highlight(group) {
  if (!group) return;
  if (cy) {
    cy.nodes(".changed").removeClass("changed");
    for (const id of group.summaries) cy.getElementById(id).addClass("changed");
  }
  costShown(JSON.stringify([group.head, group.layers, ui.rebuild]), () => clear(ui.cost, costPanel(group, ui.rebuild, (id) => open(id, true))));
}

// The cost panel is drawn again only when what it shows changed (its buttons open summaries).
function costShown(signature, draw) {
  if (signature !== null && signature === ui.costSignature) return;
  ui.costSignature = signature;
  draw();
}

export default { mount, show, reset };
