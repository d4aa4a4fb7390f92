"""The deploy (2026-07-28, InputRequiredResult) and release (2025-11-25, elicitation/create) demo servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import mcp_types as mt
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from elicithub.core.schema import validate_requested_schema
from elicithub.demo.launcher import Demo

pytestmark = pytest.mark.anyio

DEPLOY_FORM = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [
                {"const": "eu-west-1", "title": "Europe (Ireland)"},
                {"const": "us-east-1", "title": "US East (Virginia)"},
                {"const": "ap-southeast-2", "title": "Asia Pacific (Sydney)"},
            ],
        },
        "features": {
            "type": "array",
            "title": "Features",
            "description": "Optional rollout features.",
            "items": {"type": "string", "enum": ["canary", "autoscaling", "tracing"]},
        },
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "confirm": {"type": "boolean", "title": "I understand this deploys to production"},
    },
    "required": ["region", "confirm"],
}


@pytest.fixture
async def deploy(demo: Demo) -> AsyncIterator[Client]:
    async with Client(streamable_http_client(demo.deploy_url), mode="2026-07-28") as client:
        yield client


def text(result: mt.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, mt.TextContent))


async def ask(client: Client, service: str = "orders") -> mt.InputRequiredResult:
    result = await client.session.call_tool("deploy_service", {"service": service}, allow_input_required=True)
    assert isinstance(result, mt.InputRequiredResult)
    return result


async def answer(client: Client, asked: mt.InputRequiredResult, reply: mt.ElicitResult, service: str = "orders") -> Any:
    assert asked.input_requests is not None
    responses: mt.InputResponses = {key: reply for key in asked.input_requests}
    return await client.session.call_tool(
        "deploy_service",
        {"service": service},
        input_responses=responses,
        request_state=asked.request_state,
        allow_input_required=True,
    )


async def test_deploy_asks_one_form_with_titled_choices_multi_select_bounds_and_confirmation(deploy: Client) -> None:
    asked = await ask(deploy)

    assert asked.input_requests is not None
    [request] = asked.input_requests.values()
    assert isinstance(request, mt.ElicitRequest)
    assert isinstance(request.params, mt.ElicitRequestFormParams)
    assert request.params.message == "How should orders be deployed?"
    assert request.params.requested_schema == DEPLOY_FORM
    assert asked.request_state
    validate_requested_schema(request.params.requested_schema)


async def test_accepted_form_deploys(deploy: Client) -> None:
    content = {"region": "eu-west-1", "features": ["canary", "tracing"], "replicas": 3, "confirm": True}

    result = await answer(deploy, await ask(deploy), mt.ElicitResult(action="accept", content=content))

    assert isinstance(result, mt.CallToolResult)
    assert not result.is_error
    assert text(result) == "Deployed orders to eu-west-1 with 3 replicas (canary, tracing)."


async def test_defaults_apply_when_optional_fields_are_left_out(deploy: Client) -> None:
    content = {"region": "ap-southeast-2", "confirm": True}

    result = await answer(deploy, await ask(deploy), mt.ElicitResult(action="accept", content=content))

    assert text(result) == "Deployed orders to ap-southeast-2 with 2 replicas."


async def test_unconfirmed_deploy_deploys_nothing(deploy: Client) -> None:
    content = {"region": "us-east-1", "replicas": 1, "confirm": False}

    result = await answer(deploy, await ask(deploy), mt.ElicitResult(action="accept", content=content))

    assert not result.is_error
    assert text(result) == "Production deploy of orders was not confirmed; nothing was deployed."


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declined_or_cancelled_form_cancels_the_deploy(deploy: Client, action: str) -> None:
    result = await answer(deploy, await ask(deploy), mt.ElicitResult(action=action))  # type: ignore[arg-type]

    assert text(result) == "The deploy of orders was cancelled; nothing was deployed."


async def test_an_answer_cannot_be_replayed_for_another_service(deploy: Client) -> None:
    asked = await ask(deploy, "orders")
    reply = mt.ElicitResult(action="accept", content={"region": "eu-west-1", "confirm": True})

    with pytest.raises(MCPError, match="requestState"):
        await answer(deploy, asked, reply, service="billing")


async def test_out_of_range_answer_is_a_tool_error(deploy: Client) -> None:
    content = {"region": "eu-west-1", "replicas": 11, "confirm": True}

    result = await answer(deploy, await ask(deploy), mt.ElicitResult(action="accept", content=content))

    assert result.is_error
    assert "nothing was deployed" in text(result)


def legacy_client(demo: Demo, reply: mt.ElicitResult, asked: list[mt.ElicitRequestParams]) -> Client:
    async def on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params)
        return reply

    return Client(streamable_http_client(demo.release_url), mode="legacy", elicitation_callback=on_elicit)


async def test_rollback_asks_for_confirmation_mid_call(demo: Demo) -> None:
    asked: list[mt.ElicitRequestParams] = []
    reply = mt.ElicitResult(action="accept", content={"confirm": True, "reason": "bad build"})

    async with legacy_client(demo, reply, asked) as client:
        result = await client.call_tool("rollback", {"service": "orders"})

    assert text(result) == "Rolled orders back to the previous release. Reason: bad build"
    [params] = asked
    assert isinstance(params, mt.ElicitRequestFormParams)
    assert params.message == "Roll orders back to the previous release?"
    schema = params.requested_schema
    assert schema["required"] == ["confirm"]
    assert schema["properties"]["confirm"]["type"] == "boolean"
    assert schema["properties"]["reason"]["type"] == "string"
    validate_requested_schema(schema)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (mt.ElicitResult(action="accept", content={"confirm": False}), "The rollback of orders was not confirmed"),
        (mt.ElicitResult(action="decline"), "The rollback of orders was cancelled"),
        (mt.ElicitResult(action="cancel"), "The rollback of orders was cancelled"),
    ],
)
async def test_rollback_changes_nothing_unless_confirmed(demo: Demo, reply: mt.ElicitResult, expected: str) -> None:
    async with legacy_client(demo, reply, []) as client:
        result = await client.call_tool("rollback", {"service": "orders"})

    assert text(result).startswith(expected)
    assert "nothing changed" in text(result)
