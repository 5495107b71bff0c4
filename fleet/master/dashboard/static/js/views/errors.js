// A type's error groups (docs/errors.md): failures grouped by exception class,
// normalised message and location. On the type's page a panel lists the newest groups
// (count, last seen, class, message), each a link to the group's page:
// "#/errors/<type>/<group>" shows the group in full — its traceback, domains, sample
// task — and its snapshots: the page's HTML in an <iframe sandbox> without
// allow-scripts (srcdoc from the HTML fetched as text: it is shown, never run) and the
// screenshot as an <img> (a data: URL of the fetched PNG; the page's CSP allows
// img-src data: and nothing else from outside).

import { API, aborted, api, getToken, seg } from "../api.js";
import { poll, polledView } from "../refresh.js";
import { h, mount, note, fmtAgo, fmtTime, fmtBytes, table } from "../render.js";

/** Groups the panel shows (the newest: "more" turns the page). */
export const PAGE = 10;
/** Groups change with every failure: re-read this often (ms). */
const REFRESH_MS = 10_000;

function groupHref(type, group) {
  return `#/errors/${encodeURIComponent(type)}/${encodeURIComponent(group)}`;
}

/** The newest error groups of a type, a panel of its page. */
export function errorsPanel(type) {
  const body = h("div", { "data-role": "errors-list" });
  const pager = h("div", { class: "actions", "data-role": "errors-pager" });
  const base = `/automations/${seg(type)}/errors`;
  let cursor = null;

  function row(g) {
    return h(
      "tr",
      { "data-group": g.group },
      h("td", { class: "mono", "data-col": "group" }, h("a", { href: groupHref(type, g.group) }, g.group)),
      h("td", { class: "num", "data-col": "count" }, String(g.count)),
      h("td", { "data-col": "last", title: fmtTime(g.last_seen) }, fmtAgo(g.last_seen)),
      h("td", { class: "mono", "data-col": "exception" }, g.exception),
      h("td", { "data-col": "message", title: g.location }, g.message),
    );
  }

  async function load(signal) {
    let page;
    try {
      const from = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
      page = await api(`${base}?limit=${PAGE}${from}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(body, note("error", `Could not list the error groups: ${err.summary || err.message}`));
      return;
    }
    if (!page.items.length && cursor === null) {
      mount(body, h("p", { class: "empty" }, "No failure in the last 7 days."));
      mount(pager);
      return;
    }
    mount(body, table(["group", "count", "last seen", "exception", "message"], page.items.map(row), { class: "errors" }));
    mount(
      pager,
      cursor !== null ? h("button", { type: "button", class: "link", "data-action": "first", onclick: () => turn(null) }, "← newest") : null,
      page.cursor ? h("button", { type: "button", class: "link", "data-action": "more", onclick: () => turn(page.cursor) }, "more →") : null,
    );
  }

  function turn(next) {
    cursor = next;
    loader.now();
  }

  const el = h("section", { class: "panel span", id: "errors" }, h("h3", {}, "Errors"), body, pager);
  const loader = poll(load, { everyMs: REFRESH_MS });
  return { el, stop: () => loader.stop() };
}

/** A snapshot's body (`html` as text, `screenshot` as a data: URL), with the token. */
async function body(path, part, signal) {
  const res = await fetch(`${API}${path}/${part}`, {
    headers: { Authorization: `Bearer ${getToken()}` },
    cache: "no-store",
    signal,
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  if (part === "html") return res.text();
  const blob = await res.blob();
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^;,]*/, "data:image/png"));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

function snapshotCard(type, group, s, signal) {
  const path = `/automations/${seg(type)}/errors/${seg(group)}/snapshots/${seg(s.id)}`;
  const frameHost = h("div", { class: "snapshot-html" });
  const shotHost = h("div", { class: "snapshot-shot" });
  const facts = [
    `taken ${fmtAgo(s.taken_at)}`,
    s.task_id ? `task ${s.task_id}` : null,
    s.label ? `label ${s.label}` : null,
    s.html_bytes ? `HTML ${fmtBytes(s.html_bytes)}${s.truncated ? " (cut at 256 KiB)" : ""}` : "no HTML",
    s.png_bytes ? `screenshot ${fmtBytes(s.png_bytes)}` : "no screenshot",
  ].filter(Boolean);
  if (s.html_bytes) {
    body(path, "html", signal).then(
      (html) => {
        // sandbox="" : no scripts, no forms, no same-origin; the HTML is data, not a page of ours.
        const frame = h("iframe", { sandbox: "", title: `HTML of snapshot ${s.id}`, "data-role": "snapshot-html", referrerpolicy: "no-referrer" });
        frame.srcdoc = html;
        mount(frameHost, frame);
      },
      (err) => {
        if (!aborted(err)) mount(frameHost, note("error", `Could not read the HTML: ${err.message}`));
      },
    );
  }
  if (s.png_bytes) {
    body(path, "screenshot", signal).then(
      (url) => mount(shotHost, h("img", { src: url, alt: `screenshot of snapshot ${s.id}`, "data-role": "snapshot-shot" })),
      (err) => {
        if (!aborted(err)) mount(shotHost, note("error", `Could not read the screenshot: ${err.message}`));
      },
    );
  }
  return h(
    "section",
    { class: "panel wide snapshot", "data-snapshot": s.id },
    h("h3", {}, "Snapshot ", h("span", { class: "mono" }, s.id)),
    h("p", { class: "muted" }, facts.join(" · ")),
    s.url ? h("p", { class: "mono" }, s.url) : null,
    s.png_bytes ? h("h4", {}, "Screenshot") : null,
    shotHost,
    s.html_bytes ? h("h4", {}, "HTML ", h("small", { class: "muted" }, "(sandboxed: its scripts do not run)")) : null,
    frameHost,
  );
}

/** "#/errors/<type>/<group>": one group in full with its snapshots. */
export function errorGroupView(main, type, group) {
  const head = h("div", { "data-role": "group-facts" });
  const snaps = h("div", { "data-role": "snapshots" });
  mount(
    main,
    h(
      "section",
      { class: "view", id: "error-group" },
      h(
        "div",
        { class: "view-head" },
        h("h2", {}, "Error group ", h("span", { class: "mono" }, group)),
        h("a", { href: `#/automation/${encodeURIComponent(type)}` }, `← ${type}`),
      ),
      head,
      snaps,
    ),
  );
  let shown = null; // the snapshot ids drawn (bodies are fetched once)
  const controller = new AbortController();

  async function load(signal) {
    let g;
    try {
      g = await api(`/automations/${seg(type)}/errors/${seg(group)}`, { signal });
    } catch (err) {
      if (aborted(err)) throw err;
      mount(head, note("error", `Could not read the group: ${err.summary || err.message}`));
      return;
    }
    mount(
      head,
      h(
        "section",
        { class: "panel wide" },
        h(
          "dl",
          { class: "fields" },
          h("dt", {}, "exception"), h("dd", { class: "mono", "data-role": "exception" }, g.exception),
          h("dt", {}, "message"), h("dd", { "data-role": "message" }, g.message),
          h("dt", {}, "location"), h("dd", { class: "mono" }, g.location),
          h("dt", {}, "count"), h("dd", { "data-role": "count" }, String(g.count)),
          h("dt", {}, "first seen"), h("dd", { title: fmtTime(g.first_seen) }, fmtAgo(g.first_seen)),
          h("dt", {}, "last seen"), h("dd", { title: fmtTime(g.last_seen) }, fmtAgo(g.last_seen)),
          h("dt", {}, "domains"), h("dd", { "data-role": "domains" }, g.domains.join(", ") || "—"),
          h("dt", {}, "sample"), h("dd", {}, g.sample_task_id ? h("a", { href: `#/task/${encodeURIComponent(type)}/${encodeURIComponent(g.sample_task_id)}` }, g.sample_task_id) : "—", " ", g.sample_message),
        ),
        h("h3", {}, "Traceback"),
        h("pre", { class: "traceback", "data-role": "traceback" }, g.traceback || "—"),
      ),
    );
    const ids = (g.snapshots || []).map((s) => s.id).join(",");
    if (ids === shown) return;
    shown = ids;
    if (!g.snapshots || !g.snapshots.length) {
      mount(snaps, h("p", { class: "empty" }, "No snapshot (the task held neither a page nor a response when it failed)."));
      return;
    }
    mount(snaps, g.snapshots.map((s) => snapshotCard(type, group, s, controller.signal)));
  }

  const loader = poll(load, { everyMs: REFRESH_MS });
  const view = polledView(loader);
  return {
    update: view.update,
    destroy() {
      controller.abort();
      view.destroy();
    },
  };
}
