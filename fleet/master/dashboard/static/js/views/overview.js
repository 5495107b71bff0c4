// Fleet overview: one card per automation type, updated on every snapshot.

import { seg } from "../api.js";
import { store, queueOf } from "../store.js";
import { h, mount, fmtDuration, fmtNum, note } from "../render.js";
import { currentWindow, historyCharts, historyOf, refreshHistories, windowPicker } from "../history.js";

/** Workers up/total and slots busy/total of a type, from the worker list. */
export function typeTotals(row, workers) {
  const mine = workers.filter((w) => w.type === row.type);
  const up = mine.filter((w) => w.up);
  const counts = row.workers && typeof row.workers === "object" && !Array.isArray(row.workers) ? row.workers : null;
  return {
    up: counts && counts.up !== undefined ? counts.up : up.length,
    total: counts && counts.total !== undefined ? counts.total : mine.length,
    lagging: mine.filter((w) => w.lagging).length,
    busy: up.reduce((n, w) => n + ((w.slots && w.slots.busy) || 0), 0),
    slots: up.reduce((n, w) => n + ((w.slots && w.slots.total) || 0), 0),
  };
}

/** Pending counts per tier, each labelled as the CLI does: "high 2 · normal 0 · low 1". */
function pendingTiers(pending) {
  const parts = [];
  for (const tier of ["high", "normal", "low"]) {
    if (parts.length) parts.push(" · ");
    parts.push(h("span", { class: "tier", "data-tier": tier }, h("span", { class: "tier-label" }, tier), ` ${fmtNum(pending[tier])}`));
  }
  return parts;
}

function stat(label, value, attrs) {
  return h("div", { class: "stat", ...(attrs || {}) }, h("dt", {}, label), h("dd", {}, value));
}

/**
 * The card of one automation type (also the header of its own page): live counts,
 * the throughput this tab measures now, and the backend's history over `win`.
 */
export function typeCard(row, workers, series, { link = true, hist = null, win = "1h" } = {}) {
  const q = queueOf(row) || {};
  const pending = q.pending || {};
  const t = typeTotals(row, workers);
  const rates = series || [];
  const last = rates.length ? rates[rates.length - 1] : null;
  const batch = row.has_queue !== undefined ? row.has_queue : row.kind !== "ContinuousAutomation";
  const title = link
    ? h("a", { href: `#/automation/${seg(row.type)}`, class: "type-link" }, row.type)
    : h("span", {}, row.type);
  return h(
    "article",
    { class: "card type-card", "data-type": row.type },
    h("header", {}, h("h3", {}, title), h("span", { class: "kind" }, row.kind || "")),
    h(
      "dl",
      { class: "stats" },
      stat("workers up", `${t.up} / ${t.total}`, { "data-stat": "workers", class: t.up ? "stat" : "stat warn" }),
      stat("slots busy", `${t.busy} / ${t.slots}`, { "data-stat": "slots" }),
      t.lagging ? stat("lagging", String(t.lagging), { class: "stat warn", "data-stat": "lagging" }) : null,
      batch
        ? [
            stat("pending", pendingTiers(pending), {
              "data-stat": "pending",
              title: "pending tasks per priority tier: high (priority > 0) · normal (0) · low (< 0)",
            }),
            stat("processing", fmtNum(q.processing), { "data-stat": "processing" }),
            stat("scheduled", fmtNum(q.scheduled), { "data-stat": "scheduled" }),
            stat("dead", fmtNum(q.dead), { "data-stat": "dead", class: q.dead ? "stat bad" : "stat" }),
            stat("oldest pending", q.oldest_pending_age ? fmtDuration(q.oldest_pending_age) : "—", {
              "data-stat": "oldest",
            }),
            stat("throughput now", last ? `${fmtNum(last.perSecond, 1)}/s` : "—", {
              "data-stat": "rate",
              title: "completed per second, measured by this tab every 2 s",
            }),
          ]
        : null,
    ),
    batch ? historyCharts(hist, win) : null,
  );
}

export function overviewView(root) {
  const body = h("div", { class: "cards" });
  const status = h("div", {});
  const picker = h("div", {});
  mount(
    root,
    h(
      "section",
      { class: "view", id: "overview" },
      h("div", { class: "view-head" }, h("h2", {}, "Fleet overview"), picker),
      h("p", { class: "muted" }, "Charts: the backend's history of each type over the window chosen. Throughput now: sampled in this tab every 2 s."),
      status,
      body,
    ),
  );

  function update() {
    const win = currentWindow();
    mount(picker, windowPicker(() => update()));
    mount(status, store.error ? note("error", `Could not refresh: ${store.error.message}`) : null);
    if (!store.automations.length) {
      mount(body, h("p", { class: "empty" }, "No automation types yet: start a worker."));
      return;
    }
    const batch = store.automations.filter((row) => (row.has_queue !== undefined ? row.has_queue : row.kind !== "ContinuousAutomation"));
    refreshHistories(batch.map((row) => row.type), win, update);
    mount(
      body,
      store.automations.map((row) =>
        typeCard(row, store.workers, store.series.get(row.type), { hist: historyOf(row.type, win), win }),
      ),
    );
  }

  return { update };
}
