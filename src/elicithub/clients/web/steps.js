// What an assistant reply shows of the model's work as its stream delivers it: the text as it grows, the model's
// thinking (collapsed and dimmed, apart from the answer), each tool call with its arguments as the model writes
// them, what the call is doing and its result, and while the model's request is retried, that it is.

import { h } from "./dom.js";

export class Steps {
  /** `append(node)` adds to the reply; `place(parent, child)` adds to a node of it, keeping the transcript in view. */
  constructor(append, place) {
    this.append = append;
    this.place = place;
    this.texts = new Map(); // text parts of the stream being read, by id: the paragraph their pieces go into
    this.thoughts = new Map(); // its reasoning parts by id: the same, inside their collapsed block
    this.tools = new Map(); // tool calls by id
    this.status = null; // what the model's request waits for, until the reply goes on
    this.growing = null; // the text or thinking pieces go into now, until its part ends: {kind, node}
    this.carried = null; // the one a resumed stream goes on with, until something else comes
  }

  /**
   * Another stream of the same reply begins: its parts' ids are its own (a stream names its parts from its start).
   * `resumed`: it goes on from where one broke off (`Last-Event-ID`), inside a turn it brings the rest of, so its
   * first text or thinking goes on in the one that was growing.
   */
  restart(resumed) {
    this.texts = new Map();
    this.thoughts = new Map();
    this.carried = resumed ? this.growing : null;
    this.growing = null;
  }

  /** Show `part`; false for a part that is none of these. */
  apply(part) {
    const data = part.data ?? {};
    if (this.carried !== null && !["start", "start-step", `${this.carried.kind}-start`].includes(part.type)) {
      this.carried = null; // the resumed stream went on with something else
    }
    switch (part.type) {
      case "text-start":
      case "text-delta":
        this.settled();
        this.text(part.id, String(part.delta ?? ""));
        return true;
      case "reasoning-start":
      case "reasoning-delta":
        this.settled();
        this.thought(part.id, String(part.delta ?? ""));
        return true;
      case "text-end":
      case "reasoning-end":
        this.growing = null;
        return true;
      case "tool-input-start":
      case "tool-input-available":
        this.settled();
        this.toolStarted(part);
        return true;
      case "tool-input-delta":
        this.toolInput(part.toolCallId, String(part.inputTextDelta ?? ""));
        return true;
      case "tool-input-error":
      case "tool-output-error":
        this.toolFinished(part.toolCallId, "failed", part.errorText);
        return true;
      case "tool-output-available":
        this.toolFinished(part.toolCallId, "done", part.output);
        return true;
      case "data-tool-status":
        this.toolProgress(String(data.toolCallId ?? part.id), String(data.message ?? ""));
        return true;
      case "data-model-status":
        this.modelStatus(String(data.message ?? ""));
        return true;
      default:
        return false;
    }
  }

  text(id, delta) {
    let node = this.texts.get(id) ?? this.carry("text");
    if (node === undefined) node = this.append(h("p", { class: "text" }));
    this.texts.set(id, node);
    this.growing = { kind: "text", node };
    this.place(node, delta);
  }

  thought(id, delta) {
    let node = this.thoughts.get(id) ?? this.carry("reasoning");
    if (node === undefined) {
      node = h("p", { class: "reasoning-text" });
      this.append(h("details", { class: "reasoning" }, h("summary", {}, "Thinking"), node));
    }
    this.thoughts.set(id, node);
    this.growing = { kind: "reasoning", node };
    node.append(delta); // collapsed: the transcript need not follow it
  }

  /** The node a resumed stream's first part of `kind` goes on in, once. */
  carry(kind) {
    const carried = this.carried?.kind === kind ? this.carried.node : undefined;
    this.carried = null;
    return carried;
  }

  /** The model's request waits (a retry): said until the reply goes on. */
  modelStatus(message) {
    if (!message) return;
    if (this.status === null) this.status = this.append(h("p", { class: "model-status", role: "status" }));
    this.status.textContent = message;
  }

  /** The reply went on (or ended): what the model's request waited for is over. */
  settled() {
    this.status?.remove();
    this.status = null;
  }

  /** A call begins as the model writes its arguments (`tool-input-start`), or whole (`tool-input-available`). */
  toolStarted(part) {
    const whole = part.type === "tool-input-available";
    let tool = this.tools.get(part.toolCallId);
    if (tool === undefined) {
      const name = h("code", {}, String(part.toolName ?? ""));
      const status = h("span", { class: "tool-status" });
      const args = h("pre", {});
      const node = this.append(
        h(
          "div",
          { class: "tool" },
          h("p", {}, "Tool ", name, " ", status),
          h("details", {}, h("summary", {}, "Arguments"), args),
        ),
      );
      tool = { node, name, status, args, progress: null };
      this.tools.set(part.toolCallId, tool);
    }
    tool.name.textContent = String(part.toolName ?? tool.name.textContent);
    tool.status.textContent = whole ? "running…" : "writing…";
    if (whole) tool.args.textContent = JSON.stringify(part.input ?? {}, null, 2);
  }

  toolInput(callId, delta) {
    this.tools.get(callId)?.args.append(delta);
  }

  /** What a tool that works on (a downstream MCP task) says it is doing now; the latest replaces the one before. */
  toolProgress(callId, message) {
    const tool = this.tools.get(callId);
    if (tool === undefined || !message) return;
    if (tool.progress === null) {
      tool.progress = h("p", { class: "tool-progress", role: "status" });
      tool.node.children[0].after(tool.progress);
    }
    tool.progress.textContent = message;
  }

  toolFinished(callId, state, output) {
    const tool = this.tools.get(callId);
    if (tool === undefined) return;
    tool.progress?.remove(); // it said what the tool was doing while it worked
    tool.status.textContent = state;
    tool.status.dataset.state = state;
    const text = typeof output === "string" ? output : JSON.stringify(output, null, 2);
    tool.node.append(h("details", {}, h("summary", {}, "Result"), h("pre", {}, text ?? "")));
  }
}
