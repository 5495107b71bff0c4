// DOM building and formatting helpers.
//
// Every piece of data reaches the page as a text node or an attribute set with
// setAttribute: nothing here parses HTML, so a payload such as
// `<img src=x onerror=alert(1)>` is shown as the characters it contains.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    child.forEach((c) => append(parent, c));
  } else if (child instanceof Node) {
    parent.appendChild(child);
  } else {
    parent.appendChild(document.createTextNode(String(child)));
  }
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) {
      // Handlers only as functions: a string here would be inline script.
      if (typeof value === "function") el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value" && "value" in el) {
      el.value = value;
    } else if (key === "checked" || key === "disabled" || key === "selected") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

/** Create an element: h("td", {class: "num"}, "text", otherNode, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Create an SVG element (for the small charts). */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
  append(el, children);
  return el;
}

/** Replace all children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Escape text for the rare place a string must be embedded in markup. */
export function escapeHtml(text) {
  return String(text)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** "850 ms", "12 s", "4 m 10 s", "3 h 2 m", "2 d 1 h". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return "—";
  const s = Math.max(0, Number(seconds));
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 10) return `${s.toFixed(1)} s`;
  // Whole seconds from here on, so a minute never shows as "4 m 60 s".
  const whole = Math.round(s);
  if (whole < 60) return `${whole} s`;
  if (whole < 3600) return `${Math.floor(whole / 60)} m ${whole % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/** "12 s ago" from a unix time. */
export function fmtAgo(unixSeconds) {
  if (!unixSeconds) return "never";
  return `${fmtDuration(Date.now() / 1000 - Number(unixSeconds))} ago`;
}

/** Local clock time of a unix time. */
export function fmtTime(unixSeconds) {
  if (!unixSeconds) return "—";
  return new Date(Number(unixSeconds) * 1000).toLocaleTimeString();
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || !Number.isFinite(Number(n))) return "—";
  return Number(n).toFixed(digits);
}

export function fmtPercent(ratio) {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return "—";
  return `${(ratio * 100).toFixed(ratio < 0.1 && ratio > 0 ? 1 : 0)} %`;
}

/** Pretty JSON of any value, for <pre> blocks. */
export function fmtJSON(value) {
  return JSON.stringify(value, null, 2);
}

/** A <span class="badge state-x"> for a worker state. */
export function stateBadge(state) {
  const s = String(state || "UNKNOWN");
  return h("span", { class: `badge state-${s.toLowerCase()}` }, s);
}

/**
 * A small inline SVG line chart of `values` (numbers, oldest first).
 *
 * @param {number[]} values
 * @param {{label: string, width?: number, height?: number, unit?: string, cls?: string}} opts
 */
export function sparkline(values, opts) {
  const width = opts.width || 150;
  const height = opts.height || 34;
  const nums = values.filter((v) => Number.isFinite(v));
  const max = Math.max(opts.min || 0, ...nums, 1e-9);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values
    .map((v, i) => {
      const y = height - 2 - ((Number.isFinite(v) ? v : 0) / max) * (height - 4);
      return `${(i * step).toFixed(1)},${y.toFixed(1)}`;
    })
    .join(" ");
  const last = nums.length ? nums[nums.length - 1] : null;
  const title = `${opts.label}: ${last === null ? "no data yet" : fmtNum(last, 2)}${opts.unit || ""}`;
  return svg(
    "svg",
    {
      class: `spark ${opts.cls || ""}`,
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": title,
    },
    svg("title", {}, title),
    svg("line", { x1: 0, y1: height - 1, x2: width, y2: height - 1, class: "spark-base" }),
    values.length > 1 ? svg("polyline", { points, class: "spark-line" }) : null,
  );
}

/** A message line (error/info) that can be put next to a form or a field. */
export function note(kind, text) {
  return h("p", { class: `note note-${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/** A table with a header row; `rows` are arrays of cells (node or text). */
export function table(headers, rows, attrs) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      attrs || {},
      h("thead", {}, h("tr", {}, headers.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows),
    ),
  );
}
