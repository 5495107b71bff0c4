// Workers: state, host and hardware, slots, generations, browser pools; drain and
// resume a live one, forget one that is down.
//
// A worker process registers once per type it runs (one `fleet dev` runs several
// types under one id): the workers page groups those rows by process (worker id,
// its host and pid), hosts together; a type's page lists its own rows.

import { api, seg } from "../api.js";
import { store } from "../store.js";
import { h, mount, fmtAgo, fmtBytes, fmtDuration, stateBadge, note, table } from "../render.js";

function hardwareText(hw) {
  if (!hw) return "—";
  const parts = [];
  if (hw.cpu_count) parts.push(`${hw.cpu_count} CPU`);
  if (hw.memory_bytes) parts.push(fmtBytes(hw.memory_bytes));
  if (hw.python) parts.push(`Python ${hw.python}`);
  if (hw.platform) parts.push(hw.platform);
  return parts.join(" · ") || "—";
}

/** Count of a pool's stats field, "—" when the frame has none. */
function count(pool, key) {
  const v = pool[key];
  return v === null || v === undefined || !Number.isFinite(Number(v)) ? "—" : String(v);
}

/** One browser pool of a worker's stats frame, on one line. */
function browserPoolLine(pool) {
  const details = [
    `launched ${count(pool, "launched")}`,
    `acquired ${count(pool, "acquired")}`,
    `launch failures ${count(pool, "launch_failures")}`,
    `last launch ${fmtDuration(pool.launch_seconds_last)}`,
    `max uses ${count(pool, "max_uses")}`,
  ].join(" · ");
  return h(
    "div",
    { class: "browser-pool", "data-engine": String(pool.engine ?? ""), title: details },
    h("span", { class: "badge" }, String(pool.engine ?? "?")),
    ` ${count(pool, "warm")} / ${count(pool, "size")} warm · `,
    h("span", { "data-stat": "in_use" }, `${count(pool, "in_use")} in use`),
    " · ",
    h("span", { "data-stat": "retired" }, `${count(pool, "retired")} retired`),
    " · ",
    h("span", { "data-stat": "crashed" }, `${count(pool, "crashed")} crashed`),
    h("small", { class: "muted", "data-stat": "launch" }, ` · launch ${fmtDuration(pool.launch_seconds_avg)} avg`),
    pool.error ? h("div", { class: "error-text" }, String(pool.error)) : null,
  );
}

/** The "browsers" cell: one line per pool the worker reports. */
function browsersCell(w) {
  const pools = Array.isArray(w.browser_pools) ? w.browser_pools : [];
  return h("td", { "data-col": "browsers" }, pools.length ? pools.map(browserPoolLine) : "—");
}

/** Run an admin action and report its outcome in `msg`. */
async function act(msg, label, fn) {
  mount(msg, note("info", `${label}…`));
  try {
    await fn();
    mount(msg, note("ok", `${label}: done.`));
    store.refreshSoon(0);
  } catch (err) {
    mount(msg, note("error", `${label}: ${err.summary || err.message}`));
  }
}

/** Forget the records of `rows` (one worker's types), after asking. */
function forget(msg, rows) {
  const id = rows[0].worker_id;
  const types = rows.map((w) => w.type).join(", ");
  if (!window.confirm(`Forget worker ${id} (${types})? Its rows go until it registers again.`)) return;
  act(msg, `Forget ${id}`, () => Promise.all(rows.map((w) => api(`/automations/${seg(w.type)}/workers/${seg(w.worker_id)}`, { method: "DELETE" }))));
}

