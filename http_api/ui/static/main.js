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
  const mode = health.auth_mode || "none";
  if (health.principal_picker) {
    // devhost only: stand in for the sign-in App Service Authentication does on Azure.
    const input = h("input", { id: "principal", value: devPrincipal(), placeholder: "name+Role.One,Role.Two", size: 24 });
    const apply = h("button", { type: "button", onclick: () => { setDevPrincipal(input.value.trim()); route(); } }, "Act as");
    box.replaceChildren(h("label", { for: "principal" }, "Principal (devhost)"), input, apply);
  } else if (mode === "easyauth") {
    const me = await fetch("/.auth/me", { credentials: "same-origin" }).then((r) => (r.ok ? r.json() : [])).catch(() => []);
    if (!Array.isArray(me) || !me.length) {
      location.href = `/.auth/login/aad?post_login_redirect_uri=${encodeURIComponent(location.pathname + location.hash)}`;
      return;
    }
    box.replaceChildren(`Signed in as ${me[0].user_id}`, " · ", h("a", { href: "/.auth/logout" }, "Sign out"));
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
