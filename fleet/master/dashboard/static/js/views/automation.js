// One automation type: summary, config editor, submit form, DLQ, output tail,
// its workers and its schemas.

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
import { dlqPanel } from "./dlq.js";
import { tasksPanel } from "./tasks.js";
import { groupsPanel } from "./groups.js";
import { schedulesPanel } from "./schedules.js";

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
      h("div", { class: "tail-meta" }, fmtTime(entry.ts), " · ", h("span", { class: "mono" }, entry.worker_id || "?")),
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
    { class: "panel span", id: "tail" },
    h("h3", {}, "Output (live)"),
    h("p", { class: "muted" }, "The newest retained entries, then every new emit as it happens (newest first)."),
    empty,
    list,
  );
  return { el, add, load };
}

export function automationView(root, type) {
  const head = h("div", {});
  const msg = h("div", {});
  const grid = h("div", { class: "panels" });
  const workersHost = h("div", {});
  const workerMsg = h("div", { class: "messages", "aria-live": "polite" });
  const schemas = h("div", {});
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
    ),
  );
  let editor = null;
  let submit = null;
  let dlq = null;
  let groups = null;
  let schedules = null;
  let tail = null;
  let tasks = null;

  async function build() {
    let entry;
    try {
      entry = await store.entry(type);
    } catch (err) {
      mount(msg, note("error", `Unknown automation ${type}: ${err.summary || err.message}`));
      return;
    }
    editor = configEditor(type);
    grid.append(editor.el);
    if (entry.queue) {
      submit = submitPanel(type, entry);
      grid.append(submit.el);
    }
    if (entry.stream) {
      tail = tailPanel(type);
      grid.append(tail.el);
      tail.load();
    }
    if (entry.queue) {
      groups = groupsPanel(type);
      grid.append(groups.el);
      schedules = schedulesPanel(type);
      grid.append(schedules.el);
      tasks = tasksPanel(type);
      grid.append(tasks.el);
      dlq = dlqPanel(type);
      grid.append(dlq.el);
    }
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
    if (dlq) {
      // The monotonic dead-letter counter changes on every new death, even when
      // the DLQ size stays the same (one replayed, another died).
      const q = queueOf(row) || {};
      dlq.update(`${q.dead}:${(q.counters || {}).dead}`);
    }
    if (tasks) {
      // Any move of a task changes one of these: reload the page of tasks shown.
      const q = queueOf(row) || {};
      const c = q.counters || {};
      tasks.update(`${q.pending_total}:${q.scheduled}:${q.processing}:${q.dead}:${c.submitted}:${c.completed}:${c.dead}`);
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
      for (const panel of [tasks, dlq, groups, schedules, submit]) if (panel) panel.stop();
    },
  };
}
