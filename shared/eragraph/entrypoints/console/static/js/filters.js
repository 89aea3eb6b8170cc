// The metadata-filter builder: rows of key / operator / value, joined by "all of" or "any of",
// give Amazon Bedrock Knowledge Bases' filter JSON (the shape POST /query's "filter" takes).

import { h } from "./dom.js";

export const OPERATORS = [
  ["equals", "equals"], ["notEquals", "does not equal"], ["greaterThan", ">"], ["greaterThanOrEquals", "≥"],
  ["lessThan", "<"], ["lessThanOrEquals", "≤"], ["in", "is one of (comma-separated)"],
  ["notIn", "is none of (comma-separated)"], ["startsWith", "starts with"],
];
const NUMERIC = new Set(["greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals"]);

// A typed value: numbers and true/false as such (a comparison needs a number), else the text.
export function typed(text, op) {
  const raw = text.trim();
  if (op === "startsWith") return raw;
  if (raw !== "" && !Number.isNaN(Number(raw))) return Number(raw);
  if (raw === "true" || raw === "false") return raw === "true";
  if (NUMERIC.has(op)) throw new Error(`"${raw}" is not a number: ${op} compares numbers`);
  return raw;
}

export function condition(key, op, value) {
  if (!key.trim()) throw new Error("a condition needs a metadata key");
  const parsed = op === "in" || op === "notIn"
    ? value.split(",").map((part) => typed(part, "equals")).filter((v) => v !== "")
    : typed(value, op);
  return { [op]: { key: key.trim(), value: parsed } };
}

// The filter of the rows ({key, op, value}); null when there is none.
export function filterOf(rows, join) {
  const conditions = rows.filter((r) => r.key.trim() || r.value.trim()).map((r) => condition(r.key, r.op, r.value));
  if (!conditions.length) return null;
  if (conditions.length === 1) return conditions[0];
  return { [join]: conditions };
}

// The builder's DOM: ``onchange`` is called whenever the filter changes.
export function builder(prefix, onchange) {
  const rows = h("div", { class: "filter-rows", id: prefix + "-rows" });
  const join = h("select", { id: prefix + "-join", onchange },
    h("option", { value: "andAll", text: "all of these" }), h("option", { value: "orAll", text: "any of these" }));
  const preview = h("pre", { class: "filter-json", id: prefix + "-json", "aria-live": "polite" });
  let count = 0;

  function addRow() {
    const n = ++count;
    const key = h("input", { id: `${prefix}-key-${n}`, class: "f-key", placeholder: "key, e.g. lang", autocomplete: "off", oninput: onchange });
    const op = h("select", { id: `${prefix}-op-${n}`, class: "f-op", onchange }, OPERATORS.map(([v, t]) => h("option", { value: v, text: t })));
    const value = h("input", { id: `${prefix}-value-${n}`, class: "f-value", placeholder: "value", autocomplete: "off", oninput: onchange });
    const line = h("div", { class: "filter-row row" },
      h("label", { for: key.id, class: "visually-hidden" }, `Condition ${n} key`), key,
      h("label", { for: op.id, class: "visually-hidden" }, `Condition ${n} operator`), op,
      h("label", { for: value.id, class: "visually-hidden" }, `Condition ${n} value`), value,
      h("button", { type: "button", "aria-label": `Remove condition ${n}`, onclick: () => { line.remove(); onchange(); } }, "Remove"));
    rows.append(line);
    key.focus();
    onchange();
  }

  const element = h("fieldset", { class: "filters" }, h("legend", {}, "Metadata filter"),
    h("div", { class: "row" }, h("label", { for: join.id }, "Match"), join), rows,
    h("button", { type: "button", id: prefix + "-add", onclick: addRow }, "Add condition"),
    h("details", {}, h("summary", {}, "Filter JSON"), preview));

  function value() {
    const read = [...rows.querySelectorAll(".filter-row")].map((line) => ({
      key: line.querySelector(".f-key").value, op: line.querySelector(".f-op").value,
      value: line.querySelector(".f-value").value,
    }));
    return filterOf(read, join.value);
  }

  function refresh() {
    try {
      const filter = value();
      preview.textContent = filter ? JSON.stringify(filter, null, 2) : "(no filter)";
      return filter;
    } catch (error) {
      preview.textContent = error.message;
      throw error;
    }
  }

  return { element, value, refresh, addRow };
}
