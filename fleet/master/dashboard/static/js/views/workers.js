// Workers: state, host and hardware, slots, generations, browser pools; drain/resume/forget.

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

function actions(w, msg) {
  const base = `/automations/${seg(w.type)}/workers/${seg(w.worker_id)}`;
  const draining = w.draining_requested || w.state === "DRAINING";
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
    h(
      "button",
      {
        type: "button",
        class: "btn danger",
        onclick: () => {
          if (!window.confirm(`Forget worker ${w.worker_id} of ${w.type}? A live worker registers again.`)) return;
          act(msg, `Forget ${w.worker_id}`, () => api(base, { method: "DELETE" }));
        },
      },
      "Forget",
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

/** Table of workers; `withType` adds the type column, `msg` takes action outcomes. */
export function workersTable(workers, msg, { withType = true } = {}) {
  // the browsers column only where some worker has a browser pool
  const withBrowsers = workers.some((w) => Array.isArray(w.browser_pools) && w.browser_pools.length);
  const headers = [
    ...(withType ? ["type"] : []),
    "worker",
    "state",
    "last seen",
    "host",
    "hardware",
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
      h(
        "td",
        { "data-col": "state" },
        stateBadge(w.state),
        !w.up && w.reported_state ? h("small", { class: "muted" }, ` last ${w.reported_state}`) : null,
      ),
      h("td", { title: w.last_seen ? new Date(w.last_seen * 1000).toISOString() : "" }, fmtAgo(w.last_seen)),
      h("td", {}, w.host || "—", w.pid ? h("small", { class: "muted" }, ` pid ${w.pid}`) : null),
      h("td", {}, hardwareText(w.hardware)),
      h("td", { class: "num", "data-col": "slots" }, `${(w.slots && w.slots.busy) || 0} / ${(w.slots && w.slots.total) || 0}`),
      genCell(w),
      withBrowsers ? browsersCell(w) : null,
      h("td", { class: "error-text", "data-col": "last_error" }, w.last_error || ""),
      h("td", {}, actions(w, msg)),
    ),
  );
  return table(headers, rows, { class: "workers" });
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
    mount(body, workersTable(store.workers, msg));
  }

  return { update };
}
