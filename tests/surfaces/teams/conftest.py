"""Fixtures for the Teams surface: Microsoft's services stood in, a hub configured for Teams, and a Teams client
that sends the hub signed activities and card presses the way the Bot Framework does."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicithub.config import parse_config
from tests.conftest import USERS, McpProcess, RunningHub, free_port
from tests.surfaces.teams.standin import Message, MicrosoftStandIn

APP_ID = "5e3c1a2b-0000-4000-8000-00000000b07a"
PASSWORD = "test-teams-app-password-0001"
TENANT = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
# People by their Entra object id: Alice and Bob are mapped to hub users, Eve is not.
ALICE, BOB, EVE = (f"0a1b2c3d-0000-4000-8000-0000000000{n}" for n in ("a1", "b0", "e5"))
NAMES = {ALICE: "Alice", BOB: "Bob", EVE: "Eve"}
CHANNEL = "19:general0001@thread.tacv2"

_IDS = itertools.count(1)
"""Activity ids: one count for every hub of a test (hubs sharing a store take an id seen before as sent again)."""


def teams_id(object_id: str) -> str:
    """A person's Teams id for this bot (`29:...`), as activities carry it."""
    return f"29:{object_id[-4:]}"


@pytest.fixture
def microsoft() -> Iterator[MicrosoftStandIn]:
    services = MicrosoftStandIn(APP_ID, PASSWORD, TENANT)
    yield services
    services.stop()


@pytest.fixture
def teams_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMS_APP_ID", APP_ID)
    monkeypatch.setenv("TEAMS_APP_PASSWORD", PASSWORD)


def teams_config(tmp_path: Path, port: int, services: MicrosoftStandIn, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "public_url": f"http://127.0.0.1:{port}",
        "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
        "secrets": {"key_file": str(tmp_path / "secret.key")},
        "users": USERS,
        "teams": {
            "tenant_id": TENANT,
            "users": {ALICE: "alice", BOB: "bob"},
            "login_url": services.login_url,
            "openid_metadata_url": services.openid_metadata_url,
        },
    }
    data.update(overrides)
    return data


class SignedTeams:
    """Reaching a hub (its `url`) the way the Bot Framework does: activities POSTed to /teams/api/messages with the
    connector's signed token."""

    url: str
    microsoft: MicrosoftStandIn

    def post(self, activity: dict[str, Any], token: str | None = None) -> httpx.Response:
        token = self.microsoft.sign(activity.get("serviceUrl")) if token is None else token
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.post(f"{self.url}/teams/api/messages", json=activity, headers=headers, timeout=60)

    def activity(self, object_id: str, conversation: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {
            "id": f"{1_600_000_000_000 + next(_IDS)}",
            "timestamp": "2026-11-20T10:00:00.000Z",
            "serviceUrl": self.microsoft.service_url,
            "channelId": "msteams",
            "from": {"id": teams_id(object_id), "name": NAMES.get(object_id, "Someone"), "aadObjectId": object_id},
            "conversation": {"tenantId": TENANT, **conversation},
            "recipient": {"id": f"28:{APP_ID}", "name": "elicithub"},
            "channelData": {"tenant": {"id": TENANT}},
            "locale": "en-US",
            **fields,
        }

    def message(self, object_id: str, text: str, thread: str | None = None) -> dict[str, Any]:
        """A message: in the person's 1:1 chat with the bot, or (`thread`: a channel thread's first post id, or
        "new") mentioning the bot in the channel."""
        if thread is None:
            conversation = {"conversationType": "personal", "id": f"a:chat-{object_id}"}
            return self.activity(object_id, conversation, type="message", text=text, textFormat="plain")
        activity = self.activity(object_id, {}, type="message", textFormat="plain")
        root = activity["id"] if thread == "new" else thread
        activity["conversation"].update(
            {"conversationType": "channel", "isGroup": True, "id": f"{CHANNEL};messageid={root}"}
        )
        mention = {"id": f"28:{APP_ID}", "name": "elicithub"}
        activity["text"] = f"<at>elicithub</at> {text}"
        activity["entities"] = [{"type": "mention", "mentioned": mention, "text": "<at>elicithub</at>"}]
        return activity

    def say(self, object_id: str, text: str, thread: str | None = None) -> str:
        """Write to the bot; returns the Teams conversation it lives in."""
        activity = self.message(object_id, text, thread)
        response = self.post(activity)
        assert response.status_code == 200, response.text
        return str(activity["conversation"]["id"])

    def press(self, object_id: str, card: Message, title: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """Press a card's `Action.Execute` button, its inputs set (by label) as a person sets them, the rest as
        the card shows them; returns the invoke's response: `{statusCode, type, value}`."""
        action = next(a for a in card.actions() if a.get("title") == title)
        data = dict(action.get("data") or {})
        if action.get("associatedInputs") != "none":
            data.update(values(card, inputs or {}))
        conversation = {"conversationType": "personal" if card.conversation.startswith("a:") else "channel"}
        invoke = self.activity(
            object_id,
            {**conversation, "id": card.conversation},
            type="invoke",
            name="adaptiveCard/action",
            replyToId=card.id,
            value={"action": {"type": "Action.Execute", "verb": action["verb"], "data": data}, "trigger": "manual"},
        )
        response = self.post(invoke)
        assert response.status_code == 200, response.text
        return dict(response.json())


def values(card: Message, given: dict[str, Any]) -> dict[str, str]:
    """What Teams sends of a card's inputs: each input's value as a string, as set by `given` (by label) or shown."""
    sent: dict[str, str] = {}
    for label, element in card.inputs().items():
        value = given.get(label, element.get("value"))
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        sent[str(element["id"])] = str(value)
    return sent


class TeamsHub(SignedTeams, RunningHub):
    """A hub with the Teams surface, served in a thread of the test process."""

    def __init__(self, data: dict[str, Any], port: int, microsoft: MicrosoftStandIn) -> None:
        super().__init__(parse_config(data), port)
        self.microsoft = microsoft


@pytest.fixture
def teams_hub(teams_env: None, microsoft: MicrosoftStandIn, tmp_path: Path) -> Iterator[TeamsHub]:
    """A hub on its demo servers (tracker: sign-in; deploy: a rich form, and a task; release: the 2025-11-25 era)
    with the Teams surface."""
    port = free_port()
    hub = TeamsHub(teams_config(tmp_path, port, microsoft, demo={"enabled": True}), port, microsoft)
    yield hub
    hub.stop()


@pytest.fixture
def mrtr_teams_hub(
    teams_env: None, microsoft: MicrosoftStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> Iterator[TeamsHub]:
    port = free_port()
    config = teams_config(tmp_path, port, microsoft, mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}])
    hub = TeamsHub(config, port, microsoft)
    yield hub
    hub.stop()
