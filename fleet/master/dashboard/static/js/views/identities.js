// Identities (docs/identities.md): "#/identities" lists the pools with their counts by
// state; "#/identities/<pool>" shows one pool's counts and its identities a page at a
// time, each one's stats and last reason, with Retire and Revive for the admin token.
// The master masks every secret (proxy passwords, cookies, account secrets) for every
// token: this view never asks for them revealed.

import { aborted, api, getToken, seg } from "../api.js";
import { poll } from "../refresh.js";
import { h, mount, note, fmtAgo, fmtDuration, fmtTime, table } from "../render.js";
import { store } from "../store.js";

const REFRESH_MS = 5000;
/** Identities one page of the table shows. */
export const PAGE = 50;
/** The states of an identity, in the order they are shown. */
export const STATES = ["ready", "leased", "cooling", "retired"];
/** After every id a pool may hold (the largest code point): a page after it is empty. */
const PAST_THE_END = "\u{10FFFF}";

let admin = { token: null, answer: null };

/**
 * Whether this tab's token is the admin token. Only the admin may ask for secrets
 * revealed (403 for any other token), so the view asks for an empty page revealed
 * (after every id: no identity comes back) once per token.
 */
async function isAdmin(pool, signal) {
  const token = getToken();
  if (admin.token === token && admin.answer !== null) return admin.answer;
  let answer;
  try {
    await api(`/identities/${seg(pool)}?limit=1&reveal=true&after=${encodeURIComponent(PAST_THE_END)}`, { signal });
    answer = true;
  } catch (err) {
    if (err.status !== 403) throw err; // unknown pool, backend down: ask again later
    answer = false;
  }
  admin = { token, answer };
  return answer;
}

/** The state badge of an identity. */
function stateBadge(state) {
  return h("span", { class: `badge identity-${state}`, "data-role": "state" }, state);
}

/** The counts by state as a row of stats ("data-stat" is the state). */
export function countsStats(counts) {
  return h(
    "dl",
    { class: "stats", "data-role": "identity-counts" },
    STATES.map((s) => {
      const n = (counts && counts[s]) || 0;
      const cls = n && s === "cooling" ? "stat warn" : n && s === "retired" ? "stat bad" : "stat";
      return h("div", { class: cls, "data-stat": s }, h("dt", {}, s), h("dd", {}, String(n)));
    }),
  );
}

/** "in 9 m 58 s" until a cool-down ends (its clock time on hover), or "—". */
function coolingCell(identity) {
  const until = identity.cooling_until;
  if (!until || identity.state !== "cooling") return h("td", { "data-col": "cooling" }, h("span", { class: "muted" }, "—"));
  const left = until - Date.now() / 1000;
  return h("td", { "data-col": "cooling", class: "warn", title: fmtTime(until) }, left > 0 ? `in ${fmtDuration(left)}` : "now");
}

/** The "#/identities" page: every pool with its counts by state. */
export function identitiesView(root) {
  const list = h("div", { "data-role": "identity-pools" });
  mount(
    root,
    h(
      "section",
      { class: "view", id: "identities" },
      h("h2", {}, "Identities"),
      h("p", { class: "muted" }, "A proxy, a fingerprint, cookies and an account, leased fleet-wide as one. Pick a pool to see its identities."),
      list,
    ),
  );

  async function update(signal) {
    let res;
    try {
      res = await api("/identities", { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `Could not list identity pools: ${err.summary || err.message}`));
      return;
    }
    if (!res.pools.length) {
      mount(list, h("p", { class: "empty" }, "No identity pool yet. Create one with POST /api/v1/identities/<pool> or `fleet identities`."));
      return;
    }
    const rows = res.pools.map((p) =>
      h(
        "tr",
        { "data-pool": p.pool },
        h("td", {}, h("a", { href: `#/identities/${seg(p.pool)}`, class: "mono" }, p.pool)),
        h("td", { class: "num", "data-col": "total" }, String(p.total)),
        STATES.map((s) => {
          const n = p.counts[s] || 0;
          const warn = n && (s === "cooling" || s === "retired");
          return h("td", { class: warn ? "num warn" : "num", "data-col": s }, String(n));
        }),
      ),
    );
    mount(list, table(["pool", "identities", ...STATES], rows, { class: "identity-pools" }));
  }

  return watching(poll(update, { everyMs: REFRESH_MS }), () => true);
}

