// Drives the hub's AG-UI endpoint with the official AG-UI client (@ag-ui/client HttpAgent), as a front-end would:
// `node drive.mjs HUB_URL TOKEN THREAD_ID MESSAGE [TOOLS_JSON]`.
//
// It sends MESSAGE, offering the front-end tools TOOLS_JSON (an array of AG-UI tools) on every run. While
// interrupts are pending after a run (agent.pendingInterrupts) it prints `{"interrupts": [...], "errors": [...]}`
// as one line and reads one line back: `{"responses": {interruptId: {status, payload?}}}`, which it resumes with
// through the client's own API (buildResumeArray + runAgent({resume})). While a run left calls of front-end tools
// for it (the success outcome's pendingToolCallIds) it prints `{"toolCalls": [{id, name, arguments}], ...}` and
// reads back `{"results": {toolCallId: content}}`, which it adds as tool messages before it runs again. Then it
// prints what the client ended with: its messages, the events it saw, the runs' outcomes, and every error
// (RUN_ERROR included) or warning the client raised.

import readline from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [hub, token, threadId, message, offered] = process.argv.slice(2);
const tools = JSON.parse(offered ?? "[]");

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const agent = new HttpAgent({ url: `${hub}/run/agui`, headers: { authorization: `Bearer ${token}` }, threadId });
const events = [];
const errors = [];
const outcomes = [];
let pendingCalls = [];
const subscriber = {
  onEvent: ({ event }) => {
    events.push(event.type);
  },
  onRunFinishedEvent: (params) => {
    outcomes.push(params.outcome);
    pendingCalls = params.pendingToolCallIds ?? [];
  },
  onRunErrorEvent: ({ event }) => {
    errors.push(`${event.code}: ${event.message}`);
  },
};

async function run(parameters) {
  try {
    await agent.runAgent(parameters, subscriber);
  } catch (error) {
    errors.push(String(error?.message ?? error));
  }
}

agent.addMessage({ id: "m1", role: "user", content: message });
await run({ tools });
let rounds = 0;
while ((agent.pendingInterrupts.length > 0 || pendingCalls.length > 0) && rounds < 5) {
  rounds += 1;
  if (agent.pendingInterrupts.length > 0) {
    console.log(JSON.stringify({ interrupts: agent.pendingInterrupts, errors }));
    const { value } = await lines.next();
    const { responses } = JSON.parse(value);
    await run({ tools, resume: buildResumeArray(agent.pendingInterrupts, responses) });
    continue;
  }
  const calls = agent.messages
    .flatMap((m) => m.toolCalls ?? [])
    .filter((c) => pendingCalls.includes(c.id))
    .map((c) => ({ id: c.id, name: c.function.name, arguments: JSON.parse(c.function.arguments) }));
  console.log(JSON.stringify({ toolCalls: calls, errors }));
  const { value } = await lines.next();
  const { results } = JSON.parse(value);
  for (const [toolCallId, content] of Object.entries(results)) {
    agent.addMessage({ id: `result-${toolCallId}`, role: "tool", toolCallId, content });
  }
  pendingCalls = [];
  await run({ tools });
}
const messages = agent.messages.map((m) => ({
  role: m.role,
  content: m.content ?? null,
  toolCallId: m.toolCallId ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name })),
}));
console.log(JSON.stringify({ done: true, messages, events, errors, warnings, outcomes, pending: agent.pendingInterrupts }));
process.exit(0);
