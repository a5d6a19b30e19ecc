// The decision page of one approval (opened from a notification's link): the call, its arguments as readable text,
// the run's last messages, the expiry and who may decide; approve, reject with a reason, or approve edited arguments.
// Opening it decides nothing: only the buttons POST, through the decision route, with the approver's own sign-in.
import { api, h, pretty, ApiError, functionKey, setFunctionKey, devPrincipal, setDevPrincipal } from "./api.js";

const main = document.getElementById("main");
const runId = main.dataset.runId;
const approvalId = main.dataset.approvalId;

function argumentList(args) {
  const list = h("dl", { class: "arguments", "aria-label": "arguments" });
  for (const [name, value] of Object.entries(args || {})) {
    const text = typeof value === "string" ? value : pretty(value);
    const multiline = text.includes("\n");
    list.append(h("dt", {}, name), h("dd", {}, multiline ? h("pre", {}, text) : h("code", {}, text)));
  }
  return list;
}

function render(context) {
  const a = context.approval;
  const who = (a.escalated_to ? [a.escalated_to] : a.approvers).join(", ") +
    (a.separation_of_duties ? " (not the run's owner)" : "");
  const errorBox = h("p", { class: "error", role: "alert", id: "decide-error" });
  const reason = h("input", { id: "reason", type: "text", maxlength: "2000", autocomplete: "off" });
  const editor = h("textarea", { id: "edited", rows: 10, spellcheck: "false" }, pretty(a.arguments || {}));
  const editorWrap = h("details", {}, h("summary", {}, "Edit the arguments before approving"),
    h("label", { for: "edited" }, "Arguments (JSON)"), editor);
  const approve = h("button", { type: "button", class: "primary", onclick: () => decide("approve") }, "Approve");
  const reject = h("button", { type: "button", class: "danger", onclick: () => decide("reject") }, "Reject");
  const open = a.status === "pending" && a.decidable !== false; // an older app does not say `decidable`
  main.replaceChildren(
    h("h2", {}, `${a.tool} `, h("span", { class: "meta" }, open ? "needs a decision" : a.status)),
    h("p", { class: "meta" }, `${context.agent} · run ${runId} · `, h("span", { class: `status ${context.run_status}` },
      context.run_status)),
    h("dl", { class: "facts" },
      h("dt", {}, "Expires"), h("dd", { "data-testid": "expires" }, a.expires_at ? new Date(a.expires_at).toString() : "never"),
      h("dt", {}, "Who may decide"), h("dd", { "data-testid": "who" }, who)),
    h("h3", {}, "Arguments"), argumentList(a.arguments),
    h("h3", {}, "The run so far"),
    h("div", { class: "transcript", "aria-label": "last messages" },
      context.messages.map((m) => h("div", { class: `msg ${m.role}` }, m.text))),
    open ? h("section", { "aria-label": "decision" },
      h("h3", {}, "Your decision"), ...(a.editable === false ? [] : [editorWrap]),
      h("label", { for: "reason" }, "Reason (shown to the agent when you reject)"), reason,
      errorBox, h("div", { class: "actions" }, approve, reject))
      : h("p", { class: "warn", role: "status" }, a.status === "pending" ? notYours : decidedText(a)));

  async function decide(decision) {
    errorBox.textContent = "";
    const body = { decision };
    if (decision === "reject" && reason.value.trim()) body.reason = reason.value.trim();
    if (decision === "approve" && editorWrap.open) {
      try { body.arguments = JSON.parse(editor.value); }
      catch (e) { errorBox.textContent = `Not valid JSON: ${e.message}`; editor.focus(); return; }
    }
    approve.disabled = reject.disabled = true;
    try {
      const decided = await api(`/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}`,
        { method: "POST", body });
      main.querySelector("section[aria-label=decision]").replaceChildren(
        h("p", { class: decided.status === "approved" ? "ok" : "warn", role: "status" }, `${a.tool}: ${decided.status}.`));
    } catch (e) {
      approve.disabled = reject.disabled = false;
      errorBox.textContent = e.message;
      if (e instanceof ApiError && [409, 410].includes(e.status)) approve.disabled = reject.disabled = true;
    }
  }
}

const notYours = "You may not decide this approval now (another approver's, or past its deadline).";

function decidedText(a) {
  if (a.status === "expired") return "This approval has expired.";
  const who = a.decided_by_name || a.decided_by;
  return `Already ${a.status}${who ? ` by ${who}` : ""}${a.reason ? `: ${a.reason}` : ""}.`;
}

async function load() {
  try {
    render(await api(`/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}/context`));
  } catch (e) {
    const signIn = e instanceof ApiError && e.status === 401;
    main.replaceChildren(h("p", { class: "error", role: "alert" }, signIn
      ? "Sign in to decide this approval." : `This approval cannot be shown: ${e.message}`));
  }
}

const form = document.getElementById("decide-settings");
form.querySelector("#function-key").value = functionKey();
form.querySelector("#dev-principal").value = devPrincipal();
form.addEventListener("submit", (event) => {
  event.preventDefault();
  setFunctionKey(form.querySelector("#function-key").value.trim());
  setDevPrincipal(form.querySelector("#dev-principal").value.trim());
  load();
});
load();
