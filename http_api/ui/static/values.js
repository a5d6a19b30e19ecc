// Tool arguments and results for people: one row per field, multi-line strings as text (an email body reads as an
// email, not as JSON with "\n"), short values inline, long JSON folded behind a summary.
import { h, pretty } from "./api.js";

const FOLD_LINES = 6; // JSON longer than this starts folded
const FOLD_CHARS = 240;

function isPlainObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function folded(value) {
  const text = pretty(value);
  const lines = text.split("\n").length;
  if (lines <= FOLD_LINES && text.length <= FOLD_CHARS) return h("code", { class: "json" }, JSON.stringify(value));
  const size = Array.isArray(value) ? `${value.length} items` : `${Object.keys(value).length} fields`;
  return h("details", { class: "fold" }, h("summary", {}, `${Array.isArray(value) ? "[…]" : "{…}"} ${size}`),
    h("pre", {}, text));
}

export function valueView(value) {
  if (typeof value === "string") {
    if (value.includes("\n")) return h("div", { class: "text-block" }, value);
    if (value.length > FOLD_CHARS) {
      return h("details", { class: "fold" }, h("summary", {}, `${value.slice(0, 80)}… (${value.length} characters)`),
        h("div", { class: "text-block" }, value));
    }
    return h("span", { class: "text" }, value);
  }
  if (value === null || typeof value !== "object") return h("code", { class: "json" }, JSON.stringify(value));
  return folded(value);
}

// An object as a list of fields (what tool calls take and most tools return); anything else as one value.
export function fieldsView(value, { label } = {}) {
  if (!isPlainObject(value) || !Object.keys(value).length) {
    return h("div", { class: "fields", "aria-label": label }, valueView(value));
  }
  const list = h("dl", { class: "fields", "aria-label": label });
  for (const [key, item] of Object.entries(value)) list.append(h("dt", {}, key), h("dd", {}, valueView(item)));
  return list;
}
