"""The hub's composition: with the demo on, the demo adds its servers, agents and admin beside one's own, never hiding
any; and its sweep, which forgets idle conversations, and the questions and runs they held."""

from __future__ import annotations

import re

import httpx

from tests.conftest import HubFactory, McpProcess, RunningHub
from tests.core_fixtures import RedisServer
from tests.server.test_chat_ui_stream import UIStream, ask, text_of, text_part, ui_body
from tests.triggers.approving import PEOPLE, Requester, answer
from tests.triggers.approving import USERS as PEOPLE_USERS

REGION = {"region": "eu-west-1"}


def said(hub: RunningHub, conversation_id: str, message: str) -> str:
    stream = UIStream(hub.client(), ui_body(conversation_id, text_part(message)))
    text = text_of(stream.rest())
    stream.close()
    return text


def test_with_the_demo_on_the_default_agent_has_the_demos_tools_and_every_configured_servers(
    make_hub: HubFactory,
) -> None:
    hub = make_hub(demo={"enabled": True})  # beside make_hub's own servers, legacy and mrtr, and no agents:
    listed = said(hub, "conv-demo-own-help", "hello")
    for tool in ("legacy.echo", "mrtr.provision", "deploy.deploy_service", "release.rollback", "travel.send_message"):
        assert f"- {tool}:" in listed
    assert "- planner.delegate:" in listed  # the demo's delegation is still there
    assert said(hub, "conv-demo-own-call", '/call legacy.echo {"text": "my own tool"}') == "echo: my own tool"


def test_the_demos_help_names_a_tool_on_every_line_of_its_list(make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True})
    tools = [line for line in said(hub, "conv-demo-help-lines", "hello").splitlines() if line.startswith("- ")]
    assert tools and all(re.match(r"^- [a-z]+\.\w+: ", line) for line in tools), tools
    assert any(line.startswith("- travel.send_message: ") for line in tools)


def test_a_configured_server_with_a_demo_servers_id_takes_its_place(
    make_hub: HubFactory, legacy_server: McpProcess
) -> None:
    hub = make_hub(demo={"enabled": True}, mcp_servers=[{"id": "deploy", "url": legacy_server.url}])
    listed = said(hub, "conv-demo-taken-help", "hello")
    assert "- deploy.echo:" in listed and "deploy.deploy_service" not in listed
    assert "- release.rollback:" in listed
    assert said(hub, "conv-demo-taken-call", '/call deploy.echo {"text": "mine"}') == "echo: mine"


def test_the_sweep_leaves_nothing_held_of_conversations_idle_past_retention(make_hub: HubFactory) -> None:
    hub = make_hub(conversations={"retention_s": 1e-6})  # idle past it as soon as they are written
    for n in range(3):
        said(hub, f"conv-idle-{n}", "x" * 16 * 1024)
    hub.on_loop(hub.hub.sweep())  # the pass the hub makes every few seconds, now
    assert len(hub.hub.conversations.runner.histories) == 0  # none of their messages stays in the hub's memory
    with hub.client() as client:
        for n in range(3):
            assert client.get(f"/run/api/conversations/conv-idle-{n}").status_code == 404


def test_ended_questions_and_finished_runs_are_kept_no_longer_than_their_conversations(make_hub: HubFactory) -> None:
    hub = make_hub(conversations={"retention_s": 1e-6})
    stream, question = ask(hub, "conv-kept-briefly")
    assert hub.answer("alice", "conv-kept-briefly", question["id"], "accept", REGION).status_code == 200
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()
    ended, _ = hub.run_ended(question["id"])
    assert hub.answer("alice", "conv-kept-briefly", question["id"], "accept", REGION).status_code == 200  # kept

    hub.on_loop(hub.hub.sweep())  # past the conversations' retention, which is shorter than a day
    assert hub.answer("alice", "conv-kept-briefly", question["id"], "accept", REGION).status_code == 404
    assert hub.on_loop(hub.hub.backend.runs.get(ended.run_id)) is None


def test_on_redis_a_finished_run_expires_with_its_conversations_retention(
    make_hub: HubFactory, redis_server: RedisServer, redis_url: str
) -> None:
    hub = make_hub(store={"url": redis_url}, conversations={"retention_s": 600})
    stream, question = ask(hub, "conv-run-ttl")
    assert hub.answer("alice", "conv-run-ttl", question["id"], "accept", REGION).status_code == 200
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()
    ended, _ = hub.run_ended(question["id"])
    with redis_server.client() as client:
        assert 0 < client.ttl(f"elicithub:run:{ended.run_id}") <= 600  # not the day a run is kept at most


def test_with_the_demo_on_a_rollback_first_asks_the_ops_groups_approval_which_the_dev_user_may_give(
    make_hub: HubFactory,
) -> None:
    hub = make_hub(demo={"enabled": True}, users=PEOPLE_USERS)
    assert [p.tools for p in hub.hub.config.approvals] == [["release.rollback"]]
    assert hub.hub.config.groups == {"ops": ["dev"]}
    with Requester(hub.url, "dev", "conv-demo-approval", '/call release.rollback {"service": "orders"}') as person:
        asked = person.until("data-elicitation-request")["data"]
        assert asked["context"]["trigger"] == "approval" and asked["context"]["requester"] == "dev"
        approved = answer(hub.url, "dev", asked["elicitationId"], content={"approve": True, "reason": "bad canary"})
        assert approved.status_code == 200, approved.text
        confirm = person.until("data-elicitation-request")["data"]  # then the release server's own question
        assert confirm["message"] == "Roll orders back to the previous release?"
        assert answer(hub.url, "dev", confirm["elicitationId"], content={"confirm": True}).status_code == 200
        rest = person.rest()
    assert text_of(rest) == "Rolled orders back to the previous release."


def test_with_the_demo_on_its_dev_user_is_an_admin_beside_the_configured_ones(make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True, "dev_user": "dev"}, users=PEOPLE_USERS, admins=["carol"])
    assert hub.hub.config.admins == ["carol", "dev"]
    for user, status in (("dev", 200), ("carol", 200), ("bob", 403)):
        headers = {"authorization": f"Bearer {PEOPLE[user]}"}
        assert httpx.get(f"{hub.url}/run/api/admin/questions", headers=headers).status_code == status, user
