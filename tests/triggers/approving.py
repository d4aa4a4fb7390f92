"""What the approval tests share: an SDK MCP server whose tool counts its calls, the people who ask and approve, and
reading a requester's chat stream."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from tests.conftest import ServedInThread, served, sse_data

PEOPLE = {
    "alice": "alice-secret",
    "bob": "bob-secret-1",
    "carol": "carol-secret",
    "dave": "dave-secret",
    "dev": "dev-secret-1",  # the demo's user
}
USERS = [{"id": user, "token": token} for user, token in PEOPLE.items()]
GROUPS = {"ops": ["bob", "carol"]}
RESTART = '/call ops.restart {"service": "orders", "replicas": 2}'


class Confirm(BaseModel):
    confirm: bool


class OpsServer:
    """An SDK server whose tools keep their calls in `calls` (the arguments each was made with): `restart`, and
    `rollback`, which asks its own confirmation."""

    def __init__(self) -> None:
        self.url = ""
        """Its MCP endpoint, once served."""
        self.calls: list[dict[str, Any]] = []
        self.server = MCPServer("ops")

        @self.server.tool(structured_output=False)
        async def restart(service: str, replicas: Annotated[int, Field(ge=1, le=10)] = 2) -> str:
            """Restart a service with some replicas."""
            self.calls.append({"service": service, "replicas": replicas})
            return f"Restarted {service} with {replicas} replicas."

        @self.server.tool(structured_output=False)
        async def rollback(service: str, ctx: Context) -> str:
            """Roll a service back, once its owner confirms (asked mid-call with elicitation/create)."""
            self.calls.append({"rollback": service})
            answer = await ctx.elicit(f"Roll {service} back?", Confirm)
            confirmed = answer.action == "accept" and answer.data.confirm
            return f"Rolled {service} back." if confirmed else f"{service} was not rolled back."

    @contextlib.contextmanager
    def served(self) -> Iterator[ServedInThread]:
        with served(self.server.streamable_http_app(host="127.0.0.1")) as app:
            yield app


def policy(**changes: Any) -> dict[str, Any]:
    return {"tools": ["ops.*"], "approvers": {"groups": ["ops"]}, "allow_edit": True, **changes}


def person(url: str, user: str) -> httpx.Client:
    headers = {"authorization": f"Bearer {PEOPLE[user]}", "x-supports-elicitation": "true"}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def answer(
    url: str, user: str, elicitation_id: str, action: str = "accept", content: dict[str, Any] | None = None
) -> httpx.Response:
    """An answer as an approver sends it: without the conversation, which is the requester's."""
    body: dict[str, Any] = {"elicitationId": elicitation_id, "action": action}
    if content is not None:
        body["content"] = content
    with person(url, user) as client:
        return client.post("/run/api/elicitation-responses", json=body)


def audit_record(url: str, elicitation_id: str, admin: str = "dave") -> dict[str, Any]:
    """The audit's record of one approval, as an admin reads it at `GET /run/api/audit` (its hub makes `admin` one)."""
    with person(url, admin) as client:
        response = client.get("/run/api/audit")
    assert response.status_code == 200, response.text
    [record] = [r for r in response.json()["records"] if r["elicitationId"] == elicitation_id]
    return dict(record)


def ui_body(conversation_id: str, text: str) -> dict[str, Any]:
    return {"id": conversation_id, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}


class Requester:
    """A requester's chat (AI SDK UI message stream), read part by part: `until(type)` reads up to the first part of
    that type, `rest()` to the end of the run."""

    def __init__(self, url: str, user: str, conversation_id: str, text: str) -> None:
        self._stack = contextlib.ExitStack()
        client = self._stack.enter_context(person(url, user))
        response = self._stack.enter_context(
            client.stream("POST", "/run/api/chat", json=ui_body(conversation_id, text))
        )
        assert response.status_code == 200, response.read()
        self._parts = sse_data(response)
        self.seen: list[dict[str, Any]] = []

    def __enter__(self) -> Requester:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def until(self, kind: str) -> dict[str, Any]:
        for part in self._parts:
            self.seen.append(part)
            if part["type"] == kind:
                return dict(part)
        raise AssertionError(f"no {kind} part in {self.seen}")

    def rest(self) -> list[dict[str, Any]]:
        parts = list(self._parts)
        self.seen.extend(parts)
        return parts


def tool_output(parts: list[dict[str, Any]]) -> tuple[str, bool]:
    """The text of the run's tool result, and whether it was an error."""
    for part in parts:
        if part["type"] == "tool-output-available":
            return str(part["output"]), False
        if part["type"] == "tool-output-error":
            return str(part["errorText"]), True
    raise AssertionError(f"no tool output in {parts}")
