"""Questions posted to Teams outlive the hub that posted them: after a restart the card's buttons still answer, the
card is still updated, and the run's messages before the restart are not posted again."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import McpProcess, free_port
from tests.surfaces.teams.conftest import ALICE, TeamsHub, teams_config
from tests.surfaces.teams.standin import Message, MicrosoftStandIn

PROVISION = '/call mrtr.provision {"name": "orders"}'


def test_a_question_open_across_a_restart_is_answered_and_updated_by_the_new_hub(
    teams_env: None, microsoft: MicrosoftStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> None:
    port = free_port()
    config = teams_config(tmp_path, port, microsoft, mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}])
    first = TeamsHub(config, port, microsoft)
    thread = first.say(ALICE, PROVISION, thread="new")
    question: Message = microsoft.wait(lambda: next((m for m in microsoft.in_conversation(thread) if m.card), None))
    first.stop()

    second = TeamsHub(config, port, microsoft)  # the same store file and instance name, a new process state
    try:
        answered = second.press(ALICE, question, "Submit", {"Region": "eu-west-1"})
        assert "Answered by Alice" in Message(thread, "", card=answered["value"]).texts()
        microsoft.wait(lambda: "Answered by Alice" in question.texts() and not question.actions())
        reply = microsoft.wait(lambda: [m for m in microsoft.in_conversation(thread) if m.text])
        assert [m.text for m in reply] == ["Provisioned orders in eu-west-1."]
        posts = [c for c in microsoft.calls if c.method == "POST" and c.path.endswith("/activities")]
        assert len(posts) == 2  # the question once (not again after the restart), then the answer
    finally:
        second.stop()
