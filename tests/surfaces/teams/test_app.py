"""The Teams surface is mounted only when configured and needs its secrets in the environment; a 1:1 chat, or a
channel thread where the bot is mentioned, is one conversation run as its writer's hub user; anyone unmapped is told
so and nothing runs; the bot's token comes by client credentials and is kept until it nears its end."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from elicithub.config import parse_config
from elicithub.errors import TeamsUnusable
from elicithub.server.hub import Hub
from elicithub.surfaces.teams.records import conversation_for
from tests.conftest import RunningHub
from tests.surfaces.teams.conftest import ALICE, BOB, CHANNEL, EVE, TENANT, TeamsHub
from tests.surfaces.teams.standin import MicrosoftStandIn


def test_without_a_teams_section_there_is_no_teams_endpoint(tmp_path: Path) -> None:
    config = parse_config({"store": {"url": "memory://"}, "secrets": {"key_file": str(tmp_path / "k")}})
    hub = RunningHub(config)
    try:
        assert httpx.post(f"{hub.url}/teams/api/messages", json={}).status_code in (404, 405)
    finally:
        hub.stop()


def test_a_missing_secret_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMS_APP_ID", "app")
    monkeypatch.delenv("TEAMS_APP_PASSWORD", raising=False)
    teams = {"tenant_id": TENANT}
    config = parse_config({"store": {"url": "memory://"}, "teams": teams, "secrets": {"key_file": str(tmp_path / "k")}})
    with pytest.raises(TeamsUnusable, match=r"\$TEAMS_APP_PASSWORD is not set"):
        Hub(config)


def user_texts(hub: TeamsHub, user: str, teams_conversation: str) -> list[str]:
    with hub.client(user) as client:
        transcript = client.get(f"/run/api/conversations/{conversation_for(teams_conversation)}").json()
    return [m["text"] for m in transcript["messages"] if m["role"] == "user"]


def test_a_1_1_chat_runs_the_agent_as_its_person_and_is_one_conversation(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    chat = teams_hub.say(ALICE, "hello")
    [first] = microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat) if not m.streaming])
    assert "/call" in first.text  # the scripted model's help text, streamed then final
    teams_hub.say(ALICE, "hello again")
    microsoft.wait(lambda: len([m for m in microsoft.in_conversation(chat) if not m.streaming]) == 2)
    assert user_texts(teams_hub, "alice", chat) == ["hello", "hello again"]


def test_a_channel_thread_where_the_bot_is_mentioned_is_one_conversation(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    thread = teams_hub.say(ALICE, "hello", thread="new")
    assert thread.startswith(f"{CHANNEL};messageid=")
    [first] = microsoft.wait(lambda: microsoft.in_conversation(thread))
    assert "/call" in first.text
    root = thread.split("=", 1)[1]
    teams_hub.say(ALICE, "and again", thread=root)
    microsoft.wait(lambda: len(microsoft.in_conversation(thread)) == 2)
    assert user_texts(teams_hub, "alice", thread) == ["hello", "and again"]  # the mention taken out
    # A channel message that does not mention the bot starts nothing.
    quiet = teams_hub.message(ALICE, "just talking", thread=root)
    quiet["text"], quiet["entities"] = "just talking", []
    assert teams_hub.post(quiet).status_code == 200
    # Bob writes in the same thread: the conversation is his own (hub conversations belong to their user).
    teams_hub.say(BOB, "me too", thread=root)
    microsoft.wait(lambda: len(microsoft.in_conversation(thread)) == 3)
    assert user_texts(teams_hub, "bob", thread) == ["me too"]


def test_an_unmapped_person_is_told_so_and_nothing_runs(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = teams_hub.say(EVE, '/call deploy.deploy_service {"service": "orders"}')
    [told] = microsoft.wait(lambda: microsoft.in_conversation(chat))
    assert "not linked to a hub user" in told.text and told.card is None
    assert httpx.get(f"{teams_hub.url}/healthz").json()["runs"] == 0


def test_the_bot_token_comes_by_client_credentials_and_is_kept(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    for n in range(2):
        chat = teams_hub.say(ALICE, f"hello {n}")
        microsoft.wait(lambda c=chat, k=n + 1: len([m for m in microsoft.in_conversation(c) if not m.streaming]) == k)
    [asked] = [c for c in microsoft.calls if c.path.endswith("/oauth2/v2.0/token")]
    assert asked.path == f"/{TENANT}/oauth2/v2.0/token" and asked.body["grant_type"] == "client_credentials"
    # Every call to the connector carried it: the stand-in refuses any other, and both replies were sent.
    assert len([c for c in microsoft.calls if "/v3/" in c.path]) >= 2


def test_a_repeated_delivery_runs_once(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    activity = teams_hub.message(ALICE, "hello")
    assert teams_hub.post(activity).status_code == 200
    assert teams_hub.post(activity).status_code == 200  # the Bot Framework sent it again
    chat = activity["conversation"]["id"]
    microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat) if not m.streaming])
    assert user_texts(teams_hub, "alice", chat) == ["hello"]
