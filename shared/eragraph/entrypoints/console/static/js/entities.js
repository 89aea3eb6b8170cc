// The entity graph around a question (tri_graph, concept_ppr, local_global, fusion, auto):
// POST /query with explain: the seed entities, the entities the personalized PageRank activated,
// the passages with their weights and why each ranked where it did.

import cytoscape from "../vendor/cytoscape/cytoscape.esm.min.mjs";
import { post } from "./api.js";
import { clear, field, fmtNumber, h, keyed, say } from "./dom.js";
import { loadModes } from "./ask.js";

const GRAPH_MODES = new Set(["tri_graph", "paths", "concept_ppr", "local_global", "fusion", "auto"]);
const ui = {};
let cy = null;

function mount(panel) {
  ui.panel = panel;
  ui.query = h("input", { id: "ent-query", type: "search", required: true, maxlength: 4000 });
  ui.mode = h("select", { id: "ent-mode", "aria-describedby": "ent-mode-purpose" });
  ui.purpose = h("p", { id: "ent-mode-purpose", class: "hint" });
  ui.k = h("input", { id: "ent-k", type: "number", min: 1, max: 100, value: 8 });
  ui.status = h("p", { id: "ent-status", class: "message", role: "status" });
  ui.canvas = h("div", { class: "graph", id: "entity-graph", role: "img", "aria-label": "Entity graph: seed entities, activated entities and the passages they reach" });
  ui.tables = h("div", { id: "ent-tables" }); // the seed and activated entities, beside the graph
  ui.passages = h("div", { id: "ent-why" }); // the passages and why, the page's width below it
  const form = h("form", { id: "ent-form", class: "row", onsubmit: (event) => { event.preventDefault(); explain(); } },
    h("label", { for: "ent-query" }, "Question"), ui.query,
    field(ui.mode, "Mode"), field(ui.k, "k"),
    h("button", { type: "submit", class: "primary", id: "ent-submit" }, "Explain"));
  panel.append(h("h2", {}, "Entity graph around a question"),
    h("section", { class: "card" }, form, ui.purpose, ui.status),
    h("div", { class: "split wide" }, h("section", { class: "card graph-card", "aria-label": "Entity graph" }, ui.canvas,
      h("p", { class: "legend" }, h("span", { class: "key seed" }, "seed entity"), h("span", { class: "key act" }, "activated entity"),
        h("span", { class: "key pas" }, "passage (label: rank)"))),
    h("section", { class: "card", "aria-label": "Seed and activated entities" }, ui.tables)),
    h("section", { class: "card", "aria-label": "Why each passage ranked where it did" }, ui.passages));
  reset();
}

// The graph modes as the mode's options, kept as they are when the view is shown again (keyed);
// data-state "ready" once they are listed.
async function show() {
  ui.panel.dataset.state = "loading";
  const all = await loadModes(ui.mode, ui.purpose, (m) => GRAPH_MODES.has(m.name));
  if (!ui.mode.options.length) keyed(ui.mode, [...GRAPH_MODES], { key: (m) => m, make: (m) => h("option", { value: m, text: m }) });
  if (!ui.mode.value || !GRAPH_MODES.has(ui.mode.value)) ui.mode.value = all.some((m) => m.name === "tri_graph") ? "tri_graph" : ui.mode.options[0].value;
  ui.mode.dispatchEvent(new Event("change"));
  ui.panel.dataset.state = "ready";
}

function reset() {
  clear(ui.tables, h("p", { class: "hint", text: "Ask a question: its seed entities, the entities they activate and the passages they reach appear here." }));
  clear(ui.passages, h("p", { class: "hint", text: "Each passage's rank, PPR score and the words of why it ranked there appear here." }));
  if (cy) cy.elements().remove();
}

async function explain() {
  const question = ui.query.value.trim();
  if (!question) {
    say(ui.status, "Write a question first.", "error");
    return;
  }
  say(ui.status, "Asking…");
  let response;
  try {
    response = await post("/query", { query: question, mode: ui.mode.value, k: Number(ui.k.value) || 8, explain: true });
  } catch (error) {
    say(ui.status, `The question failed: ${error.message}`, "error");
    return;
  }
  const ex = response.explain;
  if (!ex) {
    reset();
    say(ui.status, response.explain === undefined ? "This server does not explain graph queries yet (POST /query has no explain)." :
      `No entity graph for this question: ${response.note || `mode ${response.route || response.mode}`}.`);
    return;
  }
  say(ui.status, `Mode ${ex.mode}: ${ex.seeds.length} seeds, ${ex.activated.length} activated entities, ${ex.passages.length} passages.`);
  draw(ex);
  tables(ex, response.results || []);
}

