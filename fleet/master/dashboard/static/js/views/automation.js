// One automation type, in the order an operator reads it: summary, its tasks (the
// queue by state, dead ones among them, replayed or deleted there), the output tail
// and the submit form, groups and schedules, its costs, its domains and their proxy
// tiers, its workers, then its schemas and last its config editor.

import { aborted, api, seg } from "../api.js";
import { STOP, poll } from "../refresh.js";
import { store, queueOf } from "../store.js";
import { buildForm } from "../schemaform.js";
import { entrySchemas } from "../schemas.js";
import { h, mount, note, fmtJSON, fmtTime } from "../render.js";
import { typeCard } from "./overview.js";
import { currentWindow, historyOf, refreshHistories, windowPicker } from "../history.js";
import { workersTable } from "./workers.js";
import { configEditor } from "./config_editor.js";
import { taskHref, taskLink, tasksPanel } from "./tasks.js";
import { groupsPanel } from "./groups.js";
import { schedulesPanel } from "./schedules.js";
import { domainsPanel } from "./domains.js";
import { errorsPanel } from "./errors.js";
import { costsPanel } from "./costs.js";

/** Most output entries kept in the tail. */
const TAIL = 100;
/** How long the submit form follows a submitted task's state. */
const TRACK_MS = 60_000;

/** A task's latest progress report as " · 40% step 3/7" ("" without one). */
function progressText(progress) {
  if (!progress) return "";
  const parts = [];
  if (typeof progress.fraction === "number") parts.push(`${Math.round(progress.fraction * 100)}%`);
  if (progress.message) parts.push(progress.message);
  return parts.length ? ` · ${parts.join(" ")}` : "";
}

function submitPanel(type, entry) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const payload = buildForm(entry.queue.payload, { idPrefix: "task" });
  const options = buildForm(
    {
      type: "object",
      properties: {
        priority: { type: "integer", title: "priority", default: 0, description: ">0 high tier, <0 low tier" },
        delay_seconds: { anyOf: [{ type: "number", minimum: 0 }, { type: "null" }], title: "delay (s)" },
        max_attempts: { anyOf: [{ type: "integer", minimum: 1 }, { type: "null" }], title: "max attempts" },
      },
    },
    { idPrefix: "opt" },
  );
  const button = h("button", { type: "submit", class: "btn primary" }, "Submit task");
  const tracker = h("p", { class: "muted", "data-role": "task-state", "aria-live": "polite" });
  let tracking = null;

  /** Follow the submitted task's state for a while (queued → processing → done/dead). */
  function track(taskId) {
    if (tracking) tracking.stop();
    const deadline = Date.now() + TRACK_MS;
    tracking = poll(async (signal) => {
      let st;
      try {
        st = await api(`/automations/${seg(type)}/tasks/${seg(taskId)}`, { signal });
      } catch (err) {
        if (aborted(err)) throw err;
        return STOP;
      }
      tracker.textContent = `Task ${taskId}: ${st.state}${st.attempt ? ` (attempt ${st.attempt})` : ""}${progressText(st.progress)}${st.outputs_total ? ` · ${st.outputs_total} output${st.outputs_total === 1 ? "" : "s"}` : ""}${st.last_error ? ` — ${st.last_error}` : ""}`;
      const ended = ["done", "dead", "cancelled", "unknown"].includes(st.state);
      return ended || Date.now() >= deadline ? STOP : null;
    }, { everyMs: 1000 });
  }

  async function submit() {
    payload.clearErrors();
    options.clearErrors();
    let body;
    try {
      body = { payload: payload.read(), ...options.read() };
    } catch (err) {
      mount(msg, note("error", err.message));
      return;
    }
    for (const k of ["delay_seconds", "max_attempts"]) if (body[k] === null) delete body[k];
    button.disabled = true;
    try {
      const res = await api(`/automations/${seg(type)}/tasks`, { method: "POST", body });
      mount(msg, note("ok", `Task ${res.task_id} ${res.duplicate ? "was already submitted" : "queued"}.`));
      track(res.task_id);
      store.refreshSoon(0);
    } catch (err) {
      if (err.status === 422) {
        const detail = err.fieldErrors;
        const inPayload = detail.filter((e) => (e.loc || [])[1] === "payload");
        const rest = [
          ...payload.showErrors(inPayload, ["body", "payload"]),
          ...options.showErrors(detail.filter((e) => !inPayload.includes(e)), ["body"]),
        ];
        mount(msg, note("error", rest.length ? rest.join("; ") : "The master refused the task: see the fields marked in red."));
      } else {
        mount(msg, note("error", err.summary || err.message));
      }
    } finally {
      button.disabled = false;
    }
  }

  const el = h(
    "section",
    { class: "panel", id: "submit" },
    h("h3", {}, "Submit a task"),
    h(
      "form",
      { novalidate: true, onsubmit: (e) => { e.preventDefault(); submit(); } },
      h("fieldset", {}, h("legend", {}, "payload"), payload.el),
      h("details", { class: "options" }, h("summary", {}, "options"), options.el),
      msg,
      tracker,
      button,
    ),
  );
  return {
    el,
    stop() {
      if (tracking) tracking.stop();
    },
  };
}

