// The chat page: sends messages to the AI SDK UI message stream endpoint, renders the stream as it arrives,
// shows questions as prompts, and picks the conversation (and any open question) up again after a reload.

import { h, randomId } from "./dom.js";
import { AnswerError, OUTCOMES, createPrompt } from "./prompt.js";
import { readParts } from "./stream.js";

const STORAGE_KEY = "elicithub.conversation";
const JSON_HEADERS = { "content-type": "application/json" };

const transcript = document.getElementById("transcript");
const composer = document.getElementById("composer");
const input = document.getElementById("message");
const prompts = new Map(); // elicitationId -> {prompt, reply}: the prompt and the stream that asked it
let conversationId = null;
let shownMessages = 0; // how many transcript messages the hub had when this page last read the conversation

async function refusal(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: keep the status alone
  }
  return new AnswerError(response.status, body?.error ?? { message: `The hub answered ${response.status}.` });
}

function chat(conversation, parts) {
  return fetch("run/api/chat", {
    method: "POST",
    headers: { ...JSON_HEADERS, "x-supports-elicitation": "true" },
    body: JSON.stringify({ id: conversation, messages: [{ id: randomId("msg"), role: "user", parts }] }),
  });
}

/** Append to `parent`, keeping the transcript scrolled to its end if the person was reading there. */
function place(parent, child) {
  const following = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  parent.append(child);
  if (following) transcript.scrollTop = transcript.scrollHeight;
  return child;
}

function userMessage(text) {
  const who = h("p", { class: "who" }, "You");
  place(transcript, h("div", { class: "message user" }, who, h("p", { class: "text" }, text)));
}

/** One assistant turn as its stream delivers it; its element appears with the first thing worth showing. */
class Reply {
  constructor() {
    this.element = null;
    this.texts = new Map();
    this.tools = new Map();
    this.live = false;
  }

  get body() {
    if (this.element === null) {
      const who = h("p", { class: "who" }, "Assistant");
      this.element = place(transcript, h("div", { class: "message assistant" }, who));
    }
    return this.element;
  }

  append(node) {
    return place(this.body, node);
  }

  async read(response) {
    this.live = true;
    try {
      await readParts(response, (part) => this.apply(part));
    } catch {
      this.append(h("p", { class: "error" }, "The connection to the hub was lost."));
    } finally {
      this.live = false; // questions asked here are answered through the chat from now on
    }
  }

  text(id, delta) {
    let node = this.texts.get(id);
    if (node === undefined) {
      node = this.append(h("p", { class: "text" }));
      this.texts.set(id, node);
    }
    place(node, delta);
  }

  apply(part) {
    if (part === null || typeof part !== "object") return;
    const data = part.data ?? {};
    switch (part.type) {
      case "text-start":
        this.text(part.id, "");
        break;
      case "text-delta":
        this.text(part.id, String(part.delta ?? ""));
        break;
      case "tool-input-available":
        this.toolStarted(part);
        break;
      case "tool-output-available":
        this.toolFinished(part.toolCallId, "done", part.output);
        break;
      case "tool-output-error":
        this.toolFinished(part.toolCallId, "failed", part.errorText);
        break;
      case "error":
        this.append(h("p", { class: "error" }, String(part.errorText ?? "Something went wrong.")));
        break;
      case "data-elicitation-request":
        if (typeof data.elicitationId === "string") this.ask(data);
        break;
      case "data-elicitation-resolved":
        prompts.get(String(data.elicitationId ?? part.id))?.prompt.resolve(data.outcome);
        break;
      default:
      // start, finish, text-end and kinds this page does not know: nothing to show.
    }
  }

  toolStarted(part) {
    const status = h("span", { class: "tool-status" }, "running…");
    const node = this.append(
      h(
        "div",
        { class: "tool" },
        h("p", {}, "Tool ", h("code", {}, String(part.toolName ?? "")), " ", status),
        h("details", {}, h("summary", {}, "Arguments"), h("pre", {}, JSON.stringify(part.input ?? {}, null, 2))),
      ),
    );
    this.tools.set(part.toolCallId, { node, status });
  }

  toolFinished(callId, state, output) {
    const tool = this.tools.get(callId);
    if (tool === undefined) return;
    tool.status.textContent = state;
    tool.status.dataset.state = state;
    const text = typeof output === "string" ? output : JSON.stringify(output, null, 2);
    tool.node.append(h("details", {}, h("summary", {}, "Result"), h("pre", {}, text ?? "")));
  }

