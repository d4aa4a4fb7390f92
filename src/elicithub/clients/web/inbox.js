// The inbox page: the open questions the signed-in person can answer (their own runs' and the approvals routed to
// them), kept as the inbox stream tells (from whichever hub), and answered in place. An item leaves when the stream
// says its question ended, whoever answered it.

import { aboutTheCall, createQuestion, isApproval } from "./approval.js";
import { h } from "./dom.js";
import { OUTCOMES, refusal } from "./prompt.js";
import { readParts } from "./stream.js";

const STREAM = "run/api/inbox/stream";
const JSON_HEADERS = { "content-type": "application/json" };
const MAX_BACKOFF_S = 10;
const OWN_RUN = "You (your own run)";

const list = document.getElementById("items");
const empty = document.getElementById("empty");
const status = document.getElementById("status"); // how many, or that the page is reconnecting
const notice = document.getElementById("notice"); // what became of the last question to leave
const refused = document.getElementById("refused");
const items = new Map(); // elicitationId -> {element, prompt, event}
const position = {}; // the stream's last event id, to resume after

function say(element, text, state = "ok") {
  element.textContent = text;
  element.dataset.state = state;
}

/** Who asks and about which tool, in a few words: "alice's call of ops.restart", "your question from mrtr". */
function label(event) {
  const context = event.context ?? {};
  const tool = [context.serverId, context.toolName].filter((s) => typeof s === "string").join(".");
  if (isApproval(event)) return `${context.requester ?? "someone"}'s call of ${tool}`;
  return tool ? `Your question from ${tool}` : "Your question";
}

/** How an answer travels: to the answer endpoint, with the conversation when it is the person's own. */
function sender(event) {
  return async (action, content) => {
    const body = { elicitationId: event.elicitationId, action };
    if (event.conversationId) body.conversationId = event.conversationId;
    if (content !== undefined) body.content = content;
    const response = await fetch("run/api/elicitation-responses", {
      method: "POST",
      headers: JSON_HEADERS,
      body: JSON.stringify(body),
    });
    if (!response.ok) throw await refusal(response);
    const { outcome } = await response.json();
    return OUTCOMES.includes(outcome) ? outcome : null;
  };
}

function add(event) {
  const id = String(event.elicitationId ?? "");
  if (!id || items.has(id)) return;
  const prompt = createQuestion(event, sender(event));
  const created = String(event.createdAt ?? "");
  // A question of the person's own run says so as an approval card says who asks, about what, and by when.
  if (!isApproval(event)) prompt.element.querySelector(".prompt-head").after(...aboutTheCall(event, OWN_RUN));
  const element = h("li", { class: "item", "data-elicitation-id": id, "data-created-at": created }, prompt.element);
  // Newest first, wherever it fits (a resumed stream may bring an older one after newer ones).
  const later = [...list.children].find((child) => (child.dataset.createdAt ?? "") < created);
  list.insertBefore(element, later ?? null);
  items.set(id, { element, prompt, event });
  update();
}

function remove(data) {
  const id = String(data.elicitationId ?? "");
  const item = items.get(id);
  if (item === undefined) return;
  item.prompt.dispose();
  item.element.remove();
  items.delete(id);
  const by = data.answeredBy ? ` by ${data.answeredBy}` : "";
  const ended = { accepted: `answered${by}`, declined: `declined${by}`, cancelled: "cancelled", expired: "expired" };
  say(notice, `${label(item.event)}: ${ended[data.outcome] ?? "ended"}.`);
  update();
}

function reset() {
  for (const { prompt } of items.values()) prompt.dispose();
  items.clear();
  list.replaceChildren();
  update();
}

function update() {
  empty.hidden = items.size > 0;
  const count = items.size === 1 ? "1 question to answer" : `${items.size} questions to answer`;
  say(status, count);
}

function apply(part) {
  if (part === null || typeof part !== "object") return;
  if (part.type === "inbox-reset") reset();
  else if (part.type === "inbox-added") add(part);
  else if (part.type === "inbox-removed") remove(part);
  // Once the stream has given the whole list (its first event with an id), the page shows what there is.
  if (position.lastEventId) document.body.dataset.ready = "true";
}

async function signInLink() {
  try {
    const { signIn } = await (await fetch("run/api/me")).json();
    return signIn ? h("a", { href: signIn }, "Sign in") : null;
  } catch {
    return null;
  }
}

/** Follow the stream for as long as the page is open: after a break, resume after the last event read. */
async function follow() {
  for (let failures = 0; ; ) {
    const headers = position.lastEventId ? { "last-event-id": position.lastEventId } : {};
    const response = await fetch(STREAM, { headers }).catch(() => null);
    if (response?.status === 401) {
      refused.replaceChildren("Sign in to see the questions you can answer. ", (await signInLink()) ?? "");
      refused.hidden = false;
      status.textContent = "";
      document.body.dataset.ready = "true";
      return;
    }
    if (response?.ok) {
      const before = position.lastEventId;
      await readParts(response, apply, position).catch(() => undefined);
      if (position.lastEventId !== before) failures = 0;
    }
    failures += 1;
    say(status, "The connection to the hub was lost; reconnecting…", "error");
    await new Promise((done) => setTimeout(done, 1000 * Math.min(failures, MAX_BACKOFF_S)));
  }
}

async function who() {
  const element = document.getElementById("who");
  try {
    const { user, name } = await (await fetch("run/api/me")).json();
    element.textContent = user ? `Signed in as ${name ?? user}` : "Not signed in";
  } catch {
    element.textContent = "The hub cannot be reached.";
  }
}

window.addEventListener("message", (event) => {
  // Only the hub's own pages (the sign-in callback) may say a url question is done; the stream then removes it.
  if (event.origin !== window.location.origin) return;
  const data = event.data;
  if (data === null || typeof data !== "object" || data.type !== "elicithub:auth-complete") return;
  items.get(String(data.elicitationId))?.prompt.resolve(data.outcome);
});

who();
follow();
