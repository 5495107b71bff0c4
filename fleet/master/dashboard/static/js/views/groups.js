// The flow-control groups of one type: pending, running, effective limits,
// throttles; pause and resume. Re-read when the type's queue counts change
// (and by the Refresh button), one page of the busiest-first list.

import { aborted, api, seg } from "../api.js";
import { PANEL_MIN_MS, onChange } from "../refresh.js";
import { h, mount, note, fmtTime, table } from "../render.js";

/** Groups one read lists (the REST page size). */
const PAGE = 1000;
/** Rows shown: the busiest groups first. */
const SHOWN = 200;

function held(g) {
  if (g.paused) return "paused";
  if (g.throttled_until && g.throttled_until * 1000 > Date.now()) return `held until ${fmtTime(g.throttled_until)}`;
  return "";
}

function limit(value, own) {
  const text = value === null || value === undefined ? "—" : String(value);
  return own === null || own === undefined ? text : `${text} (own)`;
}

export function groupsPanel(type) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "groups-list" });
  const base = `/automations/${seg(type)}/groups`;
  let reads = 0;

  async function setPaused(name, paused) {
    try {
      const current = await api(`${base}/${seg(name)}`);
      const own = current.settings || {};
      await api(`${base}/${seg(name)}`, {
        method: "PUT",
        body: { concurrency: own.concurrency ?? null, rate: own.rate ?? null, paused },
      });
      mount(msg, note("ok", `${paused ? "Paused" : "Resumed"} ${name}.`));
    } catch (err) {
      mount(msg, note("error", `${paused ? "Pause" : "Resume"} ${name}: ${err.summary || err.message}`));
    }
    await refresh();
  }

  async function load(signal) {
    const mine = ++reads;
    let page;
    try {
      page = await api(`${base}?limit=${PAGE}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      if (mine === reads) mount(body, note("error", `Could not list the groups: ${err.summary || err.message}`));
      return;
    }
    if (mine !== reads) return;
    const d = page.defaults || {};
    const limits = h(
      "p",
      { class: "muted" },
      `Type limits per group: concurrency ${d.concurrency ?? "none"}, rate ${d.rate ?? "none"}.`,
    );
    if (!page.groups.length) {
      mount(body, limits, h("p", { class: "empty" }, "No task carries a group."));
      return;
    }
    const groups = [...page.groups].sort((a, b) => b.pending + b.running - (a.pending + a.running) || (a.group < b.group ? -1 : 1));
    const rows = groups.slice(0, SHOWN).map((g) => {
      const own = g.settings || {};
      return h(
        "tr",
        { "data-group": g.group },
        h("td", { class: "mono" }, g.group),
        h("td", { class: "num" }, String(g.pending)),
        h("td", { class: "num" }, String(g.running)),
        h("td", {}, limit(g.concurrency, own.concurrency)),
        h("td", {}, limit(g.rate, own.rate)),
        h("td", { "data-role": "group-state" }, held(g)),
        h(
          "td",
          {},
          h(
            "button",
            {
              type: "button",
              class: "btn",
              "data-action": g.paused ? "resume" : "pause",
              onclick: () => setPaused(g.group, !g.paused),
            },
            g.paused ? "Resume" : "Pause",
          ),
        ),
      );
    });
    const more = page.next ? " More groups exist: the busiest of the first 1,000 are shown (fleet groups pages through all)." : "";
    mount(
      body,
      limits,
      h("p", { class: "muted" }, `${Math.min(groups.length, SHOWN)} of ${groups.length} groups shown, busiest first.${more}`),
      h("div", { class: "scroll" }, table(["group", "pending", "running", "concurrency", "rate", "state", ""], rows, { class: "groups" })),
    );
  }

  const el = h(
    "section",
    { class: "panel span", id: "groups" },
    h("h3", {}, "Groups"),
    h("div", { class: "toolbar" }, h("button", { type: "button", class: "btn", onclick: () => refresh() }, "Refresh")),
    msg,
    body,
  );

  /** Re-read when `key` (the type's queue counts) changes, not on every snapshot. */
  // Reloaded when the type's counts move (at most once a PANEL_MIN_MS), at once
  // after an action of the user's.
  const loader = onChange(load, { minMs: PANEL_MIN_MS });
  function refresh() {
    loader.now();
  }
  function update(key) {
    loader.update(key);
  }
  function stop() {
    loader.stop();
  }

  return { el, update, refresh, stop };
}
