"""A downstream task's question (input-required or auth-required) as the hub's own elicitations, and the answer back.

Hub to hub, the other hop sends each question as a data part `{"elicitation": <elicitation-request event>}`: we ask
it with its schema and message under an id of our own, and answer with its id. Any other agent asks in words: a
one-field form (input-required) or the link it sends (auth-required).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from urllib.parse import urlsplit

from a2a.helpers import get_data_parts, get_message_text, get_url_parts, new_data_part, new_text_part
from a2a.types import Message, Part, Role, Task, TaskState

from elicithub.config import A2aAgentConfig
from elicithub.core.elicitation import Action, Elicitation, Outcome, new_elicitation, utcnow
from elicithub.core.events import AnswerEvent
from elicithub.core.jsoncodec import JsonObject, whole_numbers
from elicithub.core.schema import SchemaError, validate_requested_schema
from elicithub.core.waiting import Resolution
from elicithub.errors import QuestionRefused
from elicithub.runtime.tools import CallContext, cannot_ask

PLAIN = "answer"
"""The key (and the one field) of a question asked in words."""

_LINK = re.compile(r"https?://[^\s<>\"')\]]+")


@dataclass(frozen=True)
class Round:
    """One round of a downstream task's questions: keyed by the other hop's elicitation id (hub to hub), else by
    `PLAIN`; `remote` says the answer goes back as `elicitationResponse` data parts rather than as text."""

    keys: list[str]
    elicitations: list[Elicitation]
    remote: bool


def status_text(task: Task) -> str:
    return get_message_text(task.status.message).strip() if task.status.HasField("message") else ""


def _remote_events(task: Task) -> list[JsonObject]:
    parts = task.status.message.parts if task.status.HasField("message") else []
    found = [d["elicitation"] for d in get_data_parts(parts) if isinstance(d, dict) and "elicitation" in d]
    return [e for e in found if isinstance(e, dict) and isinstance(e.get("elicitationId"), str)]


def _link(task: Task) -> str | None:
    """Where the agent wants the person to sign in: a url part, a data part's `url`, else the first link in its text."""
    parts = list(task.status.message.parts) if task.status.HasField("message") else []
    data_urls = [d.get("url") for d in get_data_parts(parts) if isinstance(d, dict)]
    candidates = [
        *get_url_parts(parts),
        *[u for u in data_urls if isinstance(u, str)],
        *[u.rstrip(".,;:!?") for u in _LINK.findall(status_text(task))],  # not the sentence's full stop
    ]
    return next((u for u in candidates if _is_http(u)), None)


def _is_http(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def build_round(task: Task, agent: A2aAgentConfig, context: CallContext, timeout_s: float) -> Round:
    """The hub's questions for a task waiting in input-required or auth-required."""
    mode = "url" if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED else "form"
    if not context.can_show(mode) or context.user_id is None:
        needs = f"The A2A agent {agent.id} needs input from the user ({status_text(task)!r})"
        raise QuestionRefused(cannot_ask(context, needs, mode))
    question = partial(
        new_elicitation,
        conversation_id=context.conversation_id,
        user_id=context.user_id,
        run_id=context.run_id,
        timeout_s=timeout_s,
        context={"trigger": "a2a_input_required", "agentId": agent.id, "taskId": task.id},
    )
    events = _remote_events(task)
    if events:
        asked = [_from_event(e, agent, question, timeout_s) for e in events]
        return Round([e["elicitationId"] for e in events], asked, True)
    text = status_text(task)
    if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
        url = _link(task)
        if url is None:
            raise QuestionRefused(f"The A2A agent {agent.id} asked for authentication without a link to sign in with.")
        message = text or f"{agent.display_name} requires authentication. Sign in to continue."
        return Round([PLAIN], [question(mode="url", url=url, message=message)], False)
    message = text or f"{agent.display_name} needs more input."
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "title": message}},
        "required": ["answer"],
    }
    return Round([PLAIN], [question(mode="form", requested_schema=schema, message=message)], False)


def _deadline(event: JsonObject, timeout_s: float) -> float:
    """Our deadline, or the other hop's when it comes first: an answer after it would find its question gone."""
    expires = event.get("expiresAt")
    try:
        remaining = (datetime.fromisoformat(str(expires)) - utcnow()).total_seconds()
    except (ValueError, TypeError):
        return timeout_s
    return max(1.0, min(timeout_s, remaining))


def _from_event(
    event: JsonObject, agent: A2aAgentConfig, question: partial[Elicitation], timeout_s: float
) -> Elicitation:
    question = partial(question, timeout_s=_deadline(event, timeout_s))
    message = str(event.get("message") or f"{agent.display_name} needs more input.")
    if event.get("mode") == "url":
        url = event.get("url")
        if not isinstance(url, str) or not _is_http(url):
            raise QuestionRefused(f"The A2A agent {agent.id} asked the user to open a link that is not http(s).")
        return question(mode="url", url=url, message=message)
    schema = whole_numbers(event.get("requestedSchema"))
    try:
        validate_requested_schema(schema)
    except SchemaError as exc:
        raise QuestionRefused(f"The A2A agent {agent.id} asked an invalid question: {exc}") from None
    return question(mode="form", requested_schema=schema, message=message)


_ACTIONS: dict[Outcome, Action] = {"accepted": "accept", "declined": "decline"}

SIGNED_IN = "authCompleted"
"""The data part `{"authCompleted": {"url": <the link>}}` that tells an agent still waiting in auth-required that
the person says they have signed in at its link."""


def answer_message(task: Task, round_: Round, resolutions: dict[str, Resolution | None]) -> Message | None:
    """The message that answers the round on the same task and context; None when the task is to be cancelled.

    Another hub hears a decline (its agent decides what then); a question asked in words has no way to say no. A
    question cancelled (the person moved on) or expired ends the task either way. A sign-in asked in words is
    answered with a text part and a `SIGNED_IN` data part."""
    parts: list[Part] = []
    for key in round_.keys:
        resolution = resolutions.get(key)
        if resolution is None or resolution.outcome not in _ACTIONS:
            return None
        if not round_.remote:
            if resolution.outcome != "accepted":
                return None
            if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
                parts.append(new_text_part("I have signed in."))
                parts.append(new_data_part({SIGNED_IN: {"url": _link(task)}}))
            elif resolution.content is not None:
                parts.append(new_text_part(str(resolution.content.get(PLAIN, ""))))
            continue
        response: AnswerEvent = {"elicitationId": key, "action": _ACTIONS[resolution.outcome]}
        if resolution.outcome == "accepted" and resolution.content is not None:
            response["content"] = resolution.content
        parts.append(new_data_part({"elicitationResponse": response}))
    if not parts:
        return None
    return Message(
        role=Role.ROLE_USER,
        parts=parts,
        message_id=str(uuid.uuid4()),
        task_id=task.id,
        context_id=task.context_id,
    )
