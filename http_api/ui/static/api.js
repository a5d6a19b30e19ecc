// The HTTP API as the page uses it. Every request carries the function key (if one is set) and, on devhost, the
// principal picked for this tab; problems (RFC 9457) become ApiError with their code and detail.
const API = "/api";
const KEY = "agents.functionKey";
const PRINCIPAL = "agents.devPrincipal";

export class ApiError extends Error {
  constructor(status, body) {
    super(body.detail || body.title || `HTTP ${status}`);
    this.status = status;
    this.code = body.code || `http_${status}`;
    this.body = body;
  }
}

export function functionKey() { return sessionStorage.getItem(KEY) || ""; }
export function setFunctionKey(value) { value ? sessionStorage.setItem(KEY, value) : sessionStorage.removeItem(KEY); }
export function devPrincipal() { return sessionStorage.getItem(PRINCIPAL) || ""; }
export function setDevPrincipal(value) {
  value ? sessionStorage.setItem(PRINCIPAL, value) : sessionStorage.removeItem(PRINCIPAL);
}

function principalHeader(name) {
  // What App Service Authentication adds in front of the app (devhost has no such front): base64 JSON claims.
  const claims = [{ typ: "name", val: name }, { typ: "oid", val: name }];
  for (const role of (name.split("+")[1] || "").split(",").filter(Boolean)) claims.push({ typ: "roles", val: role });
  const principal = { auth_typ: "aad", name_typ: "name", role_typ: "roles", claims };
  return btoa(unescape(encodeURIComponent(JSON.stringify(principal))));
}

function headers(extra = {}) {
  const all = { Accept: "application/json", ...extra };
  const key = functionKey();
  if (key) all["x-functions-key"] = key;
  const picked = devPrincipal();
  if (picked) {
    const name = picked.split("+")[0];
    all["X-MS-CLIENT-PRINCIPAL"] = principalHeader(picked);
    all["X-MS-CLIENT-PRINCIPAL-NAME"] = name;
    all["X-MS-CLIENT-PRINCIPAL-ID"] = name;
  }
  return all;
}

// A problem that passes on its own is sent again rather than shown (as `agentctl/retries.py` does): 503 or 429 (a
// store throttled, a decision or cancel stored whose event the task hub refused), or 409 with a Retry-After (the
// first start with the same key still under way), after the wait the app asks for (up to 10 s), three times at
// most. Safe: a decision is applied once however often it arrives, a cancel is sticky, and every start sends an
// Idempotency-Key of its own (`starts: true`), so a start sent twice starts one run. A request whose connection
// broke (fetch rejects) may have reached the app: it is sent again too, after 0.5 s, 1 s, 2 s, unless twice would
// not do what once does (`repeatable: false`: a rewind's second would find the run rewound, 409).
const ATTEMPTS = 4;
const MAX_RETRY_WAIT_S = 10;

function retryWait(response, attempt) {
  if (attempt >= ATTEMPTS || response.ok || response.status < 400) return null;
  const header = response.headers.get("Retry-After");
  if (![429, 503].includes(response.status) && header === null) return null;
  const seconds = header === null || header.trim() === "" ? NaN : Number(header);
  if (Number.isNaN(seconds)) return backoff(attempt);  // none, or an HTTP date: back off on our own
  return seconds >= 0 && seconds <= MAX_RETRY_WAIT_S ? seconds : null;
}

function backoff(attempt) { return 0.5 * 2 ** (attempt - 1); }

function newKey() {  // crypto.randomUUID needs a secure context; getRandomValues works on plain http too
  return "page-" + Array.from(crypto.getRandomValues(new Uint8Array(16)), b => b.toString(16).padStart(2, "0")).join("");
}

export async function api(path, { method = "GET", body, query, starts = false, repeatable = true } = {}) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  const extra = body ? { "Content-Type": "application/json" } : {};
  if (starts) extra["Idempotency-Key"] = newKey();
  const init = { method, headers: headers(extra) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  for (let attempt = 1; ; attempt++) {
    let wait;
    try {
      response = await fetch(url, init);
      wait = retryWait(response, attempt);
    } catch (error) {  // no answer: the connection broke, before or after the request reached the app
      if (!repeatable || attempt >= ATTEMPTS) throw error;
      wait = backoff(attempt);
    }
    if (wait === null) break;
    await new Promise(resolve => setTimeout(resolve, wait * 1000));
  }
  const text = await response.text();
  const data = text ? JSON.parse(text) : {};
  // A run route answers 500 with the run itself when the run failed: that is a view, not an error.
  if (response.ok || (response.status === 500 && data && data.run_id && data.status)) return data;
  throw new ApiError(response.status, data || {});
}

// A server-sent event stream read with fetch, so it carries the same headers as every other call (the function key
// in `x-functions-key`, the local principal). EventSource cannot send headers: it would need the key in the URL
// (`?code=`), where it stays in the browser's history and in the request logs of every proxy on the way.
// `onEvent(kind, data, id)` per event; a dropped stream resumes after the last event id (`Last-Event-ID`, as a
// browser would); `onUnavailable()` when no stream can be had (none served here, or it keeps failing): poll then.
export function openStream(path, onEvent, onUnavailable) {
  const controller = new AbortController();
  let lastId = null;
  let failures = 0;
  let gotEvent = false;

  function dispatch(block) {
    let kind = "message", id = null;
    const data = [];
    for (const line of block.split(/\r\n|\r|\n/)) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") kind = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
    }
    if (id !== null) lastId = id;
    if (!data.length) return;
    gotEvent = true;
    failures = 0;
    onEvent(kind, data.join("\n"), lastId);
  }

  async function read() {
    const extra = { Accept: "text/event-stream" };
    if (lastId) extra["Last-Event-ID"] = lastId;
    const response = await fetch(new URL(API + path, location.origin),
      { headers: headers(extra), signal: controller.signal, cache: "no-store" });
    if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      throw new Error(`no event stream (HTTP ${response.status})`);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const blocks = buffer.split(/\r\n\r\n|\n\n|\r\r/);
      buffer = blocks.pop();
      for (const block of blocks) dispatch(block);
    }
  }

  (async () => {
    while (!controller.signal.aborted) {
      try { await read(); } catch { failures += 1; }
      if (controller.signal.aborted) return;
      if (!gotEvent || failures >= 5) { onUnavailable(); return; }
      await new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** failures, 5000))); // then resume
    }
  })();
  return { close: () => controller.abort() };
}

// DOM helper: elements from data, never from HTML strings (nothing the API returns is parsed as markup).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined && child !== false)
    el.append(child instanceof Node ? child : String(child));
  return el;
}

export function pretty(value) { return JSON.stringify(value, null, 2); }
