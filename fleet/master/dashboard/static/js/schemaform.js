// Forms generated from a pydantic JSON schema (config editor, submit form).
//
// Scalars get a typed input, enums a select, booleans a checkbox, anything
// nested a JSON textarea. Validation is the server's: its 422 errors are put
// back next to the field their `loc` names.

import { h, fmtJSON } from "./render.js";

/** Follow a local "$ref" ("#/$defs/Name") inside `root`. */
export function resolveRef(root, schema) {
  let s = schema || {};
  for (let i = 0; i < 20 && s.$ref; i += 1) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    s = path.reduce((node, key) => (node ? node[key] : undefined), root) || {};
  }
  return s;
}

/**
 * Describe one property: which widget it needs and whether null is allowed.
 *
 * @returns {{widget: "text"|"integer"|"number"|"numword"|"boolean"|"enum"|"json", nullable: boolean,
 *   options: any[], schema: object}}
 */
export function fieldKind(root, prop) {
  let s = resolveRef(root, prop);
  let nullable = false;
  const variants = s.anyOf || s.oneOf;
  if (variants) {
    const nonNull = variants.filter((v) => v.type !== "null");
    nullable = nonNull.length < variants.length;
    // A number or one keyword (`slots`: 4 or "auto"): a text input read back as either.
    const resolved = nonNull.map((v) => resolveRef(root, v));
    const num = resolved.find((v) => v.type === "integer" || v.type === "number");
    const word = resolved.find((v) => typeof v.const === "string");
    if (nonNull.length === 2 && num && word) {
      return { widget: "numword", nullable, options: [word.const], schema: { ...num, title: s.title, description: s.description } };
    }
    if (nonNull.length === 1) s = { ...resolveRef(root, nonNull[0]), title: s.title, description: s.description };
    else return { widget: "json", nullable, options: [], schema: s };
  }
  if (Array.isArray(s.enum)) return { widget: "enum", nullable, options: s.enum, schema: s };
  if (s.const !== undefined) return { widget: "enum", nullable, options: [s.const], schema: s };
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  if (Array.isArray(s.type) && s.type.includes("null")) nullable = true;
  if (type === "string") return { widget: "text", nullable, options: [], schema: s };
  if (type === "integer") return { widget: "integer", nullable, options: [], schema: s };
  if (type === "number") return { widget: "number", nullable, options: [], schema: s };
  if (type === "boolean") return { widget: "boolean", nullable, options: [], schema: s };
  return { widget: "json", nullable, options: [], schema: s };
}

/** A short hint line from the schema's constraints and default. */
export function hintOf(kind, prop) {
  const s = kind.schema;
  const parts = [];
  let type = kind.widget === "json" ? "JSON" : kind.widget;
  if (kind.widget === "numword") type = `${s.type} or ${JSON.stringify(kind.options[0])}`;
  parts.push(kind.nullable ? `${type} or empty` : type);
  if (s.minimum !== undefined) parts.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined) parts.push(`≤ ${s.maximum}`);
  if (s.exclusiveMaximum !== undefined) parts.push(`< ${s.exclusiveMaximum}`);
  if (s.minLength !== undefined) parts.push(`min length ${s.minLength}`);
  if (s.maxLength !== undefined) parts.push(`max length ${s.maxLength}`);
  if (s.pattern) parts.push(`pattern ${s.pattern}`);
  if (prop && prop.default !== undefined) parts.push(`default ${JSON.stringify(prop.default)}`);
  return parts.join(" · ");
}

function inputFor(kind, name, id, value) {
  const attrs = { id, name, "data-field": name };
  const s = kind.schema;
  if (kind.widget === "boolean") {
    return h("input", { ...attrs, type: "checkbox", checked: value === true });
  }
  if (kind.widget === "enum") {
    const opts = kind.options.map((o) =>
      h("option", { value: JSON.stringify(o), selected: JSON.stringify(o) === JSON.stringify(value) }, String(o)),
    );
    if (kind.nullable || value === undefined) opts.unshift(h("option", { value: "" }, "—"));
    return h("select", attrs, opts);
  }
  if (kind.widget === "integer" || kind.widget === "number") {
    return h("input", {
      ...attrs,
      type: "number",
      step: kind.widget === "integer" ? "1" : "any",
      min: s.minimum,
      max: s.maximum,
      value: value === undefined || value === null ? "" : String(value),
    });
  }
  if (kind.widget === "text" || kind.widget === "numword") {
    return h("input", {
      ...attrs,
      type: "text",
      autocomplete: "off",
      value: value === undefined || value === null ? "" : String(value),
    });
  }
  return h("textarea", { ...attrs, rows: 3, spellcheck: "false" }, value === undefined ? "" : fmtJSON(value));
}

