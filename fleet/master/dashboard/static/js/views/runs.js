// Runs: the list (newest first, paged) and one run's page (counters, progress,
// meters and budget, per type with links to its tasks by state, its callback task,
// pause, resume and cancel), both kept live by polling while open.

import { aborted, api, seg } from "../api.js";
import { STOP, poll, polledView } from "../refresh.js";
import { h, mount, note, fmtAgo, fmtDuration, fmtJSON, fmtNum, fmtPercent, table } from "../render.js";
import { taskHref, tasksHref } from "./tasks.js";
import { fmtMeter, metersLine } from "./costs.js";

const REFRESH_MS = 2000;
const PAGE = 50;
const COUNTERS = ["submitted", "pending", "running", "done", "dead", "cancelled", "expired", "duplicates"];
/** The task browser's state a run counter's tasks are listed in (a run counts its
 * scheduled tasks as pending: the browser's scheduled tab, next to pending, has them). */
const BROWSE = { pending: "pending", running: "processing", done: "done", dead: "dead" };
/** A crawl's meters, shown as its figures: [meter, label]. */
const CRAWL = [
  ["pages", "pages"],
  ["items", "items"],
  ["robots_skipped", "robots skipped"],
  ["not_modified", "not modified"],
  ["http_errors", "HTTP errors"],
];

/** Workers send meters every 2 s: an ended run's page reads it this many times more. */
const READS_AFTER_END = 3;
/** The states of a run that has not ended (fleet.core.runs.OPEN_STATES). */
const OPEN = ["running", "paused"];

/** The id of a run's callback task: fleet.core.runs.callback_task_id. */
export function callbackTaskId(runId) {
  return `run-${runId}-complete`;
}

/** The share of a run's submitted tasks that ended (done, dead, cancelled, expired). */
function ended(c) {
  return (c.done || 0) + (c.dead || 0) + (c.cancelled || 0) + (c.expired || 0);
}

/** A <progress> bar of ended / submitted, with the numbers as its text. */
export function runProgress(run) {
  const c = run.counters;
  const total = Math.max(c.submitted || 0, 1);
  const label = `${ended(c)} / ${c.submitted || 0}`;
  return h(
    "span",
    { class: "run-progress" },
    h("progress", { max: total, value: Math.min(ended(c), total), "aria-label": `ended ${label}` }),
    h("span", { class: "num" }, ` ${label}`),
  );
}

function stateBadge(state) {
  return h("span", { class: `badge run-${state}`, "data-state": state }, state);
}

/**
 * A budget as typed ("bytes=2e6, spend=50": METER=CAP, by commas) as the API's
 * object; null when empty (keep the budget).
 *
 * @throws {Error} naming the part that is not METER=CAP
 */
