// Stats and cost: layers, segments, documents and tenants (GET /stats, GET /tenants); the cost
// ledger over time per kind and model as a uPlot (GET /ledger).

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { get, query, stats as readStats } from "./api.js";
import { clear, field, fmtNumber, fmtUsd, h, keyed, say } from "./dom.js";

const COLORS = ["#2f6b4f", "#d9480f", "#4a7ab0", "#8e44ad", "#b8860b", "#c2185b", "#00838f", "#5d4037"];
const METRICS = [["tokens", "tokens (in + out)"], ["calls", "calls"], ["tokens_in", "tokens in"], ["tokens_out", "tokens out"], ["usd", "US dollars"]];
const ui = {};
let plot = null;
let ledger = null;
let plotted = null; // the signature of what the plot draws

function mount(panel) {
  ui.panel = panel;
  ui.summary = h("dl", { class: "counts", id: "stats-summary" });
  ui.layers = h("tbody", { id: "stats-layers" });
  ui.ledgerTotals = h("tbody", { id: "stats-ledger" });
  ui.metric = h("select", { id: "ledger-metric" }, METRICS.map(([v, t]) => h("option", { value: v, text: t })));
  ui.bucket = h("select", { id: "ledger-bucket" }, ["minute", "hour", "day"].map((b) => h("option", { value: b, text: b, selected: b === "hour" })));
  ui.plot = h("div", { id: "ledger-plot", class: "plot", role: "img", "aria-label": "Cost ledger over time, one line per kind and model" });
  ui.message = h("p", { id: "ledger-message", class: "message", role: "status" });
  panel.append(h("h2", {}, "Stats and cost"),
    h("div", { class: "split" },
      h("section", { class: "card", "aria-labelledby": "store-title" }, h("h3", { id: "store-title" }, "Store"), ui.summary,
        h("div", { class: "scroll" }, h("table", {}, h("caption", { text: "Layers" }),
          h("thead", {}, h("tr", {}, ["Layer", "Nodes", "Segments", "Smallest", "Largest"].map((t) => h("th", { scope: "col", text: t })))), ui.layers))),
      h("section", { class: "card", "aria-labelledby": "ledger-title" }, h("h3", { id: "ledger-title" }, "Cost ledger"),
        h("div", { class: "row" }, field(ui.metric, "Plot"), field(ui.bucket, "per")),
        ui.plot, ui.message,
        h("div", { class: "scroll" }, h("table", {}, h("caption", { text: "Totals per kind and model" }),
          h("thead", {}, h("tr", {}, ["Kind", "Model", "Calls", "Tokens in", "Tokens out", "Cost"].map((t) => h("th", { scope: "col", text: t })))), ui.ledgerTotals)))));
  ui.metric.addEventListener("change", () => drawPlot());
  ui.bucket.addEventListener("change", () => loadLedger());
  window.addEventListener("resize", () => plot && plot.setSize(size()));
}

// Shown again, the view draws again only what changed (the tables keyed, the plot only when its
// ledger, metric or bucket changed); data-state "ready" once the tables and the plot are drawn.
async function show() {
  ui.panel.dataset.state = "loading";
  let stats;
  try {
    stats = await readStats({ fresh: true });
  } catch (error) {
    say(ui.message, `Could not read the stats: ${error.message}`, "error");
    ui.panel.dataset.state = "ready";
    return;
  }
  let tenants = null;
  try {
    tenants = await get("/tenants");
  } catch { /* no tenant route on this server */ }
  const segments = stats.layers.reduce((n, l) => n + (l.segments || 0), 0);
  keyed(ui.summary, [["Documents", stats.documents], ["Layers", stats.layers.length], ["Segments", segments], ["Vectors", stats.vectors],
    ["Tenants", tenants ? tenants.tenants.length : "–"], ["Embedder", stats.embedder]], { key: ([k]) => k,
    make: ([k, v]) => h("div", {}, h("dt", { text: k }), h("dd", { text: typeof v === "number" ? fmtNumber(v) : v })) });
  keyed(ui.layers, stats.layers, { key: (l) => l.layer,
    make: (l) => h("tr", {}, h("th", { scope: "row", text: l.layer }), h("td", { text: fmtNumber(l.nodes) }),
      h("td", { text: fmtNumber(l.segments) }), h("td", { text: fmtNumber(l.smallest_segment) }), h("td", { text: fmtNumber(l.largest_segment) })) });
  keyed(ui.ledgerTotals, stats.ledger.calls || [], { key: (c) => JSON.stringify([c.kind, c.model]),
    make: (c) => h("tr", {}, h("td", { text: c.kind }), h("td", { text: c.model }),
      h("td", { text: fmtNumber(c.calls) }), h("td", { text: fmtNumber(c.tokens_in) }), h("td", { text: fmtNumber(c.tokens_out) }),
      h("td", { text: fmtUsd(c.cost_usd) })) });
  await loadLedger();
  ui.panel.dataset.state = "ready";
}

