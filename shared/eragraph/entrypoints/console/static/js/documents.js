// Documents: the list by source prefix with its counts per state, each failure's reason and each
// document's readers (who may read it, as GET /documents names them in the caller's view), paged
// by cursor; upload by drag and drop or a file input (POST /documents: text, or base64
// bytes for any other file); delete; polling while anything is not done. A poll draws again only
// the rows, counts and uploads whose content changed (dom.keyed): a Delete button armed under
// the pointer stays armed while the list is read again (until the pointer or the focus leaves it).

import { ApiError, changed, del, get, post, query } from "./api.js";
import { field, fmtTime, h, keyed, readersText, say } from "./dom.js";

const STATES = [["received", "Received"], ["indexed", "Indexed"], ["summaries_pending", "Summaries pending"],
  ["done", "Done"], ["failed", "Failed"]];
const SETTLED = new Set(["done", "failed", "refused", "deleted"]);
const TEXT_KINDS = /\.(txt|md|markdown|rst|csv|tsv|json|jsonl|log|xml|yaml|yml)$/i;
const POLL_MS = 1000;

const ui = {};
const pages = { cursors: [null], at: 0, next: null };
const uploads = new Map(); // doc_id (or a local key for a refused file) -> {source, state, reason}
let timer = null;
let busyBefore = false; // the last page listed a document still moving
let notice = ""; // what the last action said (a delete), kept while the list is read again
const deleting = new Set(); // documents whose delete was accepted (202) and that are still there

function mount(panel) {
  ui.panel = panel;
  ui.prefix = h("input", { id: "doc-prefix", name: "prefix", placeholder: "e.g. uploads/", autocomplete: "off" });
  ui.limit = h("select", { id: "doc-limit" }, [25, 50, 100].map((n) => h("option", { value: n, text: n })));
  ui.counts = h("dl", { class: "counts", id: "doc-counts" });
  ui.message = h("p", { class: "message", id: "doc-message", role: "status" });
  ui.folder = h("input", { id: "upload-folder", value: "uploads/", autocomplete: "off" });
  ui.file = h("input", { id: "file-input", type: "file", multiple: true });
  ui.drop = h("div", { class: "dropzone", id: "dropzone" },
    h("p", {}, "Drop files here, or ", h("label", { for: "file-input" }, "choose files to upload"), ": "),
    h("p", { class: "hint" }, "Text files are sent as text, anything else as bytes (PDF, DOCX, HTML...): the server reads them by kind."),
    ui.file);
  ui.uploads = h("ul", { class: "uploads", id: "upload-list", "aria-live": "polite", "aria-label": "Uploads" });
  ui.rows = h("tbody", { id: "doc-rows" });
  ui.prev = h("button", { type: "button", id: "doc-prev", onclick: () => page(-1) }, "Previous page");
  ui.next = h("button", { type: "button", id: "doc-next", onclick: () => page(1) }, "Next page");
  ui.pageLabel = h("span", { id: "doc-page" });
  const form = h("form", { class: "row", id: "doc-filter", onsubmit: (event) => { event.preventDefault(); first(); } },
    field(ui.prefix, "Source prefix"), field(ui.limit, "Per page"),
    h("button", { type: "submit" }, "List"));
  panel.append(
    h("h2", {}, "Documents"),
    h("section", { class: "card", "aria-labelledby": "upload-title" },
      h("h3", { id: "upload-title" }, "Upload"),
      h("div", { class: "row" }, field(ui.folder, "Source folder")),
      ui.drop, ui.uploads),
    h("section", { class: "card", "aria-labelledby": "list-title" },
      h("h3", { id: "list-title" }, "Stored documents"), form, ui.counts, ui.message,
      h("div", { class: "scroll" }, h("table", { class: "docs" },
        h("caption", { class: "visually-hidden" }, "Documents with their state"),
        h("thead", {}, h("tr", {}, ["Source", "State", "Readers", "Reason", "Updated", "Action"].map((t) => h("th", { scope: "col", text: t })))),
        ui.rows)),
      h("div", { class: "row pager" }, ui.prev, ui.pageLabel, ui.next)));
  ui.file.addEventListener("change", () => { upload([...ui.file.files]); ui.file.value = ""; });
  ui.drop.addEventListener("dragover", (event) => { event.preventDefault(); ui.drop.classList.add("over"); });
  ui.drop.addEventListener("dragleave", () => ui.drop.classList.remove("over"));
  ui.drop.addEventListener("drop", (event) => {
    event.preventDefault();
    ui.drop.classList.remove("over");
    upload([...event.dataTransfer.files]);
  });
}

function show() {
  ui.panel.dataset.state = "loading";
  load();
}

function reset() {
  busyBefore = false;
  deleting.clear();
  uploads.clear();
  renderUploads();
  pages.cursors = [null];
  pages.at = 0;
}

function first() {
  notice = "";
  pages.cursors = [null];
  pages.at = 0;
  load();
}

function page(step) {
  if (step > 0 && !pages.next) return;
  if (step > 0) pages.cursors[pages.at + 1] = pages.next;
  pages.at = Math.max(0, pages.at + step);
  load();
}

