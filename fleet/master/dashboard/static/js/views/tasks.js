// Every task findable: the task browser of an automation page (by state, newest
// first, paged; search by id; dead letters replayed or deleted by selection) and
// one task's page (#/task/<type>/<id>).

import { aborted, api, seg } from "../api.js";
import { PANEL_MIN_MS, STOP, onChange, poll, polledView } from "../refresh.js";
import { store } from "../store.js";
import { h, mount, note, fmtAgo, fmtJSON, fmtTime, table } from "../render.js";

const STATES = ["pending", "scheduled", "processing", "dead"];
const PAGE = 50;

function taskLink(type, id) {
  return h("a", { href: `#/task/${seg(type)}/${seg(id)}`, class: "mono" }, id);
}

/** The task browser panel of one type's page. */
export function tasksPanel(type) {
  const base = `/automations/${seg(type)}`;
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "task-list" });
  const tabs = h("div", { class: "window-picker", role: "group", "aria-label": "task state" });
  const pager = h("div", { class: "toolbar" });
  const actions = h("div", { class: "toolbar" });
  let state = "pending";
  // Cursors of the pages before the one shown (null: the first page), for "Newer".
  let trail = [];
  let after = null; // the page shown: the `next` of the page before it (null: the first)
  let loads = 0;

  const search = h("input", { type: "search", name: "task-id", placeholder: "task id", "aria-label": "find a task by id", spellcheck: "false" });
  const el = h(
    "section",
    { class: "panel span", id: "tasks" },
    h("h3", {}, "Tasks"),
    h(
      "form",
      {
        class: "toolbar",
        role: "search",
        onsubmit: (e) => {
          e.preventDefault();
          const id = search.value.trim();
          if (id) location.hash = `#/task/${seg(type)}/${seg(id)}`;
        },
      },
      search,
      h("button", { type: "submit", class: "btn" }, "Find"),
    ),
    tabs,
    msg,
    actions,
    body,
    pager,
  );

  function selected() {
    return [...body.querySelectorAll("input[name=task-pick]:checked")].map((box) => box.value);
  }

  async function act(action) {
    const ids = selected();
    if (!ids.length) {
      mount(msg, note("info", `Select dead tasks to ${action} first.`));
      return;
    }
    if (action === "delete" && !window.confirm(`Delete ${ids.length} dead task(s) of ${type}? This cannot be undone.`)) return;
    try {
      const res = await api(`${base}/dead/selection`, { method: "POST", body: { ids, action } });
      const parts = [`${res.done.length} ${action === "replay" ? "replayed" : "deleted"}`];
      if (res.unknown.length) parts.push(`${res.unknown.length} no longer dead`);
      if (res.skipped.length) parts.push(`${res.skipped.length} skipped`);
      mount(msg, note("ok", `${action === "replay" ? "Replay" : "Delete"}: ${parts.join(", ")}.`));
    } catch (err) {
      mount(msg, note("error", `${action}: ${err.summary || err.message}`));
    }
    store.refreshSoon(0);
    load(after);
  }

  function renderTabs() {
    mount(
      tabs,
      STATES.map((s) =>
        h(
          "button",
          {
            type: "button",
            class: s === state ? "btn small active" : "btn small",
            "data-state": s,
            "aria-pressed": s === state ? "true" : "false",
            onclick: () => {
              state = s;
              trail = [];
              mount(msg);
              load(null);
            },
          },
          s,
        ),
      ),
    );
    mount(
      actions,
      state === "dead"
        ? [
            h("button", { type: "button", class: "btn", "data-action": "replay-picked", onclick: () => act("replay") }, "Replay selected"),
            h("button", { type: "button", class: "btn danger", "data-action": "delete-picked", onclick: () => act("delete") }, "Delete selected…"),
          ]
        : null,
    );
  }

  async function load(from, signal) {
    const mine = ++loads;
    renderTabs();
    let page;
    try {
      const q = `state=${state}&limit=${PAGE}${from ? `&after=${encodeURIComponent(from)}` : ""}`;
      page = await api(`${base}/tasks?${q}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      if (mine === loads) mount(body, note("error", `Could not list ${state} tasks: ${err.summary || err.message}`));
      return;
    }
    if (mine !== loads) return;
    after = from;
    const dead = state === "dead";
    const picked = new Set(selected()); // a reload keeps what the user ticked
    if (!page.items.length) {
      mount(body, h("p", { class: "empty" }, from ? "No more tasks." : `No ${state} task.`));
    } else {
      const rows = page.items.map((t) => reuse(t, dead, picked) || remember(t, dead, h(
          "tr",
          { "data-task": t.id },
          dead ? h("td", {}, h("input", { type: "checkbox", name: "task-pick", value: t.id, checked: picked.has(t.id), "aria-label": `select ${t.id}` })) : null,
          h("td", {}, taskLink(type, t.id)),
          h("td", {}, h("span", { class: "tier", "data-tier": t.tier }, t.tier)),
          h("td", {}, t.group || h("span", { class: "muted" }, "—")),
          h("td", {}, t.run ? h("a", { href: `#/run/${seg(t.run)}`, class: "mono" }, t.run) : h("span", { class: "muted" }, "—")),
          h("td", { class: "num" }, String(t.attempt)),
          h("td", {}, fmtAgo(t.enqueued_at)),
          h(
            "td",
            {},
            state === "scheduled" && t.ready_at ? `ready ${fmtTime(t.ready_at)}` : state === "processing" && t.deadline ? `lease to ${fmtTime(t.deadline)}` : "",
            t.last_error ? h("span", { class: "error-text" }, t.last_error) : null,
          ),
        )),
      );
      drawn = new Map(rows.map((tr) => [tr.dataset.task, tr]));
      const head = [...(dead ? [""] : []), "task", "tier", "group", "run", "attempt", "submitted", "note"];
      mount(body, h("div", { class: "scroll" }, table(head, rows, { class: "tasks" })));
    }
    mount(
      pager,
      trail.length
        ? h(
            "button",
            {
              type: "button",
              class: "btn",
              "data-action": "newer",
              onclick: () => load(trail.pop()),
            },
            "← Newer",
          )
        : null,
      page.next
        ? h(
            "button",
            {
              type: "button",
              class: "btn",
              "data-action": "older",
              onclick: () => {
                trail.push(from);
                load(page.next);
              },
            },
            "Older →",
          )
        : null,
    );
  }

  // Rows drawn by the last load, by task id: a reload keeps the row of a task whose
  // line did not change (the element itself: no redraw, its checkbox as it was).
  let drawn = new Map();
  const signature = (t, dead) => JSON.stringify([dead, t.tier, t.group, t.run, t.attempt, t.enqueued_at, t.ready_at, t.deadline, t.last_error]);
  function remember(t, dead, tr) {
    tr.dataset.sig = signature(t, dead);
    return tr;
  }
  function reuse(t, dead, picked) {
    const tr = drawn.get(t.id);
    if (!tr || tr.dataset.sig !== signature(t, dead)) return null;
    const box = tr.querySelector("input[name=task-pick]");
    if (box) box.checked = picked.has(t.id);
    return tr;
  }

  // Reloaded when the type's counts move (at most once a PANEL_MIN_MS: a busy type
  // does not reload it on every frame), at once when the user pages or picks a state.
  const loader = onChange((signal) => load(after, signal), { minMs: PANEL_MIN_MS });
  function update(key) {
    loader.update(key);
  }
  function stop() {
    loader.stop();
  }

  return { el, update, stop };
}

