"""A 2026-07-28 era MCP server (official SDK low-level Server) that asks by returning InputRequiredResult."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections import Counter
from typing import Any

import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListToolsResult,
    PaginatedRequestParams,
    SamplingMessage,
    TextContent,
    Tool,
    ToolAnnotations,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

REGION = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [{"const": "us-east-1", "title": "US East"}, {"const": "eu-west-1", "title": "EU West"}],
        }
    },
    "required": ["region"],
}
NEW_NAME = {"type": "object", "properties": {"new_name": {"type": "string"}}, "required": ["new_name"]}
CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Go ahead?"}},
    "required": ["confirm"],
}

LONG_VALUE = "site-" + "z" * 195  # longer than a Slack option value may be
PICK = {
    "type": "object",
    "properties": {
        "site": {
            "type": "string",
            "title": "Site",
            "oneOf": [
                *({"const": f"site-{i:03d}", "title": f"Site number {i:03d}"} for i in range(250)),
                {
                    "const": LONG_VALUE,
                    "title": "The far site, whose name is longer than the seventy-five characters a Slack menu shows",
                },
            ],
        },
        "extras": {
            "type": "array",
            "title": "Extras",
            "items": {"type": "string", "enum": [f"extra-{i:03d}" for i in range(120)]},
        },
    },
    "required": ["site"],
}
SURVEY = {
    "type": "object",
    "properties": {f"q{i:03d}": {"type": "boolean", "title": f"Statement {i:03d} holds"} for i in range(120)},
}
"""More fields than a Slack modal holds (100 blocks, one of them the question)."""


def ask(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def state_for(name: str, step: str) -> str:
    # The hub must echo this byte for byte; a digest makes any change visible.
    return f"{step}:{name}:{hashlib.sha256(f'{step}/{name}'.encode()).hexdigest()[:16]}"


def text(value: str, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)], is_error=error)


def answered(params: CallToolRequestParams, key: str) -> ElicitResult | None:
    value = (params.input_responses or {}).get(key)
    return value if isinstance(value, ElicitResult) else None


def tool(name: str, description: str) -> Tool:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return Tool(name=name, description=description, input_schema=schema)


STOCK = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
INVENTORY = Tool(
    name="inventory",
    title="Inventory",
    description="Counts what is in stock, without asking.",
    input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    output_schema=STOCK,
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
"""A tool with every field a listing may carry: a gateway shows them as they are."""


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(
        tools=[
            tool("provision", "Provision a database; asks which region."),
            tool("deploy", "Deploy a service; asks region and confirmation together."),
            tool("forever", "Asks for roots forever."),
            tool("later", "Says 'not yet' once, then answers."),
            tool("summarize", "Asks the client's model to write something."),
            tool("rename", "Rename something; asks for the new name (one text field)."),
            tool("pick", "Pick a site out of 251 and extras out of 120."),
            tool("survey", "Asks 120 yes-or-no questions in one form."),
            tool("hold", "Answers once /debug/release?name=NAME is called, without asking."),
            INVENTORY,
        ]
    )


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult | InputRequiredResult:
    name = str((params.arguments or {}).get("name", "db"))
    CALLED[f"{params.name}:{name}"] += 1
    if params.name == "provision":
        answer = answered(params, "region")
        if answer is None:
            return InputRequiredResult(
                input_requests={"region": ask(f"Which region should {name} live in?", REGION)},
                request_state=state_for(name, "region"),
            )
        if params.request_state != state_for(name, "region"):
            return text("request_state was altered", error=True)
        if answer.action != "accept" or answer.content is None:
            return text(f"Provisioning of {name} stopped: the user chose {answer.action}.", error=True)
        PROVISIONED[name] += 1
        return text(f"Provisioned {name} in {answer.content['region']}.")
    if params.name == "deploy":
        region, confirm = answered(params, "region"), answered(params, "confirm")
        if region is None or confirm is None:
            return InputRequiredResult(
                input_requests={"region": ask("Which region?", REGION), "confirm": ask(f"Deploy {name}?", CONFIRM)},
                request_state=state_for(name, "deploy"),
            )
        if region.content is None or confirm.content is None or not confirm.content.get("confirm"):
            return text(f"Deploy of {name} not confirmed.", error=True)
        return text(f"Deployed {name} to {region.content['region']}.")
    if params.name == "rename":
        answer = answered(params, "new_name")
        if answer is None or answer.content is None:
            return InputRequiredResult(
                input_requests={"new_name": ask(f"What should {name} be called?", NEW_NAME)}, request_state="rename"
            )
        return text(f"Renamed {name} to {answer.content['new_name']}.")
    if params.name == "pick":
        answer = answered(params, "pick")
        if answer is None or answer.content is None:
            return InputRequiredResult(input_requests={"pick": ask("Where to?", PICK)}, request_state="pick")
        extras = answer.content.get("extras") or []
        return text(f"Picked {answer.content['site']} with {len(extras)} extras: {', '.join(extras)}.")
    if params.name == "survey":
        answer = answered(params, "survey")
        if answer is None or answer.content is None:
            return InputRequiredResult(input_requests={"survey": ask("Which hold?", SURVEY)}, request_state="survey")
        return text(f"{sum(1 for v in answer.content.values() if v is True)} of {len(SURVEY['properties'])} hold.")
    if params.name == "inventory":
        return CallToolResult(content=[TextContent(type="text", text="3")], structured_content={"count": 3})
    if params.name == "hold":
        await HELD.setdefault(name, asyncio.Event()).wait()
        return text(f"Released {name}.")
    if params.name == "forever":
        round_no = int((params.request_state or "0").split(":")[0]) + 1
        # Roots are answered by the hub itself, so this loops without a person until the round cap stops it.
        return InputRequiredResult(
            input_requests={f"roots{round_no}": ListRootsRequest()}, request_state=f"{round_no}:more"
        )
    if params.name == "later":
        if params.request_state != "waited":
            return InputRequiredResult(request_state="waited")
        return text("Done after waiting.")
    if params.name == "summarize":
        sampled = (params.input_responses or {}).get("draft")
        if not isinstance(sampled, CreateMessageResult):
            request = CreateMessageRequest(
                params=CreateMessageRequestParams(
                    messages=[SamplingMessage(role="user", content=TextContent(type="text", text="hello"))],
                    max_tokens=50,
                )
            )
            return InputRequiredResult(input_requests={"draft": request}, request_state="sampling")
        content = sampled.content
        said = content.text if isinstance(content, TextContent) else "?"
        return text(f"{sampled.model} wrote {len(said)} characters starting {said[:9]!r}.")
    return text(f"unknown tool {params.name}", error=True)


server = Server("mrtr-provisioner", on_list_tools=list_tools, on_call_tool=call_tool)
PROVISIONED: Counter[str] = Counter()
"""How many times each name was provisioned: a tool call that completes twice shows here."""


CALLED: Counter[str] = Counter()
"""How many `tools/call` requests came for each tool and name (`provision:orders`), retries of a round included."""

HELD: dict[str, asyncio.Event] = {}
"""The `hold` calls' names, each set once released."""


async def provisioned(request: Request) -> Response:
    return JSONResponse(dict(PROVISIONED))


async def release(request: Request) -> Response:
    HELD.setdefault(request.query_params["name"], asyncio.Event()).set()
    return JSONResponse({})


async def called(request: Request) -> Response:
    return JSONResponse(dict(CALLED))


if __name__ == "__main__":
    app = server.streamable_http_app()
    app.router.routes.append(Route("/debug/provisioned", provisioned, methods=["GET"]))
    app.router.routes.append(Route("/debug/called", called, methods=["GET"]))
    app.router.routes.append(Route("/debug/release", release, methods=["POST"]))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
