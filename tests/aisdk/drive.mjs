// Drives the hub's UI message stream with the AI SDK's own client code, as a web app would, and prints what the
// SDK ended with as JSON: `node drive.mjs ai5|ai6 HUB_URL TOKEN SCENARIO CONVERSATION_ID [MESSAGE]`.
//
// Scenarios: `posted` (a question answered at the answer endpoint while the stream is open), `fast` (the page
// stops the stream, then answers with a data-elicitation-response part: the continuation streams on that request),
// `auto` (sendAutomaticallyWhen lastAssistantMessageIsCompleteWithToolCalls after a tool call: nothing is re-sent),
// `resume` (resumeStream() on load when nothing runs: nothing is added), `approval` (an approval the requester
// answers, approving, at the answer endpoint while the stream is open); with ai 6 and native approvals,
// `native-approve` and `native-deny` (the stream ends at the tool-approval-request; addToolApprovalResponse, and
// sendAutomaticallyWhen lastAssistantMessageIsCompleteWithApprovalResponses sends the answer), `native-reload` (the
// page reloads while the approval waits: a new Chat's resumeStream() shows it again, and approving it goes on);
// `say` (MESSAGE sent, any question answered at the answer endpoint as in `posted`: for a hub whose model streams),
// `reattach` (MESSAGE sent; the page stops its stream at the question, then a new Chat's resumeStream() reads the run
// again and answers it).
//
// While a reply streams, the first text the SDK shows of it is printed at once, as its own JSON line `{"first": TEXT}`
// (a test holding the model's stream can check that the text came before the model's last piece).
//
// Besides what the SDK ended with, `chunks` lists the types of the chunks each response carried, as the SDK read them.

const [version, hub, token, scenario, conversation, message] = process.argv.slice(2);
const ai = await import(version);
const { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, validateUIMessages } = ai;
const { lastAssistantMessageIsCompleteWithApprovalResponses } = ai; // ai 6 only

class State {
  constructor() {
    this.messages = [];
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
    if (message.role === "assistant") shown(message);
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

let first = null;
/** The first text the SDK shows of a reply, printed as it shows it. */
function shown(message) {
  const text = message.parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
  if (first === null && text !== "") {
    first = text;
    console.log(JSON.stringify({ first }));
  }
}

const headers = { authorization: `Bearer ${token}`, "x-supports-elicitation": "true" };
const requests = [];
const errors = [];
const asked = [];
const dataParts = [];
const chunks = [];
const reading = [];
const countingFetch = async (url, init) => {
  requests.push(`${init?.method ?? "GET"} ${new URL(url).pathname}`);
  const response = await fetch(url, init);
  const types = [];
  chunks.push(types);
  reading.push(
    response
      .clone()
      .text()
      .then((body) => {
        for (const line of body.split("\n")) {
          const data = line.trim().replace(/^data: /, "");
          if (line.startsWith("data: ")) types.push(data === "[DONE]" ? data : JSON.parse(data).type);
        }
      })
      .catch(() => types.push("(aborted)")),
  );
  return response;
};

async function answer(elicitationId, content) {
  const response = await fetch(`${hub}/run/api/elicitation-responses`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ conversationId: conversation, elicitationId, action: "accept", content }),
  });
  if (!response.ok) throw new Error(`answer: ${response.status} ${await response.text()}`);
}

const RESTART = '/call ops.restart {"service": "orders", "replicas": 2}';
let onQuestion = async () => {};
let finishes = 0;
let onFinished = () => {};
const native = scenario.startsWith("native-");
const newChat = () =>
  new Chat({
    id: conversation,
    transport: new DefaultChatTransport({ api: `${hub}/run/api/chat`, headers, fetch: countingFetch }),
    onError: (error) => errors.push(String(error?.message ?? error)),
    onData: (part) => {
      dataParts.push(part);
      if (part.type === "data-elicitation-request") {
        asked.push(part.data.elicitationId);
        onQuestion(part.data);
      }
    },
    onFinish: () => {
      finishes += 1;
      onFinished();
    },
    sendAutomaticallyWhen:
      scenario === "auto"
        ? lastAssistantMessageIsCompleteWithToolCalls
        : native
          ? lastAssistantMessageIsCompleteWithApprovalResponses
          : undefined,
  });