function field(label, value, attrs) {
  return [h("dt", {}, label), h("dd", attrs || {}, value === null || value === undefined || value === "" ? h("span", { class: "muted" }, "—") : value)];
}

/** How often a live task's page reads its record again. */
const TASK_REFRESH_MS = 2000;

/** Outputs a task's page draws at first, and how many more each "more" adds. */
const OUTPUTS_PAGE = 20;

/** One task's page: "#/task/<type>/<id>". */
export function taskView(root, type, taskId) {
  const base = `/automations/${seg(type)}/tasks/${seg(taskId)}`;
  const head = h("div", {});
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "task-detail" });
  mount(
    root,
    h(
      "section",
      { class: "view", id: "task", "data-task": taskId },
      h("p", {}, h("a", { href: `#/automation/${seg(type)}` }, `← ${type}`)),
      head,
      msg,
      body,
    ),
  );

  async function cancel() {
    if (!window.confirm(`Cancel task ${taskId}?`)) return;
    try {
      const res = await api(base, { method: "DELETE" });
      mount(msg, note("ok", `Cancel: ${res.outcome}.`));
    } catch (err) {
      mount(msg, note("error", `Cancel: ${err.summary || err.message}`));
    }
    refresher.now();
  }

  let lastTask = null;

  function render(t) {
    lastTask = t;
    const live = ["queued", "scheduled", "processing"].includes(t.state);
    mount(
      head,
      h("h2", {}, "Task ", h("span", { class: "mono" }, taskId), " ", h("span", { class: `badge task-${t.state}`, "data-state": t.state }, t.state)),
      live ? h("button", { type: "button", class: "btn danger", "data-action": "cancel-task", onclick: cancel }, "Cancel task…") : null,
    );
    const progress = t.progress
      ? `${typeof t.progress.fraction === "number" ? `${Math.round(t.progress.fraction * 100)} % ` : ""}${t.progress.message || ""} (attempt ${t.progress.attempt})`
      : null;
    // The record holds a dead task's traceback, and ?payload=true its payload.
    const traceback = t.traceback;
    const payload = t.payload !== undefined && t.payload !== null ? t.payload : undefined;
    mount(
      body,
      h(
        "dl",
        { class: "fields" },
        field("type", h("a", { href: `#/automation/${seg(type)}` }, type)),
        field("attempts", `${t.attempt} / ${t.max_attempts ?? "default"}`, { "data-field": "attempts" }),
        field("priority", String(t.priority ?? 0)),
        field("group", t.group),
        field("run", t.run ? h("a", { href: `#/run/${seg(t.run)}`, class: "mono" }, t.run) : null),
        field("submitted", t.submitted_at ? `${fmtTime(t.submitted_at)} (${fmtAgo(t.submitted_at)})` : null),
        field("started", t.started_at ? fmtTime(t.started_at) : null),
        field("finished", t.finished_at ? fmtTime(t.finished_at) : null),
        field("ready at", t.ready_at ? fmtTime(t.ready_at) : null),
        field("lease until", t.deadline ? fmtTime(t.deadline) : null),
        field("progress", progress, { "data-field": "progress" }),
        field("trace id", t.trace_id ? h("span", { class: "mono" }, t.trace_id) : null, { "data-field": "trace" }),
      ),
      t.last_error
        ? h(
            "section",
            { class: "panel", "data-role": "error" },
            h("h3", {}, "Last error"),
            h("p", { class: "error-text" }, t.last_error),
            traceback ? h("details", { open: true }, h("summary", {}, "traceback"), h("pre", {}, traceback)) : null,
          )
        : null,
      h("h3", {}, "Payload"),
      payload !== undefined
        ? h("pre", { class: "payload", "data-role": "payload" }, fmtJSON(payload))
        : h("p", { class: "muted", "data-role": "payload" }, "Not kept: a finished task keeps its outputs, not its payload."),
      h("h3", {}, `Outputs (${t.outputs_total || 0})`),
      outputsPanel(t),
    );
  }

  // A record keeps up to 100 outputs: the page shows the newest OUTPUTS_PAGE of
  // them, and more on demand, so a task that emitted a lot stays quick to draw.
  let shownOutputs = OUTPUTS_PAGE;

  function outputsPanel(t) {
    const all = t.outputs || [];
    if (!all.length) return h("p", { class: "empty" }, "No output.");
    const newest = all.slice(-shownOutputs).reverse();
    const kept = all.length < (t.outputs_total || 0) ? ` The record keeps the newest ${all.length} of ${t.outputs_total}.` : "";
    return h(
      "div",
      { "data-role": "outputs" },
      h("p", { class: "muted", "data-role": "outputs-count" }, `Showing the newest ${newest.length} of ${all.length} kept.${kept}`),
      table(
        ["id", "time", "attempt", "payload"],
        newest.map((o) =>
          h(
            "tr",
            { "data-output": o.id },
            h("td", { class: "mono" }, o.id),
            h("td", {}, fmtTime(o.ts)),
            h("td", { class: "num" }, String(o.attempt)),
            h(
              "td",
              {},
              o.truncated
                ? h("p", { class: "muted", "data-role": "output-truncated" }, `${o.bytes} bytes: too big for the task's record, whole in the type's output stream.`)
                : h("pre", { class: "payload" }, fmtJSON(o.payload)),
            ),
          ),
        ),
        { class: "outputs" },
      ),
      newest.length < all.length
        ? h(
            "button",
            {
              type: "button",
              class: "btn",
              "data-action": "more-outputs",
              onclick: () => {
                shownOutputs += OUTPUTS_PAGE;
                render(lastTask);
              },
            },
            `Show ${Math.min(OUTPUTS_PAGE, all.length - newest.length)} more`,
          )
        : null,
    );
  }

  // The payload is read once (on Redis a pending one is searched for in its lists),
  // then kept while the page follows the task's state.
  let stored = null;

  async function update(signal) {
    let t;
    try {
      t = await api(stored === null ? `${base}?payload=true` : base, { signal });
      if (stored === null) stored = { payload: t.payload, group: t.group, run: t.run };
      else Object.assign(t, stored);
    } catch (err) {
      if (aborted(err)) throw err;
      mount(head, h("h2", {}, "Task ", h("span", { class: "mono" }, taskId)));
      mount(body, note("error", err.summary || err.message));
      return;
    }
    if (t.state === "unknown") {
      mount(head, h("h2", {}, "Task ", h("span", { class: "mono" }, taskId), " ", h("span", { class: "badge", "data-state": "unknown" }, "unknown")));
      mount(body, note("info", `No task ${taskId} of ${type}: never submitted, dropped by its ttl, or its finished record was pruned.`));
      return;
    }
    render(t);
    // A task that ended does not change any more (a replay makes it a new page load).
    return ["queued", "scheduled", "processing"].includes(t.state) ? null : STOP;
  }

  const refresher = poll(update, { everyMs: TASK_REFRESH_MS });
  return polledView(refresher);
}