async function loadLedger() {
  try {
    ledger = await get("/ledger" + query({ bucket: ui.bucket.value }));
  } catch (error) {
    ledger = null;
    plotted = null;
    if (plot) { plot.destroy(); plot = null; }
    clear(ui.plot);
    say(ui.message, `The ledger over time is not available here (GET /ledger: ${error.message}); the totals are below.`);
    return;
  }
  drawPlot();
}

function size() {
  return { width: Math.max(260, ui.plot.clientWidth || 600), height: 260 };
}

function value(point, metric) {
  if (metric === "tokens") return (point.tokens_in || 0) + (point.tokens_out || 0);
  return point[metric] ?? null;
}

// The series on one time axis: every bucket start of any series, null where a series has none.
export function aligned(series, metric) {
  const times = [...new Set(series.flatMap((s) => s.points.map((p) => p.t)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = series.map((s) => {
    const column = new Array(times.length).fill(null);
    for (const p of s.points) column[index.get(p.t)] = value(p, metric);
    return column;
  });
  return [times, ...columns];
}

const BUCKET_S = { minute: 60, hour: 3600, day: 86400 };

// The time axis: the buckets with half a bucket either side, never less than six buckets wide
// (a ledger of one bucket would otherwise span years of empty axis).
export function span(min, max, bucket) {
  const step = BUCKET_S[bucket] || 3600;
  const pad = Math.max(step / 2, (6 * step - (max - min)) / 2);
  return [min - pad, max + pad];
}

function drawPlot() {
  // the series drawn, not the whole answer: its ``since`` (now less 30 days) moves every second
  const signature = JSON.stringify([ledger && ledger.series, ui.metric.value, ui.bucket.value]);
  if (plot && signature === plotted) return; // the same plot: kept (its legend, cursor and zoom too)
  plotted = signature;
  if (plot) { plot.destroy(); plot = null; }
  clear(ui.plot);
  if (!ledger || !ledger.series.length) {
    say(ui.message, "No model calls recorded yet.");
    return;
  }
  const metric = ui.metric.value;
  const data = aligned(ledger.series, metric);
  const label = METRICS.find(([m]) => m === metric)[1];
  say(ui.message, `${ledger.series.length} series, ${data[0].length} ${ui.bucket.value}${data[0].length === 1 ? "" : "s"}.`);
  plot = new uPlot({ ...size(), title: `Ledger: ${label} per ${ui.bucket.value}`,
    scales: { x: { time: true } },
    axes: [{}, { label, size: 70 }],
    series: [{}, ...ledger.series.map((s, i) => ({ label: `${s.kind} · ${s.model}`, stroke: COLORS[i % COLORS.length], width: 2,
      points: { show: true, size: 6 }, spanGaps: true }))] }, data, ui.plot);
  // uPlot spans one point of seconds over some three years: the buckets' own span instead
  const [min, max] = span(data[0][0], data[0][data[0].length - 1], ui.bucket.value);
  plot.setScale("x", { min, max });
  window.eragraphLedgerPlot = plot; // for the browser tests and the curious
}

export default { mount, show };
