// The schedules of one batch type: when each fires, its next and last run and the
// last run's task; pause, resume and run now. Re-read when the type's queue counts
// change (a tick enqueues a task) and by the Refresh button.

import { aborted, api, seg } from "../api.js";
import { PANEL_MIN_MS, onChange } from "../refresh.js";
import { h, mount, note, fmtDuration, table } from "../render.js";

/** Periods shown in the largest unit they are a whole number of. */
const UNITS = [
  [86400, "d"],
  [3600, "h"],
  [60, "m"],
];

function every(seconds) {
  const s = Number(seconds);
  for (const [size, unit] of UNITS) {
    if (s >= size && s % size === 0) return `every ${s / size}${unit}`;
  }
  return `every ${s}s`;
}

function timing(s) {
  return s.cron !== null && s.cron !== undefined ? `${s.cron} (${s.timezone})` : every(s.every_seconds);
}

/** Local date and time of a unix time, and how far it is from now. */
function moment(unixSeconds) {
  if (unixSeconds === null || unixSeconds === undefined) return "—";
  const t = Number(unixSeconds);
  const local = new Date(t * 1000).toLocaleString();
  const delta = t - Date.now() / 1000;
  return delta >= 0 ? `${local} (in ${fmtDuration(delta)})` : `${local} (${fmtDuration(-delta)} ago)`;
}

export function schedulesPanel(type) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const body = h("div", { "data-role": "schedules-list" });
  const base = `/automations/${seg(type)}/schedules`;
  let reads = 0;

  async function setEnabled(id, enabled) {
    try {
      await api(`${base}/${seg(id)}`, { method: "PATCH", body: { enabled } });
      mount(msg, note("ok", `${enabled ? "Resumed" : "Paused"} ${id}.`));
    } catch (err) {
      mount(msg, note("error", `${enabled ? "Resume" : "Pause"} ${id}: ${err.summary || err.message}`));
    }
    await refresh();
  }

  async function runNow(id) {
    try {
      const res = await api(`${base}/${seg(id)}/run`, { method: "POST" });
      mount(msg, note("ok", `Run of ${id} queued: task ${res.task_id}.`));
    } catch (err) {
      mount(msg, note("error", `Run ${id}: ${err.summary || err.message}`));
    }
    await refresh();
  }

  function button(action, label, onclick) {
    return h("button", { type: "button", class: "btn", "data-action": action, onclick }, label);
  }

  function row(s) {
    if (s.unreadable) {
      return h(
        "tr",
        { "data-schedule": s.id },
        h("td", { class: "mono" }, s.id),
        h("td", { colspan: 6, "data-role": "schedule-state" }, `cannot be read: ${s.error}`),
        h("td", {}),
      );
    }
    return h(
      "tr",
      { "data-schedule": s.id },
      h("td", { class: "mono" }, s.id),
      h("td", { class: "mono" }, timing(s)),
      h(
        "td",
        { "data-role": "schedule-state", title: s.last_error || "" },
        s.last_error ? `enqueues nothing: ${s.last_error}` : s.enabled ? "enabled" : "paused",
      ),
      h("td", {}, s.enabled ? moment(s.next_run) : "—"),
      h("td", {}, moment(s.last_run)),
      h("td", { class: "mono", "data-role": "schedule-task" }, s.last_task_id || "—"),
      h(
        "td",
        {},
        s.enabled
          ? button("pause", "Pause", () => setEnabled(s.id, false))
          : button("resume", "Resume", () => setEnabled(s.id, true)),
        " ",
        button("run", "Run now", () => runNow(s.id)),
      ),
    );
  }

  async function load(signal) {
    const mine = ++reads;
    let answer;
    try {
      answer = await api(base, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      if (mine === reads) mount(body, note("error", `Could not list the schedules: ${err.summary || err.message}`));
      return;
    }
    if (mine !== reads) return;
    const schedules = answer.schedules || [];
    if (!schedules.length) {
      mount(body, h("p", { class: "empty" }, "No schedule (declare Schedules on the class, or POST one)."));
      return;
    }
    mount(
      body,
      h(
        "div",
        { class: "scroll" },
        table(["schedule", "when", "state", "next run", "last run", "last task", ""], schedules.map(row), {
          class: "schedules",
        }),
      ),
      answer.next
        ? h("p", { class: "empty", "data-role": "schedules-more" },
            `The first ${schedules.length} schedules by id; \`fleet schedules ${type}\` lists them all.`)
        : null,
    );
  }

  const el = h(
    "section",
    { class: "panel span", id: "schedules" },
    h("h3", {}, "Schedules"),
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
