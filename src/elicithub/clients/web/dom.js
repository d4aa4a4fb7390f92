// Building DOM nodes. Children that are strings become text nodes, so text from the server is never markup.

export function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

let counter = 0;

/** A document-unique id for wiring labels, hints and errors to their controls. */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** A random id; crypto.randomUUID needs a secure context, which a LAN http:// address is not. */
export function randomId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `${prefix}_${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
