// Drives the hub's AG-UI endpoint with the official AG-UI client (@ag-ui/client HttpAgent), as a front-end would:
// `node drive.mjs HUB_URL TOKEN THREAD_ID MESSAGE`.
//
// It sends MESSAGE; while interrupts are pending after a run (agent.pendingInterrupts) it prints
// `{"interrupts": [...], "errors": [...]}` as one line and reads one line back:
// `{"responses": {interruptId: {status, payload?}}}`, which it resumes with through the client's own API
// (buildResumeArray + runAgent({resume})). Then it prints what the client ended with: its messages, the events it
// saw, the runs' outcomes, and every error (RUN_ERROR included) or warning the client raised.

import readline from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [hub, token, threadId, message] = process.argv.slice(2);

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const agent = new HttpAgent({ url: `${hub}/run/agui`, headers: { authorization: `Bearer ${token}` }, threadId });
const events = [];
const errors = [];
const outcomes = [];
const subscriber = {
  onEvent: ({ event }) => {
    events.push(event.type);
  },
  onRunFinishedEvent: (params) => {
    outcomes.push(params.outcome);
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
await run({});
let rounds = 0;
while (agent.pendingInterrupts.length > 0 && rounds < 5) {
  rounds += 1;
  console.log(JSON.stringify({ interrupts: agent.pendingInterrupts, errors }));
  const { value } = await lines.next();
  const { responses } = JSON.parse(value);
  await run({ resume: buildResumeArray(agent.pendingInterrupts, responses) });
}
const messages = agent.messages.map((m) => ({
  role: m.role,
  content: m.content ?? null,
  toolCallId: m.toolCallId ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name })),
}));
console.log(JSON.stringify({ done: true, messages, events, errors, warnings, outcomes, pending: agent.pendingInterrupts }));
process.exit(0);
