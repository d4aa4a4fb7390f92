"""The widget in a real browser against a real hub: forms, their states, expiry, reload, and inert server text."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from playwright.sync_api import Locator, Page, Route, expect

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import HubFactory, RunningHub
from tests.server.test_chat_ui_stream import ask as ask_over_http
from tests.web.conftest import (
    NewContext,
    OpenPage,
    Requests,
    ask,
    conversation_path,
    docs_copy,
    expect_closed,
    open_widget,
    reload,
    say,
    screenshot,
    session_cookie,
)

PROVISION = '/call mrtr.provision {"name":"orders"}'


def assistant_says(page: Page, text: str) -> None:
    expect(page.locator(".message.assistant > .text", has_text=text)).to_be_visible()


def answer_the_region(page: Page, region: str) -> Locator:
    """Pick `region` in the open prompt and submit it: the tool's result then shows once, and the prompt closes."""
    prompt = page.locator(".prompt")
    prompt.get_by_label("Region").select_option(region)
    prompt.get_by_role("button", name="Submit").click()
    continuation = page.locator(".message.assistant > .text", has_text=f"Provisioned orders in {region}.")
    expect(continuation).to_have_count(1)
    expect_closed(prompt, "accepted")
    return continuation


def wait_until_streams_closed(hub: RunningHub) -> None:
    deadline = time.monotonic() + 10
    while httpx.get(f"{hub.url}/healthz").json()["openStreams"] > 0:
        assert time.monotonic() < deadline, "the hub kept the old page's stream open"
        time.sleep(0.05)


def test_form_is_checked_in_the_browser_then_answered_and_the_result_streams_in(
    hub: RunningHub, open_page: OpenPage
) -> None:
    page = open_page(hub)
    expect(page.locator("#who")).to_have_text("Signed in as alice")
    answers: list[str] = []
    page.on("request", lambda r: answers.append(r.url) if "elicitation-responses" in r.url else None)
    say(page, PROVISION)
    prompt = page.locator(".prompt")
    expect(prompt.locator(".prompt-message")).to_have_text("Which region should orders live in?")
    region = prompt.get_by_label("Region")
    expect(region).to_have_attribute("aria-required", "true")
    screenshot(page, ".message.assistant", "form.png", copy_to=docs_copy("form.png"))

    prompt.get_by_role("button", name="Submit").click()
    expect(prompt.locator(".field-error")).to_have_text("is required")
    expect(region).to_have_attribute("aria-invalid", "true")
    expect(region).to_be_focused()
    assert answers == []  # the browser caught it; nothing was sent

    region.select_option(label="EU West")
    prompt.get_by_role("button", name="Submit").click()
    assistant_says(page, "Provisioned orders in eu-west-1.")
    expect_closed(prompt, "accepted")
    expect(prompt.locator(".field-error")).to_be_hidden()
    assert len(answers) == 1


def test_two_questions_at_once_are_answered_independently(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    say(page, '/call mrtr.deploy {"name":"orders"}')
    region = page.locator(".prompt", has_text="Which region?")
    confirm = page.locator(".prompt", has_text="Deploy orders?")
    confirm.get_by_label("Go ahead?").check()
    confirm.get_by_role("button", name="Submit").click()
    expect(confirm).to_have_attribute("data-state", "accepted")
    expect(region).to_have_attribute("data-state", "pending")
    region.get_by_label("Region").select_option("eu-west-1")
    region.get_by_role("button", name="Submit").click()
    assistant_says(page, "Deployed orders to eu-west-1.")
    expect(region).to_have_attribute("data-state", "accepted")


@pytest.mark.parametrize(
    ("command", "button", "state", "error"),
    [
        (
            '/call legacy.provision {"name":"orders"}',
            "Decline",
            "declined",
            "Provisioning of orders stopped: the user chose decline.",
        ),
        (PROVISION, "Cancel", "cancelled", "Tool error: Provisioning of orders stopped: the user chose cancel."),
    ],
)
def test_declining_or_cancelling_closes_the_prompt_and_the_tool_says_so(
    hub: RunningHub, open_page: OpenPage, command: str, button: str, state: str, error: str
) -> None:
    page = open_page(hub)
    say(page, command)
    page.locator(".prompt").get_by_role("button", name=button).click()
    assistant_says(page, error)
    expect_closed(page.locator(".prompt"), state)


def test_an_unanswered_prompt_counts_down_and_expires(make_hub: HubFactory, open_page: OpenPage) -> None:
    hub = make_hub(elicitation={"timeout_s": 2})
    page = open_page(hub)
    say(page, PROVISION)
    expect(page.locator(".prompt .countdown")).to_contain_text("expires in 0:0")
    assistant_says(page, "Tool error: The user did not answer")
    expect_closed(page.locator(".prompt"), "expired")
    expect(page.locator(".prompt .countdown")).to_have_text("")


def test_reloading_brings_back_the_conversation_and_its_open_question(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    say(page, PROVISION)
    eid = page.locator(".prompt").get_attribute("data-elicitation-id")
    conversation = conversation_path(page)
    requests = Requests(page)
    reload(page)
    expect(page.locator(".message.user .text")).to_have_text(PROVISION)
    prompt = page.locator(".prompt")
    expect(prompt).to_have_attribute("data-elicitation-id", str(eid))
    expect(prompt).to_have_attribute("data-state", "pending")
    wait_until_streams_closed(hub)  # the page that asked is gone: only the run read again can bring the rest

    continuation = answer_the_region(page, "us-east-1")
    page.wait_for_timeout(1500)  # time for anything still reading the conversation to show itself
    expect(continuation).to_have_count(1)
    expect(page.locator(".prompt")).to_have_count(1)
    expect(page.locator(".tool")).to_have_count(0)  # the replayed tool step is not news: the page never showed it
    assert requests.count("GET", conversation) == 1
    assert requests.count("GET", f"{conversation}/stream") == 1
    assert requests.count("POST", "/run/api/elicitation-responses") == 1
    assert requests.count("POST", "/run/api/chat") == 0

    reload(page)
    assistant_says(page, "Provisioned orders in us-east-1.")
    expect(page.locator(".prompt")).to_have_count(0)
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".message")).to_have_count(0)


