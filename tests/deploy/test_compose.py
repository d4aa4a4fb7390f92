"""deploy/compose.yaml under podman-compose, with each profile's store, from a clean copy of deploy/ and no key of
anyone's: two hubs behind the front door, the demo's servers in a service of their own, the master key made by the
`key` service; a question asked through the front door survives the death of the hub that streamed it, and a
rolling restart of both hubs with questions pending loses nothing. The made key outlives `down` and `up`, and a key
file given wins over it."""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import free_port
from tests.deploy.compose import (
    DEADLINE_S,
    DRAIN_S,
    Project,
    answer,
    chats_served,
    clean_copy,
    contents,
    deploy,
    eventually,
    question,
    session,
)
from tests.deploy.engine import Engine
from tests.deploy.front_door import Chat, FrontDoor, deployed

pytestmark = pytest.mark.timeout(1800)  # the first test to run builds the stand-in bases and the hub image


@pytest.fixture
def project(engine: Engine, hub_image: str, standins: dict[str, str], name: str, tmp_path: Path) -> Iterator[Project]:
    images = {
        "ELICITHUB_IMAGE": hub_image,
        "NGINX_IMAGE": standins["nginx"],
        "REDIS_IMAGE": standins["redis"],
        "POSTGRES_IMAGE": standins["postgres"],
    }
    made = Project(engine, name, clean_copy(tmp_path), images, free_port())
    try:
        yield made
    finally:
        made.down(volumes=True)


@pytest.fixture(params=["redis", "postgres"])
def stack(request: pytest.FixtureRequest, project: Project) -> Project:
    """The profile's stack, up with no key given."""
    project.up(request.param)
    return project


def test_with_no_key_given_a_question_pending_when_its_hub_dies_is_answered_and_finishes_on_the_other(
    stack: Project,
) -> None:
    made = stack.made_key()
    assert made is not None
    assert stack.users(session(made, "alice")) == {"alice"}  # both hubs hold the key the `key` service made

    # A chat client that shows questions says so; the page's session cookie names the user.
    headers = {"x-supports-elicitation": "true"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=httpx.Timeout(30, read=DEADLINE_S)) as browser:
        browser.get("/")  # the demo signs the browser in (a session cookie both hubs accept)
        assert browser.get("/run/api/me").json() == {"user": "dev"}

        with browser.stream("POST", "/run/v1/chat/completions", json=deploy("orders")) as response:
            assert response.status_code == 200
            stream = contents(response)
            request = question(stream)
            assert answer(browser, response.headers["x-conversation-id"], request, "eu-west-1").status_code == 200
            assert (
                "".join(c for c in stream if not c.startswith("{")) == "Deployed orders to eu-west-1 with 2 replicas."
            )

        served = {hub: chats_served(stack, hub) for hub in stack.hubs()}
        with browser.stream("POST", "/run/v1/chat/completions", json=deploy("billing")) as response:
            conversation = response.headers["x-conversation-id"]
            request = question(contents(response))
            [streaming] = [hub for hub in served if chats_served(stack, hub) > served[hub]]
            stack.engine.podman("rm", "--force", "--time", "0", streaming)  # SIGKILL: no drain, nothing handed over
        assert len(stack.hubs()) == 1

        # The front door sends the answer to the hub still standing, which takes the dead hub's run over.
        answered = eventually(
            lambda: (r := answer(browser, conversation, request, "us-east-1")).status_code == 200 and r,
            "the answer was never taken",
        )
        assert answered.json() == {"elicitationId": request["elicitationId"], "outcome": "accepted"}
        last = {"role": "assistant", "text": "Deployed billing to us-east-1 with 2 replicas."}
        eventually(
            lambda: browser.get(f"/run/api/conversations/{conversation}").json()["messages"][-1] == last,
            "the run never finished on the other hub",
        )


def test_the_made_key_outlives_down_and_up_and_a_key_file_given_wins_over_it(project: Project, tmp_path: Path) -> None:
    project.up("redis")
    made = project.made_key()
    assert made is not None
    with httpx.Client(base_url=project.url, timeout=30) as browser:
        browser.get("/")  # the demo signs the browser in as dev: a cookie a hub signed
        issued = browser.cookies[SESSION_COOKIE]

    # `down` keeps the volumes: the next `up` makes no new key, and a session from before is still good.
    project.down(volumes=False)
    project.up("redis")
    assert project.made_key() == made
    assert project.users(issued) == {"dev"}
    assert project.users(session(made, "alice")) == {"alice"}

    # A key file given is the hubs' key from then on; the made one stays in its volume, unused.
    given = tmp_path / "secret.key"
    given.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode() + "\n")
    os.chown(given, 10001, 10001)  # the hubs' user reads it; nobody else
    given.chmod(0o600)
    project.down(volumes=False)
    project.up("redis", key_file=given)
    assert project.users(session(given.read_text(), "alice")) == {"alice"}
    assert project.users(issued) == {None}
    assert project.made_key() == made


def test_a_rolling_restart_with_questions_pending_on_both_hubs_finishes_every_run_and_no_request_gets_a_5xx(
    stack: Project,
) -> None:
    with httpx.Client(base_url=stack.url, timeout=30) as browser:
        browser.get("/")  # the demo signs the browser in: a session cookie both hubs accept
        cookies = browser.cookies
    asyncio.run(roll(stack, cookies))


async def roll(stack: Project, cookies: httpx.Cookies) -> None:
    door = FrontDoor(stack.url, cookies)
    hubs = stack.hubs()
    # Questions pending on both hubs: chats whose runs wait on their questions until the rollout is over, their
    # streams open through the front door (which sends each new chat to the next hub).
    after_rollout = asyncio.Event()
    held: list[asyncio.Task[Chat]] = []
    while not all(stack.health(hub)["pendingElicitations"] for hub in hubs):
        assert len(held) < 8, [stack.health(hub) for hub in hubs]
        chat = Chat(f"conv-held-{len(held)}", f"held{len(held)}")
        held.append(asyncio.create_task(door.chat(chat, after_rollout)))
        async with asyncio.timeout(DEADLINE_S):
            await chat.asked.wait()
    # Chats streaming through the front door all along, each answered at once.
    rolled_out = asyncio.Event()
    chatting = [asyncio.create_task(door.keep_chatting(name, rolled_out)) for name in ("busy-a", "busy-b")]

    for hub in hubs:  # one at a time, each replaced once the one before is ready
        status, logged = await asyncio.to_thread(stack.replace, hub)
        assert status == 0, logged  # drained and stopped by itself within compose's grace period, not killed
        assert f"SIGTERM: not ready; serving for {DRAIN_S:g} s more" in logged
    rolled_out.set()
    after_rollout.set()

    async with asyncio.timeout(DEADLINE_S):
        answered = await asyncio.gather(*held)
        busy = [chat for chats in await asyncio.gather(*chatting) for chat in chats]
    await door.close()
    assert [chat.text for chat in answered] == [deployed(chat.service) for chat in answered]
    assert busy and [chat.text for chat in busy] == [deployed(chat.service) for chat in busy]
    # Each held chat's stream ended with its hub's drain at least once, and was reattached.
    assert all(chat.streams > 1 for chat in answered), [chat.streams for chat in answered]
    assert door.server_errors() == []
    assert all(stack.health(hub)["pendingElicitations"] == 0 for hub in stack.hubs())
