"""The admin's questions over HTTP: every user's open questions without their content, filtered; cancelling one
(the run goes on); and nobody else gets either."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import USERS, HubFactory, McpProcess, RunningHub
from tests.server.test_scale_out import chat_body, items

ADMIN = {"id": "carol", "token": "carol-secret"}
QUESTIONS = "/run/api/admin/questions"
FIELDS = {"elicitationId", "user", "trigger", "serverId", "toolName", "mode", "createdAt", "expiresAt", "surface"}
SCHEMA_WORDS = {"type", "object", "string", "properties", "required", "oneOf", "const", "title"}
"""JSON Schema's own words, which say nothing of what a question asks."""


@pytest.fixture
def admin_hub(make_hub: HubFactory, legacy_server: McpProcess, mrtr_server: McpProcess) -> RunningHub:
    """A hub whose admin is carol, with a user-scoped tracker whose sign-in is a url question (nothing listens at
    its URL: the question is asked before anything is sent to it)."""
    tracker = {
        "id": "tracker",
        "url": "http://127.0.0.1:9/mcp",
        "credential_scope": "user",
        "tools": [{"name": "list_issues", "description": "List your issues."}],
    }
    return make_hub(
        users=[*USERS, ADMIN],
        admins=["carol"],
        mcp_servers=[
            {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
            {"id": "mrtr", "url": mrtr_server.url},
            tracker,
        ],
    )


def as_admin(hub: RunningHub) -> httpx.Client:
    return httpx.Client(base_url=hub.url, headers={"authorization": f"Bearer {ADMIN['token']}"}, timeout=30)


class Asked:
    """A chat whose run has asked its question and waits, its stream open: `rest()` reads it to the run's end."""

    def __init__(self, conversation: str, request: dict[str, Any], stream: Iterator[str | dict[str, Any]]) -> None:
        self.conversation = conversation
        self.request = request
        self.id: str = request["elicitationId"]
        self._stream = stream

    def rest(self) -> list[str | dict[str, Any]]:
        return list(self._stream)


@pytest.fixture
def ask() -> Iterator[Any]:
    """`ask(hub, user, message)`: start a chat (OpenAI-compatible stream) and wait until its question is asked."""
    with contextlib.ExitStack() as streams:

        def ask_(hub: RunningHub, user: str, message: str) -> Asked:
            client = streams.enter_context(hub.client(user))
            response = streams.enter_context(client.stream("POST", "/run/v1/chat/completions", json=chat_body(message)))
            assert response.status_code == 200
            stream = items(response)
            request = next(stream)
            assert isinstance(request, dict) and request["type"] == "elicitation-request", request
            return Asked(response.headers["x-conversation-id"], request, stream)

        yield ask_


def provision(name: str) -> str:
    return f'/call mrtr.provision {{"name": "{name}"}}'


def words_of(schema: Any) -> set[str]:
    """Every name and text in a requested schema."""
    if isinstance(schema, dict):
        return {str(k) for k in schema} | {w for v in schema.values() for w in words_of(v)}
    if isinstance(schema, list):
        return {w for v in schema for w in words_of(v)}
    return {schema} if isinstance(schema, str) else set()


def test_an_admin_lists_every_users_open_questions_newest_first_and_nothing_they_ask(
    admin_hub: RunningHub, ask: Any
) -> None:
    form = ask(admin_hub, "alice", provision("orders"))
    sign_in = ask(admin_hub, "bob", "/call tracker.list_issues {}")
    with as_admin(admin_hub) as admin:
        listed = admin.get(QUESTIONS)
    assert listed.status_code == 200, listed.text
    rows = listed.json()["questions"]
    assert [row["elicitationId"] for row in rows] == [sign_in.id, form.id]
    assert all(set(row) == FIELDS for row in rows)
    assert rows[0] == {
        "elicitationId": sign_in.id,
        "user": "bob",
        "trigger": "credential_required",
        "serverId": "tracker",
        "toolName": "list_issues",
        "mode": "url",
        "createdAt": rows[0]["createdAt"],
        "expiresAt": sign_in.request["expiresAt"],
        "surface": "chat",
    }
    assert rows[1] == {
        **rows[0],
        "elicitationId": form.id,
        "user": "alice",
        "trigger": "mcp_elicitation",
        "serverId": "mrtr",
        "toolName": "provision",
        "mode": "form",
        "createdAt": rows[1]["createdAt"],
        "expiresAt": form.request["expiresAt"],
    }
    assert rows[1]["createdAt"] <= rows[0]["createdAt"] < rows[0]["expiresAt"]
    assert rows[0]["createdAt"].endswith("Z")
    # Never what is asked: no message, no schema, no sign-in link (nor the link's token).
    content = [form.request["message"], sign_in.request["message"], sign_in.request["url"]]
    content += [sign_in.request["url"].split("t=", 1)[1], *words_of(form.request["requestedSchema"]) - SCHEMA_WORDS]
    assert [text for text in content if text in listed.text] == []


def test_filters_narrow_the_list_and_a_bad_one_is_422_naming_it(admin_hub: RunningHub, ask: Any) -> None:
    alices = ask(admin_hub, "alice", provision("billing"))
    bobs = ask(admin_hub, "bob", provision("search"))
    with as_admin(admin_hub) as admin:

        def ids(**params: Any) -> list[str]:
            listed = admin.get(QUESTIONS, params=params)
            assert listed.status_code == 200, listed.text
            return [row["elicitationId"] for row in listed.json()["questions"]]

        assert ids(user="alice") == [alices.id]
        assert ids(server="mrtr") == [bobs.id, alices.id]
        assert ids(server="mrtr", user="bob") == [bobs.id]
        assert ids(server="legacy") == ids(user="dave") == []
        assert ids(older_than_s=0) == [bobs.id, alices.id]
        assert ids(older_than_s=86400) == []
        for name, value in [("older_than_s", "soon"), ("older_than_s", "-1"), ("older_than_s", "nan")]:
            refused = admin.get(QUESTIONS, params={name: value})
            assert refused.status_code == 422 and name in refused.json()["error"]["message"], refused.text
        for name in ("user", "server"):
            refused = admin.get(QUESTIONS, params={name: ""})
            assert refused.status_code == 422 and name in refused.json()["error"]["message"], refused.text


def test_an_admins_cancel_ends_the_question_and_the_run_goes_on(admin_hub: RunningHub, ask: Any) -> None:
    asked = ask(admin_hub, "alice", provision("orders"))
    with as_admin(admin_hub) as admin:
        cancelled = admin.post(f"{QUESTIONS}/{asked.id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json() == {"elicitationId": asked.id, "outcome": "cancelled"}
        rest = asked.rest()
        assert rest[0] == {"type": "elicitation-resolved", "elicitationId": asked.id, "outcome": "cancelled"}
        assert "".join(i for i in rest if isinstance(i, str)) == (
            "Tool error: Provisioning of orders stopped: the user chose cancel."
        )
        assert admin.get(QUESTIONS).json() == {"questions": []}

        again = admin.post(f"{QUESTIONS}/{asked.id}/cancel")
        assert again.status_code == 409 and again.json()["error"]["code"] == "already_resolved", again.text
        unknown = admin.post(f"{QUESTIONS}/eli_unknown/cancel")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    # Its person sees it ended too.
    late = admin_hub.answer("alice", asked.conversation, asked.id, "accept", {"region": "eu-west-1"})
    assert late.status_code == 409


def test_cancelling_an_expired_question_is_410(make_hub: HubFactory, ask: Any) -> None:
    hub = make_hub(users=[*USERS, ADMIN], admins=["carol"], elicitation={"timeout_s": 1})
    asked = ask(hub, "alice", provision("orders"))
    assert asked.rest()[0] == {"type": "elicitation-resolved", "elicitationId": asked.id, "outcome": "expired"}
    with as_admin(hub) as admin:
        gone = admin.post(f"{QUESTIONS}/{asked.id}/cancel")
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "expired", gone.text


def test_anyone_but_an_admin_gets_neither_the_list_nor_a_cancel(admin_hub: RunningHub, ask: Any) -> None:
    asked = ask(admin_hub, "alice", provision("orders"))
    cancel = f"{QUESTIONS}/{asked.id}/cancel"
    with admin_hub.client("alice") as alice:  # not an admin, not even of her own question
        for response in (alice.get(QUESTIONS), alice.post(cancel), alice.get(QUESTIONS, params={"older_than_s": "x"})):
            assert response.status_code == 403, response.text
            assert response.json() == {"error": {"code": "forbidden", "message": "alice is not an admin of this hub."}}
    for headers in ({}, {"authorization": "Bearer not-a-token"}):
        with httpx.Client(base_url=admin_hub.url, headers=headers) as stranger:
            for response in (stranger.get(QUESTIONS), stranger.post(cancel)):
                assert response.status_code == 401, response.text
                assert response.json()["error"]["code"] == "unauthorized"
                assert response.headers["www-authenticate"].startswith("Bearer")
    with as_admin(admin_hub) as admin:
        assert [row["elicitationId"] for row in admin.get(QUESTIONS).json()["questions"]] == [asked.id]


def test_the_page_is_served_like_the_widgets(admin_hub: RunningHub) -> None:
    page = httpx.get(f"{admin_hub.url}/admin")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert 'src="static/admin.js"' in page.text
    assert httpx.get(f"{admin_hub.url}/static/admin.js").status_code == 200
    assert json.loads(httpx.get(f"{admin_hub.url}/openapi.json").text)["paths"][QUESTIONS]["get"]
