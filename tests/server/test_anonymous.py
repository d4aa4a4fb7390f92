"""Anonymous callers stay apart: a conversation is bound to the browser that started it (a cookie), and a hub may
refuse anonymous chat altogether."""

from __future__ import annotations

import httpx

from tests.conftest import HubFactory, RunningHub, sse_data
from tests.server.test_chat_ui_stream import text_part, ui_body


def chat(client: httpx.Client, conversation_id: str, text: str) -> httpx.Response:
    with client.stream("POST", "/run/api/chat", json=ui_body(conversation_id, text_part(text))) as response:
        list(sse_data(response)) if response.status_code == 200 else response.read()
    return response


def test_an_anonymous_conversation_is_its_first_callers_only(hub: RunningHub) -> None:
    with hub.client(None) as first, hub.client(None) as second:
        issued = chat(first, "chat-1234", "hello").headers["x-conversation-id"]
        assert first.get(f"/run/api/conversations/{issued}").json()["messages"][0]["text"] == "hello"
        # The second caller knows the id, but not the first one's cookie: the id is someone else's.
        assert second.get(f"/run/api/conversations/{issued}").status_code == 404
        theirs = chat(second, issued, "what did they say?").headers["x-conversation-id"]
        assert theirs != issued
        assert chat(first, issued, "again").headers["x-conversation-id"] == issued
        transcript = first.get(f"/run/api/conversations/{issued}").json()["messages"]
        assert [m["text"] for m in transcript if m["role"] == "user"] == ["hello", "again"]


def test_the_anonymous_cookie_is_http_only_and_scoped_to_the_api(hub: RunningHub) -> None:
    with hub.client(None) as client:
        cookie = chat(client, "chat-1", "hello").headers["set-cookie"]
    assert cookie.startswith("elicithub_anonymous=")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/run/" in cookie


def test_a_hub_without_anonymous_chat_asks_for_a_user(make_hub: HubFactory) -> None:
    hub = make_hub(auth={"anonymous": False})
    with hub.client(None) as anonymous:
        refused = chat(anonymous, "chat-1", "hello")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="elicithub"'
        assert anonymous.get("/run/api/me").json() == {"user": None}
    with hub.client("alice") as alice:
        assert chat(alice, "chat-1", "hello").status_code == 200
