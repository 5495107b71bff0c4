// The domains of one type (docs/blocks.md#tiers): the proxy tier each goes through now
// and since when, its verdicts (ok, and blocks by kind), the last one and its vendor.
// A compact table of PAGE domains by name, "more" turning to the next page; re-read
// every REFRESH_MS, and at once on the stream's `tier` events of the type (a worker moved
// a domain up or down, or an operator put it at a tier), the row that moved marked.

import { aborted, api, seg } from "../api.js";
import { poll } from "../refresh.js";
import { h, mount, note, fmtAgo, fmtTime, table } from "../render.js";
import { store } from "../store.js";

/** Domains one page shows (the panel stays short: "more" turns the page). */
export const PAGE = 10;
/** Counts change with every request: re-read this often (ms). */
const REFRESH_MS = 10_000;
/** How long a row that moved stays marked (ms). */
const MOVED_MS = 10_000;
/** The verdicts other than ok, in the order the columns show them. */
export const KINDS = ["blocked", "challenge", "captcha", "throttled"];

/** "direct → datacenter → residential" (the type's proxy_tiers, cheap first). */
export function tierChain(tiers) {
  return tiers && tiers.length ? tiers.join(" → ") : "no proxy_tiers";
}

/** The badge of a domain's tier: the first tier green, the top one red, amber between. */
export function tierBadge(domain, tiers) {
  if (domain.tier === null || domain.tier === undefined) return h("span", { class: "muted", "data-role": "tier" }, "—");
  const i = domain.tier_index;
  const where = i <= 0 ? "first" : i >= tiers.length - 1 ? "top" : "mid";
  return h("span", { class: `badge tier-${where}`, "data-role": "tier", title: `tier ${i + 1} of ${tiers.length}` }, domain.tier);
}

function lastVerdict(d) {
  if (!d.last_verdict) return h("span", { class: "muted" }, "—");
  return h(
    "span",
    { title: d.last_at ? `${fmtTime(d.last_at)} (${fmtAgo(d.last_at)})` : "" },
    d.last_verdict,
    d.last_vendor ? h("span", { class: "muted" }, ` (${d.last_vendor})`) : null,
  );
}

export function domainsPanel(type) {
  const chain = h("span", { "data-role": "tiers" });
  const body = h("div", { "data-role": "domains-list" });
  const pager = h("div", { class: "actions", "data-role": "domains-pager" });
  const base = `/automations/${seg(type)}/domains`;
  let after = null; // the cursor of the page shown (null: the first)
  const moved = new Map(); // domain -> [change, when] of recent tier events

  function row(d, tiers) {
    const move = moved.get(d.domain);
    return h(
      "tr",
      {
        "data-domain": d.domain,
        "data-tier": d.tier ?? "",
        class: move ? "moved" : null,
        title: move ? `moved ${move[0]} ${fmtAgo(move[1] / 1000)}` : null,
      },
      h("td", { class: "mono", "data-col": "domain" }, d.domain),
      h("td", { "data-col": "tier" }, tierBadge(d, tiers)),
      h("td", { "data-col": "since", title: fmtTime(d.since) }, fmtAgo(d.since)),
      h("td", { class: "num", "data-col": "ok" }, String(d.ok)),
      KINDS.map((k) => {
        const n = (d.blocked && d.blocked[k]) || 0;
        return h("td", { class: n && k !== "throttled" ? "num warn" : "num", "data-col": k }, String(n));
      }),
      h("td", { "data-col": "last" }, lastVerdict(d)),
    );
  }

  function turn(cursor) {
    after = cursor;
    loader.now();
  }

  async function load(signal) {
    let page;
    try {
      const from = after === null ? "" : `&after=${encodeURIComponent(after)}`;
      page = await api(`${base}?limit=${PAGE}${from}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(body, note("error", `Could not list the domains: ${err.summary || err.message}`));
      return;
    }
    const now = Date.now();
    for (const [domain, [, when]] of moved) if (now - when > MOVED_MS) moved.delete(domain);
    mount(chain, `Tiers: ${tierChain(page.tiers)}`);
    if (!page.items.length && after === null) {
      // One short line: most types never meet a block.
      mount(body, h("p", { class: "empty" }, "No verdict met yet."));
      mount(pager);
      return;
    }
    const headers = ["domain", "tier", "since", "ok", ...KINDS, "last verdict"];
    mount(body, table(headers, page.items.map((d) => row(d, page.tiers)), { class: "domains" }));
    mount(
      pager,
      after !== null ? h("button", { type: "button", class: "link", "data-action": "first", onclick: () => turn(null) }, "← first") : null,
      page.next ? h("button", { type: "button", class: "link", "data-action": "more", onclick: () => turn(page.next) }, "more →") : null,
    );
  }

  function onTier(ev) {
    const d = ev.detail || {};
    if (d.type !== type) return;
    if (typeof d.domain === "string") moved.set(d.domain, [String(d.change || "set"), Date.now()]);
    loader.now();
  }
  function onResync() {
    loader.now(); // tier events may have been missed while the stream was down
  }

  const el = h(
    "section",
    { class: "panel span", id: "domains" },
    h("div", { class: "view-head" }, h("h3", {}, "Domains"), h("small", { class: "muted" }, chain)),
    body,
    pager,
  );
  const loader = poll(load, { everyMs: REFRESH_MS });
  store.addEventListener("tier", onTier);
  store.addEventListener("resync", onResync);

  return {
    el,
    stop() {
      store.removeEventListener("tier", onTier);
      store.removeEventListener("resync", onResync);
      loader.stop();
    },
  };
}
