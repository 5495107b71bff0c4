// Proxies: the fleet-wide health of every proxy the slots use (GET /proxies).
// Keys never hold credentials; the reason of a bad report is masked by the master.

import { aborted, api } from "../api.js";
import { poll, polledView } from "../refresh.js";
import { h, mount, note, fmtAgo, fmtDuration, table } from "../render.js";

const REFRESH_MS = 5000;

/** The state cell of one proxy: cooling (and for how long) or healthy. */
function stateCell(p) {
  if (p.cooling) {
    const left = p.cooling_until - Date.now() / 1000;
    return h("td", { class: "warn", "data-role": "proxy-state" }, `cooling, ${fmtDuration(left)} left`);
  }
  return h("td", { "data-role": "proxy-state" }, "healthy");
}

/** The table of proxies (exported for tests). */
export function proxiesTable(proxies) {
  const rows = proxies.map((p) =>
    h(
      "tr",
      { "data-proxy": p.proxy, class: p.cooling ? "lagging" : "" },
      h("td", { class: "mono" }, p.proxy),
      stateCell(p),
      h("td", { class: "num" }, String(p.in_use)),
      h("td", { class: "num" }, String(p.uses)),
      h("td", { class: "num" }, String(p.oks)),
      h("td", { class: p.failures ? "num warn" : "num" }, String(p.failures)),
      h("td", { class: "num" }, String(p.score)),
      h("td", {}, p.last_reason === null ? h("span", { class: "muted" }, "—") : p.last_reason, p.last_bad_at ? h("span", { class: "muted" }, ` (${fmtAgo(p.last_bad_at)})`) : null),
    ),
  );
  return table(["proxy", "state", "in use", "uses", "ok", "bad", "score", "last bad report"], rows, { class: "proxies" });
}

export function proxiesView(root) {
  const summary = h("p", { class: "muted", "data-role": "proxies-summary" });
  const list = h("div", {});
  mount(
    root,
    h(
      "section",
      { class: "view", id: "proxies" },
      h("h2", {}, "Proxies"),
      summary,
      list,
    ),
  );

  async function update(signal) {
    let res;
    try {
      res = await api("/proxies", { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `Could not list proxies: ${err.summary || err.message}`));
      return;
    }
    const n = res.proxies.length;
    const slots = `${res.in_use} slot${res.in_use === 1 ? "" : "s"}`;
    mount(summary, `${n} prox${n === 1 ? "y" : "ies"} · ${res.cooling} cooling down · ${slots} using one now`);
    if (!n) {
      mount(list, h("p", { class: "empty" }, "No proxy used in the last hour."));
      return;
    }
    mount(list, proxiesTable(res.proxies));
  }

  // Proxies are not part of the shared snapshot: poll them while the view is open.
  return polledView(poll(update, { everyMs: REFRESH_MS }));
}
