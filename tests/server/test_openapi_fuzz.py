"""schemathesis over /openapi.json, in process, with and without a token: whatever it sends, the hub never answers
5xx and never contradicts its schema (statuses, media types, bodies, which inputs it accepts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.core.transport import Response
from schemathesis.generation.modes import GenerationMode
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import positive_data_acceptance

from elicithub.config import parse_config
from elicithub.core.ids import CONVERSATION_ID_PATTERN
from elicithub.server.app import create_app
from tests.conftest import USERS

ENDLESS = {"/run/api/inbox/stream"}


@pytest.fixture
def schema(tmp_path: Path) -> Iterator[Any]:
    """The schema of a hub of its own (schemathesis ends an app's lifespan with the test that started it)."""
    config = parse_config(
        {"store": {"url": "memory://"}, "secrets": {"key_file": str(tmp_path / "secret.key")}, "users": USERS}
    )
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(config))
    shutdown_lifespans()


def accepted_unless_the_last_message_is_not_the_users(ctx: Any, response: Response, case: schemathesis.Case) -> None:
    """schemathesis' positive_data_acceptance, but for the one rule JSON Schema cannot state (the chat bodies'
    descriptions do): a 400 for a `messages` list whose last message is not the user's."""
    messages = case.body.get("messages") if isinstance(case.body, dict) else None
    if response.status_code == 400 and messages and isinstance(messages[-1], dict):
        if messages[-1].get("role") != "user" and "must be from the user" in response.text:
            return
    positive_data_acceptance(ctx, response, case)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("token", [None, "alice-secret"], ids=["anonymous", "alice"])
def test_no_request_gets_a_server_error_or_a_contract_mismatch(schema: Any, token: str | None, mode: Any) -> None:
    headers = {"x-supports-elicitation": "true"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8
    # A stream that stays open while its person is signed in cannot be called to its end (its contract is tested in
    # tests/surfaces/pages/test_inbox.py).
    operations = [o for o in operations if o.path not in ENDLESS]
    if mode is GenerationMode.NEGATIVE:  # nothing can be sent wrong to an operation that takes no input
        operations = [o for o in operations if o.path_parameters or o.headers or o.body]

    for operation in operations:

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def keeps_the_contract(case: schemathesis.Case) -> None:
            case.call_and_validate(
                headers=headers,
                excluded_checks=[positive_data_acceptance],
                additional_checks=[accepted_unless_the_last_message_is_not_the_users],
            )

        keeps_the_contract()


def test_streams_document_their_errors_as_json_and_routes_their_id_pattern(schema: Any) -> None:
    paths = schema.raw_schema["paths"]
    for path in ("/run/v1/chat/completions", "/run/api/chat", "/run/agui", "/run/agui/{agent}"):
        responses = paths[path]["post"]["responses"]
        assert list(responses["200"]["content"]) == ["text/event-stream"]
        for status in ("401", "422"):
            assert list(responses[status]["content"]) == ["application/json"]
    for path in (
        "/run/api/conversations/{conversation_id}",
        "/run/api/conversations/{conversation_id}/stream",
        "/run/api/chat/{conversation_id}/stream",
    ):
        [parameter] = [p for p in paths[path]["get"]["parameters"] if p["in"] == "path"]
        assert parameter["schema"]["pattern"] == CONVERSATION_ID_PATTERN
    [header] = [p for p in paths["/run/v1/chat/completions"]["post"]["parameters"] if p["name"] == "x-conversation-id"]
    assert header["schema"]["pattern"] == CONVERSATION_ID_PATTERN
    assert schema.raw_schema["components"]["schemas"]["UIChatBody"]["properties"]["id"]["pattern"] == (
        CONVERSATION_ID_PATTERN
    )


def test_the_agui_routes_take_a_run_agent_input_in_its_camel_case_json(schema: Any) -> None:
    paths, components = schema.raw_schema["paths"], schema.raw_schema["components"]["schemas"]
    for path in ("/run/agui", "/run/agui/{agent}"):
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/RunAgentBody"}
    run_agent_input = components["RunAgentBody"]
    assert {"threadId", "runId", "messages", "tools", "context", "state", "forwardedProps", "resume"} <= set(
        run_agent_input["properties"]
    )
    assert run_agent_input["properties"]["threadId"]["pattern"] == CONVERSATION_ID_PATTERN
    [agent] = paths["/run/agui/{agent}"]["post"]["parameters"]
    assert agent["in"] == "path" and agent["name"] == "agent"
