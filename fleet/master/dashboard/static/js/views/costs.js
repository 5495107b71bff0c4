// What a type spent (docs/costs.md), compact: spend and the main meters over the last
// 24 hours (the sums of its hours), spend by hour as bars, and the top domains by spend
// among a page of its domains (all time: a domain's meters are not kept by hour). One
// GET /automations/{type}/costs?window=24h every REFRESH_MS. Also the meters line of
// a run's page.

import { aborted, api, seg } from "../api.js";
import { chart } from "../history.js";
import { poll } from "../refresh.js";
import { h, mount, note, table } from "../render.js";

/** Workers send their meters every 2 s: re-read this often (ms). */
const REFRESH_MS = 12_000;
/** Domains read to rank (the endpoint pages them by name; ranked here by spend). */
export const DOMAINS_READ = 200;
/** Rows of the top domains. */
export const TOP = 5;
/** The meters shown first, in this order (then the rest by name), as `fleet costs`. */
export const FIRST = ["spend", "attempts", "run_seconds", "requests", "bytes_received", "bytes_sent", "solves", "solve_failures", "browser_seconds"];
/** The panel's figures: meter -> label. */
const MAIN = [
  ["spend", "spend"],
  ["attempts", "attempts"],
  ["requests", "requests"],
  ["bytes_received", "received"],
  ["solves", "solves"],
  ["browser_seconds", "browser-s"],
];

/** Bytes for people, in powers of 1000 as a proxy bills them: "3.50 MB". */
export function fmtBytesSI(n) {
  const v = Number(n) || 0;
  for (const [unit, size] of [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]]) if (v >= size) return `${(v / size).toFixed(2)} ${unit}`;
  return `${Math.round(v)} B`;
}

/** A spend: two decimals, four below a cent (a request may cost 0.0001). */
export function fmtSpend(n) {
  const v = Number(n) || 0;
  return v > 0 && v < 0.01 ? v.toFixed(4) : v.toFixed(2);
}

/** A meter's value for people (as `fleet costs`): bytes in KB/MB/GB, spend and
 * seconds with decimals, counts whole. */
export function fmtMeter(meter, value) {
  const v = Number(value) || 0;
  if (meter.startsWith("bytes")) return fmtBytesSI(v);
  if (meter === "spend") return fmtSpend(v);
  if (meter.endsWith("seconds") || !Number.isInteger(v)) return v.toFixed(2);
  return v.toLocaleString("en-US");
}

/** The meters in their reading order: FIRST, then the rest by name. */
export function meterNames(meters) {
  const rest = Object.keys(meters).filter((m) => !FIRST.includes(m)).sort();
  return [...FIRST.filter((m) => m in meters), ...rest];
}

/** "spend 1.20 · attempts 12 · bytes_received 3.50 MB …" as spans (`data-meter`). */
export function metersLine(meters, attrs) {
  const names = meterNames(meters || {});
  if (!names.length) return h("p", { class: "empty", ...(attrs || {}) }, "Nothing metered yet.");
  return h(
    "p",
    { class: "meters", ...(attrs || {}) },
    names.map((m, i) => [i ? " · " : null, h("span", { "data-meter": m }, h("span", { class: "muted" }, `${m} `), fmtMeter(m, meters[m]))]),
  );
}

/** The sums of the hours' meters. */
export function summed(hours) {
  const out = {};
  for (const hour of hours) for (const [m, v] of Object.entries(hour.meters || {})) out[m] = (out[m] || 0) + Number(v);
  return out;
}

function figure(meter, label, value) {
  return h("div", { class: "stat", "data-meter": meter }, h("dt", {}, label), h("dd", {}, fmtMeter(meter, value || 0)));
}

export function costsPanel(type) {
  const info = h("small", { class: "muted", "data-role": "costs-all" });
  const body = h("div", { "data-role": "costs-body" });
  const heldLine = h("p", { class: "error", "data-role": "costs-held", hidden: true });

  function draw(page) {
    const hours = page.hours || [];
    const day = summed(hours);
    const all = page.meters || {};
    mount(info, Object.keys(all).length ? `last 24h · spend ${fmtSpend(all.spend)} in all` : "last 24h");
    // Held by its daily budget (docs/costs.md): said above the rest.
    mount(
      heldLine,
      page.held
        ? `held until ${new Date(page.held.until * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC: ${page.held.reason}`
        : "",
    );
    heldLine.hidden = !page.held;
    if (!Object.keys(day).length && !Object.keys(all).length) {
      mount(body, h("p", { class: "empty" }, "Nothing metered yet."));
      return;
    }
    if (!Object.keys(day).length) {
      mount(body, h("p", { class: "empty" }, "Nothing metered in the last 24h."));
      return;
    }
    const spend = hours.map((hr) => Number((hr.meters || {}).spend || 0));
    const ranked = (page.domains || [])
      .filter((d) => (d.meters || {}).spend > 0)
      .sort((a, b) => b.meters.spend - a.meters.spend || (a.domain < b.domain ? -1 : 1))
      .slice(0, TOP);
    mount(
      body,
      h(
        "div",
        { class: "costs-row" },
        h("dl", { class: "stats" }, MAIN.map(([m, label]) => figure(m, label, day[m]))),
        h(
          "figure",
          { "data-chart": "spend" },
          chart(spend, hours.map((hr) => hr.start), { label: "spend by hour, 24h", bars: true }),
          h("figcaption", {}, "spend by hour"),
        ),
        ranked.length
          ? h(
              "div",
              { class: "costs-domains", "data-role": "top-domains" },
              table(
                ["domain", "spend", "requests", "received"],
                ranked.map((d) =>
                  h(
                    "tr",
                    { "data-domain": d.domain },
                    h("td", { class: "mono", "data-col": "domain" }, d.domain),
                    h("td", { class: "num", "data-col": "spend" }, fmtSpend(d.meters.spend)),
                    h("td", { class: "num", "data-col": "requests" }, fmtMeter("requests", d.meters.requests || 0)),
                    h("td", { class: "num", "data-col": "received" }, fmtBytesSI(d.meters.bytes_received || 0)),
                  ),
                ),
                { class: "domains-spend" },
              ),
              h("small", { class: "muted" }, `top ${TOP} by spend, all time${page.next ? `, of the first ${DOMAINS_READ} domains by name` : ""}`),
            )
          : h("p", { class: "muted", "data-role": "top-domains" }, "No domain spent yet."),
      ),
    );
  }

  async function load(signal) {
    let page;
    try {
      page = await api(`/automations/${seg(type)}/costs?window=24h&limit=${DOMAINS_READ}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(body, note("error", `Could not read the costs: ${err.summary || err.message}`));
      return;
    }
    draw(page);
  }

  const el = h(
    "section",
    { class: "panel span", id: "costs" },
    h("div", { class: "view-head" }, h("h3", {}, "Costs"), info),
    heldLine,
    body,
  );
  const loader = poll(load, { everyMs: REFRESH_MS });
  return {
    el,
    stop() {
      loader.stop();
    },
  };
}
