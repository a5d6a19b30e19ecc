// A small chat: pick an agent, write, watch the answer arrive; the next message continues the same session.
import { api, h } from "./api.js";
import { runPanel } from "./runview.js";

export async function renderChat(main) {
  const agentSelect = h("select", { id: "chat-agent" });
  const input = h("textarea", { id: "chat-input", rows: 3, placeholder: "Ask something… (Ctrl+Enter sends)" });
  const session = h("p", { class: "meta", "data-testid": "session" });
  const runs = h("div", { class: "runs" });
  const error = h("p", { class: "error", role: "alert" });
  let sessionId = null;
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const fresh = h("button", { type: "button", onclick: () => { sessionId = null; session.textContent = ""; runs.replaceChildren(); } },
    "New conversation");
  const form = h("form", { "aria-label": "chat", onsubmit: (event) => { event.preventDefault(); submit(); } },
    h("label", { for: "chat-agent" }, "Agent"), agentSelect,
    h("label", { for: "chat-input" }, "Message"), input, error,
    h("div", { class: "actions" }, send, fresh));
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit(); });
  main.replaceChildren(h("h2", {}, "Chat"), form, session, runs);
  try {
    const { agents } = await api("/agents");
    for (const agent of agents) agentSelect.append(h("option", { value: agent.name }, agent.name));
  } catch (e) { error.textContent = `Could not list the agents: ${e.message}`; }

  async function submit() {
    const text = input.value.trim();
    if (!text) { error.textContent = "Write a message first."; input.focus(); return; }
    error.textContent = "";
    send.disabled = true;
    try {
      const body = { input: text, ...(sessionId ? { session_id: sessionId } : {}) };
      const view = await api(`/agents/${encodeURIComponent(agentSelect.value)}/runs`, { method: "POST", body, starts: true });
      sessionId = view.session_id;
      agentSelect.disabled = true;
      session.textContent = `session ${sessionId}`;
      input.value = "";
      const panel = runPanel(view.run_id, { onDone: () => { send.disabled = false; input.focus(); } });
      runs.append(panel.element);
      panel.follow();
    } catch (e) {
      error.textContent = e.message;
      send.disabled = false;
    }
  }
}
