// Workflows: start one with a JSON input, then follow its steps, its child runs and its approval gates.
import { api, h, pretty } from "./api.js";
import { approvalCard } from "./approval.js";

const FINAL = new Set(["completed", "failed", "cancelled"]);

export async function renderWorkflows(main) {
  const list = h("div", {});
  main.replaceChildren(h("h2", {}, "Workflows"), list);
  let workflows;
  try { ({ workflows } = await api("/workflows")); }
  catch (e) { list.replaceChildren(h("p", { class: "error" }, e.message)); return; }
  if (!workflows.length) list.append(h("p", {}, "No workflows are served."));
  for (const workflow of workflows) {
    const id = `wf-input-${workflow.name}`;
    const input = h("textarea", { id, rows: 3, spellcheck: "false" }, "{}");
    const error = h("p", { class: "error", role: "alert" });
    const start = h("button", { type: "button", class: "primary", onclick: async () => {
      let body;
      try { body = JSON.parse(input.value); } catch (e) { error.textContent = `Not valid JSON: ${e.message}`; return; }
      try {
        const view = await api(`/workflows/${encodeURIComponent(workflow.name)}/runs`, { method: "POST", body: { input: body }, starts: true });
        location.hash = `#workflow/${view.run_id}`;
      } catch (e) { error.textContent = e.message; }
    } }, "Start");
    list.append(h("article", { class: "card" }, h("h3", {}, workflow.name),
      h("p", { class: "meta" }, workflow.description || ""),
      h("label", { for: id }, "Input (JSON)"), input, error, h("div", { class: "actions" }, start)));
  }
}

export async function renderWorkflowRun(main, runId) {
  const badge = h("span", { class: "status", "data-testid": "workflow-status" }, "…");
  const steps = h("ol", { class: "steps", "aria-label": "finished steps" });
  const active = h("p", { class: "meta", "aria-live": "polite" });
  const approvals = h("div", {});
  const outcome = h("div", { role: "status" });
  main.replaceChildren(h("h2", {}, "Workflow run"), h("p", { class: "meta" }, `run ${runId} · `, badge), active, steps,
    approvals, outcome);
  const shown = new Set();
  let token = null;
  for (;;) {
    let view;
    try {
      view = await api(`/workflows/runs/${encodeURIComponent(runId)}`, { query: { continuation_token: token, wait_seconds: 5 } });
    } catch (e) { outcome.textContent = e.message; return; }
    if (!main.contains(badge)) return; // navigated away
    badge.textContent = view.status.replace("_", " ");
    badge.className = `status ${view.status}`;
    const step = view.active_step;
    active.textContent = step ? `Now: ${step.id}${step.waiting_for_approval ? " (waiting for approval)" : ""}` : "";
    steps.replaceChildren(...(view.steps || []).map((s) => h("li", {}, `${s.step} (${s.kind}): ${s.status}`,
      ...(s.run_ids || []).map((r) => [" ", h("a", { href: `#run/${r}` }, `run ${r.slice(0, 8)}`)]))));
    for (const approval of view.pending_approvals || []) {
      if (shown.has(approval.approval_id)) continue;
      shown.add(approval.approval_id);
      approvals.append(approvalCard({ ...approval, run_id: runId }));
    }
    token = view.continuation_token;
    if (FINAL.has(view.status)) {
      approvals.replaceChildren();
      if (view.error) outcome.replaceChildren(h("p", { class: "error" }, `${view.error.code}: ${view.error.message}`));
      if (view.output) outcome.replaceChildren(h("pre", {}, pretty(view.output)));
      return;
    }
  }
}