/** Drain or resume a live worker's type; forget one that is down (`forgettable`). */
function actions(w, msg, { forgettable = true } = {}) {
  const base = `/automations/${seg(w.type)}/workers/${seg(w.worker_id)}`;
  const draining = w.draining_requested || w.state === "DRAINING";
  if (!w.up) {
    // A worker that is down takes no command: it can only be forgotten (a live one
    // would register again at its next heartbeat, so it is not offered one).
    return h(
      "div",
      { class: "actions" },
      forgettable ? h("button", { type: "button", class: "btn danger", "data-action": "forget", onclick: () => forget(msg, [w]) }, "Forget") : null,
    );
  }
  return h(
    "div",
    { class: "actions" },
    draining
      ? h(
          "button",
          { type: "button", class: "btn", onclick: () => act(msg, `Resume ${w.worker_id}`, () => api(`${base}/resume`, { method: "POST" })) },
          "Resume",
        )
      : h(
          "button",
          { type: "button", class: "btn", onclick: () => act(msg, `Drain ${w.worker_id}`, () => api(`${base}/drain`, { method: "POST" })) },
          "Drain",
        ),
  );
}

/** Generation cell: "applied / desired", marked when the worker lags. */
export function genCell(w) {
  const gen = w.gen || {};
  return h(
    "td",
    { class: w.lagging ? "gen lagging" : "gen", "data-col": "gen", title: "applied / desired" },
    `${gen.applied ?? "—"} / ${gen.desired ?? "—"}`,
    w.lagging ? h("span", { class: "badge warn" }, "lagging") : null,
  );
}

/** The cells of one worker's row after its name cells (state … actions). */
function rowCells(w, msg, withBrowsers, opts) {
  return [
    h(
      "td",
      { "data-col": "state" },
      stateBadge(w.state),
      !w.up && w.reported_state ? h("small", { class: "muted" }, ` last ${w.reported_state}`) : null,
    ),
    h("td", { title: w.last_seen ? new Date(w.last_seen * 1000).toISOString() : "" }, fmtAgo(w.last_seen)),
    h(
      "td",
      { class: "num", "data-col": "slots" },
      `${(w.slots && w.slots.busy) || 0} / ${(w.slots && w.slots.total) || 0}`,
      // slots: "auto": the count the worker chose and the signal that held it.
      w.autoslots
        ? h(
            "small",
            { class: "muted", "data-stat": "autoslots", title: `min ${w.autoslots.min_slots} · max ${w.autoslots.max_slots}` },
            ` auto ${w.autoslots.slots ?? "?"} (${w.autoslots.limit ?? "?"})`,
          )
        : null,
    ),
    genCell(w),
    withBrowsers ? browsersCell(w) : null,
    h("td", { class: "error-text", "data-col": "last_error" }, w.last_error || ""),
    h("td", {}, actions(w, msg, opts)),
  ];
}

function hasBrowsers(workers) {
  return workers.some((w) => Array.isArray(w.browser_pools) && w.browser_pools.length);
}

/** Table of workers; `withType` adds the type column, `msg` takes action outcomes. */
export function workersTable(workers, msg, { withType = true } = {}) {
  // the browsers column only where some worker has a browser pool
  const withBrowsers = hasBrowsers(workers);
  const headers = [
    ...(withType ? ["type"] : []),
    "worker",
    "host",
    "hardware",
    "state",
    "last seen",
    "slots busy / total",
    "config gen",
    ...(withBrowsers ? ["browsers"] : []),
    "last error",
    "",
  ];
  const rows = workers.map((w) =>
    h(
      "tr",
      { class: w.lagging ? "lagging" : w.up ? "" : "down", "data-worker": w.worker_id, "data-type": w.type },
      withType ? h("td", {}, h("a", { href: `#/automation/${seg(w.type)}` }, w.type)) : null,
      h("td", { class: "mono" }, w.worker_id),
      h("td", {}, w.host || "—", w.pid ? h("small", { class: "muted" }, ` pid ${w.pid}`) : null),
      h("td", {}, hardwareText(w.hardware)),
      rowCells(w, msg, withBrowsers),
    ),
  );
  return table(headers, rows, { class: "workers" });
}

