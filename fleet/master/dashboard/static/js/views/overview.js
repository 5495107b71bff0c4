// Fleet overview: one card per automation type, updated on every snapshot.

import { seg } from "../api.js";
import { store, queueOf } from "../store.js";
import { h, mount, fmtDuration, fmtNum, fmtPercent, sparkline, note } from "../render.js";

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

/** The card of one automation type (also the header of its own page). */
export function typeCard(row, workers, series, { link = true } = {}) {
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
          ]
        : null,
    ),
    batch
      ? h(
          "div",
          { class: "charts" },
          h(
            "figure",
            {},
            sparkline(
              rates.map((r) => r.perSecond),
              { label: "completed per second", unit: "/s" },
            ),
            h("figcaption", {}, `throughput ${last ? fmtNum(last.perSecond, 1) : "—"}/s`),
          ),
          h(
            "figure",
            {},
            sparkline(
              rates.map((r) => (r.failureRate === null ? 0 : r.failureRate * 100)),
              { label: "failure rate", unit: " %", cls: "bad", min: 100 },
            ),
            h("figcaption", {}, `failures ${last ? fmtPercent(last.failureRate) : "—"}`),
          ),
        )
      : null,
  );
}

export function overviewView(root) {
  const body = h("div", { class: "cards" });
  const status = h("div", {});
  mount(
    root,
    h(
      "section",
      { class: "view", id: "overview" },
      h("h2", {}, "Fleet overview"),
      h("p", { class: "muted" }, "Rates are sampled in this tab every 2 s over the last three minutes."),
      status,
      body,
    ),
  );

  function update() {
    mount(status, store.error ? note("error", `Could not refresh: ${store.error.message}`) : null);
    if (!store.automations.length) {
      mount(body, h("p", { class: "empty" }, "No automation types yet: start a worker."));
      return;
    }
    mount(
      body,
      store.automations.map((row) => typeCard(row, store.workers, store.series.get(row.type))),
    );
  }

  return { update };
}
