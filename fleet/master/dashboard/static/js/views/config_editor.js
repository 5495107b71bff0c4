// The type-wide config editor and the live view of its push to every worker.

import { api, seg } from "../api.js";
import { store } from "../store.js";
import { buildForm } from "../schemaform.js";
import { h, mount, note, stateBadge, table } from "../render.js";

/**
 * Rows of the push panel: for each worker, whether it applied generation `gen`.
 *
 * @returns {{worker_id: string, applied: number, desired: number, done: boolean}[]}
 */
export function pushProgress(workers, gen) {
  return workers.map((w) => {
    const applied = (w.gen && w.gen.applied) || 0;
    return { worker_id: w.worker_id, state: w.state, applied, desired: (w.gen && w.gen.desired) || 0, done: applied >= gen };
  });
}

export function configEditor(type) {
  const msg = h("div", { class: "messages", "aria-live": "polite" });
  const formHost = h("div", {});
  const push = h("div", { class: "push", "data-role": "push" });
  const saveBtn = h("button", { type: "submit", class: "btn primary" }, "Save and push");
  const el = h(
    "section",
    { class: "panel", id: "config-editor" },
    h("h3", {}, "Config"),
    h("p", { class: "muted" }, "Saved fields are merged into the type-wide config, checked by the master against the Config schema and pushed to every worker with a new generation."),
    h("form", { novalidate: true, onsubmit: (e) => { e.preventDefault(); save(); } }, formHost, msg, saveBtn),
    push,
  );
  let form = null;
  let pushedGen = null;

  async function load() {
    try {
      const cfg = await api(`/automations/${seg(type)}/config`);
      form = buildForm(cfg.schema, { values: cfg.effective || cfg.config, idPrefix: "cfg" });
      mount(formHost, form.el);
      if (cfg.missing && cfg.missing.length) {
        mount(msg, note("error", `Required fields not set yet: ${cfg.missing.join(", ")}`));
      }
    } catch (err) {
      mount(formHost, note("error", `Could not load the config: ${err.summary || err.message}`));
    }
  }

  async function save() {
    if (!form) return;
    form.clearErrors();
    let patch;
    try {
      patch = form.changes();
    } catch (err) {
      mount(msg, note("error", err.message));
      return;
    }
    if (!Object.keys(patch).length) {
      mount(msg, note("info", "Nothing changed."));
      return;
    }
    saveBtn.disabled = true;
    try {
      const res = await api(`/automations/${seg(type)}/config`, { method: "PATCH", body: patch });
      pushedGen = res.gen;
      const saved = () => {
        const missing = res.missing || [];
        // a stored config can still lack required fields: the workers stay in ERROR until set
        mount(msg, missing.length
          ? note("error", `Saved: generation ${res.gen} pushed to ${res.workers.length} worker(s); required fields not set yet: ${missing.join(", ")}`)
          : note("ok", `Saved: generation ${res.gen} pushed to ${res.workers.length} worker(s).`));
      };
      saved();
      await load();
      saved();
      store.refreshSoon(0);
      update();
    } catch (err) {
      const rest = err.status === 422 ? form.showErrors(err.fieldErrors, ["body"]) : [err.summary || err.message];
      mount(msg, note("error", rest.length ? rest.join("; ") : "The master refused the config: see the fields marked in red."));
    } finally {
      saveBtn.disabled = false;
    }
  }

  function update() {
    if (pushedGen === null) return;
    const rows = pushProgress(store.workersOf(type), pushedGen).map((r) =>
      h(
        "tr",
        { "data-worker": r.worker_id, class: r.done ? "applied" : "waiting" },
        h("td", { class: "mono" }, r.worker_id),
        h("td", {}, stateBadge(r.state)),
        h("td", { "data-col": "applied" }, String(r.applied)),
        h("td", {}, r.done ? h("span", { class: "badge ok" }, "applied") : h("span", { class: "badge warn" }, "waiting")),
      ),
    );
    mount(push, h("h4", {}, `Push of generation ${pushedGen}`), table(["worker", "state", "applied gen", ""], rows));
  }

  load();
  return { el, update };
}
