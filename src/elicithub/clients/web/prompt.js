// One question on screen: a form (form mode) or a link to open (url mode), with its state and countdown.

import { h, uid } from "./dom.js";
import { createField } from "./fields.js";
import { properties, requiredNames, validateContent } from "./schema.js";

const STATUS = {
  pending: "Waiting for your answer",
  sending: "Sending…",
  accepted: "Accepted",
  declined: "Declined",
  cancelled: "Cancelled",
  expired: "Expired",
  answered: "Already answered",
  gone: "No longer available",
};
export const OUTCOMES = ["accepted", "declined", "cancelled", "expired"];

/** An answer the hub refused: its HTTP status and the JSON error body's code, message and field errors. */
export class AnswerError extends Error {
  constructor(status, { code = "error", message = "The answer could not be sent.", fields = [] } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

/** The AnswerError of a response the hub refused (its JSON error body, or just its status). */
export async function refusal(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: keep the status alone
  }
  return new AnswerError(response.status, body?.error ?? { message: `The hub answered ${response.status}.` });
}

/** Where a url-mode link goes: {href, host} for an http(s) URL, else null (it is then shown, never opened). */
export function linkTarget(url) {
  let parsed;
  try {
    parsed = new URL(String(url));
  } catch {
    return null;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return null;
  return { href: parsed.href, host: parsed.host };
}

/**
 * Render an `elicitation-request` event. `send(action, content)` delivers the answer and resolves to the
 * outcome (or null when the outcome will arrive on a stream); it throws AnswerError when the hub refuses.
 */
export function createPrompt(event, send) {
  return event.mode === "url" ? new UrlPrompt(event, send) : new FormPrompt(event, send);
}

/** Seconds as a countdown reads them: 0:07, 9:59, 1:00:00, or 3 days. */
function duration(seconds) {
  if (seconds >= 2 * 86400) return `${Math.floor(seconds / 86400)} days`;
  const two = (n) => String(n).padStart(2, "0");
  const [hours, minutes] = [Math.floor(seconds / 3600), Math.floor(seconds / 60) % 60];
  return hours > 0 ? `${hours}:${two(minutes)}:${two(seconds % 60)}` : `${minutes}:${two(seconds % 60)}`;
}

class Prompt {
  constructor(event, send, kind) {
    this.id = String(event.elicitationId);
    this.send = send;
    this.state = "pending";
    this.expiresAt = Date.parse(event.expiresAt);
    const messageId = uid("prompt");
    this.status = h("span", { class: "status", role: "status" });
    // The countdown changes every second, so screen readers get the deadline once, as a time, instead.
    this.countdown = h("span", { class: "countdown", "aria-hidden": "true" });
    const deadline = Number.isFinite(this.expiresAt)
      ? h("span", { class: "visually-hidden" }, ` Answer by ${new Date(this.expiresAt).toLocaleTimeString()}.`)
      : null;
    this.problem = h("p", { class: "prompt-error", role: "alert", hidden: true });
    const context = event.context ?? {};
    // A delegated agent's question says which agents it came through (outermost first).
    const agents = Array.isArray(context.agentPath) ? context.agentPath.filter((a) => typeof a === "string") : [];
    const via = agents.length > 1 ? [agents.join(" → ")] : [];
    const tool = [context.agentId, context.serverId, context.toolName].filter((s) => typeof s === "string");
    // An MCP tool's question names its task when the call runs as one (an A2A agent's always comes from a task).
    const asTask = context.trigger === "mcp_elicitation" && typeof context.taskId === "string";
    const task = asTask ? [`task ${context.taskId}`] : [];
    const source = [...via, ...tool, ...task].join(" · ");
    this.element = h(
      "section",
      { class: `prompt prompt-${kind}`, "aria-labelledby": messageId, "data-elicitation-id": this.id },
      h(
        "div",
        { class: "prompt-head" },
        h("p", { class: "prompt-message", id: messageId }, String(event.message ?? "")),
        h("p", { class: "prompt-state" }, this.status, this.countdown, deadline),
      ),
      source ? h("p", { class: "prompt-source" }, `Asked by ${source}`) : null,
    );
    this.setState("pending");
    if (Number.isFinite(this.expiresAt)) this.timer = setInterval(() => this.tick(), 1000);
    this.tick();
  }

  /** Stop the countdown of a prompt taken off the page. */
  dispose() {
    clearInterval(this.timer);
  }

  get open() {
    return this.state === "pending" || this.state === "sending";
  }

  setState(state) {
    this.state = state;
    this.element.dataset.state = state;
    this.status.dataset.state = state;
    this.status.textContent = STATUS[state] ?? state;
    for (const control of this.controls()) control.disabled = state !== "pending";
    if (!this.open) {
      clearInterval(this.timer);
      this.countdown.textContent = "";
    }
  }

  /** The question ended (an answer, the deadline, or another window): show it, and take no more answers. */
  resolve(outcome) {
    if (this.open || this.state === "answered") this.setState(OUTCOMES.includes(outcome) ? outcome : "answered");
  }

  tick() {
    if (!this.open || !Number.isFinite(this.expiresAt)) return;
    const left = Math.ceil((this.expiresAt - Date.now()) / 1000);
    if (left <= 0) {
      this.resolve("expired");
      return;
    }
    this.countdown.textContent = ` · expires in ${duration(left)}`;
  }

  showProblem(message) {
    this.problem.textContent = message ?? "";
    this.problem.hidden = !message;
  }

  async answer(action, content) {
    if (this.state !== "pending") return;
    this.showProblem(null);
    this.setState("sending");
    try {
      const outcome = await this.send(action, content);
      if (outcome !== null && this.state === "sending") this.setState(outcome);
    } catch (error) {
      if (this.state !== "sending") return; // the stream told us how it ended meanwhile
      this.refused(error, action);
    }
  }

  refused(error, action) {
    const status = error instanceof AnswerError ? error.status : 0;
    if (status === 410) return this.setState("expired");
    if (status === 404) return this.setState("gone");
    if (status === 409) return this.setState("answered");
    this.setState("pending");
    if (status === 422 && action === "accept" && error.fields.length > 0) return this.showFieldErrors(error.fields);
    this.showProblem(error instanceof AnswerError ? error.message : "The answer could not be sent; try again.");
    return undefined;
  }

  showFieldErrors(errors) {
    this.showProblem(errors.map((e) => (e.field ? `${e.field} ${e.message}` : e.message)).join("; "));
  }
}

/** A form question: one field per property of its schema, and Submit, Decline and Cancel. */
export class FormPrompt extends Prompt {
  constructor(event, send, kind = "form") {
    super(event, send, kind);
    this.schema = event.requestedSchema ?? { type: "object", properties: {} };
    const required = requiredNames(this.schema);
    const shown = properties(this.schema).filter(([name]) => this.shows(name));
    this.fields = shown.map(([name, prop]) => createField(name, prop ?? {}, required.has(name)));
    this.buttons = this.actions();
    const note = this.fields.some((f) => required.has(f.name))
      ? h("p", { class: "hint" }, "Fields marked * are required.")
      : null;
    this.form = h(
      "form",
      { novalidate: true, onsubmit: (e) => this.submit(e) },
      note,
      this.fields.map((f) => f.element),
      this.problem,
      h("div", { class: "actions" }, this.buttons),
    );
    this.element.append(this.form);
    this.setState(this.state);
  }

  /** Whether the form shows a field for the schema's property `name`. */
  shows() {
    return true;
  }

  /** The form's buttons; the one of type submit sends the form's content. */
  actions() {
    return [
      h("button", { type: "submit", class: "primary" }, "Submit"),
      h("button", { type: "button", onclick: () => this.answer("decline") }, "Decline"),
      h("button", { type: "button", onclick: () => this.answer("cancel") }, "Cancel"),
    ];
  }

  controls() {
    return this.form ? this.form.querySelectorAll("input, select, textarea, button") : [];
  }

  content() {
    const content = {};
    for (const field of this.fields) {
      const value = field.read();
      if (value !== undefined) content[field.name] = value;
    }
    return content;
  }

  submit(event, extra = {}) {
    event?.preventDefault();
    const content = { ...this.content(), ...extra };
    const unreadable = this.fields
      .map((f) => ({ field: f.name, message: f.badInput() }))
      .filter((e) => e.message !== null);
    const names = new Set(unreadable.map((e) => e.field));
    const errors = [...unreadable, ...validateContent(this.schema, content).filter((e) => !names.has(e.field))];
    if (errors.length > 0) {
      this.showFieldErrors(errors);
      return;
    }
    this.showFieldErrors([]);
    this.answer("accept", content);
  }

  showFieldErrors(errors) {
    const byName = new Map(errors.map((e) => [e.field, e.message]));
    for (const field of this.fields) field.showError(byName.get(field.name));
    // Errors for the form as a whole (or for fields it does not show) go below the fields.
    const shown = new Set(this.fields.map((f) => f.name));
    const rest = errors.filter((e) => !shown.has(e.field));
    super.showFieldErrors(rest);
    this.fields.find((f) => byName.has(f.name))?.focus();
  }
}

class UrlPrompt extends Prompt {
  constructor(event, send) {
    super(event, send, "url");
    this.target = linkTarget(event.url);
    this.fallback = h("p", { class: "hint", hidden: true });
    const dismiss = h("button", { type: "button", onclick: () => this.answer("decline") }, "Dismiss");
    let where;
    if (this.target === null) {
      where = h(
        "p",
        { class: "prompt-refused" },
        "This link was not opened because it is not an http(s) link: ",
        h("code", {}, String(event.url ?? "")),
      );
      this.buttons = [dismiss];
    } else {
      const domain = h("strong", { class: "domain" }, this.target.host);
      where = h("p", { class: "prompt-domain" }, "Connect opens a page on ", domain);
      const connect = h("button", { type: "button", class: "primary", onclick: () => this.connect() }, "Connect");
      this.buttons = [connect, dismiss];
    }
    this.element.append(where, this.fallback, this.problem, h("div", { class: "actions" }, this.buttons));
    this.setState(this.state);
  }

  controls() {
    return this.buttons ?? [];
  }

  connect() {
    if (this.state !== "pending" || this.target === null) return;
    // Not noopener: the hub's callback page tells this window it is done through window.opener.
    this.popup = window.open(this.target.href, `elicithub-${this.id}`, "popup,width=560,height=720");
    if (this.popup) {
      this.status.textContent = "Finish in the window that opened";
      return;
    }
    const link = { href: this.target.href, target: "_blank", rel: "opener" };
    this.fallback.replaceChildren(
      "Your browser blocked the window. ",
      h("a", link, `Open the page on ${this.target.host} in a new tab`),
    );
    this.fallback.hidden = false;
  }

  resolve(outcome) {
    super.resolve(outcome);
    if (!this.open && this.popup && !this.popup.closed) this.popup.close();
  }
}