function draw(ex) {
  const seeds = new Set(ex.seeds.map((s) => s.entity));
  const maxWeight = Math.max(1e-9, ...ex.activated.map((a) => a.weight), ...ex.seeds.map((s) => s.score));
  const entities = new Map();
  for (const s of ex.seeds) entities.set(s.entity, s.score);
  for (const a of ex.activated) if (!entities.has(a.entity)) entities.set(a.entity, a.weight);
  const elements = [];
  for (const [name, weight] of entities) {
    elements.push({ data: { id: "e:" + name, label: name, size: 14 + 30 * (weight / maxWeight) }, classes: seeds.has(name) ? "seed" : "act" });
  }
  for (const p of ex.passages) elements.push({ data: { id: "p:" + p.id, label: `#${p.rank}`, size: 12 + 24 * p.score / Math.max(1e-9, ex.passages[0]?.score || 1) }, classes: "pas" });
  const ids = new Set(elements.map((e) => e.data.id));
  ex.edges.forEach((e, i) => {
    if (ids.has("e:" + e.entity) && ids.has("p:" + e.passage)) elements.push({ data: { id: "x" + i, source: "e:" + e.entity, target: "p:" + e.passage } });
  });
  if (cy) cy.destroy();
  cy = cytoscape({ container: ui.canvas, elements, minZoom: 0.1, maxZoom: 4,
    layout: { name: "concentric", concentric: (n) => (n.hasClass("seed") ? 3 : n.hasClass("act") ? 2 : 1), levelWidth: () => 1, minNodeSpacing: 18 },
    style: [
      { selector: "node", style: { width: "data(size)", height: "data(size)", label: "data(label)", "font-size": 10, "text-valign": "bottom" } },
      { selector: "node.seed", style: { "background-color": "#d9480f" } },
      { selector: "node.act", style: { "background-color": "#e8a33d" } },
      { selector: "node.pas", style: { shape: "round-rectangle", "background-color": "#2f6b4f", "text-valign": "center", color: "#fff" } },
      { selector: "edge", style: { width: 1, "line-color": "#b8c2cc" } },
    ] });
  cy.on("tap", "node.pas", (event) => {
    const row = document.getElementById("why-" + event.target.id().slice(2));
    if (row) { row.classList.add("cited"); row.focus(); }
  });
  window.eragraphEntityGraph = cy;
}

function tables(ex, results) {
  const text = new Map(results.map((r) => [r.id, r]));
  clear(ui.tables,
    h("h3", {}, "Seed entities"),
    h("p", { id: "ent-seeds" }, ex.seeds.map((s) => h("span", { class: "badge seed", text: `${s.entity} ${fmtNumber(s.score, 3)}` }))),
    h("h3", {}, "Activated entities"),
    h("p", { id: "ent-activated" }, ex.activated.map((a) => h("span", { class: "badge act", text: `${a.entity} ${fmtNumber(a.weight, 3)}` }))));
  clear(ui.passages,
    h("h3", {}, "Passages and why"),
    h("div", { class: "scroll" }, h("table", { id: "ent-passages" },
      h("thead", {}, h("tr", {}, ["Rank", "Passage", "PPR score", "Restart", "Entities", "Why"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, ex.passages.map((p) => h("tr", { id: "why-" + p.id, tabindex: -1 },
        h("td", { text: p.rank }),
        h("td", {}, h("details", {}, h("summary", { text: text.get(p.id)?.title || p.id }), h("p", { class: "text", text: text.get(p.id)?.text || p.id }))),
        h("td", { text: fmtNumber(p.score, 4) }), h("td", { text: fmtNumber(p.restart, 4) }),
        h("td", { text: (p.entities || []).join(", ") }), h("td", { class: "why", text: p.why })))))));
}

export default { mount, show, reset };
