"""The inbox page in a real browser against a real hub and real SDK MCP servers: carol's /inbox shows the call alice's
chat makes as it comes (no reload), with its requester, tool, arguments and deadline, and approves it in place; the
item leaves by the stream; refusals (a bad edit, someone else's answer, a self-approval) show on the item."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import pytest
from mcp.server.mcpserver import MCPServer
from playwright.sync_api import Page, Route, expect
from pydantic import Field

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import HubFactory, RunningHub, served
from tests.triggers.approving import PEOPLE, USERS, OpsServer, answer, audit_record
from tests.web.conftest import NewContext, OpenPage, docs_copy, say, screenshot, session_cookie

RESTART = '/call ops.restart {"service": "orders", "replicas": 2}'
SHIP = '/call ship.ship {"service": "orders", "version": "1.4.2"}'


@contextlib.contextmanager
def ship_server() -> Iterator[str]:
    """An SDK server whose tool `ship` takes a service name the flat approval form cannot constrain (a pattern):
    only the hub's check of the tool's own schema refuses a bad edit of it."""
    server = MCPServer("ship")
    shipped: list[str] = []

    @server.tool(structured_output=False)
    async def ship(service: Annotated[str, Field(pattern=r"^[a-z-]+$")], version: str) -> str:
        """Ship a version of a service."""
        shipped.append(service)
        return f"Shipped {service} {version}."

    with served(server.streamable_http_app(host="127.0.0.1")) as app:
        yield f"{app.url}/mcp"


@pytest.fixture
def approvals_hub(make_hub: HubFactory) -> Iterator[RunningHub]:
    ops = OpsServer()
    with ops.served() as app, ship_server() as ship:
        ops.url = f"{app.url}/mcp"
        yield make_hub(
            users=USERS,
            mcp_servers=[{"id": "ops", "url": ops.url}, {"id": "ship", "url": ship}],
            approvals=[
                {"tools": ["ops.*"], "approvers": {"users": ["carol"]}, "allow_edit": True},
                {"tools": ["ship.*"], "approvers": {"users": ["carol", "alice"]}, "allow_edit": True},
            ],
            admins=["dave"],  # who reads the audit
        )


def open_inbox(new_context: NewContext, hub: RunningHub, user: str | None) -> Page:
    """The page /inbox in a fresh browser signed in as `user` (None: no one), once it shows what there is."""
    context = new_context(viewport={"width": 900, "height": 760})
    if user is not None:
        context.add_cookies([{"name": SESSION_COOKIE, "value": session_cookie(hub, user), "url": hub.url}])
    page = context.new_page()
    page.goto(f"{hub.url}/inbox")
    page.wait_for_selector("body[data-ready=true]")
    return page


def listed(hub: RunningHub, user: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=hub.url, headers={"authorization": f"Bearer {PEOPLE[user]}"}) as client:
        questions: list[dict[str, Any]] = client.get("/run/api/inbox").json()["questions"]
        return questions


def test_carol_sees_alices_call_as_it_comes_and_approves_it_in_place(
    approvals_hub: RunningHub, open_page: OpenPage, new_context: NewContext
) -> None:
    carol = open_inbox(new_context, approvals_hub, "carol")
    expect(carol.locator("#who")).to_have_text("Signed in as carol")
    expect(carol.locator("#empty")).to_be_visible()

    alice = open_page(approvals_hub, "alice")
    expect(alice.get_by_role("link", name="Inbox")).to_have_attribute("href", "inbox")  # the chat links it
    say(alice, RESTART)
    status = alice.locator(".tool-progress")
    expect(status).to_have_text("Waiting for approval by carol.")

    item = carol.locator("#items .item")
    expect(item).to_have_count(1)  # live: the page was not reloaded
    expect(item.locator(".prompt-message")).to_have_text("alice asks to call ops.restart. Approve this call?")
    about = item.locator(".prompt-about dd")
    expect(about.nth(0)).to_have_text("alice")
    expect(about.nth(1)).to_have_text("ops.restart")
    expect(about.nth(2).locator("time")).to_have_attribute("datetime", listed(approvals_hub, "carol")[0]["expiresAt"])
    arguments = json.loads(item.locator(".prompt-arguments").inner_text())
    assert arguments == {"service": "orders", "replicas": 2}
    expect(carol.locator("#status")).to_have_text("1 question to answer")
    expect(item.get_by_label("Replicas")).to_have_value("2")
    screenshot(carol, None, "inbox.png", copy_to=docs_copy("inbox.png"))

    item.get_by_label("Replicas").fill("3")
    item.get_by_label("Reason").fill("during the window")
    item.get_by_role("button", name="Approve").click()
    # The item leaves when the stream says the approval ended.
    expect(item).to_have_count(0)
    expect(carol.locator("#notice")).to_have_text("alice's call of ops.restart: answered by carol.")
    expect(carol.locator("#empty")).to_be_visible()

    # Alice's run went on with carol's edit, and finished.
    result = alice.locator(".tool .tool-status")
    expect(result).to_have_text("done")
    expect(alice.locator(".tool details pre").last).to_contain_text("Restarted orders with 3 replicas.")


def test_a_bad_edit_shows_at_its_field_and_a_denial_gives_its_reason(
    approvals_hub: RunningHub, open_page: OpenPage, new_context: NewContext
) -> None:
    carol = open_inbox(new_context, approvals_hub, "carol")
    alice = open_page(approvals_hub, "alice")
    say(alice, SHIP)
    item = carol.locator("#items .item")
    expect(item).to_have_count(1)
    item.get_by_label("service").fill("Orders!")
    item.get_by_role("button", name="Approve").click()
    # The tool's own schema refuses it (422, naming the field): the error is under the field, and it stays open.
    error = item.locator(".field", has=carol.get_by_label("service")).locator(".field-error")
    expect(error).to_contain_text("does not match")
    expect(item.locator(".prompt")).to_have_attribute("data-state", "pending")

    denied = listed(approvals_hub, "carol")[0]["elicitationId"]
    item.get_by_label("Reason").fill("not this week")
    item.get_by_role("button", name="Deny").click()
    expect(item).to_have_count(0)
    expect(carol.locator("#notice")).to_have_text("alice's call of ship.ship: answered by carol.")
    refusal = "Call of ship.ship was not approved: denied by carol: not this week"
    expect(alice.locator(".tool details pre").last).to_have_text(refusal)
    record = audit_record(approvals_hub.url, denied)  # the refusal names carol; the audit keeps her words alone
    assert (record["answeredBy"], record["outcome"], record["reason"]) == ("carol", "denied", "not this week")


def stub_stream(page: Page, items: list[dict[str, Any]]) -> None:
    """The page's inbox stream, once: a reset and `items`; then no hub can be reached (the page keeps what it has)."""
    body = 'data: {"type": "inbox-reset"}\n\n' + "".join(
        f"id: 1\ndata: {json.dumps({'type': 'inbox-added', **i})}\n\n" for i in items
    )
    served = []

    def handle(route: Route) -> None:
        if served:
            route.abort()
            return
        served.append(route)
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    page.route("**/run/api/inbox/stream", handle)


