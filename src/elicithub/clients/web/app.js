// The chat page: sends messages to the AI SDK UI message stream endpoint, renders the stream as it arrives,
// shows questions as prompts, and picks the conversation (and any open question) up again after a reload.

import { createQuestion } from "./approval.js";
import { h, randomId } from "./dom.js";
import { OUTCOMES, refusal } from "./prompt.js";
import { Steps } from "./steps.js";
import { readParts } from "./stream.js";
import { loadSuggestions, suggestionButtons } from "./suggestions.js";

const STORAGE_KEY = "elicithub.conversation";
const JSON_HEADERS = { "content-type": "application/json" };
const RECONNECTS = 5; // failed tries in a row at reading a run again before the page gives up on it

const transcript = document.getElementById("transcript");
const composer = document.getElementById("composer");
const input = document.getElementById("message");
const prompts = new Map(); // elicitationId -> {prompt, reply}: the prompt and the stream that asked it
let conversationId = null;
let session = new AbortController(); // aborts the runs this page reads again when it leaves the conversation
let suggestions = []; // what the introduction offers to send with one click

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
  constructor(conversation) {
    this.conversation = conversation;
    this.element = null;
    this.steps = new Steps((node) => this.append(node), place);
    this.streams = 0; // how many streams of this page carry the run (while any does, it answers questions)
    this.asked = new Set(); // the questions shown in this reply, by elicitation id
    this.awaited = new Set(); // while reattached: shown questions the replay has not come to yet (see reattach)
    this.held = new Map(); // while reattached: questions the replay asked before those, unless they ended
    this.finished = false; // whether the stream being read came to the run's end
  }

  get live() {
    return this.streams > 0;
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

  /** Show a stream's parts as they arrive; resolves to false when it broke off before the run's end. */
  async read(response, position) {
    this.streams += 1;
    this.finished = false;
    this.steps.restart(Boolean(position?.lastEventId));
    try {
      await readParts(response, (part) => this.apply(part), position);
      return this.finished;
    } catch {
      return false;
    } finally {
      this.streams -= 1;
    }
  }

  lost() {
    this.append(h("p", { class: "error" }, "The connection to the hub was lost."));
  }

  /** The stream broke: while the run still waits for an answer here, read it again; else say it was lost. */
  dropped() {
    if ([...this.asked].some((id) => prompts.get(id)?.prompt.open)) reattach(this);
    else this.lost();
  }

  apply(part) {
    if (part === null || typeof part !== "object") return;
    const data = part.data ?? {};
    if (part.type === "finish") this.finished = true;
    if (this.awaited.size > 0) {
      this.passOver(part, data);
      return;
    }
    if (this.steps.apply(part)) return;
    switch (part.type) {
      case "finish":
        this.steps.settled();
        break;
      case "error":
        this.append(h("p", { class: "error" }, String(part.errorText ?? "Something went wrong.")));
        break;
      case "data-elicitation-request":
        this.ask(data);
        break;
      case "data-elicitation-resolved":
        prompts.get(String(data.elicitationId ?? part.id))?.prompt.resolve(data.outcome);
        break;
      default:
      // start, steps and kinds this page does not know: nothing to show.
    }
  }

  /** A part replayed from before the questions on screen: the page shows it already, or never showed it. */
  passOver(part, data) {
    const id = String(data.elicitationId ?? part.id);
    if (part.type === "data-elicitation-resolved") {
      this.held.delete(id);
      // A question on screen may have ended since the page was shown; ending one twice changes nothing.
      prompts.get(id)?.prompt.resolve(data.outcome);
    } else if (part.type === "data-elicitation-request") {
      if (!this.awaited.delete(id) && !prompts.has(id)) this.held.set(id, data);
      if (this.awaited.size > 0) return;
      // The replay has caught up with the page: questions asked meanwhile that are still open show now.
      for (const event of this.held.values()) this.ask(event);
      this.held.clear();
    }
  }

  ask(event) {
    if (typeof event.elicitationId !== "string" || prompts.has(event.elicitationId)) return;
    const prompt = createQuestion(event, answerer(event, this));
    prompts.set(event.elicitationId, { prompt, reply: this });
    this.asked.add(event.elicitationId);
    this.append(prompt.element);
  }
}

/** How a prompt's answer travels: to the answer endpoint while its stream is open, else as a chat message. */
function answerer(event, reply) {
  const { conversation } = reply;
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
    // No stream of this page carries the run (it could not be read again): it continues on this request.
    const response = await chat(conversation, [{ type: "elicitation-response", ...answer }]);
    if (!response.ok) throw await refusal(response);
    const next = new Reply(conversation);
    next.read(response).then((whole) => {
      // Nothing but the resolution came back: the run goes on in a stream another page holds; follow it too.
      if (next.element === null) reattach(reply);
      else if (!whole) next.dropped();
    });
    return null;
  };
}

async function send(text) {
  userMessage(text);
  const reply = new Reply(conversationId);
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
  if (!(await reply.read(response))) reply.dropped();
}

function startConversation(id) {
  session.abort();
  session = new AbortController();
  for (const { prompt } of prompts.values()) prompt.dispose();
  prompts.clear();
  transcript.replaceChildren(
    h("p", { class: "intro" }, "Ask something, or call a tool with /call SERVER.TOOL {json arguments}."),
  );
  const offered = suggestionButtons(suggestions, send);
  if (offered !== null) transcript.append(offered);
  conversationId = id ?? randomId("conv");
  localStorage.setItem(STORAGE_KEY, conversationId);
}

