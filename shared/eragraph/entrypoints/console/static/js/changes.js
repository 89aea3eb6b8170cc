// What one upload (or delete) changed: the change records of GET /changes grouped by the
// ingest or removal that started them, with the cost of the re-summarizing layer by layer
// against the estimate of rebuilding every summary of the store.

import { fmtNumber, fmtTime, fmtUsd, h } from "./dom.js";

// Newest first, each group an ingest/remove record and the resummarize records that followed it.
export function changeGroups(records) {
  const groups = [];
  let currentGroup = null;
  for (const record of [...records].sort((a, b) => a.time - b.time || String(a.id).localeCompare(String(b.id)))) {
    if (record.kind !== "resummarize" || !currentGroup) {
      currentGroup = { head: record, layers: [], summaries: [] };
      groups.push(currentGroup);
      if (record.kind === "resummarize") currentGroup.layers.push(record);
    } else {
      currentGroup.layers.push(record);
    }
    if (record.kind === "resummarize") currentGroup.summaries.push(...(record.summaries || []));
  }
  for (const group of groups) {
    const head = group.head;
    const what = head.kind === "resummarize" ? "re-summarizing" : `${head.kind} of ${sources(head)}`;
    group.title = `${fmtTime(head.time)}: ${what}`;
    group.cost = sum(group.layers);
  }
  return groups.reverse();
}

function sum(records) {
  const out = { calls: 0, tokens_in: 0, tokens_out: 0, segments: 0, summaries: 0 };
  for (const r of records) {
    out.calls += r.calls || 0;
    out.tokens_in += r.tokens_in || 0;
    out.tokens_out += r.tokens_out || 0;
    out.segments += r.segments || 0;
    out.summaries += r.summaries_total ?? (r.summaries || []).length;
  }
  return out;
}

function share(part, whole) {
  return whole ? `${fmtNumber((100 * part) / whole, 1)} %` : "–";
}

const BASIS = { ledger: "the ledger's mean summarize call", words: "the settings' segment and summary sizes" };

// "a.md, b.md and 3 more": a record lists at most a few hundred sources and counts them all.
export function sources(record) {
  const listed = record.documents || [];
  const more = (record.documents_total ?? listed.length) - listed.length;
  return (listed.join(", ") || "documents") + (more > 0 ? ` and ${fmtNumber(more)} more` : "");
}

export function costPanel(group, rebuild, open) {
  const head = group.head;
  const cost = group.cost;
  const inLayer = (layer) => rebuild?.summaries?.[String(layer)];
  const rows = group.layers.map((r) => h("tr", { dataset: { layer: r.layer } },
    h("th", { scope: "row", text: r.layer }), h("td", { text: fmtNumber(r.segments) }),
    h("td", { text: fmtNumber(r.summaries_total ?? (r.summaries || []).length) +
      (inLayer(r.layer) != null ? ` of ${fmtNumber(inLayer(r.layer))}` : "") }),
    h("td", { text: fmtNumber(r.removed_total ?? (r.removed || []).length) }),
    h("td", { text: fmtNumber(r.calls) }), h("td", { text: fmtNumber((r.tokens_in || 0) + (r.tokens_out || 0)) })));
  const tokens = cost.tokens_in + cost.tokens_out;
  const rebuildTokens = rebuild ? (rebuild.tokens_in || 0) + (rebuild.tokens_out || 0) : 0;
  return h("div", { class: "change" },
    head.kind !== "resummarize" ? h("p", { class: "change-head", text: `${head.kind}: ${sources(head)} · +${fmtNumber(head.chunks_added || 0)} / −${fmtNumber(head.chunks_removed || 0)} chunks` }) : null,
    h("div", { class: "scroll" }, h("table", { id: "change-layers" },
      h("caption", { text: "Re-summarized, layer by layer (summaries written, of the layer's)" }),
      h("thead", {}, h("tr", {}, ["Layer", "Segments", "Summaries", "Removed", "Calls", "Tokens"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, text: "Nothing re-summarized." }))))),
    h("p", { class: "versus", id: "change-versus" },
      h("strong", { text: `This change: ${fmtNumber(cost.calls)} calls, ${fmtNumber(tokens)} tokens. ` }),
      rebuild ? `A rebuild of the whole store: about ${fmtNumber(rebuild.calls)} calls, ${fmtNumber(rebuildTokens)} tokens` +
        ` (${fmtUsd(rebuild.usd)}${rebuild.model ? ` with ${rebuild.model}` : ""}; estimated from ${BASIS[rebuild.basis] || rebuild.basis}) — this change cost ${share(cost.calls, rebuild.calls)} of the calls` +
        ` and ${share(tokens, rebuildTokens)} of the tokens.` : "No rebuild estimate."),
    group.summaries.length ? h("details", {}, h("summary", { text: `${group.summaries.length} summaries highlighted where the graph draws them` }),
      h("ul", { class: "members" }, group.summaries.map((id) => h("li", {}, h("button", { type: "button", class: "link", onclick: () => open(id) }, id))))) : null);
}
