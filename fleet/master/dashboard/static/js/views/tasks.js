// Every task findable: the task browser of an automation page (by state, newest
// first, paged, optionally only one run's tasks; search by id; dead tasks replayed
// or deleted by selection, or all at once) and one task's page (#/task/<type>/<id>).

import { aborted, api, seg } from "../api.js";
import { PANEL_MIN_MS, STOP, onChange, poll, polledView } from "../refresh.js";
import { store } from "../store.js";
import { h, mount, note, fmtAgo, fmtDuration, fmtJSON, fmtTime, table } from "../render.js";

const STATES = ["pending", "scheduled", "processing", "done", "dead"];
const PAGE = 50;

export function taskLink(type, id) {
  return h("a", { href: `#/task/${seg(type)}/${seg(id)}`, class: "mono" }, id);
}

/**
 * The location of a type's page with its task browser at `state`, only the tasks
 * of `run` if given: "#/automation/<type>?state=done&run=<id>" (app.js parseRoute).
 */
export function tasksHref(type, { state, run } = {}) {
  const q = new URLSearchParams();
  if (state) q.set("state", state);
  if (run) q.set("run", run);
  const query = q.toString();
  return `#/automation/${seg(type)}${query ? `?${query}` : ""}`;
}

/** The time column of a state: what "when" means for its tasks. */
function whenOf(state, t) {
  if (state === "done") return { head: "finished", at: t.finished_at };
  if (state === "dead") return { head: "died", at: t.failed_at };
  return { head: "submitted", at: t.enqueued_at };
}

/**
 * The task browser panel of one type's page; `state` and `run` (from the route)
 * open it at a state and only that run's tasks.
 */
