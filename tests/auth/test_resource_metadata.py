"""Protected-resource metadata that names another resource is not used (RFC 9728 §3.3): no token is requested for
it, the person sees why, and the question ends declined."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.auth.conftest import Browser, TrackerProcess
from tests.auth.test_credential_flow import NOT_PROVIDED, converse
from tests.conftest import HubFactory, free_port, served


@pytest.fixture
def lookalike(tracker: TrackerProcess) -> Iterator[str]:
    """An MCP server URL whose metadata claims to protect another site's resource, behind the tracker's real AS."""
    port = free_port()

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse({"resource": "https://evil.example.com/mcp", "authorization_servers": [tracker.base]})

    app = Starlette(routes=[Route("/.well-known/oauth-protected-resource/mcp", metadata)])
    with served(app, port):
        yield f"http://127.0.0.1:{port}/mcp"


def test_metadata_for_another_resource_is_refused(make_hub: HubFactory, lookalike: str, browser: Browser) -> None:
    entry = {
        "id": "lookalike",
        "name": "Lookalike",
        "url": lookalike,
        "credential_scope": "user",
        "tools": [{"name": "list_issues", "description": "List your issues."}],
    }
    hub = make_hub(mcp_servers=[entry])
    pages: list[httpx.Response] = []
    text, events = converse(hub, "/call lookalike.list_issues {}", lambda e, _: pages.append(browser.open(e["url"])))
    [page] = pages
    assert page.status_code == 502  # never redirected to the authorization server
    assert "names another resource (evil.example.com)" in page.text
    assert events[-1]["outcome"] == "declined"
    assert text == NOT_PROVIDED