/**
 * The workers by process: one group per worker id (a process registers once per
 * type it runs), hosts together. A group's head row names the process (id, host,
 * pid, hardware, how many of its types are up) and offers "Forget" once every one
 * of its rows is down; below it one row per type (drain or resume while up).
 */
export function processesTable(workers, msg) {
  const groups = new Map();
  for (const w of workers) {
    if (!groups.has(w.worker_id)) groups.set(w.worker_id, []);
    groups.get(w.worker_id).push(w);
  }
  const ordered = [...groups.values()]
    .map((rows) => rows.slice().sort((a, b) => a.type.localeCompare(b.type)))
    .sort((a, b) => String(a[0].host || "").localeCompare(String(b[0].host || "")) || a[0].worker_id.localeCompare(b[0].worker_id));
  const withBrowsers = hasBrowsers(workers);
  const headers = ["type", "state", "last seen", "slots busy / total", "config gen", ...(withBrowsers ? ["browsers"] : []), "last error", ""];
  const bodies = ordered.map((rows) => {
    const first = rows[0];
    const up = rows.filter((w) => w.up).length;
    const pid = rows.map((w) => w.pid).find(Boolean);
    const seen = Math.max(...rows.map((w) => Number(w.last_seen) || 0));
    const head = h(
      "tr",
      { class: up ? "process" : "process down", "data-role": "process" },
      h(
        "th",
        { scope: "rowgroup", colspan: String(headers.length - 1) },
        h("span", { class: "mono", "data-role": "process-id" }, first.worker_id),
        h("span", { class: "muted" }, " on "),
        h("span", { "data-role": "host" }, first.host || "unknown host"),
        pid ? h("small", { class: "muted", "data-role": "pid" }, ` pid ${pid}`) : null,
        h("small", { class: "muted" }, ` · ${hardwareText(first.hardware)}`),
        h("small", { class: "muted", "data-role": "process-up" }, ` · ${up} of ${rows.length} type${rows.length === 1 ? "" : "s"} up`),
        up ? null : h("small", { class: "muted" }, ` · last seen ${fmtAgo(seen || null)}`),
      ),
      h(
        "td",
        {},
        up
          ? null
          : h("div", { class: "actions" }, h("button", { type: "button", class: "btn danger", "data-action": "forget", onclick: () => forget(msg, rows) }, "Forget")),
      ),
    );
    const typeRows = rows.map((w) =>
      h(
        "tr",
        { class: w.lagging ? "lagging" : w.up ? "" : "down", "data-worker": w.worker_id, "data-type": w.type },
        h("td", {}, h("a", { href: `#/automation/${seg(w.type)}` }, w.type)),
        rowCells(w, msg, withBrowsers, { forgettable: false }),
      ),
    );
    return h("tbody", { "data-process": first.worker_id, "data-host": first.host || "", "data-up": String(up) }, head, typeRows);
  });
  return h(
    "div",
    { class: "table-wrap" },
    h("table", { class: "workers processes" }, h("thead", {}, h("tr", {}, headers.map((c) => h("th", { scope: "col" }, c)))), bodies),
  );
}

export function workersView(root) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", {});
  mount(
    root,
    h("section", { class: "view", id: "workers" }, h("h2", {}, "Workers"), msg, body),
  );

  function update() {
    if (!store.workers.length) {
      mount(body, h("p", { class: "empty" }, "No worker has registered yet."));
      return;
    }
    const processes = new Set(store.workers.map((w) => w.worker_id)).size;
    const hosts = new Set(store.workers.map((w) => w.host || "")).size;
    mount(
      body,
      h("p", { class: "muted", "data-role": "workers-count" }, `${processes} worker process${processes === 1 ? "" : "es"} on ${hosts} host${hosts === 1 ? "" : "s"}, ${store.workers.length} type registration${store.workers.length === 1 ? "" : "s"}.`),
      processesTable(store.workers, msg),
    );
  }

  return { update };
}
