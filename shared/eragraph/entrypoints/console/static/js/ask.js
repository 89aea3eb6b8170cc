// Ask: a conversation. A question with its mode (each mode's purpose from GET /modes), k, budget,
// metadata filter and rerank switch; results as cards (text, source, page, score, layer, the route
// taken and the time of each stage); the answer streamed from POST /query/stream, its citations
// linking to the cards they rest on and marking there the sentence the citing sentence rests on.
// Each question after the first is sent with the conversation so far (the server makes it
// standalone and says how: "Asked as"); "New conversation" starts afresh.

import { ApiError, get, ndjson, post } from "./api.js";
import { clear, field, fmtNumber, h, keyed, say } from "./dom.js";
import { builder } from "./filters.js";

const ui = {};
let modes = [];
let filters;
let conversation = []; // the turns so far: {role: "user" | "assistant", content}
const MAX_TURNS = 40; // what POST /query takes
const MAX_CONTENT = 16000;

// The modes (GET /modes, read once) as the options of ``select``, those ``only`` keeps: keyed
// (dom.keyed), so a view shown again keeps the options, the one picked and an open list as they are.
export async function loadModes(select, purpose, only = () => true) {
  if (!modes.length) {
    try {
      modes = (await get("/modes")).modes;
    } catch (error) {
      modes = [{ name: "collapsed", family: "summary", description: `the default mode (GET /modes: ${error.message})`, available: true }];
    }
  }
  keyed(select, modes.filter(only), { key: (m) => m.name, sign: (m) => String(m.available !== false),
    make: (m) => h("option", { value: m.name, disabled: m.available === false, text: m.available === false ? `${m.name} (not on this store)` : m.name }) });
  const describe = () => {
    const mode = modes.find((m) => m.name === select.value);
    purpose.textContent = mode ? `${mode.family}: ${mode.description}` : "";
  };
  select.onchange = describe;
  describe();
  return modes;
}

function mount(panel) {
  ui.panel = panel;
  ui.query = h("textarea", { id: "ask-query", name: "query", rows: 3, required: true, maxlength: 4000 });
  ui.mode = h("select", { id: "ask-mode", name: "mode", "aria-describedby": "ask-mode-purpose" });
  ui.purpose = h("p", { id: "ask-mode-purpose", class: "hint" });
  ui.k = h("input", { id: "ask-k", type: "number", min: 1, max: 100, value: 5 });
  ui.budget = h("input", { id: "ask-budget", type: "number", min: 1, max: 100000, placeholder: "default" });
  ui.rerank = h("input", { id: "ask-rerank", type: "checkbox" });
  ui.answer = h("input", { id: "ask-answer", type: "checkbox", checked: true });
  ui.status = h("p", { id: "ask-status", class: "message", role: "status" });
  ui.answerText = h("div", { id: "answer", class: "answer", "aria-live": "polite" });
  ui.route = h("p", { id: "ask-route", class: "route" });
  ui.rewrite = h("p", { id: "ask-rewrite", class: "hint" });
  ui.history = h("ol", { id: "conversation", class: "conversation", "aria-label": "Conversation so far" });
  ui.fresh = h("button", { type: "button", id: "ask-new", onclick: () => newConversation() }, "New conversation");
  ui.results = h("ol", { id: "results", class: "results" });
  filters = builder("filter", () => { try { filters.refresh(); } catch { /* shown in the preview */ } });
  const form = h("form", { id: "ask-form", onsubmit: (event) => { event.preventDefault(); ask(); } },
    h("label", { for: "ask-query" }, "Question"), ui.query,
    h("fieldset", { class: "options" }, h("legend", {}, "Retrieval"),
      h("div", { class: "row" }, field(ui.mode, "Mode"), field(ui.k, "k (results)"), field(ui.budget, "Budget (tokens)")),
      ui.purpose,
      h("div", { class: "row" }, field(ui.rerank, "Rerank the results"), field(ui.answer, "Stream an answer"))),
    filters.element,
    h("button", { type: "submit", id: "ask-submit", class: "primary" }, "Ask"), " ", ui.fresh);
  panel.append(h("h2", {}, "Ask"), h("div", { class: "split" },
    h("section", { class: "card", "aria-label": "Question" }, form, ui.status, ui.history),
    h("section", { class: "card", "aria-labelledby": "answer-title" },
      h("h3", { id: "answer-title" }, "Answer"), ui.rewrite, ui.answerText,
      h("h3", {}, "Results"), ui.route, ui.results)));
  filters.refresh();
}

