// The approval card, the same wherever a page shows an approval (the chat, the inbox): who asks, the tool, the
// deadline and the call's arguments, then a reason and Approve or Deny (and the arguments to edit, where the policy
// lets them be edited). Its look is approval.css.

import { h } from "./dom.js";
import { FormPrompt, createPrompt } from "./prompt.js";

export const isApproval = (event) => event.context?.trigger === "approval";

/** The prompt of a question: the approval card for an approval, else its form or its link (as createPrompt). */
export function createQuestion(event, send) {
  return isApproval(event) ? new ApprovalPrompt(event, send) : createPrompt(event, send);
}

/** Who asks (`requester`), the tool, the deadline, and the call's arguments when the question has them. */
export function aboutTheCall(event, requester) {
  const context = event.context ?? {};
  const tool = [context.serverId, context.toolName].filter((s) => typeof s === "string").join(".");
  const entry = (term, ...value) => h("div", {}, h("dt", {}, term), h("dd", {}, ...value));
  const deadline = new Date(event.expiresAt).toLocaleString();
  const when = h("time", { datetime: event.expiresAt, title: event.expiresAt }, deadline);
  const args = context.arguments;
  return [
    h(
      "dl",
      { class: "prompt-about" },
      entry("Requester", requester),
      tool ? entry("Tool", h("code", {}, tool)) : null,
      entry("Deadline", when),
    ),
    args !== null && typeof args === "object"
      ? h("pre", { class: "prompt-arguments", "aria-label": "Arguments" }, JSON.stringify(args, null, 2))
      : null,
  ];
}

/**
 * An approval of someone's tool call, for one of its approvers: Approve (with the reason and the arguments as
 * edited) or Deny (with the reason). Both accept the form, with `approve` true or false, so that the reason is kept.
 */
class ApprovalPrompt extends FormPrompt {
  constructor(event, send) {
    super(event, send, "approval");
    // The tool the card names stands for the line that says which tool asks (the requester asks).
    this.element.querySelector(".prompt-source")?.remove();
    const requester = String(event.context?.requester ?? "");
    this.element.querySelector(".prompt-head").after(...aboutTheCall(event, requester));
  }

  shows(name) {
    return name !== "approve";
  }

  actions() {
    return [
      h("button", { type: "submit", class: "primary" }, "Approve"),
      h("button", { type: "button", onclick: () => this.deny() }, "Deny"),
    ];
  }

  submit(event) {
    super.submit(event, { approve: true });
  }

  deny() {
    const reason = this.fields.find((f) => f.name === "reason")?.read();
    this.answer("accept", reason === undefined ? { approve: false } : { approve: false, reason });
  }

  async answer(action, content) {
    if (this.state === "pending") this.decision = content?.approve;
    await super.answer(action, content);
  }

  setState(state) {
    super.setState(state);
    if (state === "pending") this.decision = undefined; // not given, or refused: nothing was decided here
    // The form's outcome is "accepted" either way: say what was decided here, or only that it was answered when it
    // was answered elsewhere (the hub tells that it ended, not how).
    if (state !== "accepted") return;
    this.status.textContent = { true: "Approved", false: "Denied" }[this.decision] ?? "Answered";
  }
}
