"""Each approval's end, recorded once across hubs: its audit record, and the listeners told it `ended`.

Before an approval is stored, a key of its own (`approval-open:ID`) and an entry of the list `approvals-open` are
written. Whoever first sees it ended takes the key (a store's take has one winner) and records it: the run waiting on
it as it goes on, or, for one whose run never goes on (stopped by a new message, or its hub gone for good), any hub's
sweep, which reads the list.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from elicithub.core.approval import OnTimeout, edited
from elicithub.core.elicitation import Elicitation, Outcome, State
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import ElicitationStore, Entry, KeyValueStore
from elicithub.runtime.approvers import ApprovalNotices, asked_of
from elicithub.runtime.audit import AuditLog

log = logging.getLogger(__name__)

OPEN = "approval-open:"
LIST = "approvals-open"
PAGE = 500


@dataclass(frozen=True)
class Decision:
    """Whether the call is approved, why (in the refusal's words: who ended it, then the approver's own), and the
    audit's outcome: approved, denied, expired or cancelled."""

    approved: bool
    reason: str
    outcome: str


def decision_of(
    outcome: Outcome, content: JsonObject | None, by: str | None, on_timeout: OnTimeout, timeout_s: float, stopped: bool
) -> Decision:
    """What an approval's end means for its call. `stopped`: it was cancelled because the run was stopped."""
    given = str((content or {}).get("reason") or "").strip()
    if outcome == "accepted" and (content or {}).get("approve") is True:
        return Decision(True, given or f"approved by {by}", "approved")
    if outcome == "accepted":
        return Decision(False, f"denied by {by}" + (f": {given}" if given else ""), "denied")
    if outcome == "declined":
        return Decision(False, f"declined by {by}" + (f": {given}" if given else ""), "denied")
    if outcome == "expired":
        late = f"nobody answered within {timeout_s:g} s"
        if on_timeout == "approve":
            return Decision(True, f"{late} (on_timeout: approve)", "approved")
        if on_timeout == "cancel":
            return Decision(False, f"{late}; it was cancelled", "cancelled")
        return Decision(False, late, "expired")
    if stopped:
        return Decision(False, "the run was stopped", "cancelled")
    return Decision(False, f"cancelled by {by}" if by else "it was cancelled", "cancelled")


def words_of(content: JsonObject | None) -> str:
    """The approver's own words, as they gave them ("" for none): the audit's `reason`. Who answered and how it ended
    are the record's `answeredBy` and `outcome`, not words put in their mouth."""
    reason = (content or {}).get("reason")
    return reason if isinstance(reason, str) else ""


class ApprovalEnds:
    """`kept_s`: how long past its deadline what is noted of an approval is kept: as long as an ended question is."""

    def __init__(
        self, kv: KeyValueStore, store: ElicitationStore, audit: AuditLog, notices: ApprovalNotices, kept_s: float
    ) -> None:
        self.kv = kv
        self.store = store
        self.audit = audit
        self.notices = notices
        self.kept_s = kept_s

    def keep_s(self, question: Elicitation) -> float:
        """How long from now a note about `question` is kept."""
        return (question.expires_at - question.created_at).total_seconds() + self.kept_s

    async def opening(self, question: Elicitation) -> None:
        """`question` is about to be stored: its end is to be recorded (one never stored is never recorded)."""
        keep_s = self.keep_s(question)
        await self.kv.put(OPEN + question.id, b"1", keep_s)
        await self.kv.add_entry(LIST, question.id, keep_s)

    async def record(self, elicitation_id: str, stopped: bool = False) -> None:
        """Record the approval's end, unless it is still open or some hub has recorded it."""
        ended = await self.store.get(elicitation_id)
        if ended is None or ended.state is State.PENDING or ended.approval is None or ended.outcome is None:
            return
        if await self.kv.take(OPEN + elicitation_id) is None:
            return
        content = ended.answer.content if ended.answer is not None else None
        timeout_s = (ended.expires_at - ended.created_at).total_seconds()
        decision = decision_of(ended.outcome, content, ended.answered_by, ended.approval.on_timeout, timeout_s, stopped)
        arguments = ended.context.get("arguments") or {}
        await self.audit.write(
            {
                "elicitationId": ended.id,
                "at": (ended.resolved_at or ended.expires_at).isoformat(),
                "runId": ended.run_id,
                "tool": f"{ended.context.get('serverId')}.{ended.context.get('toolName')}",
                "arguments": edited(arguments, content) if decision.approved else arguments,
                "requester": ended.user_id,
                "approvers": asked_of(ended).to_json(),
                "answeredBy": ended.answered_by,
                "channel": ended.answer.via if ended.answer is not None and ended.answered_by else None,
                "outcome": decision.outcome,
                "reason": words_of(content),
            }
        )
        about = {"elicitation_id": ended.id, "run_id": ended.run_id}
        log.info("approval %s %s", ended.id, decision.outcome, extra=about)  # never its reason: an answer's content
        await self.notices.ended(ended)

    async def sweep(self) -> None:
        """Record the approvals that have ended and that no run recorded (the sweep's)."""
        before: Entry | None = None
        while True:
            page = await self.kv.entries(LIST, PAGE, before)
            for entry in page:
                if await self.kv.get(OPEN + entry.value) is not None:
                    await self.record(entry.value)
            if len(page) < PAGE:
                return
            before = page[-1]