def test_someone_elses_answer_and_a_self_approval_are_refused_on_the_item(
    approvals_hub: RunningHub, open_page: OpenPage, new_context: NewContext
) -> None:
    alice = open_page(approvals_hub, "alice")
    say(alice, SHIP)
    expect(alice.locator(".tool-progress")).to_have_text("Waiting for approval by carol, alice.")
    [shipping] = listed(approvals_hub, "carol")

    # Alice is an approver of her own call without self_approval: her page, shown the item, is refused (403).
    context = new_context(viewport={"width": 900, "height": 760})
    value = session_cookie(approvals_hub, "alice")
    context.add_cookies([{"name": SESSION_COOKIE, "value": value, "url": approvals_hub.url}])
    page = context.new_page()
    stub_stream(page, [shipping])
    page.goto(f"{approvals_hub.url}/inbox")
    item = page.locator("#items .item")
    item.get_by_role("button", name="Approve").click()
    expect(item.locator(".prompt-error")).to_have_text(
        f"Elicitation '{shipping['elicitationId']}' asks approval of your own call; another approver must answer it."
    )
    expect(item.locator(".prompt")).to_have_attribute("data-state", "pending")

    # Carol's page shows it while carol answers elsewhere first: her page's answer is refused (409).
    carol = new_context(viewport={"width": 900, "height": 760})
    value = session_cookie(approvals_hub, "carol")
    carol.add_cookies([{"name": SESSION_COOKIE, "value": value, "url": approvals_hub.url}])
    carols = carol.new_page()
    stub_stream(carols, [shipping])
    carols.goto(f"{approvals_hub.url}/inbox")
    mine = carols.locator("#items .item")
    expect(mine).to_have_count(1)
    assert answer(approvals_hub.url, "carol", shipping["elicitationId"], "decline").status_code == 200
    mine.get_by_role("button", name="Approve").click()
    expect(mine.locator(".prompt")).to_have_attribute("data-state", "answered")
    expect(mine.locator(".status")).to_have_text("Already answered")
    expect(alice.locator(".tool details pre").last).to_have_text(
        "Call of ship.ship was not approved: declined by carol"
    )


def test_no_one_signed_in_is_told_to_sign_in(approvals_hub: RunningHub, new_context: NewContext) -> None:
    page = open_inbox(new_context, approvals_hub, None)
    expect(page.locator("#refused")).to_have_text("Sign in to see the questions you can answer. ")
    expect(page.locator("#items .item")).to_have_count(0)