export function parseBudget(text) {
  const parts = String(text || "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (!parts.length) return null;
  const out = {};
  for (const part of parts) {
    const eq = part.indexOf("=");
    const name = eq === -1 ? "" : part.slice(0, eq).trim();
    const raw = eq === -1 ? "" : part.slice(eq + 1).trim();
    const cap = Number(raw);
    if (!name || !raw || !Number.isFinite(cap)) throw new Error(`"${part}" is not METER=CAP (e.g. bytes=5e9)`);
    out[name] = cap;
  }
  return out;
}

/** "bytes 1.00 MB (400.00 KB left) · spend 50.00 (12.00 left)" as spans (`data-cap`). */
function budgetLine(run) {
  const left = run.budget_left || {};
  return h(
    "p",
    { class: "meters", "data-role": "run-budget" },
    Object.entries(run.budget).map(([name, cap], i) => [
      i ? " · " : null,
      h(
        "span",
        { "data-cap": name },
        h("span", { class: "muted" }, `${name} `),
        fmtMeter(name, cap),
        name in left ? h("span", { class: "muted", "data-left": name }, ` (${fmtMeter(name, left[name])} left)`) : null,
      ),
    ]),
  );
}

/** A monitor's value or threshold as its kind reads: a duration, a rate, a count. */
function fmtMonitor(name, value) {
  if (value === null || value === undefined) return "—";
  if (name.endsWith("_seconds")) return fmtDuration(value);
  if (name.includes("rate")) return fmtPercent(Number(value));
  return fmtNum(value);
}

/** The run's monitors (docs/monitors.md): a row each, firing ones in the error style,
 * resolved ones muted; nothing for a run without monitors. */
function monitorsTable(run) {
  const monitors = run.monitors || [];
  if (!monitors.length) return null;
  const style = { firing: "error-text", resolved: "muted" };
  return [
    h("h3", {}, "Monitors"),
    table(
      ["monitor", "state", "value", "threshold", "since"],
      monitors.map((m) =>
        h(
          "tr",
          { "data-monitor": m.monitor, "data-state": m.state, class: style[m.state] || null },
          h("td", { class: "mono", "data-col": "monitor" }, m.monitor),
          h("td", { "data-col": "state" }, m.state === "firing" ? h("strong", {}, m.state) : m.state),
          h("td", { class: "num", "data-col": "value" }, fmtMonitor(m.monitor, m.value)),
          h("td", { class: "num", "data-col": "threshold" }, fmtMonitor(m.monitor, m.threshold)),
          h("td", { "data-col": "since", title: m.since ? new Date(m.since * 1000).toISOString() : "" }, fmtAgo(m.since)),
        ),
      ),
      { class: "monitors", "data-role": "run-monitors" },
    ),
  ];
}

function took(run) {
  const end = run.finished_at || Date.now() / 1000;
  return fmtDuration(end - run.created_at);
}

/** The runs list: "#/runs". */
export function runsView(root) {
  const list = h("div", { "data-role": "runs-list" });
  const more = h("div", {});
  const shown = [];
  let next = null;
  mount(
    root,
    h(
      "section",
      { class: "view", id: "runs" },
      h("h2", {}, "Runs"),
      h("p", { class: "muted" }, "The tasks of one job (a crawl, a batch), counted and ended once. Newest first."),
      list,
      more,
    ),
  );

  function render() {
    if (!shown.length) {
      mount(list, h("p", { class: "empty" }, "No run yet. Create one with POST /api/v1/runs or `fleet runs create`."));
      mount(more);
      return;
    }
    const rows = shown.map((r) =>
      h(
        "tr",
        { "data-run": r.run_id },
        h("td", {}, h("a", { href: `#/run/${seg(r.run_id)}`, class: "mono" }, r.run_id)),
        h("td", {}, r.name || h("span", { class: "muted" }, "—")),
        h("td", {}, stateBadge(r.state)),
        h("td", {}, runProgress(r)),
        h("td", { class: "num" }, String(r.counters.dead || 0)),
        h("td", { class: "num" }, String(r.counters.duplicates || 0)),
        h("td", {}, fmtAgo(r.created_at)),
        h("td", {}, took(r)),
      ),
    );
    mount(list, table(["run", "name", "state", "ended / submitted", "dead", "duplicates", "created", "took"], rows, { class: "runs" }));
    mount(
      more,
      next ? h("button", { type: "button", class: "btn", "data-action": "more-runs", onclick: () => loadMore() }, "Older runs") : null,
    );
  }

  async function loadMore() {
    try {
      const page = await api(`/runs?limit=${PAGE}&after=${seg(next)}`);
      shown.push(...page.runs);
      next = page.next;
      render();
    } catch (err) {
      mount(more, note("error", `Could not page runs: ${err.summary || err.message}`));
    }
  }

  async function update(signal) {
    // As many rows as are shown again (up to the API's page of 500), newest first.
    let page;
    try {
      page = await api(`/runs?limit=${Math.min(Math.max(PAGE, shown.length), 500)}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `Could not list runs: ${err.summary || err.message}`));
      return;
    }
    shown.splice(0, shown.length, ...page.runs);
    next = page.next;
    render();
  }

  return polledView(poll(update, { everyMs: REFRESH_MS }));
}

/** One run: "#/run/<id>". */
export function runView(root, runId) {
  const head = h("div", {});
  const body = h("div", { "data-role": "run-detail" });
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  // Drawn again only when the state changes: a poll keeps what is typed in the budget.
  const actions = h("div", { class: "actions run-actions", "data-role": "run-actions" });
  const budgetInput = h("input", {
    type: "text",
    id: "run-resume-budget",
    "data-role": "resume-budget",
    placeholder: "bytes=2e6, spend=50",
    "aria-label": "New budget (optional): METER=CAP, by commas; empty keeps the budget",
    title: "New budget (optional): METER=CAP, by commas; empty keeps the budget",
  });
  let actionsFor = null; // the state the actions were drawn for
  mount(
    root,
    h(
      "section",
      { class: "view", id: "run", "data-run": runId },
      h("p", {}, h("a", { href: "#/runs" }, "← Runs")),
      head,
      actions,
      msg,
      body,
    ),
  );

  async function cancel() {
    if (!window.confirm(`Cancel run ${runId}? Its pending tasks are dropped and its running ones stopped.`)) return;
    try {
      await api(`/runs/${seg(runId)}`, { method: "DELETE" });
      mount(msg, note("ok", "Run cancelled."));
    } catch (err) {
      mount(msg, note("error", `Cancel: ${err.summary || err.message}`));
    }
    refresher.now();
  }

  async function pause() {
    if (!window.confirm(`Pause run ${runId}? Its queued tasks wait until it is resumed; its running ones finish.`)) return;
    try {
      const run = await api(`/runs/${seg(runId)}/pause`, { method: "POST", body: {} });
      mount(msg, note("ok", "Run paused."));
      render(run);
    } catch (err) {
      mount(msg, note("error", `Pause: ${err.summary || err.message}`));
    }
    refresher.now();
  }

  async function resume() {
    let budget;
    try {
      budget = parseBudget(budgetInput.value);
    } catch (err) {
      mount(msg, note("error", `Resume: ${err.message}`));
      return;
    }
    const caps = budget ? ` with the budget ${Object.entries(budget).map(([m, c]) => `${m}=${c}`).join(", ")}` : "";
    if (!window.confirm(`Resume run ${runId}${caps}? Its waiting tasks are dispatched again.`)) return;
    try {
      const run = await api(`/runs/${seg(runId)}/resume`, { method: "POST", body: budget ? { budget } : {} });
      budgetInput.value = "";
      mount(msg, note("ok", "Run resumed."));
      render(run);
    } catch (err) {
      mount(msg, note("error", `Resume: ${err.summary || err.message}`));
    }
    refresher.now();
  }

  /** Pause while running; resume (with an optional new budget) while paused; cancel
   * until it ended. */
  function renderActions(state) {
    if (state === actionsFor) return;
    actionsFor = state;
    mount(
      actions,
      state === "running" ? h("button", { type: "button", class: "btn", "data-action": "pause-run", onclick: pause }, "Pause") : null,
      state === "paused"
        ? [
            h("label", { for: "run-resume-budget", class: "muted" }, "New budget (optional)"),
            budgetInput,
            h("button", { type: "button", class: "btn primary", "data-action": "resume-run", onclick: resume }, "Resume"),
          ]
        : null,
      OPEN.includes(state)
        ? h("button", { type: "button", class: "btn danger", "data-action": "cancel-run", onclick: cancel }, "Cancel run…")
        : null,
    );
  }

  function render(run) {
    mount(
      head,
      h("h2", {}, "Run ", h("span", { class: "mono" }, run.run_id), run.name ? ` — ${run.name}` : null, " ", stateBadge(run.state)),
      h(
        "p",
        {},
        runProgress(run),
        h("span", { class: "muted" }, ` created ${fmtAgo(run.created_at)}, ${run.finished_at ? `ended after ${took(run)}` : `${run.state === "paused" ? "open" : "running"} for ${took(run)}`}`),
      ),
      run.state === "paused"
        ? h(
            "p",
            { "data-role": "run-state" },
            h("strong", {}, "paused"),
            h("span", { "data-role": "paused-reason" }, ` — ${run.paused_reason || "no reason given"}`),
            run.paused_at ? h("span", { class: "muted" }, ` (${fmtAgo(run.paused_at)})`) : null,
          )
        : null,
    );
    renderActions(run.state);
    const counters = table(
      COUNTERS,
      [h("tr", { "data-role": "run-counters" }, COUNTERS.map((n) => h("td", { class: "num", "data-counter": n }, String(run.counters[n] || 0))))],
      { class: "counters" },
    );
    const types = Object.entries(run.by_type || {});
    const perType = types.length
      ? table(
          ["type", ...COUNTERS],
          types.map(([t, c]) =>
            h(
              "tr",
              { "data-type": t },
              h("td", {}, h("a", { href: `#/automation/${seg(t)}` }, t)),
              COUNTERS.map((n) =>
                h(
                  "td",
                  { class: "num", "data-col": n },
                  BROWSE[n]
                    ? h("a", { href: tasksHref(t, { state: BROWSE[n], run: run.run_id }), "data-browse": BROWSE[n], title: `${BROWSE[n]} tasks of ${t} in this run` }, String(c[n] || 0))
                    : String(c[n] || 0),
                ),
              ),
            ),
          ),
          { class: "by-type" },
        )
      : h("p", { class: "empty" }, "No task yet.");
    mount(
      body,
      h("h3", {}, "Counters"),
      counters,
      crawlFigures(run),
      monitorsTable(run),
      h("h3", {}, "Meters"),
      metersLine(run.meters, { "data-role": "run-meters" }),
      run.budget ? [h("h3", {}, "Budget"), budgetLine(run)] : null,
      h("h3", {}, "Per type"),
      perType,
      run.on_complete ? [h("h3", {}, "On complete"), callback(run), h("pre", { class: "payload" }, fmtJSON(run.on_complete))] : null,
    );
  }

  /** A crawl's figures (docs/crawling.md): its pages, items, duplicates, robots-skipped
   * and not-modified pages, from the run's meters; nothing for a run that is no crawl. */
  function crawlFigures(run) {
    const m = run.meters || {};
    if (!CRAWL.some(([name]) => m[name])) return null;
    const figures = [...CRAWL.map(([name, label]) => [name, label, m[name] || 0]), ["duplicates", "duplicates", run.counters.duplicates || 0]];
    return [
      h("h3", {}, "Crawl"),
      h(
        "dl",
        { class: "stats", "data-role": "run-crawl" },
        figures.map(([name, label, value]) => h("div", { class: "stat", "data-figure": name }, h("dt", {}, label), h("dd", {}, String(value)))),
      ),
    ];
  }

  /** The line about a run's callback task: pushed into its type when the run ends done. */
  function callback(run) {
    const type = run.on_complete.type;
    const id = callbackTaskId(run.run_id);
    if (run.state === "cancelled") return h("p", { class: "muted", "data-role": "callback" }, "Not pushed: the run was cancelled.");
    return h(
      "p",
      { "data-role": "callback" },
      "Callback task ",
      h("a", { href: taskHref(type, id), class: "mono", "data-role": "callback-task" }, id),
      ` of ${type}`,
      run.state === "running" ? h("span", { class: "muted" }, " (pushed when the run ends)") : null,
    );
  }

  async function update(signal) {
    let run;
    try {
      run = await api(`/runs/${seg(runId)}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(head, h("h2", {}, "Run ", h("span", { class: "mono" }, runId)));
      renderActions(null);
      mount(body, note("error", err.status === 404 ? "No such run (or it expired)." : err.status === 422 ? "No such run: that is not a run id." : err.summary || err.message));
      return;
    }
    render(run);
    // An ended run does not change any more: stop polling it (once its last meters,
    // sent by the workers every 2 s, are in). A paused one may be resumed.
    if (OPEN.includes(run.state)) return null;
    readsAfterEnd += 1;
    return readsAfterEnd > READS_AFTER_END ? STOP : null;
  }

  let readsAfterEnd = 0;
  const refresher = poll(update, { everyMs: REFRESH_MS });
  return polledView(refresher);
}