def replay_through_the_question(hub: RunningHub, conversation: str) -> tuple[str, str]:
    """The hub's own reattach stream up to and including the question's event, and that event's id."""
    lines: list[str] = []
    question_id = ""
    with hub.client() as client, client.stream("GET", f"{conversation}/stream") as response:
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith("id: "):
                event_id = line.removeprefix("id: ")
            elif line.startswith("data: ") and '"data-elicitation-request"' in line:
                question_id = event_id
            elif line == "" and question_id:
                break
    return "\n".join(lines) + "\n", question_id


def test_a_broken_reattached_stream_resumes_after_the_last_event_it_read(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    ask(page, PROVISION)
    conversation = conversation_path(page)
    cut: list[str] = []
    resumed_after: list[str | None] = []

    def break_the_first(route: Route) -> None:
        if cut:
            resumed_after.append(route.request.headers.get("last-event-id"))
            route.continue_()
            return
        body, question_id = replay_through_the_question(hub, conversation)
        cut.append(question_id)
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)  # then it ends

    page.route(f"**{conversation}/stream", break_the_first)
    reload(page)
    answer_the_region(page, "eu-west-1")
    assert cut[0].startswith("run_")
    assert resumed_after == cut
    expect(page.locator(".prompt")).to_have_count(1)
    expect(page.locator(".tool")).to_have_count(0)


def test_when_the_run_has_no_trace_of_the_question_the_answer_brings_the_continuation(
    hub: RunningHub, open_page: OpenPage
) -> None:
    page = open_page(hub)
    ask(page, PROVISION)
    conversation = conversation_path(page)
    requests = Requests(page)

    def a_run_without_it(route: Route) -> None:
        # Marked now, before the page reads on: the page shows the conversation afresh once this run has ended.
        page.evaluate("document.querySelector('.prompt').dataset.before = 'yes'")
        body = 'data: {"type":"start"}\n\ndata: {"type":"finish"}\n\ndata: [DONE]\n\n'
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    page.route(f"**{conversation}/stream", a_run_without_it)
    with page.expect_response(lambda r: r.url.endswith(conversation) and requests.count("GET", conversation) == 2):
        page.reload()
    expect(page.locator(".prompt[data-before]")).to_have_count(0)
    wait_until_streams_closed(hub)  # nothing of this page carries the run now: the answer must bring the rest
    answer_the_region(page, "us-east-1")
    assert requests.count("GET", f"{conversation}/stream") == 1
    assert requests.count("POST", "/run/api/chat") == 1
    assert requests.count("GET", conversation) == 2


def test_without_the_demo_a_new_conversation_offers_no_suggestions(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    expect(page.locator(".intro")).to_be_visible()
    expect(page.locator(".suggestions")).to_have_count(0)


def test_a_new_conversation_stops_reading_the_old_run(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    ask(page, PROVISION)
    run = f"{conversation_path(page)}/stream"
    with page.expect_response(lambda r: r.url.endswith(run)):
        page.reload()
    with page.expect_event("requestfailed", lambda r: r.url.endswith(run)):
        page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".message")).to_have_count(0)


