// The TypeScript SDK's Client on the hub's /mcp, as a team's own agent would use the hub as a gateway:
//   node gateway_client.mjs HUB_URL TOKEN SCENARIO [TOOL] [ARGUMENTS_JSON]
// It prints one JSON line: what the scenario saw. Scenarios:
//   list     every page of tools/list: the names, and each tool as listed;
//   call     the listing (the SDK then checks structuredContent against the tool's outputSchema), then TOOL;
//   ask      TOOL, answering each elicitation/create with the handler a client registers: accept, region eu-west-1;
//   refused  TOOL, expecting a JSON-RPC error: its code and message.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const [hubUrl, token, scenario, tool, argumentsJson] = process.argv.slice(2);
const args = argumentsJson ? JSON.parse(argumentsJson) : {};

const client = new Client(
  { name: "elicithub-gateway-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} } } },
);
const errors = [];
client.onerror = (error) => errors.push(String(error));
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params);
  return { action: "accept", content: { region: "eu-west-1" } };
});

const transport = new StreamableHTTPClientTransport(new URL(`${hubUrl}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);

async function everyTool() {
  const tools = [];
  const pages = [];
  let cursor;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    pages.push(page.tools.length);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { tools, pages };
}

const seen = { protocolVersion: transport.protocolVersion };
if (scenario === "list") {
  Object.assign(seen, await everyTool());
} else if (scenario === "call" || scenario === "ask") {
  if (scenario === "call") await everyTool();
  seen.result = await client.callTool({ name: tool, arguments: args });
  seen.asked = asked;
} else if (scenario === "refused") {
  try {
    seen.result = await client.callTool({ name: tool, arguments: args });
  } catch (error) {
    if (!(error instanceof McpError)) throw error;
    seen.error = { code: error.code, message: error.message };
  }
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
seen.errors = errors;
await client.close();
console.log(JSON.stringify(seen));
