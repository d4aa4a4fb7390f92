"""`elicithub chat` on a pseudo-terminal against a real hub: questions asked field by field, Ctrl-C cancels a
question (form or sign-in), end of input exits; off a terminal a question is given up at once, never waited on. A
reply from a streaming model is printed as it comes."""

from __future__ import annotations

import os
import subprocess
import sys

import pexpect

from elicithub.clients.terminal import DIM, UNDIM
from tests.conftest import HubFactory, McpProcess, RunningHub
from tests.models.hubs import standin_models
from tests.models.script import Fail, Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn


def chat(hub: RunningHub) -> pexpect.spawn:
    command = ["-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret"]
    # No screen to open a browser on: the sign-in link is only printed.
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    child = pexpect.spawn(sys.executable, command, encoding="utf-8", timeout=30, env=env)
    child.expect_exact("you> ")
    return child


def leave(child: pexpect.spawn) -> None:
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_form_question_is_asked_again_until_valid_and_the_call_finishes(hub: RunningHub) -> None:
    child = chat(hub)
    child.sendline('/call mrtr.provision {"name": "orders"}')
    child.expect_exact("[calling mrtr.provision]")
    child.expect_exact("Which region should orders live in?")
    child.expect_exact("    2. EU West (eu-west-1)")
    child.expect_exact("Region (number or value): ")
    child.sendline("7")
    child.expect_exact("Region has no choice '7'; try again.")
    child.sendline("2")
    child.expect_exact("[question accepted]")
    child.expect_exact("Provisioned orders in eu-west-1.")
    child.expect_exact("you> ")
    leave(child)


def test_ctrl_c_cancels_a_form_question_and_the_chat_goes_on(hub: RunningHub) -> None:
    child = chat(hub)
    child.sendline('/call legacy.provision {"name": "orders"}')
    child.expect_exact("Region (number or value): ")
    child.sendcontrol("c")
    child.expect_exact("cancelled.")
    child.expect_exact("[question cancelled]")
    child.expect_exact("Provisioning of orders stopped: the user chose cancel.")
    child.expect_exact("you> ")
    child.sendline("hello")
    child.expect_exact("Available tools:")
    child.expect_exact("you> ")
    leave(child)


def test_a_sign_in_link_is_shown_and_awaited_until_ctrl_c_cancels_it(
    make_hub: HubFactory, mrtr_server: McpProcess
) -> None:
    locked = {"id": "locked", "url": mrtr_server.url, "credential_scope": "user", "tools": [{"name": "provision"}]}
    hub = make_hub(mcp_servers=[locked])
    child = chat(hub)
    child.sendline("/call locked.provision {}")
    child.expect(r"Open http://127\.0\.0\.1:\d+/auth/connect\?t=\S+")
    child.expect_exact("Waiting for you to finish there; Ctrl-C cancels.")
    child.sendcontrol("c")
    child.expect_exact("[question cancelled]")
    child.expect_exact("Authentication required but not provided.")
    child.expect_exact("you> ")
    leave(child)


def test_off_a_terminal_a_question_is_given_up_at_once_naming_it(hub: RunningHub) -> None:
    command = [sys.executable, "-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret"]
    done = subprocess.run(
        command, input='/call mrtr.provision {"name": "orders"}\n', capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert (
        "cannot ask 'Which region should orders live in?' here (stdin is not a terminal); the question is cancelled"
        in done.stdout
    )
    assert "[question cancelled]" in done.stdout


def test_conversation_continues_a_named_conversation(hub: RunningHub) -> None:
    command = [sys.executable, "-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret"]
    for line in ("hello", "again"):
        done = subprocess.run(
            [*command, "--conversation", "kept-1"], input=f"{line}\n", capture_output=True, text=True, check=False
        )
        assert done.returncode == 0 and "Available tools:" in done.stdout
    with hub.client() as client:
        transcript = client.get("/run/api/conversations/kept-1").json()
    said = [m["text"] for m in transcript["messages"] if m["role"] == "user"]
    assert said == ["hello", "again"]


def test_exit_ends_the_session_like_end_of_input_and_the_banner_says_so(hub: RunningHub) -> None:
    command = ["-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret", "--conversation", "bye-1"]
    child = pexpect.spawn(sys.executable, command, encoding="utf-8", timeout=30)
    child.expect_exact("/exit, /quit or Ctrl-D")
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    with hub.client() as client:  # nothing was sent to the agent
        assert client.get("/run/api/conversations/bye-1").status_code == 404


def test_quit_ends_the_session_and_no_later_line_is_sent(hub: RunningHub) -> None:
    command = [sys.executable, "-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret"]
    done = subprocess.run(
        [*command, "--conversation", "bye-2"],
        input="hello\n  /quit \nafter\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "Available tools:" in done.stdout
    with hub.client() as client:
        transcript = client.get("/run/api/conversations/bye-2").json()
    assert [m["text"] for m in transcript["messages"] if m["role"] == "user"] == ["hello"]


def test_a_reply_is_printed_as_the_model_writes_it_its_thinking_dimmed_on_a_line_of_its_own(
    make_hub: HubFactory, model_standin: ModelStandIn
) -> None:
    hub = make_hub(**standin_models(model_standin, "anthropic"))
    gate = Gate()
    model_standin.reply(Thinking("They greet; "), Thinking("greet back."), Text("Hello "), gate, Text("there."))
    child = chat(hub)
    child.sendline("hi")
    child.expect_exact("Hello ")  # printed while the model still holds the rest
    thought = child.before.rsplit("hi\r\n", 1)[-1]
    assert thought.replace(DIM, "").replace(UNDIM, "") == "They greet; greet back.\r\n"  # a line of its own
    assert thought.startswith(DIM) and thought.endswith(f"{UNDIM}\r\n")
    gate.release()
    child.expect_exact("there.")
    assert child.before == ""  # the same line: no break between the pieces
    child.expect_exact("you> ")
    leave(child)


def test_off_a_terminal_a_retry_is_said_thinking_left_out_and_notes_get_lines_of_their_own(
    make_hub: HubFactory, model_standin: ModelStandIn
) -> None:
    hub = make_hub(**standin_models(model_standin, "anthropic"))
    model_standin.reply(Fail(429, "Overloaded.", retry_after=0))
    model_standin.reply(Thinking("Echo it."), Text("Let me "), Text("echo."), ToolCall("legacy__echo", {"text": "hi"}))
    model_standin.reply(Text("Echoed."))
    command = [sys.executable, "-m", "elicithub.cli", "chat", "--url", hub.url, "--token", "alice-secret"]
    done = subprocess.run(command, input="hi\n", capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    said = "[Model gpt is busy; retrying now.]\nLet me echo.\n[calling legacy.echo]\nEchoed.\n"
    assert said in done.stdout
    assert "Echo it." not in done.stdout and DIM not in done.stdout
