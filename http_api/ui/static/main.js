// The page: who is signed in (per the app's auth mode), the connection settings, and the sections by URL hash.
import { api, h, devPrincipal, setDevPrincipal, functionKey, setFunctionKey } from "./api.js";
import { renderInbox } from "./inbox.js";
import { renderChat } from "./chat.js";
import { renderRun } from "./runview.js";
import { renderWorkflows, renderWorkflowRun } from "./workflows.js";

const main = document.getElementById("main");

async function identity() {
  const box = document.getElementById("identity");
  let health = {};
  try { health = await api("/health"); } catch { /* the page still works; sections show their own errors */ }
  const mode = (health.auth && health.auth.mode) || health.auth_mode || "none";
  if (mode === "easyauth" && health.auth && health.auth.local_principal_picker) {
    // The server says no App Service Authentication can be in front (devhost, `func start`): pick who to act as;
    // this tab then sends the headers Easy Auth would add. On Azure the server never says so (the app refuses to
    // start with easyauth unless the platform's front is on, and that front strips such headers).
    const input = h("input", { id: "principal", value: devPrincipal(), placeholder: "name+Role.One,Role.Two", size: 24 });
    const apply = h("button", { type: "button", onclick: () => { setDevPrincipal(input.value.trim()); route(); } }, "Act as");
    box.replaceChildren(h("label", { for: "principal" }, "Principal (local host)"), input, apply);
    return;
  }
  setDevPrincipal("");
  const front = mode === "easyauth"
    ? await fetch("/.auth/me", { credentials: "same-origin" }).then((r) => (r.ok ? r.json() : null)).catch(() => null)
    : null;
  if (mode === "easyauth" && front === null) {
    box.textContent = "Sign-in is unavailable (App Service Authentication did not answer)";
  } else if (mode === "easyauth") {
    if (!Array.isArray(front) || !front.length) {
      location.href = `/.auth/login/aad?post_login_redirect_uri=${encodeURIComponent(location.pathname + location.hash)}`;
      return;
    }
    box.replaceChildren(`Signed in as ${front[0].user_id}`, " · ", h("a", { href: "/.auth/logout" }, "Sign out"));
  } else {
    box.textContent = mode === "none" ? "Anonymous (function key)" : `Auth: ${mode}`;
  }
}

function route() {
  const [section, id] = (location.hash.replace(/^#/, "") || "inbox").split("/");
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (section === "run" && id) renderRun(main, decodeURIComponent(id));
  else if (section === "workflow" && id) renderWorkflowRun(main, decodeURIComponent(id));
  else if (section === "chat") renderChat(main);
  else if (section === "workflows") renderWorkflows(main);
  else renderInbox(main);
}

document.getElementById("connection").addEventListener("submit", (event) => {
  event.preventDefault();
  setFunctionKey(event.target.key.value.trim());
  route();
});
document.getElementById("function-key").value = functionKey();
window.addEventListener("hashchange", route);
identity().then(route);
