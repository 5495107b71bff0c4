// A type's history as the backend keeps it (GET /automations/{type}/history): the
// charts of the overview and automation pages read it, so they are full the moment
// a page opens and the same after a reload or on another master.

import { api, seg } from "./api.js";
import { h, fmtDuration, fmtNum, fmtPercent, svg } from "./render.js";

export const WINDOWS = ["1h", "24h", "30d"];
const WINDOW_KEY = "fleet.window";
/** How old a fetched window may get before a page's update fetches it again. */
const FRESH_MS = { "1h": 3_000, "24h": 30_000, "30d": 300_000 };

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

const CHART = { width: 180, height: 64, left: 30, bottom: 12 };
// Presentation attributes, so the axes read without a stylesheet rule.
const AXIS_TEXT = { "font-size": 8, fill: "currentColor", opacity: 0.7 };

function clock(t) {
  const d = new Date(t * 1000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

function axisNum(v) {
  return v >= 100 ? fmtNum(v) : v >= 10 ? fmtNum(v, 1) : fmtNum(v, 2);
}

/**
 * A chart of one value per point: a y axis (0 and the top value), an x axis (the
 * window's first and last point), and each point's time and value on hover (a
 * <title> per point; `data-value` for scripts). `opts.bars`: a bar per point (one
 * amount per step, as the Costs panel's spend by hour) instead of a line.
 */
export function chart(values, times, opts) {
  const { width, height, left, bottom } = CHART;
  const plotW = width - left;
  const plotH = height - bottom - 2;
  const nums = values.filter((v) => Number.isFinite(v));
  const top = Math.max(opts.min || 0, ...nums, 1e-9);
  const bars = Boolean(opts.bars);
  const step = bars ? plotW / Math.max(values.length, 1) : values.length > 1 ? plotW / (values.length - 1) : plotW;
  const x = (i) => left + (bars ? (i + 0.5) * step : i * step);
  const y = (v) => 1 + plotH - ((Number.isFinite(v) ? v : 0) / top) * plotH;
  const line = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const last = nums.length ? nums[nums.length - 1] : null;
  const label = `${opts.label}: ${last === null ? "no data yet" : fmtNum(last, 2)}${opts.unit || ""}`;
  const hover = values.map((v, i) =>
    svg(
      "rect",
      {
        class: "spark-hit",
        fill: "transparent",
        x: (x(i) - step / 2).toFixed(1),
        y: 0,
        width: Math.max(step, 1).toFixed(1),
        height: plotH + 2,
        "data-t": times[i],
        "data-value": Number.isFinite(v) ? String(v) : "",
      },
      svg("title", {}, `${clock(times[i])}: ${Number.isFinite(v) ? `${String(Number(v.toFixed(2)))}${opts.unit || ""}` : "no runs"}`),
    ),
  );
  return svg(
    "svg",
    { class: `spark ${opts.cls || ""}`, width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label },
    svg("title", {}, label),
    svg("line", { x1: left, y1: plotH + 1, x2: width, y2: plotH + 1, class: "spark-base" }),
    svg("line", { x1: left, y1: 1, x2: left, y2: plotH + 1, class: "spark-base" }),
    svg("text", { x: left - 3, y: 8, class: "axis", ...AXIS_TEXT, "text-anchor": "end", "data-axis": "top" }, `${axisNum(top)}${opts.axisUnit || ""}`),
    svg("text", { x: left - 3, y: plotH + 1, class: "axis", ...AXIS_TEXT, "text-anchor": "end" }, "0"),
    times.length ? svg("text", { x: left, y: height - 1, class: "axis", ...AXIS_TEXT, "data-axis": "start" }, clock(times[0])) : null,
    times.length ? svg("text", { x: width, y: height - 1, class: "axis", ...AXIS_TEXT, "text-anchor": "end", "data-axis": "end" }, clock(times[times.length - 1])) : null,
    !bars && values.length > 1 ? svg("polyline", { points: line, class: "spark-line" }) : null,
    ...(bars
      ? values.map((v, i) =>
          svg("rect", { class: "spark-bar", x: (x(i) - step / 2 + 0.5).toFixed(1), y: y(v).toFixed(1), width: Math.max(step - 1, 0.5).toFixed(1), height: (plotH + 1 - y(v)).toFixed(1), "data-value": Number.isFinite(v) ? String(v) : "" }),
        )
      : []),
    ...hover,
  );
}

/** A percentile as the history answers it: an estimate inside its bucket. */
export function fmtQuantile(q) {
  if (!q) return "—";
  const upper = q.upper === null || q.upper === undefined ? "more" : fmtDuration(q.upper);
  return `≈ ${fmtDuration(q.value)} (between ${fmtDuration(q.lower)} and ${upper}: an estimate from the run-time buckets)`;
}

/** Throughput, failures and run time over the window, as three small charts. */
export function historyCharts(hist, win) {
  if (!hist) return h("div", { class: "charts", "data-role": "history" }, h("p", { class: "muted" }, `Loading ${win} of history…`));
  const pts = hist.points || [];
  const step = hist.step_seconds || 60;
  const times = pts.map((p) => p.t);
  const summary = hist.summary || null;
  const counts = summary ? summary.counts : null;
  const completed = counts ? counts.completed : sum(pts, "completed");
  // Each attempt once: timed-out attempts are among the failed and dead already.
  const failed = counts ? counts.failed + counts.dead : sum(pts, "failed") + sum(pts, "dead");
  const attempts = completed + failed;
  const failureRate = summary ? summary.failure_rate : attempts ? failed / attempts : null;
  const p95s = pts.map((p) => (p.p95 === null || p.p95 === undefined ? NaN : p.p95));
  const p95 = summary ? summary.p95 : null;
  return h(
    "div",
    { class: "charts", "data-role": "history", "data-window": win },
    h(
      "figure",
      { "data-chart": "throughput" },
      chart(
        pts.map((p) => (p.completed || 0) / step),
        times,
        { label: `completed per second, ${win}`, unit: "/s", axisUnit: "/s" },
      ),
      h("figcaption", {}, h("span", { "data-role": "completed" }, fmtNum(completed)), ` completed in ${win}`),
    ),
    h(
      "figure",
      { "data-chart": "failures" },
      chart(
        pts.map((p) => {
          const bad = (p.failed || 0) + (p.dead || 0);
          const all = bad + (p.completed || 0);
          return all ? (100 * bad) / all : 0;
        }),
        times,
        { label: `failed attempts, ${win}`, unit: " %", axisUnit: "%", cls: "bad", min: 100 },
      ),
      h(
        "figcaption",
        {},
        "failures ",
        h("span", { "data-role": "failure-rate" }, fmtPercent(failureRate)),
        ` (${fmtNum(failed)} of ${fmtNum(attempts)} attempts`,
        counts && counts.timed_out ? `, ${fmtNum(counts.timed_out)} timed out` : "",
        ")",
      ),
    ),
    h(
      "figure",
      { "data-chart": "runtime" },
      chart(p95s, times, { label: `p95 run time, ${win} (estimates)`, unit: " s", axisUnit: "s" }),
      h("figcaption", {}, "p95 run time ", h("span", { "data-role": "p95", title: fmtQuantile(p95) }, p95 ? `≈ ${fmtDuration(p95.value)}` : "—"), p95 ? h("span", { class: "muted", "data-role": "p95-bucket" }, ` (${fmtDuration(p95.lower)}–${p95.upper === null ? "∞" : fmtDuration(p95.upper)})`) : null),
    ),
  );
}
