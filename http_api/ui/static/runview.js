// A run, live: its conversation, the answer as it is written, tool calls and results, approvals to decide, and the
// run's course as a timeline. Follows the run's server-sent event stream; where the app serves none, long-polls.
import { api, h, openStream, pretty } from "./api.js";
import { approvalCard } from "./approval.js";
import { repairActions } from "./repair.js";
import { loadTimeline, timelineView } from "./timeline.js";
import { fieldsView } from "./values.js";

const FINAL = new Set(["completed", "failed", "cancelled"]);

export function renderRun(main, runId) {
  const panel = runPanel(runId);
  main.replaceChildren(h("h2", {}, "Run"), panel.element);
  panel.follow();
  return panel;
}

export function runPanel(runId, { onDone } = {}) {
  const badge = h("span", { class: "status", "data-testid": "run-status" }, "…");
  const transcript = h("div", { class: "transcript", "aria-live": "polite", "aria-relevant": "additions" });
  const approvals = h("div", { class: "approvals" });
  const outcome = h("div", { role: "status" });
  const timeline = h("div", { class: "timeline-box", "data-testid": "timeline" });
  const cancel = h("button", { type: "button", class: "danger", onclick: async () => {
    cancel.disabled = true;
    try { await api(`/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST" }); } catch (e) { outcome.textContent = e.message; }
  } }, "Cancel run");
  const element = h("section", { class: "run", "data-run-id": runId, "aria-label": `run ${runId}` },
    h("p", { class: "meta" }, `run ${runId} · `, badge, " ", cancel), timeline, transcript, approvals, outcome);
  const seenSeq = new Set();
  const shownApprovals = new Map(); // approval id → its card, and whether it offered a decision
  let writing = null;
  let source = null;
  let shownStatus = null;

  async function refreshTimeline() {
    try {
      const { view, approvals: decided } = await loadTimeline(runId);
      timeline.replaceChildren(timelineView(view, decided));
    } catch { /* the timeline is extra: the run view works without it */ }
  }

  function setStatus(status, pending = []) {
    if (status !== shownStatus) { shownStatus = status; refreshTimeline(); }
    badge.textContent = status.replace("_", " ");
    badge.className = `status ${status}`;
    cancel.hidden = FINAL.has(status);
    for (const approval of pending) {
      // A card shown as waiting for another approver is replaced once the approval becomes the person's to decide
      // (escalated to a role they hold); one they may decide stays as it is (their edit in progress is kept).
      const shown = shownApprovals.get(approval.approval_id);
      const decidable = approval.decidable !== false;
      if (shown && (shown.decidable || !decidable)) continue;
      const card = approvalCard({ ...approval, run_id: runId });
      if (shown) shown.card.replaceWith(card); else approvals.append(card);
      shownApprovals.set(approval.approval_id, { card, decidable });
    }
  }

  function addUpdate(update) {
    if (seenSeq.has(update.seq)) return;
    seenSeq.add(update.seq);
    const message = update.message || {};
    for (const content of message.contents || []) {
      if (content.type === "text" && content.text) {
        if (message.role === "assistant" && writing) { writing.remove(); writing = null; }
        transcript.append(h("div", { class: `msg ${message.role}` }, content.text));
      } else if (content.type === "function_call") {
        transcript.append(h("div", { class: "msg tool call" }, h("div", { class: "tool-head" }, `→ ${content.name}`),
          fieldsView(content.arguments, { label: `${content.name} arguments` })));
      } else if (content.type === "function_result") {
        transcript.append(h("div", { class: `msg tool result${content.error ? " error" : ""}` },
          h("div", { class: "tool-head" }, content.error ? "← error" : "← result"),
          content.error ? h("div", { class: "text-block" }, content.error) : fieldsView(content.result)));
      } else if (content.type === "function_approval_response") {
        const who = message.author_name ? ` by ${message.author_name}` : "";
        const verdict = content.approved ? "approved" : `rejected${content.reason ? `: ${content.reason}` : ""}`;
        transcript.append(h("div", { class: "msg tool" }, `${content.function_call?.name}: ${verdict}${who}`));
        approvals.querySelector(`[data-approval-id="${CSS.escape(content.id)}"]`)?.remove();
      }
    }
  }

  function addDelta(text) {
    if (!writing) {
      writing = h("div", { class: "msg assistant writing", "data-testid": "writing" });
      transcript.append(writing);
    }
    writing.textContent += text;
  }

  function finish(view) {
    setStatus(view.status);
    if (writing && view.status !== "completed") { writing.remove(); writing = null; }
    approvals.replaceChildren();
    if (view.error) outcome.replaceChildren(h("p", { class: "error" }, `${view.error.code}: ${view.error.message}`));
    else if (view.output && view.output.value !== undefined) outcome.replaceChildren(h("pre", {}, pretty(view.output.value)));
    outcome.append(repairActions(runId, view.status));
    refreshTimeline();
    onDone?.(view);
  }

  function follow() {
    const handlers = {
      update: addUpdate,
      delta: (d) => addDelta(d.text || ""),
      status: (s) => setStatus(s.status, s.pending_approvals || []),
      done: (view) => { source?.close(); source = null; finish(view); },
    };
    source = openStream(`/runs/${encodeURIComponent(runId)}/stream`,
      (kind, data) => handlers[kind]?.(JSON.parse(data || "{}")),
      () => { source = null; poll(); }); // no stream served here (or it keeps failing): poll instead
  }

  async function poll() {
    let token = null;
    let draft = "";
    let wait = 0;
    for (;;) {
      let view;
      try {
        view = await api(`/runs/${encodeURIComponent(runId)}`, { query: { continuation_token: token, wait_seconds: wait } });
      } catch (e) { outcome.textContent = e.message; return; }
      for (const update of view.updates || []) addUpdate(update);
      const partial = view.partial_output || "";
      if (partial.startsWith(draft) && partial.length > draft.length) { addDelta(partial.slice(draft.length)); draft = partial; }
      if (!partial) draft = "";
      setStatus(view.status, view.pending_approvals || []);
      token = view.continuation_token;
      if (FINAL.has(view.status) && !token) { finish(view); return; }
      wait = view.status === "in_progress" ? 0.5 : 5; // a draft does not end a long poll: ask often while writing
    }
  }

  return { element, follow, close: () => source?.close() };
}
