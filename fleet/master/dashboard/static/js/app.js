// Entry point: sign-in, hash routing, live connection.

import { api, getToken, setToken, clearToken } from "./api.js";
import { connectEvents } from "./sse.js";
import { store } from "./store.js";
import { h, mount, note } from "./render.js";
import { overviewView } from "./views/overview.js";
import { workersView } from "./views/workers.js";
import { automationView } from "./views/automation.js";
import { poolsView } from "./views/pools.js";
import { proxiesView } from "./views/proxies.js";
import { identitiesView, identityPoolView } from "./views/identities.js";
import { runsView, runView } from "./views/runs.js";
import { taskView } from "./views/tasks.js";
import { errorGroupView } from "./views/errors.js";
import { webhooksView } from "./views/webhooks.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const live = document.getElementById("live");
const signOutBtn = document.getElementById("sign-out");

let view = null;
let stopEvents = null;

/** The task states a route may open a type's task browser at. */
const TASK_STATES = ["pending", "scheduled", "processing", "done", "dead"];

/**
 * The view a location hash names: "#/automation/<type>" and friends.
 *
 * A type's page may open its task browser at a state and a run's tasks:
 * "#/automation/<type>?state=done&run=<run id>" (both optional); the route then
 * carries `state` and `run`, and only then. A task's page may pick out one of its
 * attempts: "#/task/<type>/<id>?attempt=2" (the route's `attempt`). "#/identities" lists
 * the identity pools, "#/identities/<pool>" one pool (the route's `pool`).
 * "#/errors/<type>/<group>" is one error group of a type (the route's `type`, `group`).
 * "#/webhooks" lists the webhooks, "#/webhooks/<id>" opens one's deliveries (`hook`).
 */
export function parseRoute(hash) {
  const [path, query] = (hash || "").replace(/^#\/?/, "").split("?", 2);
  const parts = path.split("/");
  if (parts[0] === "automation" && parts[1]) {
    const r = { name: "automation", type: decodeURIComponent(parts[1]) };
    const q = new URLSearchParams(query || "");
    if (TASK_STATES.includes(q.get("state"))) r.state = q.get("state");
    if (q.get("run")) r.run = q.get("run");
    return r;
  }
  if (parts[0] === "task" && parts[1] && parts[2]) {
    const r = { name: "task", type: decodeURIComponent(parts[1]), task: decodeURIComponent(parts.slice(2).join("/")) };
    const attempt = Number(new URLSearchParams(query || "").get("attempt"));
    if (Number.isInteger(attempt) && attempt > 0) r.attempt = attempt;
    return r;
  }
  if (parts[0] === "run" && parts[1]) return { name: "runs", run: decodeURIComponent(parts[1]) };
  if (parts[0] === "errors" && parts[1] && parts[2]) {
    return { name: "errors", type: decodeURIComponent(parts[1]), group: decodeURIComponent(parts[2]) };
  }
  if (parts[0] === "webhooks") {
    return parts[1] ? { name: "webhooks", hook: decodeURIComponent(parts[1]) } : { name: "webhooks" };
  }
  if (parts[0] === "identities") {
    return parts[1] ? { name: "identities", pool: decodeURIComponent(parts[1]) } : { name: "identities" };
  }
  if (["workers", "pools", "proxies", "runs"].includes(parts[0])) return { name: parts[0] };
  return { name: "overview" };
}

function showSignIn(message) {
  if (view && view.destroy) view.destroy();
  view = null;
  nav.hidden = true;
  signOutBtn.hidden = true;
  live.hidden = true;
  const input = h("input", { id: "token", type: "password", name: "token", autocomplete: "off", spellcheck: "false", required: true });
  const msg = h("div", { "aria-live": "polite" }, message ? note("error", message) : null);
  const button = h("button", { type: "submit", class: "btn primary" }, "Sign in");
  mount(
    main,
    h(
      "section",
      { class: "view signin", id: "signin" },
      h("h2", {}, "Sign in"),
      h("p", { class: "muted" }, "Paste an API token (admin, read or scoped). It is kept in this tab only."),
      h(
        "form",
        {
          onsubmit: async (e) => {
            e.preventDefault();
            const token = input.value.trim();
            if (!token) return;
            button.disabled = true;
            try {
              await api("/automations", { token });
              setToken(token);
              input.value = "";
              start();
            } catch (err) {
              mount(msg, note("error", err.status === 401 ? "That token is not known to the master." : err.summary || err.message));
            } finally {
              button.disabled = false;
            }
          },
        },
        h("label", { for: "token" }, "Token"),
        input,
        msg,
        button,
      ),
    ),
  );
  input.focus();
}

function route() {
  if (!getToken()) return;
  if (view && view.destroy) view.destroy();
  const r = parseRoute(location.hash);
  for (const a of nav.querySelectorAll("a")) {
    a.classList.toggle("active", a.dataset.route === r.name);
  }
  if (r.name === "automation") view = automationView(main, r.type, { state: r.state, run: r.run });
  else if (r.name === "task") view = taskView(main, r.type, r.task, { attempt: r.attempt });
  else if (r.name === "errors") view = errorGroupView(main, r.type, r.group);
  else if (r.name === "workers") view = workersView(main);
  else if (r.name === "pools") view = poolsView(main);
  else if (r.name === "proxies") view = proxiesView(main);
  else if (r.name === "webhooks") view = webhooksView(main, r.hook);
  else if (r.name === "identities") view = r.pool ? identityPoolView(main, r.pool) : identitiesView(main);
  else if (r.name === "runs") view = r.run ? runView(main, r.run) : runsView(main);
  else view = overviewView(main);
  view.update();
}

function setLive(status) {
  live.dataset.status = status;
  live.textContent = { live: "live", connecting: "connecting…", offline: "offline", polling: "polling" }[status] || status;
}

function start() {
  nav.hidden = false;
  signOutBtn.hidden = false;
  live.hidden = false;
  store.start();
  if (stopEvents) stopEvents();
  stopEvents = connectEvents(
    (ev) => store.onServerEvent(ev),
    (status) => {
      setLive(status);
      store.setStatus(status); // live: frames only; otherwise the store polls
    },
  );
  route();
}

function stop() {
  store.stop();
  if (stopEvents) stopEvents();
  stopEvents = null;
}

store.addEventListener("update", () => {
  if (view) view.update();
});
window.addEventListener("hashchange", route);
window.addEventListener("fleet:unauthorized", (e) => {
  clearToken();
  stop();
  showSignIn(e.detail);
});
signOutBtn.addEventListener("click", () => {
  clearToken();
  stop();
  showSignIn("Signed out.");
});

if (getToken()) start();
else showSignIn();
