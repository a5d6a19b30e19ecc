// The approvals inbox: every pending approval the signed-in person may decide, across runs and workflows.
import { api, h } from "./api.js";
import { approvalCard } from "./approval.js";

export async function listInbox() {
  const items = [];
  let token;
  do {
    const page = await api("/approvals", { query: { status: "pending", continuation_token: token } });
    items.push(...(page.approvals || page.items || []));
    token = page.continuation_token;
  } while (token);
  return items;
}

export async function renderInbox(main) {
  const status = h("p", { class: "meta", role: "status" }, "Loading…");
  const list = h("div", { class: "inbox" });
  const refresh = h("button", { type: "button", onclick: () => renderInbox(main) }, "Refresh");
  main.replaceChildren(h("h2", {}, "Approvals waiting for you"), h("div", { class: "actions" }, refresh), status, list);
  try {
    const items = await listInbox();
    let waiting = items.length;
    const count = () => { status.textContent = waiting ? `${waiting} waiting` : "Nothing waits for your decision."; };
    count();
    // A decided card stays (with its outcome and a link to the run); the count follows what still waits.
    const onDecided = () => { waiting -= 1; count(); };
    for (const approval of items) list.append(approvalCard(approval, { onDecided }));
  } catch (e) {
    status.textContent = `Could not load the inbox: ${e.message}`;
    status.className = "error";
  }
}
