// Pools: sizes, claims, expiring soon; items of one pool on demand.

import { aborted, api, seg } from "../api.js";
import { poll, polledView } from "../refresh.js";
import { h, mount, note, fmtJSON, fmtAgo, fmtDuration, table } from "../render.js";

const REFRESH_MS = 5000;

function itemsTable(items) {
  const rows = items.map((it) =>
    h(
      "tr",
      { "data-item": it.id },
      h("td", { class: "mono" }, it.id),
      h("td", {}, h("pre", { class: "payload" }, fmtJSON(it.tags))),
      h("td", {}, it.expires_at ? `in ${fmtDuration(it.expires_at - Date.now() / 1000)}` : "never"),
      h("td", {}, fmtAgo(it.created_at)),
      h("td", {}, "payload" in it ? h("pre", { class: "payload" }, fmtJSON(it.payload)) : h("span", { class: "muted" }, "admin only")),
    ),
  );
  return table(["item", "tags", "expires", "created", "payload"], rows, { class: "items" });
}

export function poolsView(root) {
  const list = h("div", {});
  const detail = h("div", { "data-role": "pool-items" });
  let open = null;
  mount(
    root,
    h(
      "section",
      { class: "view", id: "pools" },
      h("h2", {}, "Pools"),
      list,
      detail,
    ),
  );

  async function showItems(name) {
    open = name;
    mount(detail, note("info", `Loading ${name}…`));
    try {
      const res = await api(`/pools/${seg(name)}?n=50`);
      mount(
        detail,
        h("h3", {}, `Items of ${name}`, h("span", { class: "muted" }, ` (first ${res.items.length} available, freshest first)`)),
        res.items.length ? itemsTable(res.items) : h("p", { class: "empty" }, "No available item."),
      );
    } catch (err) {
      mount(detail, note("error", `${name}: ${err.summary || err.message}`));
    }
  }

  async function update(signal) {
    let pools;
    try {
      pools = await api("/pools", { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `Could not list pools: ${err.summary || err.message}`));
      return;
    }
    if (!pools.length) {
      mount(list, h("p", { class: "empty" }, "No pool holds items."));
      return;
    }
    const rows = pools.map((p) =>
      h(
        "tr",
        { "data-pool": p.name, class: open === p.name ? "selected" : "" },
        h("td", {}, h("button", { type: "button", class: "link", onclick: () => showItems(p.name) }, p.name)),
        h("td", { class: "num" }, String(p.total)),
        h("td", { class: "num" }, String(p.available)),
        h("td", { class: "num" }, String(p.claimed)),
        h("td", { class: p.expiring_soon ? "num warn" : "num" }, String(p.expiring_soon)),
      ),
    );
    mount(list, table(["pool", "size", "available", "claimed", "expiring soon"], rows, { class: "pools" }));
  }

  // Pools are not part of the shared snapshot: poll them while the view is open.
  return polledView(poll(update, { everyMs: REFRESH_MS }));
}