let chat = newChat();
const approvals = [];

/** The approval the last message waits on (as the SDK shows it), answered with addToolApprovalResponse; resolves
 * once the request that sends it automatically has finished. */
async function respond(approved, reason) {
  const part = chat.lastMessage.parts.find((p) => p.state === "approval-requested");
  approvals.push({ toolCallId: part.toolCallId, id: part.approval.id, status: chat.status });
  const sent = finishes + 1;
  const finished = new Promise((done) => {
    onFinished = () => finishes >= sent && done();
  });
  await chat.addToolApprovalResponse({ id: part.approval.id, approved, reason });
  await finished;
}

async function healthz() {
  return (await fetch(`${hub}/healthz`)).json();
}

if (scenario === "posted" || scenario === "say") {
  onQuestion = (data) => answer(data.elicitationId, { region: "eu-west-1" });
  await chat.sendMessage({ text: message ?? '/call mrtr.provision {"name": "orders"}' });
} else if (scenario === "approval") {
  onQuestion = (data) => answer(data.elicitationId, { approve: true });
  await chat.sendMessage({ text: RESTART });
} else if (scenario === "fast") {
  let question;
  onQuestion = async (data) => {
    question = data;
    await chat.stop(); // the page goes away while the question is open
  };
  await chat.sendMessage({ text: '/call mrtr.provision {"name": "orders"}' });
  while ((await healthz()).openStreams > 0) await new Promise((done) => setTimeout(done, 20));
  const data = { elicitationId: question.elicitationId, action: "accept", content: { region: "us-east-1" } };
  await chat.sendMessage({ parts: [{ type: "data-elicitation-response", data }] });
} else if (scenario === "reattach") {
  onQuestion = () => chat.stop(); // the page goes away while the question is open
  await chat.sendMessage({ text: message });
  while ((await healthz()).openStreams > 0) await new Promise((done) => setTimeout(done, 20));
  chat = newChat(); // and comes back: the run is read again from its start, then live
  onQuestion = (data) => answer(data.elicitationId, { region: "eu-west-1" });
  await chat.resumeStream();
} else if (scenario === "auto") {
  await chat.sendMessage({ text: '/call legacy.echo {"text": "hi"}' });
  await new Promise((done) => setTimeout(done, 300)); // time for an automatic re-send, if the SDK wanted one
} else if (scenario === "resume") {
  await chat.resumeStream();
} else if (scenario === "native-approve") {
  await chat.sendMessage({ text: RESTART });
  await respond(true);
} else if (scenario === "native-deny") {
  await chat.sendMessage({ text: RESTART });
  await respond(false, "not during the freeze");
} else if (scenario === "native-reload") {
  await chat.sendMessage({ text: RESTART });
  chat = newChat();
  await chat.resumeStream();
  await respond(true);
}

await Promise.all(reading);
let valid = true;
try {
  if (chat.messages.length > 0) await validateUIMessages({ messages: chat.messages });
} catch (error) {
  valid = false;
  errors.push(`validateUIMessages: ${error.message}`);
}
const tools = (message) =>
  message.parts
    .filter((p) => p.type === "dynamic-tool" || p.type.startsWith("tool-"))
    .map(({ toolCallId, toolName, state, input, approval, output, errorText }) => ({
      toolCallId,
      toolName,
      state,
      input,
      approval,
      output,
      errorText,
    }));
const reasoning = (message) =>
  message.parts
    .filter((p) => p.type === "reasoning")
    .map(({ text, state }) => ({ text, state }));
const text = (message) =>
  message.parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
console.log(
  JSON.stringify({
    status: chat.status,
    errors,
    valid,
    asked,
    // The data parts onData had, transient ones included (those are in no message).
    data: dataParts,
    requests,
    chunks,
    approvals,
    // Whether the SDK would send the last message again on its own (it asks this after every response).
    resends: native ? lastAssistantMessageIsCompleteWithApprovalResponses({ messages: chat.messages }) : undefined,
    messages: chat.messages.map((m) => ({
      id: m.id,
      role: m.role,
      text: text(m),
      types: m.parts.map((p) => p.type),
      tools: tools(m),
      reasoning: reasoning(m),
    })),
  }),
);