async function load() {
  let body;
  try {
    body = await get("/documents" + query({ prefix: ui.prefix.value, limit: ui.limit.value, cursor: pages.cursors[pages.at] }));
  } catch (error) {
    say(ui.message, `Could not list the documents: ${error.message}`, "error");
    ui.panel.dataset.state = "ready";
    return;
  }
  keyed(ui.counts, [["total", "Total", body.total], ...STATES.map(([key, label]) => [key, label, body[key] ?? 0])], {
    key: ([key]) => key, make: ([key, label, count]) => h("div", { dataset: { state: key } }, h("dt", {}, label), h("dd", { text: count })) });
  const rows = body.documents.length ? body.documents : [null];
  keyed(ui.rows, rows, { key: (doc) => (doc ? "doc:" + doc.doc_id : "none"),
    sign: (doc) => JSON.stringify(doc && [doc.source, doc.state, doc.readers || null, doc.reason || "", doc.updated || doc.updated_at || null]),
    make: (doc) => (doc ? row(doc) : h("tr", {}, h("td", { colspan: 6, text: "No documents under this prefix." }))) });
  pages.next = body.next_cursor ?? null;
  ui.prev.disabled = pages.at === 0;
  ui.next.disabled = !pages.next;
  ui.pageLabel.textContent = `Page ${pages.at + 1}`;
  say(ui.message, notice || (body.truncated && body.next_cursor === undefined ? "Only the first documents are shown: narrow the prefix." : ""));
  ui.panel.dataset.state = "ready"; // the first page is drawn (eragraph bench console waits for it)
  const busy = body.documents.some((d) => !SETTLED.has(d.state));
  if (busyBefore && !busy) changed(); // what moved has settled (or left): the store is read again
  busyBefore = busy;
  schedule(busy);
}

function row(doc) {
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${doc.source}` }, "Delete");
  remove.addEventListener("click", () => confirmDelete(remove, doc));
  // armed while the pointer or the focus stays on it, not for a time: a slow page keeps it armed
  remove.addEventListener("blur", () => disarm(remove));
  remove.addEventListener("pointerleave", () => disarm(remove));
  return h("tr", { dataset: { docId: doc.doc_id, state: doc.state } },
    h("td", { class: "source", text: doc.source, dataset: { label: "Source" } }),
    h("td", { dataset: { label: "State" } }, h("span", { class: "state " + doc.state, text: label(doc.state) })),
    h("td", { class: "readers", dataset: { label: "Readers" } }, readersText(doc.readers)
      ? h("span", { class: "badge readers", text: readersText(doc.readers) }) : null),
    h("td", { class: "reason", text: doc.reason || "", dataset: { label: "Reason" } }),
    h("td", { text: fmtTime(doc.updated || doc.updated_at), dataset: { label: "Updated" } }),
    h("td", { class: "action" }, remove));
}

function label(state) {
  return (STATES.find(([key]) => key === state) || [state, state])[1];
}

function confirmDelete(button, doc) {
  if (button.dataset.armed) {
    button.disabled = true;
    del("/documents/" + encodeURIComponent(doc.doc_id))
      .then(() => { notice = `Deleting ${doc.source}.`; uploads.delete(doc.doc_id); deleting.add(doc.doc_id); load(); })
      .catch((error) => { notice = ""; say(ui.message, `Could not delete ${doc.source}: ${error.message}`, "error"); });
    return;
  }
  button.dataset.armed = "1";
  button.textContent = "Confirm delete";
}

function disarm(button) {
  if (!button.dataset.armed || button.disabled) return;
  delete button.dataset.armed;
  button.textContent = "Delete";
}

async function asDocument(file, folder) {
  const source = folder + file.name;
  if (TEXT_KINDS.test(file.name)) {
    const text = await file.text();
    if (!text.includes("\u0000")) return { source, text };
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return { source, bytes: btoa(binary) };
}

async function upload(files) {
  const folder = ui.folder.value;
  for (const file of files) {
    const key = "local:" + folder + file.name + ":" + Date.now();
    try {
      const body = await post("/documents", { documents: [await asDocument(file, folder)] });
      for (const doc of body.documents) uploads.set(doc.doc_id, { source: doc.source, state: doc.state || "received" });
    } catch (error) {
      const reason = error instanceof ApiError && error.missingRoute
        ? "this server has no upload route (POST /documents)" : error.message;
      uploads.set(key, { source: folder + file.name, state: "refused", reason });
    }
    renderUploads();
  }
  load();
  schedule(true);
}

function renderUploads() {
  keyed(ui.uploads, [...uploads.entries()], { key: ([id]) => id, sign: ([, up]) => JSON.stringify([up.source, up.state, up.reason || ""]),
    make: ([id, up]) => h("li", { class: "upload " + up.state, dataset: { docId: id, state: up.state } },
      h("span", { class: "source", text: up.source }), " ",
      h("span", { class: "state " + up.state, text: up.state === "refused" ? "Upload failed" : label(up.state) }),
      up.reason ? h("span", { class: "reason", text: " — " + up.reason }) : null) });
}

async function poll() {
  let settled = false;
  for (const [id, up] of uploads) {
    if (SETTLED.has(up.state) || id.startsWith("local:")) continue;
    try {
      const doc = await get("/documents/" + encodeURIComponent(id));
      up.state = doc.status || doc.state || up.state;
      up.reason = doc.reason;
      settled = settled || SETTLED.has(up.state);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) up.reason = error.message;
    }
  }
  for (const id of deleting) { // the delete runs in the background: followed until the document is gone
    try {
      const doc = await get("/documents/" + encodeURIComponent(id));
      if (doc.status === "deleted" || doc.state === "deleted") throw new ApiError(404, "deleted");
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        deleting.delete(id);
        settled = true;
      }
    }
  }
  renderUploads();
  if (settled) changed(); // the store line, the graph and the stats read the store again
  await load();
}

function schedule(busy) {
  const waiting = [...uploads.values()].some((up) => !SETTLED.has(up.state)) || deleting.size > 0;
  if (timer || !(busy || waiting)) return;
  timer = setTimeout(() => { timer = null; poll(); }, POLL_MS);
}

export default { mount, show, reset };