export function tasksPanel(type, opts = {}) {
  const base = `/automations/${seg(type)}`;
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "task-list" });
  const tabs = h("div", { class: "window-picker", role: "group", "aria-label": "task state" });
  const filter = h("div", { class: "toolbar filter", "data-role": "run-filter" });
  const pager = h("div", { class: "toolbar" });
  const actions = h("div", { class: "toolbar" });
  let state = STATES.includes(opts.state) ? opts.state : "pending";
  let run = opts.run || null;
  let counts = {}; // the type's tasks by state, from the snapshot (no run filter)
  // Cursors of the pages before the one shown (null: the first page), for "Newer".
  let trail = [];
  let after = null; // the page shown or asked for: the `next` of the page before it (null: the first)
  let loads = 0;

  const runInput = h("input", { type: "search", name: "run-id", placeholder: "run id", "aria-label": "list only the tasks of a run", spellcheck: "false" });
  const search = h("input", { type: "search", name: "task-id", placeholder: "task id", "aria-label": "find a task by id", spellcheck: "false" });
  const findForm = h(
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
  );
  const runForm = h(
    "form",
    {
      class: "toolbar",
      "data-role": "run-pick",
      onsubmit: (e) => {
        e.preventDefault();
        const id = runInput.value.trim();
        runInput.value = "";
        if (id) show(state, id);
      },
    },
    runInput,
    h("button", { type: "submit", class: "btn" }, "Only this run"),
  );
  const el = h(
    "section",
    { class: "panel span", id: "tasks", "data-state": state },
    h("h3", {}, "Tasks"),
    h("div", { class: "toolbar" }, findForm, runForm),
    tabs,
    filter,
    msg,
    actions,
    body,
    pager,
  );

  /** Show another state or run filter: first page, and the location says so (no reload). */
  function show(nextState, nextRun) {
    state = nextState;
    run = nextRun;
    el.dataset.state = state;
    trail = [];
    mount(msg);
    const plain = state === "pending" && !run;
    history.replaceState(null, "", plain ? tasksHref(type) : tasksHref(type, { state, run }));
    load(null);
  }

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

  /** Every dead task of the type at once: replay them all, or drain (delete) them. */
  async function actAll(label, call) {
    try {
      const res = await call();
      const said = Object.entries(res || {}).map(([k, v]) => `${k} ${v}`);
      mount(msg, note("ok", `${label}: ${said.join(", ") || "done"}.`));
    } catch (err) {
      mount(msg, note("error", `${label}: ${err.summary || err.message}`));
    }
    store.refreshSoon(0);
    load(null);
  }

  function renderTabs() {
    mount(
      tabs,
      STATES.map((s) => {
        // The snapshot counts a type's tasks, not a run's: no count under a run filter.
        const n = run ? undefined : counts[s];
        return h(
          "button",
          {
            type: "button",
            class: s === state ? "btn small active" : "btn small",
            "data-state": s,
            "aria-pressed": s === state ? "true" : "false",
            onclick: () => show(s, run),
          },
          s,
          Number.isFinite(n) ? h("span", { class: "tab-count", "data-count": s }, ` ${n}`) : null,
        );
      }),
    );
    filter.hidden = !run;
    mount(
      filter,
      run
        ? [
            h("span", {}, "Only the tasks of run ", h("a", { href: `#/run/${seg(run)}`, class: "mono", "data-role": "filter-run" }, run)),
            h("button", { type: "button", class: "btn small", "data-action": "clear-run", onclick: () => show(state, null) }, "× every run"),
          ]
        : null,
    );
    mount(
      actions,
      state === "dead"
        ? [
            h("button", { type: "button", class: "btn", "data-action": "replay-picked", onclick: () => act("replay") }, "Replay selected"),
            h("button", { type: "button", class: "btn danger", "data-action": "delete-picked", onclick: () => act("delete") }, "Delete selected…"),
            // All of the type's dead tasks, whatever the run filter: only offered without one.
            run
              ? null
              : h(
                  "button",
                  {
                    type: "button",
                    class: "btn",
                    "data-action": "replay-all",
                    onclick: () => actAll("Replay all", () => api(`${base}/dead/replay`, { method: "POST", body: {} })),
                  },
                  "Replay all",
                ),
            run
              ? null
              : h(
                  "button",
                  {
                    type: "button",
                    class: "btn danger",
                    "data-action": "drain",
                    onclick: () => {
                      if (!window.confirm(`Delete every dead task of ${type}? This cannot be undone.`)) return;
                      actAll("Drain", () => api(`${base}/dead`, { method: "DELETE" }));
                    },
                  },
                  "Drain…",
                ),
          ]
        : null,
    );
  }

  /** One task's line of a page of `st` tasks. */
  function taskRow(t, st, picked) {
    const when = whenOf(st, t);
    return h(
      "tr",
      { "data-task": t.id },
      st === "dead" ? h("td", {}, h("input", { type: "checkbox", name: "task-pick", value: t.id, checked: picked.has(t.id), "aria-label": `select ${t.id}` })) : null,
      h("td", {}, taskLink(type, t.id)),
      h("td", {}, h("span", { class: "tier", "data-tier": t.tier }, t.tier)),
      h("td", {}, t.group || h("span", { class: "muted" }, "—")),
      h("td", {}, t.run ? h("a", { href: `#/run/${seg(t.run)}`, class: "mono" }, t.run) : h("span", { class: "muted" }, "—")),
      h("td", { class: "num", "data-col": "attempt" }, String(t.attempt)),
      h("td", { "data-col": "when", title: when.at ? fmtTime(when.at) : "" }, when.at ? fmtAgo(when.at) : "—"),
      h(
        "td",
        {},
        st === "scheduled" && t.ready_at ? `ready ${fmtTime(t.ready_at)}` : st === "processing" && t.deadline ? `lease to ${fmtTime(t.deadline)}` : "",
        // A done task's last error is that of an attempt retried before it succeeded.
        t.last_error && st === "done" ? h("span", { class: "muted" }, `retried after: ${t.last_error}`) : null,
        t.last_error && st !== "done" ? h("span", { class: "error-text" }, t.last_error) : null,
      ),
    );
  }

  async function load(from, signal) {
    const mine = ++loads;
    // The page wanted from now on: a reload the snapshot asks for while this one is in
    // flight (a busy type) loads it again, not the page the user just left.
    after = from;
    renderTabs();
    const shownState = state;
    let page;
    try {
      const q = `state=${state}&limit=${PAGE}${run ? `&run=${encodeURIComponent(run)}` : ""}${from ? `&after=${encodeURIComponent(from)}` : ""}`;
      page = await api(`${base}/tasks?${q}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      if (mine === loads) mount(body, note("error", `Could not list ${state} tasks: ${err.summary || err.message}`));
      return;
    }
    if (mine !== loads) return;
    const picked = new Set(selected()); // a reload keeps what the user ticked
    const ofRun = run ? ` of run ${run}` : "";
    if (!page.items.length) {
      // A page filtered by run may be empty and still have a next one (the API reads a
      // bounded stretch of the state per page): then "Older" looks further.
      const text = page.next ? `No ${shownState} task${ofRun} in this stretch: look further with Older.` : from ? "No more tasks." : `No ${shownState} task${ofRun}.`;
      mount(body, h("p", { class: "empty" }, text));
    } else {
      const rows = page.items.map((t) => reuse(t, shownState, picked) || remember(t, shownState, taskRow(t, shownState, picked)));
      drawn = new Map(rows.map((tr) => [tr.dataset.task, tr]));
      const head = [...(shownState === "dead" ? [""] : []), "task", "tier", "group", "run", "attempt", whenOf(shownState, {}).head, "note"];
      mount(body, h("div", { class: "scroll" }, table(head, rows, { class: "tasks", "data-state": shownState })));
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
  const signature = (t, st) => JSON.stringify([st, t.tier, t.group, t.run, t.attempt, t.enqueued_at, t.ready_at, t.deadline, t.last_error, t.failed_at, t.finished_at]);
  function remember(t, st, tr) {
    tr.dataset.sig = signature(t, st);
    return tr;
  }
  function reuse(t, st, picked) {
    const tr = drawn.get(t.id);
    if (!tr || tr.dataset.sig !== signature(t, st)) return null;
    const box = tr.querySelector("input[name=task-pick]");
    if (box) box.checked = picked.has(t.id);
    return tr;
  }

  // Reloaded when the type's counts move (at most once a PANEL_MIN_MS: a busy type
  // does not reload it on every frame), at once when the user pages or picks a state.
  const loader = onChange((signal) => load(after, signal), { minMs: PANEL_MIN_MS });
  /** `key`: any move of the type's tasks; `byState`: its tasks by state for the tabs. */
  function update(key, byState) {
    if (byState && JSON.stringify(byState) !== JSON.stringify(counts)) {
      counts = byState;
      renderTabs();
    }
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

/** The location of a task's page; with `attempt`, that attempt picked out. */
export function taskHref(type, id, attempt) {
  return `#/task/${seg(type)}/${seg(id)}${Number.isInteger(attempt) && attempt > 0 ? `?attempt=${attempt}` : ""}`;
}

/** The table of a task's attempts, oldest first; `picked` (a number) marked. */
function attemptsTable(t, picked) {
  const attempts = Array.isArray(t.attempts) ? t.attempts : [];
  if (!attempts.length) return h("p", { class: "empty", "data-role": "attempts" }, "Not run yet.");
  const now = Date.now() / 1000;
  const rows = attempts.map((a) => {
    const end = a.ended_at || (a.outcome === "running" ? now : null);
    const took = a.started_at && end ? fmtDuration(end - a.started_at) : "—";
    const mine = a.attempt === picked;
    return h(
      "tr",
      { "data-attempt": String(a.attempt), "data-outcome": a.outcome, class: mine ? "picked" : null, "aria-current": mine ? "true" : null },
      h("td", { class: "num" }, String(a.attempt)),
      h("td", { class: "mono" }, a.worker || h("span", { class: "muted" }, "—")),
      h("td", { "data-col": "started" }, a.started_at ? fmtTime(a.started_at) : "—"),
      h("td", { "data-col": "ended" }, a.ended_at ? fmtTime(a.ended_at) : "—"),
      h("td", { class: "num", "data-col": "duration" }, a.outcome === "running" ? `${took} so far` : took),
      h("td", { "data-col": "outcome" }, h("span", { class: `badge outcome-${a.outcome}` }, a.outcome)),
      h("td", { class: "error-text", "data-col": "error" }, a.error || ""),
    );
  });
  return h(
    "div",
    { "data-role": "attempts" },
    t.attempt > attempts.length && attempts[0].attempt > 1
      ? h("p", { class: "muted" }, `The record keeps the newest ${attempts.length} of ${t.attempt} attempts.`)
      : null,
    table(["attempt", "worker", "started", "ended", "duration", "outcome", "error"], rows, { class: "attempts" }),
  );
}

/** One task's page: "#/task/<type>/<id>", with "?attempt=N" that attempt marked. */
export function taskView(root, type, taskId, { attempt } = {}) {
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
    // The start of its latest attempt (the record's own, else the newest attempt's).
    const tried = Array.isArray(t.attempts) ? t.attempts : [];
    const started = t.started_at || (tried.length ? tried[tried.length - 1].started_at : null);
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
        field("started", started ? fmtTime(started) : null, { "data-field": "started" }),
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
      h("h3", {}, "Attempts"),
      attemptsTable(t, attempt),
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
            h("td", { class: "num" }, o.attempt ? h("a", { href: taskHref(type, taskId, o.attempt), "data-role": "output-attempt" }, String(o.attempt)) : "—"),
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
  let scrolled = false;

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
    if (attempt && !scrolled) {
      // Opened at one attempt (an output's link): bring its row into view, once.
      const row = body.querySelector("tr[data-attempt].picked");
      if (row) {
        row.scrollIntoView({ block: "center" });
        scrolled = true;
      }
    }
    // A task that ended does not change any more (a replay makes it a new page load).
    return ["queued", "scheduled", "processing"].includes(t.state) ? null : STOP;
  }

  const refresher = poll(update, { everyMs: TASK_REFRESH_MS });
  return polledView(refresher);
}