def test_html_in_messages_results_and_questions_stays_text(hub: RunningHub, open_page: OpenPage) -> None:
    payload = "<img src=x onerror=window.__pwned=1>"
    page = open_page(hub)
    say(page, payload)
    say(page, "/call legacy.echo " + json.dumps({"text": payload}))
    assistant_says(page, f"echo: {payload}")
    say(page, "/call mrtr.provision " + json.dumps({"name": payload}))
    expect(page.locator(".prompt-message")).to_have_text(f"Which region should {payload} live in?")
    expect(page.locator(".message.user .text").first).to_have_text(payload)

    reload(page)  # the restored transcript is built from server text too
    expect(page.locator(".prompt-message")).to_have_text(f"Which region should {payload} live in?")
    assistant_says(page, f"echo: {payload}")
    assert page.locator("#transcript img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_the_servers_field_errors_show_beside_their_fields(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    say(page, PROVISION)
    prompt = page.locator(".prompt")

    def smuggle(route: Route) -> None:
        # What a browser check cannot catch: the content changes on its way to the hub.
        body = json.loads(route.request.post_data or "{}")
        route.continue_(post_data=json.dumps({**body, "content": {"region": "mars-1"}}))

    page.route("**/run/api/elicitation-responses", smuggle)
    prompt.get_by_label("Region").select_option("eu-west-1")
    prompt.get_by_role("button", name="Submit").click()
    error = prompt.locator(".field", has=page.get_by_label("Region")).locator(".field-error")
    expect(error).to_have_text("must be one of: us-east-1, eu-west-1")
    expect(prompt).to_have_attribute("data-state", "pending")
    expect(prompt.get_by_label("Region")).to_be_enabled()

    page.unroute("**/run/api/elicitation-responses")
    prompt.get_by_role("button", name="Submit").click()
    assistant_says(page, "Provisioned orders in eu-west-1.")
    expect(prompt).to_have_attribute("data-state", "accepted")


def test_a_delegated_agents_question_says_which_agents_it_came_through(
    make_hub: HubFactory, open_page: OpenPage
) -> None:
    agents = [{"id": "assistant", "tools": ["mrtr", "researcher"]}, {"id": "researcher", "tools": ["mrtr"]}]
    hub = make_hub(agents=agents)
    page = open_page(hub)
    say(page, "/call researcher.delegate " + json.dumps({"message": PROVISION}))
    expect(page.locator(".prompt .prompt-source")).to_have_text("Asked by assistant → researcher · mrtr · provision")


def test_a_tool_running_as_a_task_shows_what_the_task_says_it_is_doing(
    make_hub: HubFactory, open_page: OpenPage
) -> None:
    hub = make_hub(demo={"enabled": True})
    page = open_page(hub)
    say(page, '/call deploy.migrate {"database": "orders-db"}')
    prompt = page.locator(".prompt", has_text="Apply 3 pending migrations to orders-db?")
    expect(prompt).to_have_attribute("data-state", "pending")
    # The task's last status message before it asked stays while it waits for the answer.
    tool = page.locator(".tool", has_text="deploy.migrate")
    expect(tool.locator(".tool-progress")).to_have_text("Checking the schema of orders-db: 3 migrations pending")
    expect(tool.locator(".tool-status")).to_have_text("running…")
    prompt.get_by_label("Apply 3 pending migrations").check()
    prompt.get_by_role("button", name="Submit").click()
    assistant_says(page, "Migrated orders-db: 3 migrations applied.")
    expect(tool.locator(".tool-status")).to_have_text("done")
    expect(tool.locator(".tool-progress")).to_have_count(0)  # it said what the task was doing while it worked


def test_a_link_to_a_conversation_opens_it_with_its_open_question(hub: RunningHub, new_context: NewContext) -> None:
    # The conversation goes on elsewhere (as one in a Slack thread does), its question open.
    stream, _ = ask_over_http(hub, "conv-linked")
    context = new_context()
    context.add_cookies([{"name": SESSION_COOKIE, "value": session_cookie(hub, "alice"), "url": hub.url}])
    page = open_widget(context, hub.url, "/?conversation=conv-linked")
    assert page.evaluate("window.location.search") == ""  # a reload shows this conversation, not the link's again
    assert page.evaluate("localStorage.getItem('elicithub.conversation')") == "conv-linked"
    answer_the_region(page, "eu-west-1")
    stream.close()
