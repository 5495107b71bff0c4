// Readable rendering of JSON schemas: one row per field, raw JSON on demand.

import { h, fmtJSON, table } from "./render.js";
import { resolveRef } from "./schemaform.js";

/** A short type name: "integer", "string | null", "list[Item]", "Cookie". */
export function typeName(root, schema, depth = 0) {
  if (!schema || depth > 6) return "any";
  if (schema.$ref) return schema.$ref.split("/").pop();
  const variants = schema.anyOf || schema.oneOf;
  if (variants) return variants.map((v) => typeName(root, v, depth + 1)).join(" | ");
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.type === "array") return `list[${typeName(root, schema.items, depth + 1)}]`;
  if (schema.type === "object" && schema.additionalProperties && typeof schema.additionalProperties === "object") {
    return `dict[str, ${typeName(root, schema.additionalProperties, depth + 1)}]`;
  }
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return schema.type || "any";
}

function constraints(schema) {
  const s = schema || {};
  const keys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "format"];
  return keys.filter((k) => s[k] !== undefined).map((k) => `${k} ${s[k]}`).join(", ");
}

/** The fields of an object schema as a table (or a note when it has none). */
export function fieldsTable(schema) {
  const root = schema || {};
  const obj = resolveRef(root, root);
  const props = obj.properties || {};
  const required = new Set(obj.required || []);
  const names = Object.keys(props);
  if (!names.length) return h("p", { class: "muted" }, `${typeName(root, obj)} (no fields)`);
  const rows = names.map((name) => {
    const p = props[name];
    return h(
      "tr",
      {},
      h("td", { class: "mono" }, name),
      h("td", { class: "mono" }, typeName(root, p)),
      h("td", {}, required.has(name) ? "required" : p.default !== undefined ? `default ${JSON.stringify(p.default)}` : "optional"),
      h("td", {}, [constraints(resolveRef(root, p)), p.description].filter(Boolean).join(" — ")),
    );
  });
  return table(["field", "type", "required / default", "notes"], rows, { class: "schema" });
}

/** A collapsible block: title, field table and the raw schema. */
export function schemaBlock(title, schema, open = false) {
  return h(
    "details",
    { class: "schema-block", open },
    h("summary", {}, title, schema && schema.title ? h("span", { class: "muted" }, ` (${schema.title})`) : null),
    schema ? fieldsTable(schema) : h("p", { class: "muted" }, "not declared"),
    schema ? h("details", { class: "raw" }, h("summary", {}, "JSON schema"), h("pre", {}, fmtJSON(schema))) : null,
  );
}

/** Every schema of a catalog entry: config, task payload, output, pools. */
export function entrySchemas(entry) {
  const blocks = [
    schemaBlock("Config", entry.config),
    schemaBlock("Task payload", entry.queue ? entry.queue.payload : null),
    schemaBlock("Output", entry.stream ? entry.stream.payload : null),
  ];
  for (const [local, pool] of Object.entries(entry.pools || {})) {
    blocks.push(schemaBlock(`Pool “${local}” (${pool.name}) payload`, pool.payload));
    blocks.push(schemaBlock(`Pool “${local}” (${pool.name}) tags`, pool.tags));
  }
  return blocks;
}
