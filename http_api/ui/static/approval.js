// One approval as a card: the call and its arguments, an argument editor (the tool's schema is checked by the API,
// and its error is shown here), approve / reject with a reason, and the time left. It offers what the API says the
// caller may do (`decidable`, `editable`; an older app says neither: everything is offered, as before).
import { api, h, pretty, ApiError } from "./api.js";
import { fieldsView } from "./values.js";

const countdowns = new Set();
setInterval(() => { for (const tick of countdowns) tick(); }, 1000);

function timeLeft(expiresAt) {
  const ms = new Date(expiresAt) - Date.now();
  if (Number.isNaN(ms)) return "";
  if (ms <= 0) return "expired";
  const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60), ss = s % 60;
  return d ? `${d}d ${hh}h left` : hh ? `${hh}h ${mm}m left` : `${mm}m ${String(ss).padStart(2, "0")}s left`;
}

export function approvalCard(approval, { onDecided } = {}) {
  const id = approval.approval_id;
  const runId = approval.run_id;
  const errorBox = h("p", { class: "error", role: "alert", id: `err-${id}` });
  const editor = h("textarea", { id: `args-${id}`, rows: 8, "aria-describedby": `err-${id}`, spellcheck: "false" },
    pretty(approval.arguments || {}));
  const editorWrap = h("div", { hidden: true }, h("label", { for: `args-${id}` }, "Arguments (JSON)"), editor);
  const editToggle = h("button", { type: "button", "aria-expanded": "false", "aria-controls": `args-${id}`,
    onclick: () => {
      const open = editorWrap.hidden;
      editorWrap.hidden = !open;
      editToggle.setAttribute("aria-expanded", String(open));
      editToggle.textContent = open ? "Keep the original arguments" : "Edit arguments";
      if (open) editor.focus();
    } }, "Edit arguments");
  const reason = h("input", { id: `reason-${id}`, type: "text", maxlength: "2000", autocomplete: "off" });
  const countdown = h("span", { class: "meta", "aria-label": "time left" });
  const tick = () => { countdown.textContent = approval.expires_at ? ` · ${timeLeft(approval.expires_at)}` : ""; };
  tick();
  countdowns.add(tick);
  const approveButton = h("button", { type: "button", class: "primary", onclick: () => decide("approve") }, "Approve");
  const rejectButton = h("button", { type: "button", class: "danger", onclick: () => decide("reject") }, "Reject");
  const decidable = approval.decidable !== false;
  const editable = decidable && approval.editable !== false;
  const card = h("article", { class: "card approval", "data-approval-id": id, "aria-labelledby": `title-${id}` },
    h("h3", { id: `title-${id}` }, `${approval.tool} `,
      h("span", { class: "meta" }, decidable ? "needs your approval" : "waits for an approver")),
    h("p", { class: "meta" }, approval.agent ? `${approval.agent} · ` : "",
      h("a", { href: `#run/${runId}` }, `run ${runId.slice(0, 8)}`), countdown,
      approval.escalated_to ? ` · escalated to ${approval.escalated_to}` : ""),
    fieldsView(approval.arguments || {}, { label: "arguments" }),
    ...(decidable ? [
      ...(editable ? [editToggle, editorWrap] : []),
      h("label", { for: `reason-${id}` }, "Reason (shown to the agent when you reject)"), reason,
      errorBox,
      h("div", { class: "actions" }, approveButton, rejectButton),
    ] : [h("p", { class: "meta", role: "status" }, "Not yours to decide now (another approver's, or past its deadline).")]));

  async function decide(decision) {
    errorBox.textContent = "";
    const body = { decision };
    if (decision === "reject" && reason.value.trim()) body.reason = reason.value.trim();
    if (decision === "approve" && !editorWrap.hidden) {
      try { body.arguments = JSON.parse(editor.value); }
      catch (e) { errorBox.textContent = `Not valid JSON: ${e.message}`; editor.focus(); return; }
    }
    approveButton.disabled = rejectButton.disabled = true;
    try {
      const decided = await api(`/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(id)}`,
        { method: "POST", body });
      countdowns.delete(tick);
      card.replaceChildren(h("p", { class: decided.status === "approved" ? "ok" : "warn", role: "status" },
        `${approval.tool}: ${decided.status}. `, h("a", { href: `#run/${runId}` }, "Follow the run")));
      onDecided?.(decided);
    } catch (e) {
      approveButton.disabled = rejectButton.disabled = false;
      if (e instanceof ApiError && e.code === "invalid_arguments") {
        errorBox.textContent = `The tool refuses these arguments: ${e.message}`;
        editor.focus();
      } else {
        errorBox.textContent = e.message;
        if (e instanceof ApiError && [409, 410].includes(e.status)) approveButton.disabled = rejectButton.disabled = true;
      }
    }
  }
  return card;
}