  ask(event) {
    if (prompts.has(event.elicitationId)) return;
    const prompt = createPrompt(event, answerer(event, conversationId, this));
    prompts.set(event.elicitationId, { prompt, reply: this });
    this.append(prompt.element);
  }
}

/** How a prompt's answer travels: to the answer endpoint while its stream is open, else as a chat message. */
function answerer(event, conversation, reply) {
  return async (action, content) => {
    const answer = { elicitationId: event.elicitationId, action };
    if (content !== undefined) answer.content = content;
    if (reply.live) {
      const response = await fetch("run/api/elicitation-responses", {
        method: "POST",
        headers: JSON_HEADERS,
        body: JSON.stringify({ conversationId: conversation, ...answer }),
      });
      if (!response.ok) throw await refusal(response);
      const { outcome } = await response.json();
      return OUTCOMES.includes(outcome) ? outcome : null;
    }
    // The stream that asked is gone (the page was reloaded): the run continues on this request instead.
    const response = await chat(conversation, [{ type: "elicitation-response", ...answer }]);
    if (!response.ok) throw await refusal(response);
    const next = new Reply();
    next.read(response).then(() => {
      // Nothing but the resolution came back: the run goes on in a stream another page holds.
      if (next.element === null) follow(conversation);
    });
    return null;
  };
}

async function send(text) {
  userMessage(text);
  const reply = new Reply();
  let response;
  try {
    response = await chat(conversationId, [{ type: "text", text }]);
  } catch {
    reply.append(h("p", { class: "error" }, "The hub cannot be reached."));
    return;
  }
  if (!response.ok) {
    reply.append(h("p", { class: "error" }, (await refusal(response)).message));
    return;
  }
  await reply.read(response);
}

function startConversation(id) {
  for (const { prompt } of prompts.values()) prompt.dispose();
  prompts.clear();
  shownMessages = 0;
  transcript.replaceChildren(
    h("p", { class: "intro" }, "Ask something, or call a tool with /call SERVER.TOOL {json arguments}."),
  );
  conversationId = id ?? randomId("conv");
  localStorage.setItem(STORAGE_KEY, conversationId);
}

/** The conversation as the hub keeps it ({id, messages, pending}), or null when it does not know it for us. */
async function load(id) {
  const response = await fetch(`run/api/conversations/${encodeURIComponent(id)}`);
  return response.ok ? response.json() : null;
}

function showConversation({ id, messages, pending }) {
  startConversation(id);
  for (const message of messages) {
    if (message.role === "user") userMessage(String(message.text));
    else new Reply().text("restored", String(message.text));
  }
  shownMessages = messages.length;
  const reply = new Reply();
  for (const event of pending) reply.ask(event);
}

/**
 * Keep up with a run whose stream this page does not hold (it was reloaded while the run waited): read the
 * conversation until the run has moved on (a new message or a new question), for at most a minute.
 */
async function follow(conversation) {
  for (let attempt = 0; attempt < 60; attempt += 1) {
    await new Promise((done) => setTimeout(done, 1000));
    if (conversation !== conversationId) return;
    const data = await load(conversation).catch(() => null);
    if (data === null || conversation !== conversationId) return;
    if (data.messages.length > shownMessages || data.pending.some((e) => !prompts.has(e.elicitationId))) {
      showConversation(data);
      return;
    }
  }
}

async function showUser() {
  const who = document.getElementById("who");
  try {
    const { user } = await (await fetch("run/api/me")).json();
    who.textContent = user ? `Signed in as ${user}` : "Not signed in: tools cannot ask you anything.";
  } catch {
    who.textContent = "The hub cannot be reached.";
  }
}

window.addEventListener("message", (event) => {
  // Only the hub's own pages (the auth callback) may say a question is done.
  if (event.origin !== window.location.origin) return;
  const data = event.data;
  if (data === null || typeof data !== "object" || data.type !== "elicithub:auth-complete") return;
  const asked = prompts.get(String(data.elicitationId));
  if (asked === undefined || !asked.prompt.open) return;
  asked.prompt.resolve(data.outcome);
  if (!asked.reply.live) follow(conversationId);
});

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  send(text);
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

document.getElementById("new-conversation").addEventListener("click", () => {
  startConversation();
  input.focus();
});

showUser();
const kept = localStorage.getItem(STORAGE_KEY);
const restored = kept ? await load(kept).catch(() => null) : null;
if (restored === null) startConversation();
else showConversation(restored);
document.body.dataset.ready = "true";
