// One form control per property of a flat requestedSchema: how it looks, its default, and the value it yields.

import { h, uid } from "./dom.js";
import { FORMAT_MESSAGES, options } from "./schema.js";

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

/**
 * A labelled control for one property: {name, element, read(), badInput(), showError(message), focus()}.
 * read() gives the JSON value to send, or undefined for "no answer"; badInput() names input the browser
 * could not even turn into a value (half a date, letters in a number).
 */
export function createField(name, prop, required) {
  const id = uid("field");
  const title = typeof prop.title === "string" && prop.title ? prop.title : name;
  const hint = hintFor(prop);
  const hintId = hint ? `${id}-hint` : null;
  const errorId = `${id}-error`;
  const error = h("p", { class: "field-error", id: errorId, hidden: true });
  const describedBy = [hintId, errorId].filter(Boolean).join(" ");
  const marker = required ? [h("span", { class: "required", "aria-hidden": "true" }, " *")] : [];
  const hintNode = hint ? h("p", { class: "hint", id: hintId }, hint) : null;

  const control = buildControl(prop, { id, required, describedBy });
  let element;
  if (control.group) {
    const spoken = required ? h("span", { class: "visually-hidden" }, " (required)") : null;
    const legend = h("legend", {}, title, ...marker, spoken);
    const attributes = { class: "field field-group", "aria-describedby": describedBy };
    element = h("fieldset", attributes, legend, hintNode, control.node, error);
  } else if (prop.type === "boolean") {
    const label = h("label", { for: id }, control.node, " ", title, ...marker);
    element = h("div", { class: "field field-check" }, label, hintNode, error);
  } else {
    const label = h("label", { for: id }, title, ...marker);
    element = h("div", { class: "field" }, label, hintNode, control.node, error);
  }

  return {
    name,
    element,
    read: control.read,
    badInput: control.badInput ?? (() => null),
    focus: () => control.focusable.focus(),
    showError(message) {
      error.textContent = message ?? "";
      error.hidden = !message;
      for (const input of control.inputs) input.setAttribute("aria-invalid", message ? "true" : "false");
    },
  };
}

function buildControl(prop, { id, required, describedBy }) {
  const common = { id, "aria-describedby": describedBy, "aria-required": required ? "true" : null };
  const choices = options(prop);
  if (prop.type === "array") return multiSelect(prop, choices ?? [], required, id);
  if (choices !== null) return select(prop, choices, common);
  if (prop.type === "boolean") {
    const input = h("input", { ...common, type: "checkbox" });
    input.checked = prop.default === true;
    return { node: input, inputs: [input], focusable: input, read: () => input.checked };
  }
  if (prop.type === "number" || prop.type === "integer") return number(prop, common);
  return text(prop, common);
}

function text(prop, common) {
  const format = typeof prop.format === "string" ? prop.format : null;
  const type = INPUT_TYPES[format] ?? "text";
  const input = h("input", { ...common, type, step: type === "datetime-local" ? "1" : null, autocomplete: "off" });
  if (typeof prop.default === "string") {
    input.value = type === "datetime-local" ? toLocalInput(prop.default) : prop.default;
  }
  const read = () => {
    if (input.value === "") return undefined;
    return type === "datetime-local" ? fromLocalInput(input.value) : input.value;
  };
  const badInput = () => (input.validity.badInput && format ? FORMAT_MESSAGES[format] : null);
  return { node: input, inputs: [input], focusable: input, read, badInput };
}

function number(prop, common) {
  const integer = prop.type === "integer";
  const input = h("input", {
    ...common,
    type: "number",
    inputmode: integer ? "numeric" : "decimal",
    step: integer ? "1" : "any",
    min: typeof prop.minimum === "number" ? prop.minimum : null,
    max: typeof prop.maximum === "number" ? prop.maximum : null,
  });
  if (typeof prop.default === "number") input.value = String(prop.default);
  const read = () => (input.value === "" ? undefined : Number(input.value));
  const badInput = () => (input.validity.badInput ? (integer ? "must be an integer" : "must be a number") : null);
  return { node: input, inputs: [input], focusable: input, read, badInput };
}

function select(prop, choices, common) {
  const node = h(
    "select",
    common,
    h("option", { value: "" }, "Choose…"),
    choices.map((c) => h("option", { value: c.value }, c.title)),
  );
  if (typeof prop.default === "string") node.value = prop.default;
  return { node, inputs: [node], focusable: node, read: () => (node.value === "" ? undefined : node.value) };
}

function multiSelect(prop, choices, required, id) {
  const chosen = new Set(Array.isArray(prop.default) ? prop.default : []);
  const boxes = choices.map((c, i) => {
    const box = h("input", { type: "checkbox", id: `${id}-${i}`, value: c.value });
    box.checked = chosen.has(c.value);
    return box;
  });
  const node = h(
    "div",
    { class: "choices" },
    boxes.map((box, i) => h("label", { for: box.id, class: "choice" }, box, " ", choices[i].title)),
  );
  const read = () => {
    const values = boxes.filter((b) => b.checked).map((b) => b.value);
    // Nothing ticked on an optional field means "no answer"; on a required one it is the answer [].
    return values.length === 0 && !required ? undefined : values;
  };
  return { node, inputs: boxes, focusable: boxes[0] ?? node, read, group: true };
}

function hintFor(prop) {
  const parts = [];
  if (typeof prop.description === "string" && prop.description) parts.push(prop.description);
  const range = (low, high, unit) => {
    if (low != null && high != null) return `${low}–${high} ${unit}`;
    if (low != null) return `at least ${low} ${unit}`;
    if (high != null) return `at most ${high} ${unit}`;
    return null;
  };
  if (prop.type === "string") {
    const length = range(prop.minLength, prop.maxLength, "characters");
    if (length) parts.push(`Length: ${length}.`);
    if (prop.format === "date-time") parts.push("In your local time.");
  } else if (prop.type === "number" || prop.type === "integer") {
    const span = range(prop.minimum, prop.maximum, "").trim();
    if (span) parts.push(`${prop.type === "integer" ? "A whole number" : "A number"}, ${span}.`);
  } else if (prop.type === "array") {
    const items = range(prop.minItems, prop.maxItems, "");
    if (items) parts.push(`Choose ${items.trim()}.`);
  }
  return parts.join(" ");
}

const pad = (n) => String(n).padStart(2, "0");

function toLocalInput(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return "";
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
  );
}

function fromLocalInput(value) {
  // A datetime-local value has no zone; send the instant it means here, as RFC 3339 UTC.
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