/** Read one input back into a JSON value; `undefined` means "leave out". */
function readInput(kind, input) {
  if (kind.widget === "boolean") return input.checked;
  const raw = input.value;
  if (kind.widget === "enum") return raw === "" ? (kind.nullable ? null : undefined) : JSON.parse(raw);
  if (raw.trim() === "") return kind.nullable ? null : undefined;
  if (kind.widget === "integer" || kind.widget === "number") {
    const n = Number(raw);
    // Not a number: send the text so the server names the field in its 422.
    return Number.isFinite(n) ? n : raw;
  }
  if (kind.widget === "text") return raw;
  if (kind.widget === "numword") {
    if (raw.trim().toLowerCase() === String(kind.options[0]).toLowerCase()) return kind.options[0];
    const n = Number(raw);
    // Neither: send the text so the server names the field in its 422.
    return Number.isFinite(n) ? n : raw;
  }
  try {
    return JSON.parse(raw);
  } catch {
    throw new Error("not valid JSON");
  }
}

/**
 * Build a form for an object schema.
 *
 * @param {object} schema - the JSON schema (root, with $defs)
 * @param {{values?: object, idPrefix: string}} opts - current values, id prefix
 * @returns {{el: HTMLElement, read: () => object, changes: () => object,
 *   showErrors: (detail: any[], strip?: string[]) => string[], clearErrors: () => void}}
 */
export function buildForm(schema, opts) {
  const root = schema || {};
  const obj = resolveRef(root, root);
  const props = obj.properties || {};
  const required = new Set(obj.required || []);
  const values = opts.values || {};
  const fields = new Map();
  const el = h("div", { class: "schema-form" });
  for (const [name, prop] of Object.entries(props)) {
    const kind = fieldKind(root, prop);
    const id = `${opts.idPrefix}-${name}`;
    const value = values[name] !== undefined ? values[name] : prop.default;
    const input = inputFor(kind, name, id, value);
    const error = h("p", { class: "field-error", "data-error-for": name, role: "alert", hidden: true });
    const title = prop.title || resolveRef(root, prop).title || name;
    el.appendChild(
      h(
        "div",
        { class: `field field-${kind.widget}` },
        h("label", { for: id }, title, required.has(name) ? h("span", { class: "req", title: "required" }, " *") : null),
        input,
        h("small", { class: "hint" }, hintOf(kind, prop)),
        prop.description ? h("small", { class: "desc" }, prop.description) : null,
        error,
      ),
    );
    fields.set(name, { kind, input, error, initial: input.type === "checkbox" ? input.checked : input.value });
  }

  function setError(name, msg) {
    const f = fields.get(name);
    if (!f) return false;
    f.error.textContent = msg;
    f.error.hidden = false;
    f.input.setAttribute("aria-invalid", "true");
    return true;
  }

  function collect(onlyChanged) {
    const out = {};
    let bad = false;
    for (const [name, f] of fields) {
      const now = f.input.type === "checkbox" ? f.input.checked : f.input.value;
      if (onlyChanged && now === f.initial) continue;
      try {
        const v = readInput(f.kind, f.input);
        if (v !== undefined) out[name] = v;
      } catch (err) {
        bad = setError(name, err.message) || bad;
      }
    }
    if (bad) throw new Error("Fix the fields marked in red.");
    return out;
  }

  return {
    el,
    read: () => collect(false),
    changes: () => collect(true),
    clearErrors() {
      for (const f of fields.values()) {
        f.error.hidden = true;
        f.error.textContent = "";
        f.input.removeAttribute("aria-invalid");
      }
    },
    /** Show 422 errors at their fields; returns the messages no field took. */
    showErrors(detail, strip = ["body"]) {
      const rest = [];
      for (const e of detail || []) {
        const loc = (e.loc || []).map(String);
        const name = loc.find((part) => !strip.includes(part) && fields.has(part));
        if (!name || !setError(name, e.msg)) rest.push(`${loc.join(".")}: ${e.msg}`);
      }
      return rest;
    },
  };
}
