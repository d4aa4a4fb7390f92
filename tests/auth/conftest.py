"""Fixtures for credential elicitation: the demo tracker (a real OAuth-protected MCP server) and a browser stand-in."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from tests.auth.oidc_provider import OidcProvider, oidc_provider
from tests.conftest import USERS, HubFactory, RunningHub, free_port, wait_for_port


class TrackerProcess:
    """`python -m elicithub.demo.tracker`: the authorization server and the protected MCP server on loopback."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "elicithub.demo.tracker", str(self.port), *args])
        wait_for_port(self.port)
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = httpx.get(f"{self.base}/debug/stats").json()
        return stats

    def revoke_all(self) -> None:
        httpx.post(f"{self.base}/debug/revoke-all").raise_for_status()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="session")
def tracker() -> Iterator[TrackerProcess]:
    server = TrackerProcess()
    yield server
    server.kill()


TRACKER_TOOLS = [
    {"name": "list_issues", "description": "List your issues."},
    {
        "name": "create_issue",
        "description": "Open an issue.",
        "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    },
]


def tracker_entry(tracker: TrackerProcess, **extra: Any) -> dict[str, Any]:
    return {"id": "tracker", "url": tracker.url, "credential_scope": "user", "tools": TRACKER_TOOLS, **extra}


@pytest.fixture
def auth_hub(make_hub: HubFactory, tracker: TrackerProcess) -> RunningHub:
    return make_hub(mcp_servers=[tracker_entry(tracker)])


def bearer(user: str) -> dict[str, str]:
    return {"authorization": f"Bearer {next(u['token'] for u in USERS if u['id'] == user)}"}


@dataclass
class Form:
    action: str
    fields: dict[str, str]
    buttons: dict[str, tuple[str, str]]  # label -> (name, value)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._button: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", ""), {}, {}))
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1].fields[a["name"]] = a.get("value", "")
        elif tag == "button" and self.forms:
            self._button = a

    def handle_data(self, data: str) -> None:
        if self._button is not None and data.strip():
            self.forms[-1].buttons[data.strip()] = (self._button.get("name", ""), self._button.get("value", ""))
            self._button = None


def form_of(response: httpx.Response) -> Form:
    parser = _FormParser()
    parser.feed(response.text)
    assert parser.forms, f"no form on {response.url}: {response.text[:300]}"
    form = parser.forms[0]
    form.action = urljoin(str(response.url), form.action)
    return form


class Browser:
    """An HTTP client that follows redirects and keeps cookies, as a person's browser would."""

    def __init__(self, user: str | None = "alice") -> None:
        self.user = user
        self.client = httpx.Client(follow_redirects=True, timeout=30)
        self.visited: list[str] = []

    def open(self, url: str) -> httpx.Response:
        """Open a link; the hub sees who this is (same bearer identity), the authorization server does not."""
        headers = bearer(self.user) if self.user else {}
        response = self.client.get(url, headers=headers)
        self.visited += [str(r.url) for r in response.history] + [str(response.url)]
        return response

    def press(self, page: httpx.Response, label: str) -> httpx.Response:
        form = form_of(page)
        name, value = form.buttons[label]
        response = self.client.post(form.action, data={**form.fields, name: value})
        self.visited += [str(r.url) for r in response.history] + [str(response.url)]
        return response

    def sign_in(self, url: str, decision: str = "Allow") -> httpx.Response:
        consent = self.open(url)
        assert "Allow elicithub demo" in consent.text, consent.text[:500]
        return self.press(consent, decision)

    def callback_url(self) -> str:
        return next(u for u in self.visited if "/auth/callback?" in u)

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def oidc() -> Iterator[OidcProvider]:
    with oidc_provider() as provider:
        yield provider


@pytest.fixture
def oidc_hub(make_hub: HubFactory, oidc: OidcProvider) -> RunningHub:
    return make_hub(auth={"oidc": oidc.config()})
