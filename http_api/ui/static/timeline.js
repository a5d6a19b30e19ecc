// A run's course at a glance: every model call, tool call and approval as a bar on one time axis (where it started,
// how long it took), with tokens and cost per model call and who decided each approval when. Built only from what
// the API returns: the run's messages (each with the time it was stored, a model answer with its call's usage) and
// the run's approvals (created, decided, by whom).
import { api, h } from "./api.js";

const FINAL = new Set(["completed", "failed", "cancelled"]);

export async function loadTimeline(runId) {
  const path = `/runs/${encodeURIComponent(runId)}`;
  let view = await api(path);
  const updates = [...(view.updates || [])];
  // A long run: every page of it (a page with nothing new ends a running run's pages too).
  for (let token = view.continuation_token, more = updates.length > 0; token && more;) {
    view = await api(path, { query: { continuation_token: token } });
    updates.push(...(view.updates || []));
    token = view.continuation_token;
    more = (view.updates || []).length > 0;
  }
  const { approvals = [] } = await api(`${path}/approvals`);
  return { view: { ...view, updates }, approvals };
}

const time = (value) => (value ? new Date(value).getTime() : NaN);

export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const hours = Math.floor(m / 60);
  return hours < 48 ? `${hours} h ${m % 60} min` : `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

function tokens(usage) {
  if (!usage || !usage.total_tokens) return "";
  const cost = usage.cost !== null && usage.cost !== undefined ? ` · $${Number(usage.cost).toFixed(4)}` : "";
  return `${usage.input_tokens} in / ${usage.output_tokens} out tokens${cost}`;
}

const clock = (value) => new Date(value).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

// The run as steps: [{kind, title, detail, start, end}], times in ms since the epoch.
export function timelineSteps(view, approvals, now = Date.now()) {
  const steps = [];
  const byCall = new Map(approvals.map((a) => [a.call_id, a]));
  const proposed = new Map(); // call_id -> [tool name, when the model proposed it]
  let last = time(view.created_at); // the end of the latest step a model call waits for
  for (const { message } of view.updates || []) {
    const at = time(message.created_at);
    const contents = message.contents || [];
    if (contents.some((c) => c.type === "function_approval_request")) continue; // shown from the approvals
    if (message.role === "assistant" && !contents.length) {
      // A draft emptied when its call failed (`agent_runtime.steps`): the call gave no answer the run kept.
      const detail = view.status === "failed" && view.error ? view.error.message : "";
      steps.push({ kind: "failed", title: "Model call: failed", detail, start: last, end: at });
    } else if (message.role === "assistant") {
      const calls = contents.filter((c) => c.type === "function_call");
      const did = calls.length ? `proposed ${calls.map((c) => c.name).join(", ")}` : "answered";
      steps.push({ kind: "model", title: `Model call: ${did}`, detail: tokens(message.usage), start: last, end: at });
      for (const call of calls) proposed.set(call.call_id, [call.name, at]);
    }
    for (const content of contents.filter((c) => c.type === "function_result")) {
      const [name, proposedAt] = proposed.get(content.call_id) || ["tool", last];
      const approval = byCall.get(content.call_id);
      if (approval && approval.status !== "approved") {
        steps.push({ kind: "skipped", title: `${name}: not run`, detail: "", start: at, end: at });
        continue;
      }
      const start = approval ? time(approval.decided_at) : proposedAt;
      steps.push({ kind: content.error ? "failed" : "tool", title: `Tool call: ${name}`,
        detail: content.error ? `error: ${content.error}` : "", start, end: at });
    }
    if (Number.isFinite(at)) last = at;
  }
  for (const approval of approvals) {
    const decided = time(approval.decided_at);
    const who = approval.decided_by_name || approval.decided_by || "?";
    const verdict = approval.status === "pending" ? "waiting for a decision" : approval.status;
    const detail = Number.isFinite(decided)
      ? `${verdict} by ${who} at ${clock(approval.decided_at)}${approval.reason ? `: ${approval.reason}` : ""}`
      : verdict;
    steps.push({ kind: `approval ${approval.status}`, title: `Approval: ${approval.tool}`, detail,
      start: time(approval.created_at), end: Number.isFinite(decided) ? decided : now });
  }
  return steps.filter((s) => Number.isFinite(s.start) && Number.isFinite(s.end))
    .sort((a, b) => a.start - b.start || a.end - b.end);
}

function bar(left, width) {
  const element = h("span", { class: "bar" });
  element.style.marginLeft = `${left.toFixed(2)}%`; // CSSOM, not a style attribute: the page's CSP allows no inline style
  element.style.width = `${width.toFixed(2)}%`;
  return element;
}

export function timelineView(view, approvals, now = Date.now()) {
  const steps = timelineSteps(view, approvals, now);
  const begin = time(view.created_at);
  const finish = FINAL.has(view.status) ? Math.max(time(view.updated_at), ...steps.map((s) => s.end)) : now;
  const span = Math.max(finish - begin, 1);
  const list = h("ol", { class: "timeline", "aria-label": "timeline" });
  for (const step of steps) {
    const left = ((step.start - begin) / span) * 100;
    const width = Math.max(((step.end - step.start) / span) * 100, 0.6);
    list.append(h("li", { class: `step ${step.kind}` },
      h("div", { class: "step-head" },
        h("span", { class: "step-title" }, step.title),
        h("span", { class: "step-took" }, duration(step.end - step.start))),
      h("div", { class: "track", "aria-hidden": "true" }, bar(left, Math.min(width, 100 - left))),
      step.detail ? h("div", { class: "meta" }, step.detail) : null));
  }
  const usage = view.usage || {};
  const summary = h("p", { class: "meta timeline-summary" },
    `${view.status.replace("_", " ")} · ${duration(finish - begin)} in all`,
    usage.total_tokens ? ` · ${tokens(usage)}` : "");
  return h("section", { class: "card timeline-card", "aria-label": "course of the run" },
    h("h3", {}, "Course of the run"), summary, list);
}
