// Small DOM helpers: elements are built with textContent, never innerHTML, so text from the
// store (document sources, chunk text, failure reasons) is shown as text, never run as markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// The children of ``parent`` made from ``items``, one element per key, in the items' order: an
// element whose key and signature (by default the item as JSON) are unchanged is kept as it is,
// not made again, so a button under the pointer stays attached, with its focus and any state it
// holds; the others are made by ``make(item)``, and the elements no item keys any more go.
// Returns whether anything changed.
export function keyed(parent, items, { key, make, sign = (item) => JSON.stringify(item) }) {
  const before = new Map();
  for (const el of parent.children) if (el.dataset.key !== undefined) before.set(el.dataset.key, el);
  const wanted = items.map((item) => {
    const k = String(key(item));
    const signature = sign(item);
    const kept = before.get(k);
    if (kept && kept.dataset.sign === signature) return kept;
    const made = make(item);
    made.dataset.key = k;
    made.dataset.sign = signature;
    return made;
  });
  const keep = new Set(wanted);
  let changed = false;
  for (const child of [...parent.childNodes]) {
    if (!keep.has(child)) {
      child.remove();
      changed = true;
    }
  }
  let at = parent.firstChild;
  for (const el of wanted) {
    if (el === at) {
      at = at.nextSibling;
    } else {
      parent.insertBefore(el, at);
      changed = true;
    }
  }
  return changed;
}

export function fmtNumber(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en", { maximumFractionDigits: digits });
}

export function fmtTime(epochSeconds) {
  if (!epochSeconds) return "–";
  return new Date(epochSeconds * 1000).toLocaleString("en-GB", { hour12: false });
}

export function fmtUsd(value) {
  if (value === null || value === undefined) return "unpriced";
  if (Number(value) === 0) return "$0";
  return "$" + Number(value).toFixed(value < 0.01 ? 5 : 2);
}

// A message in a status region: kind "error" (role=alert) or "info".
export function say(region, text, kind = "info") {
  region.classList.toggle("error", kind === "error");
  region.setAttribute("role", kind === "error" ? "alert" : "status");
  region.textContent = text;
}

// A label and its control kept together on one line (a check box after its label's box).
// Who may read a document or node (its ``readers``: principals, "*" the whole tenant), in words;
// "" when not known (a status without a stored document).
export function readersText(readers) {
  if (!readers || !readers.length) return "";
  return readers.includes("*") ? "everyone in the tenant" : readers.join(", ");
}

export function field(control, text) {
  const label = h("label", { for: control.id }, text);
  return h("span", { class: "field" }, control.type === "checkbox" ? [control, label] : [label, control]);
}
