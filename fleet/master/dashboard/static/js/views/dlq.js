// The dead-letter queue inspector: peek, replay selected or all, drain.

import { aborted, api, seg } from "../api.js";
import { PANEL_MIN_MS, onChange } from "../refresh.js";
import { store } from "../store.js";
import { h, mount, note, fmtTime, table } from "../render.js";

const PEEK = 50;

export function dlqPanel(type) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "dead-list" });
  const base = `/automations/${seg(type)}/dead`;
  let peeks = 0;

  function selected() {
    return [...body.querySelectorAll("input[name=dead-pick]:checked")].map((box) => box.value);
  }

  async function run(label, fn) {
    try {
      const res = await fn();
      const counts = Object.entries(res || {}).map(([k, v]) => `${k} ${v}`);
      mount(msg, note("ok", `${label}: ${counts.join(", ") || "done"}.`));
    } catch (err) {
      mount(msg, note("error", `${label}: ${err.summary || err.message}`));
    }
    await refresh();
    store.refreshSoon(0);
  }

  const el = h(
    "section",
    { class: "panel span", id: "dlq" },
    h("h3", {}, "Dead letters"),
    h(
      "div",
      { class: "toolbar" },
      h("button", { type: "button", class: "btn", onclick: () => refresh() }, "Refresh"),
      h(
        "button",
        {
          type: "button",
          class: "btn",
          "data-action": "replay-selected",
          onclick: () => {
            const ids = selected();
            if (!ids.length) {
              mount(msg, note("info", "Select tasks to replay first."));
              return;
            }
            run("Replay", () => api(`${base}/replay`, { method: "POST", body: { task_ids: ids } }));
          },
        },
        "Replay selected",
      ),
      h(
        "button",
        { type: "button", class: "btn", "data-action": "replay-all", onclick: () => run("Replay all", () => api(`${base}/replay`, { method: "POST", body: {} })) },
        "Replay all",
      ),
      h(
        "button",
        {
          type: "button",
          class: "btn danger",
          "data-action": "drain",
          onclick: () => {
            if (!window.confirm(`Delete every dead task of ${type}? This cannot be undone.`)) return;
            run("Drain", () => api(base, { method: "DELETE" }));
          },
        },
        "Drain…",
      ),
    ),
    msg,
    body,
  );

  async function load(signal) {
    // Peeks can overlap (a new death while one is in flight): only the latest
    // may render, or a slow stale answer would hide the newest dead task.
    const mine = ++peeks;
    let dead;
    try {
      dead = await api(`${base}?n=${PEEK}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      if (mine === peeks) mount(body, note("error", `Could not peek the DLQ: ${err.summary || err.message}`));
      return;
    }
    if (mine !== peeks) return;
    const picked = new Set(selected());
    if (!dead.length) {
      mount(body, h("p", { class: "empty" }, "No dead tasks."));
      return;
    }
    const rows = dead.map((t) =>
      h(
        "tr",
        { "data-task": t.id },
        h("td", {}, h("input", { type: "checkbox", name: "dead-pick", value: t.id, checked: picked.has(t.id), "aria-label": `select ${t.id}` })),
        h("td", { class: "mono" }, t.id),
        h("td", { class: "num" }, `${t.attempt} / ${t.max_attempts}`),
        h("td", {}, fmtTime(t.failed_at)),
        h(
          "td",
          { class: "error-text" },
          t.last_error || "",
          t.traceback ? h("details", {}, h("summary", {}, "traceback"), h("pre", {}, t.traceback)) : null,
        ),
        h("td", { class: "payload-cell" }, h("pre", { class: "payload" }, JSON.stringify(t.payload))),
      ),
    );
    mount(
      body,
      h("p", { class: "muted" }, `${dead.length} oldest shown (up to ${PEEK}).`),
      h("div", { class: "scroll" }, table(["", "task", "attempts", "died", "last error", "payload"], rows, { class: "dead" })),
    );
  }

  /** Re-peek when `key` (the type's dead counts) changes, not on every snapshot. */
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
