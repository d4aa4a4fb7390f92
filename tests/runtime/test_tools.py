"""What a tool that cannot ask its person says, in the words of the surface the person uses."""

from __future__ import annotations

import pytest

from elicithub.runtime.tools import CallContext, cannot_ask

NEEDS = "Tool deploy.provision needs input from the user ('Which region?')"


def context(surface: str, user: str | None = "alice") -> CallContext:
    return CallContext("conv", "run", user, False, surface=surface)


def test_a_chat_client_is_told_the_header() -> None:
    said = cannot_ask(context("chat"), NEEDS, "form")
    assert said == (
        f"{NEEDS}, but this chat client cannot show questions. Ask again from a signed-in client that sends "
        "x-supports-elicitation: true."
    )


@pytest.mark.parametrize("mode", ["form", "url"])
def test_an_mcp_client_is_told_it_did_not_declare_elicitation_in_that_mode(mode: str) -> None:
    said = cannot_ask(context("mcp"), NEEDS, mode)
    declared = f"did not declare the elicitation capability ({mode} mode)"
    assert said == f"{NEEDS}, but this MCP client {declared}, so the hub cannot ask."


def test_an_a2a_client_is_told_to_give_it_on_the_task() -> None:
    said = cannot_ask(context("a2a"), NEEDS, "form")
    assert said.startswith(NEEDS) and "message on this task" in said and "x-supports" not in said


def test_nobody_signed_in_is_told_to_sign_in_whatever_the_surface() -> None:
    assert "signed-in client" in cannot_ask(context("mcp", user=None), NEEDS, "form")