// The view says when it has settled (data-state "ready": its modes are listed), as the others do.
async function show() {
  ui.panel.dataset.state = "loading";
  await loadModes(ui.mode, ui.purpose);
  ui.panel.dataset.state = "ready";
}

function reset() {
  clear(ui.results);
  clear(ui.answerText);
  ui.route.textContent = "";
  ui.rewrite.textContent = "";
}

function newConversation() {
  conversation = [];
  clear(ui.history);
  reset();
  say(ui.status, "A new conversation: the next question stands alone.");
  ui.query.value = "";
  ui.query.focus();
}

function remember(question, answer) {
  conversation.push({ role: "user", content: question.slice(0, MAX_CONTENT) });
  if (answer) conversation.push({ role: "assistant", content: answer.slice(0, MAX_CONTENT) });
  conversation = conversation.slice(-MAX_TURNS);
  ui.history.append(h("li", { class: "turn" }, h("strong", { text: "Q: " }), question,
    answer ? h("p", { class: "hint", text: "A: " + answer }) : ""));
}

function body() {
  const out = { query: ui.query.value.trim(), mode: ui.mode.value || "collapsed", k: Number(ui.k.value) || 5 };
  if (ui.budget.value) out.budget = Number(ui.budget.value);
  if (ui.rerank.checked) out.rerank = true;
  const filter = filters.refresh();
  if (filter) out.filter = filter;
  if (conversation.length) out.conversation = conversation.slice(-MAX_TURNS);
  return out;
}

async function ask() {
  let request;
  try {
    request = body();
  } catch (error) {
    say(ui.status, `The filter is not valid: ${error.message}`, "error");
    return;
  }
  if (!request.query) {
    say(ui.status, "Write a question first.", "error");
    ui.query.focus();
    return;
  }
  reset();
  say(ui.status, "Asking…");
  try {
    answered = null;
    if (ui.answer.checked) await streamed(request);
    else results(await post("/query", request));
    remember(request.query, answered);
    if (!ui.status.classList.contains("error")) say(ui.status, "Done.");
  } catch (error) {
    say(ui.status, `The question failed: ${error.message}`, "error");
  }
}

async function streamed(request) {
  let lines;
  try {
    lines = ndjson("/query/stream", request);
    const first = await lines.next();
    if (first.done) throw new Error("the stream ended before its results");
    results(first.value);
  } catch (error) {
    if (!(error instanceof ApiError && error.missingRoute)) throw error;
    const whole = await post("/query", { ...request, answer: true }); // no stream route: the answer whole
    results(whole);
    finish({ answer: whole.answer, cited_ids: whole.cited_ids, note: whole.note });
    return;
  }
  const live = h("span", { class: "streaming" });
  clear(ui.answerText, live);
  for await (const line of lines) {
    if (line.type === "piece") live.textContent += line.text;
    else if (line.type === "done") finish(line);
    else if (line.type === "error") say(ui.status, `The answer stopped: ${line.message}`, "error");
  }
}

const byId = new Map();
let answered = null; // the answer of the question being asked, for the conversation

function results(response) {
  byId.clear();
  const list = response.results || [];
  clear(ui.results, list.map((r, i) => card(r, i + 1)));
  if (!list.length) ui.results.append(h("li", { text: response.note || "No results." }));
  head = response;
  routeLine(response, !ui.answer.checked || response.answer !== undefined);
  const rw = response.rewrite;
  ui.rewrite.textContent = rw && rw.how !== "none" ? `Asked as: ${rw.question} (${rw.how} rewrite of the follow-up)` : "";
}

// "page N" (or "pages a–b") and the chunk's characters in its document; a chunk stored before
// places were recorded says so.
function placeBadge(result) {
  const place = result.place;
  if (result.layer !== 0) return "";
  if (!place) return h("span", { class: "badge", text: "no place recorded" });
  if (place.pages) {
    const [first, last] = place.pages;
    return h("span", { class: "badge page", text: first === last ? `page ${first}` : `pages ${first}–${last}` });
  }
  return "";
}

let head = null; // the results of the question being answered (the stream's first line)

