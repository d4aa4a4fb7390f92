// Messages the page offers to send with one click (the demo's calls while the demo is on), shown in the introduction
// of each new conversation.

import { h } from "./dom.js";

/** The hub's suggestions ([{label, message}]); none when it has none or cannot be asked. */
export async function loadSuggestions() {
  try {
    const response = await fetch("run/api/suggestions");
    if (!response.ok) return [];
    const { suggestions } = await response.json();
    return Array.isArray(suggestions) ? suggestions.filter((s) => typeof s?.message === "string") : [];
  } catch {
    return [];
  }
}

/** A row of buttons, one per suggestion, each sending its message through `send`; null when there are none. */
export function suggestionButtons(suggestions, send) {
  if (suggestions.length === 0) return null;
  const buttons = suggestions.map(({ label, message }) =>
    h("button", { type: "button", class: "suggestion", title: message, onclick: () => send(message) }, label || message),
  );
  return h("div", { class: "suggestions", role: "group", "aria-label": "Try" }, ...buttons);
}
