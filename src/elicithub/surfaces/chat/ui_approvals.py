"""AI SDK 6 native approvals, the client's half: the `approval-responded` tool part an AI SDK 6 client sends back in
the assistant message it continues (`addToolApprovalResponse`), read as the answer to the approval it names.

`approved: true` accepts; otherwise it declines, with the `reason` if given (an approval's decline keeps it: the
tool's refusal and the audit log say it)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException

from elicithub.core.elicitation import Elicitation
from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import ElicitationNotFound
from elicithub.surfaces.bodies import ElicitationResponse, UIMessage


@dataclass(frozen=True)
class ApprovalResponse:
    """An approval-responded tool part: the answer it gives, and the call it is about (as the client names it)."""

    answer: ElicitationResponse
    tool_call_id: str

    @property
    def approved(self) -> bool:
        return self.answer.action == "accept"


def approval_response(message: UIMessage, index: int) -> ApprovalResponse | None:
    """The answer that `message` (the request's `messages[index]`) carries: its last tool part whose approval was
    responded to; None when it has none. A responded part that is not well formed is a 422 naming the field."""
    for at in reversed(range(len(message.parts))):
        part = message.parts[at]
        if _is_tool(part) and part.get("state") == "approval-responded":
            where = f"messages[{index}].parts[{at}]"
            call_id = part.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                raise HTTPException(422, f"{where}.toolCallId: a non-empty string is required")
            return ApprovalResponse(_answer(part.get("approval"), f"{where}.approval"), call_id)
    return None


def check_approval(question: Elicitation) -> None:
    """A native approval answers only an approval its own person answers: any other question (an ordinary form of
    theirs, an approval routed to others) is unknown as an approval (ElicitationNotFound)."""
    if question.approval is None or not question.asks_requester:
        raise ElicitationNotFound(question.id)


def _is_tool(part: JsonObject) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def _answer(approval: object, where: str) -> ElicitationResponse:
    if not isinstance(approval, dict):
        raise HTTPException(422, f"{where}: an object is required")
    approval_id, approved, reason = approval.get("id"), approval.get("approved"), approval.get("reason")
    if not isinstance(approval_id, str) or not approval_id:
        raise HTTPException(422, f"{where}.id: a non-empty string is required")
    if not isinstance(approved, bool):
        raise HTTPException(422, f"{where}.approved: a boolean is required")
    if reason is not None and not isinstance(reason, str):
        raise HTTPException(422, f"{where}.reason: a string is required")
    if approved:
        return ElicitationResponse(elicitationId=approval_id, action="accept", content={"approve": True})
    content: JsonObject | None = {"reason": reason} if reason else None
    return ElicitationResponse(elicitationId=approval_id, action="decline", content=content)
