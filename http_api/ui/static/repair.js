// Repairing a finished run: rewind a failed one (the same run goes on from the step that failed) or fork any one
// (a new session with the conversation before it, and a run there with a new input or the same one).
import { api, h } from "./api.js";

export function repairActions(runId, status) {
  const note = h("p", { role: "status", class: "repair-note" });
  const rewind = h("button", { type: "button", "data-testid": "rewind", onclick: async () => {
    rewind.disabled = true;
    try {
      const body = await api(`/runs/${encodeURIComponent(runId)}/rewind`, { method: "POST", repeatable: false });
      note.textContent = `Going on from ${body.rewind.from_step.replace("_", " ")} (step ${body.rewind.iteration}).`;
      location.hash = `#run/${encodeURIComponent(runId)}`;
      dispatchEvent(new HashChangeEvent("hashchange")); // the same run: follow it again
    } catch (e) { note.textContent = e.message; rewind.disabled = false; }
  } }, "Rewind: go on from the failed step");
  const input = h("input", { id: `fork-input-${runId}`, name: "input", placeholder: "the same input again", size: 40 });
  const fork = h("form", { class: "fork", "data-testid": "fork", onsubmit: async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    try {
      const run = await api(`/runs/${encodeURIComponent(runId)}/fork`, { method: "POST", body: text ? { input: text } : {}, starts: true });
      location.hash = `#run/${encodeURIComponent(run.run_id)}`;
    } catch (e) { note.textContent = e.message; }
  } }, h("label", { for: input.id }, "Fork from before this run with "), input, " ", h("button", { type: "submit" }, "Fork"));
  const forkBox = h("details", { class: "fork-box" }, h("summary", {}, "Fork from here…"), fork);
  return h("div", { class: "repair" }, status === "failed" ? rewind : null, forkBox, note);
}
