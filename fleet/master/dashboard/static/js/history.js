// A type's history as the backend keeps it (GET /automations/{type}/history): the
// charts of the overview and automation pages read it, so they are full the moment
// a page opens and the same after a reload or on another master.

import { api, seg } from "./api.js";
import { h, fmtDuration, fmtNum, fmtPercent, sparkline } from "./render.js";

export const WINDOWS = ["1h", "24h", "30d"];
const WINDOW_KEY = "fleet.window";
/** How old a fetched window may get before a page's update fetches it again. */
const FRESH_MS = { "1h": 10_000, "24h": 60_000, "30d": 300_000 };

const cache = new Map(); // "type|win" -> {at, data | null, error | null}
const inflight = new Map();

/** The window the pages show (kept for the tab). */
export function currentWindow() {
  const w = sessionStorage.getItem(WINDOW_KEY);
  return WINDOWS.includes(w) ? w : "1h";
}

export function setWindow(w) {
  if (WINDOWS.includes(w)) sessionStorage.setItem(WINDOW_KEY, w);
}

/** The cached history of `type` over `win`: {step_seconds, points} or null. */
export function historyOf(type, win) {
  const hit = cache.get(`${type}|${win}`);
  return hit ? hit.data : null;
}

/**
 * Fetch the histories of `types` over `win` that are missing or stale; calls
 * `onLoaded` once if any arrived (the page renders again then).
 */
export async function refreshHistories(types, win, onLoaded) {
  const now = Date.now();
  const due = types.filter((t) => {
    const hit = cache.get(`${t}|${win}`);
    return !inflight.has(`${t}|${win}`) && (!hit || now - hit.at > FRESH_MS[win]);
  });
  if (!due.length) return;
  const loads = due.map((t) => {
    const key = `${t}|${win}`;
    const p = api(`/automations/${seg(t)}/history?window=${win}`)
      .then((data) => cache.set(key, { at: Date.now(), data, error: null }))
      .catch((error) => cache.set(key, { at: Date.now(), data: (cache.get(key) || {}).data || null, error }))
      .finally(() => inflight.delete(key));
    inflight.set(key, p);
    return p;
  });
  await Promise.all(loads);
  onLoaded();
}

/** The window selector: three buttons, the current one pressed. */
export function windowPicker(onPick) {
  const current = currentWindow();
  return h(
    "div",
    { class: "window-picker", role: "group", "aria-label": "history window" },
    WINDOWS.map((w) =>
      h(
        "button",
        {
          type: "button",
          class: w === current ? "btn small active" : "btn small",
          "data-window": w,
          "aria-pressed": w === current ? "true" : "false",
          onclick: () => {
            setWindow(w);
            onPick(w);
          },
        },
        w,
      ),
    ),
  );
}

function sum(points, key) {
  return points.reduce((n, p) => n + (p[key] || 0), 0);
}

/** Throughput, failures and run time over the window, as three small charts. */
export function historyCharts(hist, win) {
  if (!hist) return h("div", { class: "charts", "data-role": "history" }, h("p", { class: "muted" }, `Loading ${win} of history…`));
  const pts = hist.points || [];
  const step = hist.step_seconds || 60;
  const completed = sum(pts, "completed");
  const failed = sum(pts, "failed") + sum(pts, "dead") + sum(pts, "timed_out");
  const failureRate = completed + failed ? failed / (completed + failed) : null;
  const p95s = pts.map((p) => (p.p95 === null || p.p95 === undefined ? NaN : p.p95));
  const lastP95 = [...p95s].reverse().find((v) => Number.isFinite(v));
  return h(
    "div",
    { class: "charts", "data-role": "history", "data-window": win },
    h(
      "figure",
      { "data-chart": "throughput" },
      sparkline(
        pts.map((p) => (p.completed || 0) / step),
        { label: `completed per second, ${win}`, unit: "/s" },
      ),
      h("figcaption", {}, h("span", { "data-role": "completed" }, fmtNum(completed)), ` completed in ${win}`),
    ),
    h(
      "figure",
      { "data-chart": "failures" },
      sparkline(
        pts.map((p) => {
          const bad = (p.failed || 0) + (p.dead || 0) + (p.timed_out || 0);
          const all = bad + (p.completed || 0);
          return all ? (100 * bad) / all : 0;
        }),
        { label: `failure rate, ${win}`, unit: " %", cls: "bad", min: 100 },
      ),
      h("figcaption", {}, `failures ${fmtPercent(failureRate)} (${fmtNum(failed)})`),
    ),
    h(
      "figure",
      { "data-chart": "runtime" },
      sparkline(p95s, { label: `p95 run time, ${win}`, unit: " s" }),
      h("figcaption", {}, `p95 run time ${lastP95 === undefined ? "—" : fmtDuration(lastP95)}`),
    ),
  );
}