// The route taken and the time of each stage; a streamed answer's head has not been timed yet
// (``whole`` false): its stages and seconds come with the stream's last line.
function routeLine(response, whole = true) {
  const list = response.results || [];
  const stages = response.stages ? Object.entries(response.stages).map(([k, v]) => `${k.replace(/_ms$/, "")} ${fmtNumber(v, 1)} ms`).join(" · ") : "";
  ui.route.textContent = `Route: ${response.route || response.mode}` +
    (response.router_score != null ? ` (router score ${fmtNumber(response.router_score, 3)})` : "") +
    (stages ? ` · stages: ${stages}` : "") +
    (whole && response.seconds != null ? ` · ${fmtNumber(response.seconds * 1000, 1)} ms in all` : "") +
    (response.rerank ? " · reranked" : "") + (response.note && list.length ? ` · ${response.note}` : "");
}

function card(result, n) {
  byId.set(result.id, n);
  return h("li", { class: "result", id: "result-" + n, tabindex: -1, dataset: { id: result.id } },
    h("div", { class: "result-head" },
      h("strong", { text: `[${n}] ${result.title || result.source || result.id}` }),
      h("span", { class: "badge", text: `layer ${result.layer}` }),
      placeBadge(result),
      h("span", { class: "badge", text: `score ${fmtNumber(result.score, 3)}` })),
    h("p", { class: "source", text: result.source || "" }),
    h("p", { class: "text", text: result.text }),
    h("p", { class: "hint", text: result.place ? `${result.id} · characters ${result.place.start}–${result.place.end} of its document` : result.id }));
}

// The answer with each [evidence id] as a link to its card.
function finish(done) {
  if (head && done.type === "done") {
    routeLine({ ...head, stages: { ...head.stages, ...done.stages }, seconds: done.seconds, note: done.note || head.note });
  }
  if (done.answer == null) {
    clear(ui.answerText, h("p", { class: "hint", text: done.note || "No answer: this server has no generator configured." }));
    return;
  }
  answered = done.answer;
  const parts = [];
  let last = 0;
  const text = done.answer;
  for (const match of text.matchAll(/\[([^\[\]\n]{1,400})\]/g)) {
    const ids = match[1].split(/[,;]\s*/).map((s) => s.trim());
    if (!ids.every((id) => byId.has(id))) continue;
    parts.push(text.slice(last, match.index));
    const said = text.slice(0, match.index).split(/(?<=[.!?])\s+/).pop(); // the citing sentence
    ids.forEach((id) => parts.push(citation(id, said)));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  clear(ui.answerText, h("p", {}, parts));
  const cited = (done.cited_ids || []).filter((id) => byId.has(id));
  if (cited.length) ui.answerText.append(h("p", { class: "hint" }, "Cites: ", cited.map((id) => citation(id))));
}

const WORD = /[\p{L}\p{N}]{3,}/gu;

// In the cited card, the sentence of the chunk that shares the most words with the citing
// sentence of the answer, marked (the whole chunk when none shares a word).
function markSpan(card, said) {
  const text = card.querySelector(".text");
  const chunk = text.textContent;
  const words = new Set((said || "").toLowerCase().match(WORD) || []);
  const sentences = chunk.split(/(?<=[.!?])\s+/);
  let best = -1, bestScore = 0, at = 0, start = 0;
  sentences.forEach((s, i) => {
    const score = (s.toLowerCase().match(WORD) || []).filter((w) => words.has(w)).length;
    if (score > bestScore) { best = i; bestScore = score; start = at; }
    at += s.length + 1;
  });
  if (best < 0) { clear(text, h("mark", { class: "span", text: chunk })); return; }
  const from = chunk.indexOf(sentences[best], Math.max(0, start - 1));
  clear(text, chunk.slice(0, from), h("mark", { class: "span", text: sentences[best] }), chunk.slice(from + sentences[best].length));
}

function citation(id, said) {
  const n = byId.get(id);
  return h("a", { class: "cite", href: "#ask", "aria-label": `citation ${n}: result ${n}`, dataset: { target: "result-" + n },
    onclick: (event) => {
      event.preventDefault();
      const target = document.getElementById("result-" + n);
      for (const other of ui.results.querySelectorAll(".cited")) other.classList.remove("cited");
      target.classList.add("cited");
      markSpan(target, said);
      target.scrollIntoView({ block: "nearest" });
      target.focus();
    } }, `[${n}]`);
}

export default { mount, show, reset };