function tailPanel(type) {
  const list = h("ul", { class: "tail", "data-role": "tail" });
  const empty = h("p", { class: "empty" }, "Waiting for output…");
  const seen = new Set();

  function add(entry) {
    if (!entry || (entry.id && seen.has(entry.id))) return;
    if (entry.id) seen.add(entry.id);
    empty.hidden = true;
    const item = h(
      "li",
      { "data-entry": entry.id || "" },
      h(
        "div",
        { class: "tail-meta" },
        fmtTime(entry.ts),
        " · ",
        h("span", { class: "mono" }, entry.worker_id || "?"),
        // The task and attempt that emitted it (entries written before issue 42 have neither).
        entry.task_id ? [" · task ", taskLink(type, entry.task_id)] : null,
        entry.task_id && entry.attempt
          ? [" · ", h("a", { href: taskHref(type, entry.task_id, entry.attempt), "data-role": "entry-attempt" }, `attempt ${entry.attempt}`)]
          : null,
      ),
      h("pre", { class: "payload" }, fmtJSON(entry.payload)),
    );
    // Newest first; ids sort by time, so an entry re-read late (after a
    // reconnect) still lands in its place.
    const older = entry.id ? [...list.children].find((li) => li.dataset.entry && li.dataset.entry < entry.id) : null;
    if (older) older.before(item);
    else if (entry.id && list.children.length) list.append(item);
    else list.prepend(item);
    while (list.children.length > TAIL) list.lastElementChild.remove();
  }

  async function load() {
    try {
      const entries = await api(`/automations/${seg(type)}/output?n=20&newest=true`);
      entries.forEach(add);
    } catch (err) {
      list.before(note("error", `Could not peek the output: ${err.summary || err.message}`));
    }
  }

  const el = h(
    "section",
    { class: "panel", id: "tail" },
    h("h3", {}, "Output (live)"),
    h("p", { class: "muted" }, "The newest retained entries, then every new emit as it happens (newest first)."),
    empty,
    list,
  );
  return { el, add, load };
}

