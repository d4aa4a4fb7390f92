"""The hub as an MCP gateway: `/mcp` offers the downstream tools beside the agents, called with the SDK Client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from typing import Any

import anyio
import httpx
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from elicithub.core.elicitation import State
from elicithub.core.events import ToolCallFinished
from tests.conftest import HubFactory, McpProcess, RunningHub, free_port, served
from tests.servers.mrtr_server import INVENTORY
from tests.surfaces.mcp.test_asking import LINK, linker
from tests.surfaces.mcp.test_server import connected, text, token
from tests.surfaces.pages.inboxes import InboxStream
from tests.triggers.approving import answer
from tests.triggers.test_a2a_agents import AgentProcess, agent_entry

DECLARED = [{"name": f"lookup_{i:03}", "description": f"Look up record {i}."} for i in range(120)]
"""A user-scoped server's configured tools: shown until its user signs in, and more than one page."""


@pytest.fixture(scope="module")
def travel() -> Iterator[AgentProcess]:
    agent = AgentProcess()
    yield agent
    agent.kill()


@pytest.fixture
def gateway_hub(make_hub: HubFactory, legacy_server: McpProcess, mrtr_server: McpProcess) -> HubFactory:
    """Hubs with the test servers, and two user-scoped ones nobody has signed in to (nothing listens where they are)."""
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"
    servers = [
        {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
        {"id": "mrtr", "url": mrtr_server.url},
        {"id": "crm", "url": nowhere, "credential_scope": "user", "tools": DECLARED},
        {"id": "vault", "url": nowhere, "credential_scope": "user"},
    ]
    return partial(make_hub, mcp_servers=servers)


async def every_tool(client: Any) -> list[mt.Tool]:
    """Every page of the listing, following `nextCursor`; each page holds at most 100 tools."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        assert len(page.tools) <= 100
        tools.extend(page.tools)
        if page.next_cursor is None:
            return tools
        cursor = page.next_cursor


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_listing_offers_each_downstream_tool_as_its_server_gives_it_in_pages(
    gateway_hub: HubFactory, travel: AgentProcess, mode: str
) -> None:
    gateway = gateway_hub(a2a_agents=[agent_entry(travel)])

    async def go() -> None:
        async with connected(gateway, mode) as (client, _):
            first = await client.list_tools()
            tools = await every_tool(client)
        assert first.next_cursor is not None and len(first.tools) == 100
        names = [t.name for t in tools]
        assert names[0] == "assistant"  # the agents first, as before
        assert {"legacy.provision", "mrtr.provision", "travel.send_message", "vault.connect"} <= set(names)
        assert [n for n in names if n.startswith("crm.")] == [f"crm.{t['name']}" for t in DECLARED]
        assert len(names) == len(set(names))
        [inventory] = [t for t in tools if t.name == "mrtr.inventory"]
        given = INVENTORY.model_dump(by_alias=True, exclude_none=True, mode="json")
        shown = inventory.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert shown == {**given, "name": "mrtr.inventory"}

    asyncio.run(go())


def test_a_cursor_that_no_page_gave_is_refused(gateway_hub: HubFactory) -> None:
    gateway = gateway_hub()

    async def go() -> None:
        async with connected(gateway, "2026-07-28") as (client, _):
            for cursor in ("not-a-cursor", "100000"):
                with pytest.raises(MCPError) as refused:
                    await client.list_tools(cursor=cursor)
                assert refused.value.error.code == mt.INVALID_PARAMS

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_with_tools_false_the_listing_is_the_agents_alone(gateway_hub: HubFactory, mode: str) -> None:
    agents_only = gateway_hub(mcp_server={"tools": False})

    async def go() -> None:
        async with connected(agents_only, mode) as (client, _):
            listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["assistant"] and listed.next_cursor is None

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_tool_the_caller_may_not_use_is_refused_as_one_no_server_has(gateway_hub: HubFactory, mode: str) -> None:
    # researcher is an agent the assistant delegates to: its tool is an agent's, never the caller's to call.
    agents = [{"id": "assistant", "tools": ["legacy", "mrtr", "researcher"]}, {"id": "researcher", "tools": ["mrtr"]}]
    gateway = gateway_hub(agents=agents)
    agents_only = gateway_hub(mcp_server={"tools": False})

    async def refusal(hub: RunningHub, name: str) -> tuple[int, str]:
        async with connected(hub, mode) as (client, _):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {"name": "orders"})
        return refused.value.error.code, refused.value.error.message.replace(name, "NAME")

    async def go() -> None:
        unknown = await refusal(gateway, "nosuch.tool")
        assert unknown == (mt.INVALID_PARAMS, "Unknown tool: NAME")
        for name in ("researcher.delegate", "mrtr.nothing", "assistant.ask", "crm"):
            assert await refusal(gateway, name) == unknown, name
        assert await refusal(agents_only, "mrtr.provision") == unknown  # only the agents are offered there

    asyncio.run(go())


def provisioned(server: McpProcess) -> dict[str, int]:
    counts: dict[str, int] = httpx.get(server.url.removesuffix("/mcp") + "/debug/provisioned").json()
    return counts


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_call_returns_the_downstream_result_as_given(gateway_hub: HubFactory, mode: str) -> None:
    gateway = gateway_hub()

    async def go() -> None:
        async with connected(gateway, mode) as (client, asked):
            result = await client.call_tool("mrtr.inventory", {"name": "shelf"})
        assert asked == []
        assert result.structured_content == {"count": 3} and not result.is_error
        assert [b.model_dump(exclude_none=True) for b in result.content] == [{"type": "text", "text": "3"}]
        # The hub answers this client: a 2026-07-28 result is stamped with its serverInfo, never the server's.
        stamp = (result.meta or {}).get(mt.SERVER_INFO_META_KEY)
        assert (stamp or {}).get("name") == ("elicithub" if mode == "2026-07-28" else None)

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
@pytest.mark.parametrize("server", ["mrtr", "legacy"])
def test_the_servers_question_reaches_the_client_and_the_call_completes_once(
    gateway_hub: HubFactory, mrtr_server: McpProcess, legacy_server: McpProcess, mode: str, server: str
) -> None:
    gateway = gateway_hub()
    downstream = mrtr_server if server == "mrtr" else legacy_server
    name = f"direct-{mode}"

    async def go() -> None:
        async with connected(gateway, mode) as (client, asked):
            result = await client.call_tool(f"{server}.provision", {"name": name})
        assert text(result) == f"Provisioned {name} in eu-west-1." and not result.is_error
        assert [p.message for p in asked] == [f"Which region should {name} live in?"]

    asyncio.run(go())
    assert provisioned(downstream)[name] == 1


FREEZE = "not during the freeze"


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
@pytest.mark.parametrize(
    ("content", "outcome"),
    [
        ({"approve": True}, ("3", False)),
        (
            {"approve": False, "reason": FREEZE},
            (f"Call of mrtr.inventory was not approved: denied by bob: {FREEZE}", True),
        ),
    ],
    ids=["approved", "denied"],
)
def test_an_approvers_answer_decides_whether_the_call_is_made(
    gateway_hub: HubFactory, mode: str, content: dict[str, Any], outcome: tuple[str, bool]
) -> None:
    gateway = gateway_hub(approvals=[{"tools": ["mrtr.inventory"], "approvers": {"users": ["bob"]}}])

    async def go() -> None:
        with InboxStream(gateway.url, token("bob")) as bob:
            assert bob.started() == []
            async with connected(gateway, mode) as (client, asked):
                call = asyncio.ensure_future(client.call_tool("mrtr.inventory", {"name": "shelf"}))
                asked_bob = asyncio.ensure_future(asyncio.to_thread(bob.until, "inbox-added"))
                await asyncio.wait([call, asked_bob], return_when=asyncio.FIRST_COMPLETED)
                assert not call.done(), call.result()  # the call waits for bob's answer
                added = await asked_bob
                assert added["context"]["arguments"] == {"name": "shelf"}
                reply = await asyncio.to_thread(answer, gateway.url, "bob", added["elicitationId"], "accept", content)
                assert reply.status_code == 200, reply.text
                result = await call
        assert asked == []  # the approval is bob's to give, not a question of the caller's
        assert (text(result), bool(result.is_error)) == outcome
        assert (result.structured_content is not None) == (not outcome[1])

    asyncio.run(go())


def test_a_client_that_goes_away_mid_call_cancels_the_servers_question_and_nothing_is_made(
    gateway_hub: HubFactory, mrtr_server: McpProcess
) -> None:
    gateway = gateway_hub()
    name = "abandoned"

    async def go() -> str:
        shown = anyio.Event()

        async def never_answers(context: Any, params: mt.ElicitRequestParams) -> Any:
            shown.set()
            await anyio.sleep_forever()

        with InboxStream(gateway.url, token("alice")) as alice:
            assert alice.started() == []
            async with connected(gateway, "legacy", elicitation_callback=never_answers) as (client, _):
                async with anyio.create_task_group() as calls:
                    calls.start_soon(client.call_tool, "mrtr.provision", {"name": name})
                    await shown.wait()
                    calls.cancel_scope.cancel()  # the client gives up on the call, then closes its session
            added = await asyncio.to_thread(alice.until, "inbox-added")
            removed = await asyncio.to_thread(alice.until, "inbox-removed", added["elicitationId"])
            return str(removed["elicitationId"])

    question, events = gateway.run_ended(asyncio.run(go()))
    assert question.state is State.CANCELLED
    # The server was told of the cancel, and the call ended with it: made once, never again.
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.is_error and finished.name == "mrtr.provision"
    assert provisioned(mrtr_server).get(name, 0) == 0


@pytest.fixture
def linked_hub(make_hub: HubFactory) -> Iterator[RunningHub]:
    """A hub with a server whose tool asks the person to open a link, in either era (the server stops after it)."""
    with served(linker().streamable_http_app(host="127.0.0.1")) as downstream:
        url = f"{downstream.url}/mcp"
        servers = [{"id": "old", "url": url, "protocol": "legacy"}, {"id": "new", "url": url, "protocol": "2026-07-28"}]
        hub = make_hub(mcp_servers=servers)
        yield hub
        hub.stop()


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
@pytest.mark.parametrize("server", ["new", "old"])
def test_the_servers_link_reaches_the_client_and_its_answer_goes_back(
    linked_hub: RunningHub, mode: str, server: str
) -> None:
    async def go() -> None:
        async with connected(linked_hub, mode, answer=mt.ElicitResult(action="accept")) as (client, asked):
            result = await client.call_tool(f"{server}.connect", {})
        [params] = asked
        assert isinstance(params, mt.ElicitRequestURLParams) and params.url == LINK
        assert text(result) == "The user chose accept at the link." and not result.is_error

    asyncio.run(go())


def test_a_rounds_state_goes_on_with_its_own_call_alone(gateway_hub: HubFactory, mrtr_server: McpProcess) -> None:
    gateway = gateway_hub()
    arguments = {"name": "stated"}

    async def retry(client: Any, tool: str, state: str | None, responses: Any = None) -> Any:
        return await client.session.call_tool(
            tool, arguments, input_responses=responses, request_state=state, allow_input_required=True
        )

    async def refusal(client: Any, tool: str, state: str, responses: Any) -> tuple[int, str]:
        with pytest.raises(MCPError) as refused:
            await retry(client, tool, state, responses)
        return refused.value.error.code, refused.value.error.message

    async def go() -> None:
        async with connected(gateway, "2026-07-28") as (client, _):
            first = await retry(client, "mrtr.provision", None)
            assert isinstance(first, mt.InputRequiredResult) and first.request_state
            [key] = list(first.input_requests or {})
            answers = {key: mt.ElicitResult(action="accept", content={"region": "eu-west-1"})}
            # Another tool's call, a tool no server has: refused alike, and nothing is answered.
            other = await refusal(client, "mrtr.deploy", first.request_state, answers)
            assert await refusal(client, "nosuch.tool", first.request_state, answers) == other
            done = await retry(client, "mrtr.provision", first.request_state, answers)
        assert isinstance(done, mt.CallToolResult) and text(done) == "Provisioned stated in eu-west-1."

    asyncio.run(go())
    assert provisioned(mrtr_server)["stated"] == 1


def test_a_direct_call_is_a_conversation_of_its_own_forgotten_once_idle_past_retention(
    gateway_hub: HubFactory,
) -> None:
    # Each call is a run in a conversation of its own (two calls at once in one conversation would supersede each
    # other); its client is never told it, its owner sees its questions there, and it goes as any conversation does.
    gateway = gateway_hub(conversations={"retention_s": 1e-6})  # idle past it as soon as it is written

    async def go() -> tuple[str, mt.CallToolResult]:
        with InboxStream(gateway.url, token("alice")) as alice:
            assert alice.started() == []
            async with connected(gateway, "legacy") as (client, _):
                result = await client.call_tool("mrtr.provision", {"name": "kept-briefly"})
            added = await asyncio.to_thread(alice.until, "inbox-added")
        assert added["context"]["serverId"] == "mrtr" and added["context"]["toolName"] == "provision"
        return str(added["conversationId"]), result

    conversation, result = asyncio.run(go())
    assert result.structured_content is None or "conversationId" not in result.structured_content
    gateway.on_loop(gateway.hub.sweep())  # the pass the hub makes every few seconds, now
    assert len(gateway.hub.conversations.runner.histories) == 0
    with gateway.client() as owner:
        assert owner.get(f"/run/api/conversations/{conversation}").status_code == 404