/** The conversation as the hub keeps it ({id, messages, pending}), or null when it does not know it for us. */
async function load(id) {
  const response = await fetch(`run/api/conversations/${encodeURIComponent(id)}`);
  return response.ok ? response.json() : null;
}

/** Show the conversation as the hub keeps it; returns the reply that holds its open questions. */
function showConversation({ id, messages, pending }) {
  startConversation(id);
  for (const message of messages) {
    if (message.role === "user") userMessage(String(message.text));
    else new Reply(id).steps.text("restored", String(message.text));
  }
  const reply = new Reply(id);
  for (const event of pending) reply.ask(event);
  return reply;
}

/** The conversation's current run again (replayed, then live), after `lastEventId` if given; null if unreachable. */
function runStream(conversation, lastEventId, signal) {
  const headers = lastEventId ? { "last-event-id": lastEventId } : {};
  const url = `run/api/conversations/${encodeURIComponent(conversation)}/stream`;
  return fetch(url, { headers, signal }).catch(() => null);
}

/**
 * Follow the run of `reply`'s questions when no stream of this page carries it: the page was reloaded, its
 * connection broke, or the run went on in a stream another page holds.
 *
 * The hub replays the run from its start, then follows it live. Questions and their ends carry ids, but text
 * does not, so what the page shows already is recognised by position instead: a run stops at its questions,
 * so every part before the requests of the questions this reply shows is on the page already (in the restored
 * transcript or in the stream that asked) or was never meant to be (tool steps are not restored), and is passed
 * over until the replay has come to all of them. Meanwhile only the ends of questions are applied (ending one
 * twice changes nothing), and questions the page does not show yet are held, to show once it has caught up
 * unless they ended before. A broken connection resumes after the last event read (`Last-Event-ID`).
 */
async function reattach(reply) {
  if (reply.live || reply.asked.size === 0 || reply.conversation !== conversationId) return;
  const { signal } = session;
  const { conversation } = reply;
  reply.awaited = new Set(reply.asked);
  reply.streams += 1; // questions are answered at the answer endpoint while this page follows the run
  let finished = false;
  try {
    finished = await readAgain(reply, conversation, signal);
  } finally {
    reply.streams -= 1;
  }
  const missing = reply.awaited;
  reply.awaited = new Set();
  reply.held.clear();
  if (signal.aborted) return;
  if (!finished) {
    reply.lost();
  } else if (missing.size > 0) {
    // The run ended without asking the questions shown here: they were a replaced run's, or the hub no longer
    // keeps what its run said. Read the conversation once more and show it as the hub has it.
    const data = await load(conversation).catch(() => null);
    if (data === null || signal.aborted) return;
    const restored = showConversation(data);
    if ([...restored.asked].some((id) => !missing.has(id))) reattach(restored);
  }
}

/** Read the run into `reply` to its end (true), resuming after a broken connection, or give up (false). */
async function readAgain(reply, conversation, signal) {
  const position = {};
  for (let failures = 0; failures < RECONNECTS; ) {
    if (failures > 0) await new Promise((done) => setTimeout(done, 1000 * failures));
    if (signal.aborted) return false;
    const resumeAfter = position.lastEventId;
    const response = await runStream(conversation, resumeAfter, signal);
    if (response !== null && !response.ok && response.status < 500) return false; // unknown to the hub for us
    if (response?.status === 204) return true; // nothing runs any more: the run ended meanwhile
    if (response?.ok && (await reply.read(response, position))) return true;
    failures = position.lastEventId === resumeAfter ? failures + 1 : 0;
  }
  return false;
}

async function showUser() {
  const who = document.getElementById("who");
  try {
    const response = await fetch("run/api/me");
    if (!response.ok) {
      who.textContent = (await refusal(response)).message; // the identity provider is out of reach, say
      return;
    }
    const { user, name, signIn } = await response.json();
    if (user) who.textContent = `Signed in as ${name ?? user}`;
    else if (signIn) who.replaceChildren("Not signed in: ", h("a", { href: signIn }, "Sign in"));
    else who.textContent = "Not signed in: tools cannot ask you anything.";
  } catch {
    who.textContent = "The hub cannot be reached.";
  }
}

/** The conversation a link opened the page on (`?conversation=ID`, as Slack links a form too long for it), else
 * the one this browser had; the address is cleared so that a reload keeps the conversation shown then. */
function conversationToOpen() {
  const linked = new URLSearchParams(window.location.search).get("conversation");
  if (linked === null) return localStorage.getItem(STORAGE_KEY);
  window.history.replaceState(null, "", window.location.pathname);
  return linked;
}

window.addEventListener("message", (event) => {
  // Only the hub's own pages (the auth callback) may say a question is done.
  if (event.origin !== window.location.origin) return;
  const data = event.data;
  if (data === null || typeof data !== "object" || data.type !== "elicithub:auth-complete") return;
  const asked = prompts.get(String(data.elicitationId));
  if (asked === undefined || !asked.prompt.open) return;
  asked.prompt.resolve(data.outcome);
  reattach(asked.reply); // the run goes on: follow it, unless a stream of this page already does
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
suggestions = await loadSuggestions();
const kept = conversationToOpen();
const restored = kept ? await load(kept).catch(() => null) : null;
if (restored === null) startConversation();
else reattach(showConversation(restored));
document.body.dataset.ready = "true";