/** A type's page: "#/automation/<type>", its task browser at `state` and `run` if given. */
export function automationView(root, type, { state, run } = {}) {
  const head = h("div", {});
  const msg = h("div", {});
  const grid = h("div", { class: "panels" });
  const workersHost = h("div", {});
  const workerMsg = h("div", { class: "messages", "aria-live": "polite" });
  const schemas = h("div", {});
  const configHost = h("div", {});
  mount(
    root,
    h(
      "section",
      { class: "view", id: "automation", "data-type": type },
      h("p", {}, h("a", { href: "#/overview" }, "← overview")),
      head,
      msg,
      grid,
      h("section", { class: "panel wide" }, h("h3", {}, "Workers"), workerMsg, workersHost),
      h("section", { class: "panel wide", id: "schemas" }, h("h3", {}, "Schemas"), schemas),
      configHost,
    ),
  );
  let editor = null;
  let submit = null;
  let groups = null;
  let schedules = null;
  let tail = null;
  let tasks = null;
  let domains = null;
  let costs = null;
  let errors = null;

  async function build() {
    let entry;
    try {
      entry = await store.entry(type);
    } catch (err) {
      mount(msg, note("error", `Unknown automation ${type}: ${err.summary || err.message}`));
      return;
    }
    if (entry.queue) {
      tasks = tasksPanel(type, { state, run });
      grid.append(tasks.el);
    }
    if (entry.stream) {
      tail = tailPanel(type);
      grid.append(tail.el);
      tail.load();
    }
    if (entry.queue) {
      submit = submitPanel(type, entry);
      grid.append(submit.el);
      groups = groupsPanel(type);
      grid.append(groups.el);
      schedules = schedulesPanel(type);
      grid.append(schedules.el);
    }
    // Any type may fetch through ctx.http: what it spent, its domains and their tiers.
    costs = costsPanel(type);
    grid.append(costs.el);
    domains = domainsPanel(type);
    grid.append(domains.el);
    // Any type may fail: its failures grouped by kind, with snapshots (docs/errors.md).
    errors = errorsPanel(type);
    grid.append(errors.el);
    editor = configEditor(type);
    editor.el.classList.add("wide");
    mount(configHost, editor.el);
    mount(schemas, entrySchemas(entry));
    update();
  }

  function update() {
    const row = store.automations.find((r) => r.type === type);
    const win = currentWindow();
    refreshHistories([type], win, update);
    mount(
      head,
      h("div", { class: "view-head" }, h("span", {}), windowPicker(() => update())),
      row ? typeCard(row, store.workers, store.series.get(type), { link: false, hist: historyOf(type, win), win }) : h("h2", {}, type),
    );
    const workers = store.workersOf(type);
    mount(workersHost, workers.length ? workersTable(workers, workerMsg, { withType: false }) : h("p", { class: "empty" }, "No worker runs this type."));
    if (editor) editor.update();
    if (tasks) {
      // Any move of a task changes one of these: reload the page of tasks shown (the
      // monotonic dead counter moves on every new death, even when the number of dead
      // tasks stays the same: one replayed, another died).
      const q = queueOf(row) || {};
      const c = q.counters || {};
      tasks.update(`${q.pending_total}:${q.scheduled}:${q.processing}:${q.dead}:${c.submitted}:${c.completed}:${c.dead}`, {
        pending: q.pending_total,
        scheduled: q.scheduled,
        processing: q.processing,
        dead: q.dead,
      });
    }
    if (groups) {
      const q = queueOf(row) || {};
      const c = q.counters || {};
      groups.update(`${q.pending_total}:${q.processing}:${c.completed}:${c.throttled}`);
    }
    if (schedules) {
      // A tick or a run now submits a task (the schedule's last run moves with it).
      const q = queueOf(row) || {};
      const c = q.counters || {};
      schedules.update(`${c.submitted}:${q.pending_total}:${q.processing}:${c.completed}`);
    }
  }

  function onEmit(ev) {
    if (tail && ev.detail.type === type) tail.add(ev.detail.entry);
  }
  function onResync() {
    if (tail) tail.load(); // emits made before the event stream was live
  }
  store.addEventListener("emit", onEmit);
  store.addEventListener("resync", onResync);
  build();

  return {
    update,
    destroy() {
      store.removeEventListener("emit", onEmit);
      store.removeEventListener("resync", onResync);
      for (const panel of [tasks, groups, schedules, submit, costs, domains, errors]) if (panel) panel.stop();
    },
  };
}
