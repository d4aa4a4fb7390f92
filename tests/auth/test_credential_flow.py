"""Credential elicitation end to end: the openai client, the hub, a real OAuth server and a protected MCP server."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from elicithub.auth.vault import Credential
from tests.auth.conftest import Browser, TrackerProcess, bearer, tracker_entry
from tests.conftest import HubFactory, RunningHub
from tests.server.test_chat_openai import chat, conversation, items

CALL = "/call tracker.list_issues {}"
NOT_PROVIDED = "Tool error: Authentication required but not provided."


def stored(hub: RunningHub, user: str = "alice") -> Credential | None:
    return hub.on_loop(hub.hub.vault.credential("tracker", user))


def converse(
    hub: RunningHub, text: str, on_request: Callable[[dict[str, Any], str], None] | None = None, **kw: Any
) -> tuple[str, list[dict[str, Any]]]:
    """Chat through the openai client; `on_request(event, conversation_id)` handles each question as it arrives."""
    stream = chat(hub, text, **kw)
    texts: list[str] = []
    events: list[dict[str, Any]] = []
    for item in items(stream):
        if isinstance(item, str):
            texts.append(item)
            continue
        events.append(item)
        if item["type"] == "elicitation-request" and on_request is not None:
            on_request(item, conversation(stream))
    return "".join(texts), events


def requests_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "elicitation-request"]


def test_connect_completes_the_original_call(auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser) -> None:
    before = tracker.stats()
    pages: list[httpx.Response] = []
    text, events = converse(auth_hub, CALL, lambda e, _: pages.append(browser.sign_in(e["url"])))

    request, resolved = events
    assert request["mode"] == "url"
    assert request["message"] == "Tracker requires authentication. Connect your account to continue."
    assert request["context"] == {"trigger": "credential_required", "serverId": "tracker", "toolName": "list_issues"}
    link = urlsplit(request["url"])
    assert f"{link.scheme}://{link.netloc}" == auth_hub.url and link.path == "/auth/connect"
    assert "alice" not in request["url"]
    assert resolved == {
        "type": "elicitation-resolved",
        "elicitationId": request["elicitationId"],
        "outcome": "accepted",
    }
    assert "Connected — you can close this window." in pages[0].text
    assert "postMessage" in pages[0].text and "elicithub:auth-complete" in pages[0].text
    assert "issue" in text.lower() and not text.startswith("Tool error")

    after = tracker.stats()
    assert after["unauthenticated"] == before["unauthenticated"]  # not one call without the user's token
    assert after["toolCalls"].get("list_issues", 0) == before["toolCalls"].get("list_issues", 0) + 1
    assert stored(auth_hub) is not None and stored(auth_hub, "bob") is None


def test_a_second_call_uses_the_stored_token_without_asking(auth_hub: RunningHub, browser: Browser) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    text, events = converse(auth_hub, '/call tracker.create_issue {"title": "Printer on fire"}')
    assert events == []
    assert "Printer on fire" in text and not text.startswith("Tool error")


def test_tokens_are_encrypted_at_rest(auth_hub: RunningHub, browser: Browser) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    credential = stored(auth_hub)
    assert credential is not None and credential.refresh_token is not None
    database = (auth_hub.config.store.url.removeprefix("sqlite:///") + "-wal", auth_hub.config.store.url[10:])
    raw = b"".join(open(path, "rb").read() for path in database if __import__("os").path.exists(path))
    assert raw, "the vault should be in the SQLite file"
    assert credential.access_token.encode() not in raw and credential.refresh_token.encode() not in raw
    assert "access_token" not in repr(credential) and credential.access_token not in repr(credential)


def test_consent_denied_ends_the_call_with_a_clear_error(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser
) -> None:
    before = tracker.stats()
    pages: list[httpx.Response] = []
    text, events = converse(auth_hub, CALL, lambda e, _: pages.append(browser.sign_in(e["url"], "Deny")))
    assert events[-1]["outcome"] == "declined"
    assert text == NOT_PROVIDED
    assert pages[0].status_code == 400 and "you did not allow access" in pages[0].text
    assert stored(auth_hub) is None
    assert tracker.stats()["toolCalls"] == before["toolCalls"]


def test_dismissed_in_the_chat_ends_the_call(auth_hub: RunningHub) -> None:
    def dismiss(event: dict[str, Any], conversation_id: str) -> None:
        assert auth_hub.answer("alice", conversation_id, event["elicitationId"], "decline").status_code == 200

    text, events = converse(auth_hub, CALL, dismiss)
    assert [e.get("outcome") for e in events] == [None, "declined"]
    assert text == NOT_PROVIDED


def test_unanswered_link_expires(make_hub: HubFactory, tracker: TrackerProcess) -> None:
    hub = make_hub(mcp_servers=[tracker_entry(tracker)], elicitation={"timeout_s": 1})
    text, events = converse(hub, CALL)
    assert events[-1]["outcome"] == "expired"
    assert text == NOT_PROVIDED


@pytest.mark.parametrize("user", ["alice", None])
def test_without_elicitation_support_the_tool_fails_at_once(
    auth_hub: RunningHub, tracker: TrackerProcess, user: str | None
) -> None:
    before = tracker.stats()
    if user is None:  # an anonymous chat cannot be asked either
        with httpx.Client(base_url=auth_hub.url, headers={"x-supports-elicitation": "true"}) as client:
            body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": CALL}]}
            with client.stream("POST", "/run/v1/chat/completions", json=body) as response:
                text = "".join(response.iter_text())
        assert "elicitation-request" not in text
    else:
        text, events = converse(auth_hub, CALL, elicitation=False)
        assert events == []
    message = (
        "Tool tracker.list_issues requires user authentication. The user needs to connect their "
        "Tracker account before this tool can be used."
    )
    assert message in text
    assert tracker.stats() == before


def test_another_user_opening_the_link_gets_403_and_nothing_is_stored(auth_hub: RunningHub) -> None:
    pages: dict[str, httpx.Response] = {}

    def others_open(event: dict[str, Any], conversation_id: str) -> None:
        for who in ("bob", None):
            stranger = Browser(who)
            pages[str(who)] = stranger.open(event["url"])
            stranger.close()
        auth_hub.answer("alice", conversation_id, event["elicitationId"], "decline")

    text, _ = converse(auth_hub, CALL, others_open)
    assert pages["bob"].status_code == 403 and "another person" in pages["bob"].text
    assert pages["None"].status_code == 403
    assert stored(auth_hub) is None and stored(auth_hub, "bob") is None
    assert text == NOT_PROVIDED


def test_tampered_and_expired_links_are_refused(make_hub: HubFactory, tracker: TrackerProcess) -> None:
    hub = make_hub(mcp_servers=[tracker_entry(tracker)], elicitation={"timeout_s": 60})
    pages: list[httpx.Response] = []

    def tamper(event: dict[str, Any], conversation_id: str) -> None:
        token = parse_qs(urlsplit(event["url"]).query)["t"][0]
        forged = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
        browser = Browser()
        pages.append(browser.open(f"{hub.url}/auth/connect?t={forged}"))
        pages.append(browser.open(f"{hub.url}/auth/connect?t=not-a-token"))
        hub.hub.links.clock = lambda: time.time() + 61  # past the link's lifetime (the question's timeout)
        pages.append(browser.open(event["url"]))
        browser.close()
        hub.answer("alice", conversation_id, event["elicitationId"], "decline")

    converse(hub, CALL, tamper)
    assert [p.status_code for p in pages] == [400, 400, 400]
    assert all("not valid or has expired" in p.text for p in pages)
    assert stored(hub) is None


def test_replayed_forged_and_foreign_state_are_refused(auth_hub: RunningHub, browser: Browser) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    first = stored(auth_hub)
    replay = browser.open(browser.callback_url())
    assert replay.status_code == 400 and "already used" in replay.text
    forged = browser.open(f"{auth_hub.url}/auth/callback?state=forged&code=whatever")
    assert forged.status_code == 400
    assert browser.open(f"{auth_hub.url}/auth/callback").status_code == 400
    assert stored(auth_hub) == first


def test_state_from_another_browser_is_refused(auth_hub: RunningHub) -> None:
    pages: list[httpx.Response] = []

    def split_browsers(event: dict[str, Any], conversation_id: str) -> None:
        starter = Browser()
        consent = starter.open(event["url"])
        form_client = httpx.Client(follow_redirects=False)  # a different browser, without the starter's cookie
        form = __import__("tests.auth.conftest", fromlist=["form_of"]).form_of(consent)
        name, value = form.buttons["Allow"]
        redirect = form_client.post(form.action, data={**form.fields, name: value})
        pages.append(form_client.get(redirect.headers["location"]))
        form_client.close()
        starter.close()
        auth_hub.answer("alice", conversation_id, event["elicitationId"], "decline")

    converse(auth_hub, CALL, split_browsers)
    assert pages[0].status_code == 403 and "another browser" in pages[0].text
    assert stored(auth_hub) is None


def test_callback_for_an_already_resolved_elicitation_stores_nothing(auth_hub: RunningHub, browser: Browser) -> None:
    pages: list[httpx.Response] = []

    def answer_then_consent(event: dict[str, Any], conversation_id: str) -> None:
        consent = browser.open(event["url"])
        assert auth_hub.answer("alice", conversation_id, event["elicitationId"], "decline").status_code == 200
        pages.append(browser.press(consent, "Allow"))

    text, _ = converse(auth_hub, CALL, answer_then_consent)
    assert pages[0].status_code == 409 and "already answered" in pages[0].text
    assert stored(auth_hub) is None
    assert text == NOT_PROVIDED


def test_client_accept_after_the_callback_is_a_harmless_repeat(auth_hub: RunningHub, browser: Browser) -> None:
    codes: list[int] = []

    def sign_in_then_accept(event: dict[str, Any], conversation_id: str) -> None:
        browser.sign_in(event["url"])
        codes.append(auth_hub.answer("alice", conversation_id, event["elicitationId"], "accept").status_code)

    text, _ = converse(auth_hub, CALL, sign_in_then_accept)
    assert codes == [200]
    assert not text.startswith("Tool error")


def test_an_expiring_token_is_refreshed_before_the_call(
    auth_hub: RunningHub, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    first = stored(auth_hub)
    assert first is not None
    monkeypatch.setattr("elicithub.triggers.credentials.REFRESH_MARGIN_S", 10**9)  # every token is about to expire
    text, events = converse(auth_hub, CALL)
    assert events == [] and not text.startswith("Tool error")
    second = stored(auth_hub)
    assert second is not None
    assert second.access_token != first.access_token and second.refresh_token != first.refresh_token


def test_a_failed_refresh_asks_the_user_to_connect_again(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    tracker.revoke_all()  # the refresh token dies too
    monkeypatch.setattr("elicithub.triggers.credentials.REFRESH_MARGIN_S", 10**9)
    again = Browser()
    text, events = converse(auth_hub, CALL, lambda e, _: again.sign_in(e["url"]))
    again.close()
    assert len(requests_of(events)) == 1 and events[-1]["outcome"] == "accepted"
    assert not text.startswith("Tool error")


def test_a_revoked_token_raises_one_new_elicitation(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser
) -> None:
    converse(auth_hub, CALL, lambda e, _: browser.sign_in(e["url"]))
    tracker.revoke_all()
    again = Browser()
    text, events = converse(auth_hub, CALL, lambda e, _: again.sign_in(e["url"]))
    again.close()
    assert len(requests_of(events)) == 1
    assert not text.startswith("Tool error")
    # Revoked again and declined this time: the call ends, it does not loop.
    tracker.revoke_all()

    def decline(event: dict[str, Any], conversation_id: str) -> None:
        auth_hub.answer("alice", conversation_id, event["elicitationId"], "decline")

    text, events = converse(auth_hub, CALL, decline)
    assert len(requests_of(events)) == 1
    assert text == NOT_PROVIDED


def test_no_token_code_or_link_reaches_a_stream_or_a_log(
    auth_hub: RunningHub, browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    raw: list[str] = []
    stream_events: list[dict[str, Any]] = []

    def sign_in(event: dict[str, Any], _: str) -> None:
        browser.sign_in(event["url"])

    with httpx.Client(base_url=auth_hub.url, headers={**bearer("alice"), "x-supports-elicitation": "true"}) as client:
        body = {"id": "conv_secrets", "messages": [{"role": "user", "parts": [{"type": "text", "text": CALL}]}]}
        with client.stream("POST", "/run/api/chat", json=body, timeout=30) as response:
            for line in response.iter_lines():
                raw.append(line)
                if '"data-elicitation-request"' in line:
                    event = __import__("json").loads(line.removeprefix("data: "))["data"]
                    stream_events.append(event)
                    sign_in(event, "conv_secrets")
    text, events = converse(auth_hub, CALL)  # and once more on the openai surface, with the stored token
    credential = stored(auth_hub)
    assert credential is not None and credential.refresh_token is not None
    callback = parse_qs(urlsplit(browser.callback_url()).query)
    link_token = parse_qs(urlsplit(stream_events[0]["url"]).query)["t"][0]
    secrets = {
        "access token": credential.access_token,
        "refresh token": credential.refresh_token,
        "authorization code": callback["code"][0],
        "state": callback["state"][0],
    }
    streams = "\n".join(raw) + repr(events) + text
    # Everything the hub process logged (its own thread), at every level; the test's browser logs its own traffic.
    hub_records = [r for r in caplog.records if r.thread != threading.get_ident()]
    logs = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in hub_records)
    for name, value in secrets.items():
        assert value not in streams, f"the {name} appeared on a stream"
        assert value not in logs, f"the {name} appeared in a log line"
    assert link_token not in logs
    assert re.search(r"elicitation \S+ accepted", logs), "the capture should hold the hub's own log lines"
