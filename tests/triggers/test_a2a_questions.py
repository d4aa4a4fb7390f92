"""A downstream task's status message as the hub's questions, and the answer back: plain values, no server."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_part, new_url_part
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

from elicithub.config import A2aAgentConfig
from elicithub.core.elicitation import utcnow
from elicithub.core.jsoncodec import whole_numbers
from elicithub.core.waiting import Resolution
from elicithub.errors import QuestionRefused
from elicithub.runtime.tools import CallContext
from elicithub.triggers.a2a.questions import PLAIN, answer_message, build_round

AGENT = A2aAgentConfig(id="travel", url="http://127.0.0.1:9300")


class _Asker:
    """Stands in for the run's Asker: build_round only checks that the call can ask."""


CONTEXT = CallContext("conv-1", "run-1", "alice", True, _Asker())  # type: ignore[arg-type]


def task(state: TaskState, *parts: Part) -> Task:
    message = Message(role=Role.ROLE_AGENT, parts=list(parts), message_id="m-1")
    return Task(id="task-1", context_id="ctx-1", status=TaskStatus(state=state, message=message))


def remote(**event: Any) -> Part:
    return new_data_part({"elicitation": {"elicitationId": "remote-1", **event}})


def test_data_part_numbers_come_back_whole() -> None:
    assert whole_numbers({"minimum": 1.0, "ratio": 0.5, "enum": [2.0, "a"], "flag": True}) == {
        "minimum": 1,
        "ratio": 0.5,
        "enum": [2, "a"],
        "flag": True,
    }


def test_another_hubs_question_is_asked_under_our_own_id() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}
    waiting = task(
        TaskState.TASK_STATE_INPUT_REQUIRED,
        new_text_part("How many?"),
        remote(message="How many?", requestedSchema=schema),
    )
    round_ = build_round(waiting, AGENT, CONTEXT, 60)
    [asked] = round_.elicitations
    assert round_.keys == ["remote-1"] and round_.remote
    assert asked.id != "remote-1" and asked.requested_schema == schema and asked.message == "How many?"
    assert asked.context == {"trigger": "a2a_input_required", "agentId": "travel", "taskId": "task-1"}


def test_another_hubs_invalid_schema_is_refused() -> None:
    nested = {"type": "object", "properties": {"a": {"type": "object"}}}
    waiting = task(TaskState.TASK_STATE_INPUT_REQUIRED, remote(message="?", requestedSchema=nested))
    with pytest.raises(QuestionRefused, match="The A2A agent travel asked an invalid question"):
        build_round(waiting, AGENT, CONTEXT, 60)


@pytest.mark.parametrize(
    "part",
    [
        new_url_part("https://travel.example/signin"),
        new_data_part({"url": "https://travel.example/signin"}),
        new_text_part("Please sign in at https://travel.example/signin."),
    ],
)
def test_the_sign_in_link_is_found_in_a_url_part_a_data_part_or_the_text(part: Part) -> None:
    [asked] = build_round(task(TaskState.TASK_STATE_AUTH_REQUIRED, part), AGENT, CONTEXT, 60).elicitations
    assert (asked.mode, asked.url) == ("url", "https://travel.example/signin")


def test_a_sign_in_without_a_link_or_with_another_scheme_is_refused() -> None:
    with pytest.raises(QuestionRefused, match="without a link"):
        build_round(task(TaskState.TASK_STATE_AUTH_REQUIRED, new_text_part("Sign in, please.")), AGENT, CONTEXT, 60)
    with pytest.raises(QuestionRefused, match="not http"):
        build_round(
            task(TaskState.TASK_STATE_AUTH_REQUIRED, remote(mode="url", url="javascript:x")), AGENT, CONTEXT, 60
        )


def test_a_chat_that_cannot_ask_is_refused() -> None:
    silent = CallContext("conv-1", "run-1", "alice", False)
    with pytest.raises(QuestionRefused, match="cannot show questions"):
        build_round(task(TaskState.TASK_STATE_INPUT_REQUIRED, new_text_part("Where?")), AGENT, silent, 60)


def test_answers_go_back_on_the_same_task_as_text_or_as_elicitation_responses() -> None:
    waiting = task(TaskState.TASK_STATE_INPUT_REQUIRED, new_text_part("Where?"))
    plain = build_round(waiting, AGENT, CONTEXT, 60)
    message = answer_message(waiting, plain, {PLAIN: Resolution("eli_1", "accepted", {"answer": "Oslo"})})
    assert message is not None
    assert (message.task_id, message.context_id, message.role) == ("task-1", "ctx-1", Role.ROLE_USER)
    assert get_message_text(message) == "Oslo"
    assert answer_message(waiting, plain, {PLAIN: Resolution("eli_1", "declined")}) is None

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    asked = task(TaskState.TASK_STATE_INPUT_REQUIRED, remote(message="How many?", requestedSchema=schema))
    hub_round = build_round(asked, AGENT, CONTEXT, 60)
    accepted = answer_message(asked, hub_round, {"remote-1": Resolution("eli_2", "accepted", {"n": 2})})
    assert accepted is not None
    assert get_data_parts(accepted.parts) == [
        {"elicitationResponse": {"elicitationId": "remote-1", "action": "accept", "content": {"n": 2.0}}}
    ]
    declined = answer_message(asked, hub_round, {"remote-1": Resolution("eli_2", "declined")})
    assert declined is not None
    assert get_data_parts(declined.parts) == [
        {"elicitationResponse": {"elicitationId": "remote-1", "action": "decline"}}
    ]
    assert answer_message(asked, hub_round, {"remote-1": Resolution("eli_2", "cancelled")}) is None
    assert answer_message(asked, hub_round, {"remote-1": Resolution("eli_2", "expired")}) is None


def test_another_hubs_deadline_shortens_ours() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    soon = (utcnow() + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    waiting = task(TaskState.TASK_STATE_INPUT_REQUIRED, remote(message="?", requestedSchema=schema, expiresAt=soon))
    [asked] = build_round(waiting, AGENT, CONTEXT, 600).elicitations
    assert 25 < (asked.expires_at - asked.created_at).total_seconds() <= 30
    unreadable = task(TaskState.TASK_STATE_INPUT_REQUIRED, remote(message="?", requestedSchema=schema, expiresAt="x"))
    [asked] = build_round(unreadable, AGENT, CONTEXT, 600).elicitations
    assert (asked.expires_at - asked.created_at).total_seconds() == 600


def test_a_sign_in_asked_in_words_is_answered_by_saying_it_is_done_with_its_link() -> None:
    waiting = task(TaskState.TASK_STATE_AUTH_REQUIRED, new_text_part("Sign in at https://travel.example/signin"))
    round_ = build_round(waiting, AGENT, CONTEXT, 60)
    message = answer_message(waiting, round_, {PLAIN: Resolution("eli_1", "accepted")})
    assert message is not None
    assert (message.task_id, message.context_id, message.role) == ("task-1", "ctx-1", Role.ROLE_USER)
    assert get_message_text(message) == "I have signed in."
    assert get_data_parts(message.parts) == [{"authCompleted": {"url": "https://travel.example/signin"}}]
    assert answer_message(waiting, round_, {PLAIN: Resolution("eli_1", "declined")}) is None
