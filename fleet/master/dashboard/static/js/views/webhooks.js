// Webhooks: the subscriptions (secrets masked by the master) and, for the one opened
// ("#/webhooks/<id>"), its delivery log, newest first (GET /webhooks/{id}/deliveries).

import { aborted, api, seg } from "../api.js";
import { poll, polledView } from "../refresh.js";
import { h, mount, note, fmtAgo, table } from "../render.js";

const REFRESH_MS = 5000;
/** The CSS class of a delivery's status cell: a dead one in the error style. */
const STATUS_CLASS = { delivered: "", pending: "muted", failed: "warn", dead: "error-text" };

function filters(w) {
  const out = [];
  if (w.types) out.push(`types ${w.types.join(", ")}`);
  if (w.runs) out.push(`runs ${w.runs.join(", ")}`);
  return out.length ? out.join("; ") : h("span", { class: "muted" }, "every event");
}

/** The table of subscriptions (exported for tests). */
export function webhooksTable(hooks, openId) {
  const rows = hooks.map((w) =>
    h(
      "tr",
      { "data-webhook": w.id, "aria-current": w.id === openId ? "true" : "false" },
      h("td", { class: "mono" }, h("a", { href: `#/webhooks/${encodeURIComponent(w.id)}` }, w.id)),
      h("td", { class: "mono" }, w.url),
      h("td", {}, w.events.join(", ")),
      h("td", {}, filters(w)),
      w.enabled ? h("td", {}, "yes") : h("td", { class: "warn" }, "disabled"),
      h("td", { class: "mono", "data-role": "secret" }, w.secret),
    ),
  );
  return table(["webhook", "url", "events", "filters", "enabled", "secret"], rows, { class: "webhooks" });
}

/** The delivery log of one subscription (exported for tests). */
export function deliveriesTable(deliveries) {
  const rows = deliveries.map((d) =>
    h(
      "tr",
      { "data-event": d.event_id },
      h("td", { class: "mono" }, d.event_id),
      h("td", {}, d.event_type),
      h("td", { class: STATUS_CLASS[d.status] || "", "data-role": "status" }, d.status),
      h("td", { class: "num" }, String(d.attempts)),
      h("td", { class: "num" }, d.http_status === null ? "—" : String(d.http_status)),
      h("td", {}, d.error === null ? h("span", { class: "muted" }, "—") : d.error),
      h("td", {}, fmtAgo(d.created_at)),
      h("td", {}, fmtAgo(d.updated_at)),
    ),
  );
  return table(["event", "type", "status", "attempts", "http", "last error", "queued", "changed"], rows, { class: "deliveries" });
}

export function webhooksView(root, openId) {
  const list = h("div", {});
  const log = h("div", { "data-role": "deliveries" });
  mount(
    root,
    h(
      "section",
      { class: "view", id: "webhooks" },
      h("h2", {}, "Webhooks"),
      h("p", { class: "muted" }, "Signed deliveries of Fleet's events. Secrets are shown once, when a webhook is created (fleet webhooks create)."),
      list,
      log,
    ),
  );

  async function update(signal) {
    let res;
    try {
      res = await api("/webhooks", { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(list, note("error", `Could not list webhooks: ${err.summary || err.message}`));
      return;
    }
    if (!res.webhooks.length) {
      mount(list, h("p", { class: "empty" }, "No webhook yet."));
    } else {
      mount(list, webhooksTable(res.webhooks, openId));
    }
    if (!openId) return;
    let page;
    try {
      page = await api(`/webhooks/${seg(openId)}/deliveries?limit=100`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(log, note("error", `Could not read the deliveries of ${openId}: ${err.summary || err.message}`));
      return;
    }
    const title = h("h3", {}, `Deliveries of ${openId}`);
    if (!page.deliveries.length) {
      mount(log, title, h("p", { class: "empty" }, "Nothing delivered yet."));
      return;
    }
    mount(log, title, deliveriesTable(page.deliveries));
  }

  // Webhooks are not part of the shared snapshot: poll them while the view is open.
  return polledView(poll(update, { everyMs: REFRESH_MS }));
}