/** The "#/identities/<pool>" page: its counts and its identities, a page at a time. */
export function identityPoolView(root, pool) {
  const counts = h("div", {});
  const msg = h("div", { "aria-live": "polite" });
  const list = h("div", { "data-role": "identity-list" });
  const pager = h("div", { class: "toolbar", "data-role": "identity-pager" });
  let after = null; // the cursor of the page shown (null: the first)
  const before = []; // the cursors of the pages before it, for "Previous"
  let canAct = false;
  let loader = null;

  mount(
    root,
    h(
      "section",
      { class: "view", id: "identity-pool", "data-pool": pool },
      h("p", {}, h("a", { href: "#/identities" }, "← Identity pools")),
      h("h2", {}, "Identities of ", h("span", { class: "mono" }, pool)),
      counts,
      msg,
      list,
      pager,
    ),
  );

  /** Retire or revive one identity, then show the page again. */
  async function act(identity, action) {
    const label = `${action === "retire" ? "Retire" : "Revive"} ${identity.id}`;
    if (action === "retire" && !window.confirm(`Retire identity ${identity.id} of ${pool}? No lease takes it until it is revived.`)) return;
    mount(msg, note("info", `${label}…`));
    try {
      await api(`/identities/${seg(pool)}/${seg(identity.id)}/${action}`, { method: "POST" });
      mount(msg, note("ok", `${label}: done.`));
    } catch (err) {
      mount(msg, note("error", `${label}: ${err.summary || err.message}`));
    }
    loader.now();
  }

  function actions(identity) {
    const retired = identity.state === "retired";
    return h(
      "td",
      { "data-col": "actions" },
      h(
        "div",
        { class: "actions" },
        retired ? null : h("button", { type: "button", class: "btn small danger", "data-action": "retire", onclick: () => act(identity, "retire") }, "Retire"),
        retired || identity.state === "cooling"
          ? h("button", { type: "button", class: "btn small", "data-action": "revive", onclick: () => act(identity, "revive") }, "Revive")
          : null,
      ),
    );
  }

  function row(i) {
    const s = i.stats || {};
    const fp = i.fingerprint;
    return h(
      "tr",
      { "data-identity": i.id, "data-state": i.state },
      h("td", { class: "mono", "data-col": "id" }, i.id),
      h("td", {}, stateBadge(i.state)),
      h("td", { class: "mono", "data-col": "proxy" }, i.proxy || h("span", { class: "muted" }, "direct")),
      h("td", { class: "ua", "data-col": "user-agent", title: fp ? fp.user_agent : "" }, fp ? fp.user_agent : h("span", { class: "muted" }, "—")),
      h("td", { class: "num", "data-col": "leases" }, String(i.leases)),
      h("td", { class: "num", "data-col": "uses" }, String(s.uses || 0)),
      h("td", { class: "num", "data-col": "ok" }, String(s.ok || 0)),
      h("td", { class: s.blocked ? "num warn" : "num", "data-col": "blocked" }, String(s.blocked || 0)),
      h("td", { class: s.blocked_in_row ? "num warn" : "num", "data-col": "blocked-in-row" }, String(s.blocked_in_row || 0)),
      h("td", { "data-col": "last-used" }, fmtAgo(s.last_used_at)),
      h("td", { "data-col": "last-reason" }, s.last_reason || h("span", { class: "muted" }, "—")),
      coolingCell(i),
      canAct ? actions(i) : null,
    );
  }

  function showPager(next) {
    mount(
      pager,
      before.length ? h("button", { type: "button", class: "btn", "data-action": "previous", onclick: () => turn(before.pop()) }, "← Previous") : null,
      next
        ? h(
            "button",
            {
              type: "button",
              class: "btn",
              "data-action": "next",
              onclick: () => {
                before.push(after);
                turn(next);
              },
            },
            "Next →",
          )
        : null,
    );
  }

  function turn(cursor) {
    after = cursor;
    mount(pager);
    loader.now();
  }

  async function update(signal) {
    let page;
    try {
      canAct = await isAdmin(pool, signal);
      const from = after === null ? "" : `&after=${encodeURIComponent(after)}`;
      page = await api(`/identities/${seg(pool)}?limit=${PAGE}${from}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `${pool}: ${err.summary || err.message}`));
      return;
    }
    mount(counts, countsStats(page.counts));
    if (!page.items.length) {
      mount(list, h("p", { class: "empty" }, after === null ? "This pool holds no identity." : "No identity on this page."));
    } else {
      const headers = ["id", "state", "proxy", "user agent", "leases", "uses", "ok", "blocked", "blocked in a row", "last used", "last reason", "cooling until"];
      if (canAct) headers.push("");
      mount(list, table(headers, page.items.map(row), { class: "identities" }));
    }
    showPager(page.next);
  }

  loader = poll(update, { everyMs: REFRESH_MS });
  return watching(loader, (ev) => ev.pool === pool);
}

/**
 * A view's handle that reloads at once on an `identity` event `mine` accepts (and on
 * a resync: events may have been missed), besides its polling.
 */
function watching(loader, mine) {
  function onIdentity(ev) {
    if (mine(ev.detail || {})) loader.now();
  }
  function onResync() {
    loader.now();
  }
  store.addEventListener("identity", onIdentity);
  store.addEventListener("resync", onResync);
  return {
    update() {},
    destroy() {
      store.removeEventListener("identity", onIdentity);
      store.removeEventListener("resync", onResync);
      loader.stop();
    },
  };
}
