"""Approvals: before a tool that a policy names is called, its approvers are asked, and the call is made (with their
edits) only when they approve.

A policy applies to any `SERVER.TOOL` (an MCP server's, an A2A agent's, a delegated agent's): the gate wraps each
trigger (`ApprovalGate.wrap`), so the router and the run loop know nothing of it. The approval is a form question
asked through the call's Asker like any trigger's, of the run's own person (`user_id`, the requester) but answerable by
the approvers (core/approval.py); the run may park while it waits and go on on any hub (the call runs again and finds
the approval answered). Its end is recorded once (triggers/approval_ends.py), its reminder and escalation notices are
timers on the store (triggers/approval_timers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import timedelta
from functools import partial

from elicithub.auth.groups import SignedInGroups
from elicithub.config.approvals import ApprovalPolicy, first_policy
from elicithub.core.approval import Approval, approval_schema, edited
from elicithub.core.elicitation import Elicitation, QuestionContext, new_elicitation
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import KeyValueStore
from elicithub.core.waiting import Resolution
from elicithub.runtime.approvers import ApprovalNotices, asked_of, waiting_for
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.router import Trigger
from elicithub.runtime.tools import CallContext, ToolOutcome, cannot_ask, stopped_call
from elicithub.triggers.approval_ends import ApprovalEnds, decision_of
from elicithub.triggers.approval_timers import ApprovalTimers

log = logging.getLogger(__name__)


class ApprovalGate:
    """`groups`: the hub's static groups; `signed_in`: the groups people had at their latest OIDC sign-in (so a
    requester who is an approver sees the question as theirs to answer)."""

    def __init__(
        self,
        policies: list[ApprovalPolicy],
        timeout_s: float,
        kv: KeyValueStore,
        notices: ApprovalNotices,
        ends: ApprovalEnds,
        timers: ApprovalTimers,
        groups: Mapping[str, Collection[str]],
        signed_in: SignedInGroups | None = None,
    ) -> None:
        self.policies = policies
        self.kv = kv
        self.timeout_s = timeout_s
        self.notices = notices
        self.ends = ends
        self.timers = timers
        self.groups = groups
        self.signed_in = signed_in

    def wrap(self, trigger: Trigger) -> Trigger:
        return Approved(trigger, self) if self.policies else trigger

    async def call(self, trigger: Trigger, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        name = f"{trigger.prefix}.{tool}"
        policy = first_policy(self.policies, name)
        if policy is None:
            return await trigger.call(tool, arguments, context)
        if context.user_id is None or context.asker is None:
            return ToolOutcome(f"Call of {name} needs approval, and only a signed-in person's call can have it.", True)
        if policy.approvers == "requester" and not context.can_show("form"):
            return ToolOutcome(cannot_ask(context, f"Call of {name} needs your approval", "form"), is_error=True)
        resolution = await self._given(context)
        if resolution is None:
            resolution = await self._ask(policy, trigger, tool, arguments, context)
        stopped = resolution.outcome == "cancelled" and context.asker.stopped
        await self.ends.record(resolution.elicitation_id, stopped)
        timeout_s = policy.timeout_s or self.timeout_s
        by = resolution.answered_by
        decision = decision_of(resolution.outcome, resolution.content, by, policy.on_timeout, timeout_s, stopped)
        if stopped:
            return ToolOutcome(stopped_call(name), is_error=True)
        if not decision.approved:
            return ToolOutcome(f"Call of {name} was not approved: {decision.reason}", is_error=True)
        return await trigger.call(tool, edited(arguments, resolution.content), context)

    async def _given(self, context: CallContext) -> Resolution | None:
        """How the approval of this call ended, when it was asked before its run was interrupted and the call has
        asked other questions since (its run's pause names those now, not the approval)."""
        key = _given_key(context)
        elicitation_id = await self.kv.get(key) if key is not None else None
        asked = await self.ends.store.get(elicitation_id.decode()) if elicitation_id is not None else None
        return None if asked is None or asked.outcome is None else Resolution.of(asked)

    async def _ask(
        self, policy: ApprovalPolicy, trigger: Trigger, tool: str, arguments: JsonObject, context: CallContext
    ) -> Resolution:
        assert context.asker is not None
        question = await self._question(policy, trigger, tool, arguments, context)
        again = context.asker.asking_again
        if not again:  # (else it is most likely the approval asked before, already set up: see `_opened`)
            await self._before_asking(question, policy)
        opened = partial(self._opened, context, policy, again)
        [resolution] = await context.asker.ask(
            [question], trigger="approval", state={"kind": "rerun"}, resumable=True, opened=opened
        )
        if (key := _given_key(context)) is not None:
            await self.kv.put(key, resolution.elicitation_id.encode(), self.ends.keep_s(question))
        return resolution

    async def _question(
        self, policy: ApprovalPolicy, trigger: Trigger, tool: str, arguments: JsonObject, context: CallContext
    ) -> Elicitation:
        assert context.user_id is not None
        requester = context.user_id
        tool_schema = await self._tool_schema(trigger, tool, context) if policy.allow_edit else None
        approvers = None if policy.approvers == "requester" else policy.approvers.people()
        escalate_to = policy.escalate_to.people() if policy.escalate_to is not None else None
        self_approval = policy.self_approval or approvers is None
        requester_answers = approvers is None or (
            self_approval and approvers.include(requester, await self._groups_of(requester))
        )
        about: QuestionContext = {
            "trigger": "approval",
            "serverId": trigger.prefix,
            "toolName": tool,
            "arguments": arguments,
            "requester": requester,
        }
        question = new_elicitation(
            conversation_id=context.conversation_id,
            user_id=requester,
            run_id=context.run_id,
            mode="form",
            message=f"{requester} asks to call {trigger.prefix}.{tool}. Approve this call?",
            timeout_s=policy.timeout_s or self.timeout_s,
            requested_schema=approval_schema(arguments, tool_schema, policy.allow_edit),
            context=about,
        )
        escalate_at = (
            question.created_at + timedelta(seconds=policy.escalate_after_s) if policy.escalate_after_s else None
        )
        approval = Approval(
            approvers, self_approval, escalate_to, escalate_at, policy.on_timeout, requester_answers, tool_schema
        )
        return replace(question, approval=approval)

    async def _tool_schema(self, trigger: Trigger, tool: str, context: CallContext) -> JsonObject | None:
        """The tool's input schema as its trigger lists it (None when it cannot list it now, or it is no schema)."""
        try:
            specs: list[ToolSpec] = await trigger.list_tools(context)
        except Exception as exc:
            log.warning("cannot list %s for its input schema: %s", trigger.prefix, exc)
            return None
        schema = next((s.input_schema for s in specs if s.name == tool), None)
        import jsonschema  # by the first approval asked, not by every hub's start

        try:
            jsonschema.Draft202012Validator.check_schema(schema or {})
        except jsonschema.SchemaError:
            return None
        return schema

    async def _groups_of(self, user_id: str) -> frozenset[str]:
        static = {g for g, members in self.groups.items() if user_id in members}
        signed_in = await self.signed_in.of(user_id) if self.signed_in is not None else frozenset()
        return frozenset(static) | signed_in

    async def _before_asking(self, question: Elicitation, policy: ApprovalPolicy) -> None:
        """Its end is to be recorded, and its timers set, before it is stored: a hub that dies once it is stored
        leaves them to whichever hub goes on."""
        await self.ends.opening(question)
        if policy.remind_after_s is not None:
            reminder = question.created_at + timedelta(seconds=policy.remind_after_s)
            await self.timers.schedule(question, "remind", reminder)
        if question.approval is not None and question.approval.escalate_at is not None:
            await self.timers.schedule(question, "escalate", question.approval.escalate_at)

    async def _opened(
        self, context: CallContext, policy: ApprovalPolicy, again: bool, questions: list[Elicitation]
    ) -> None:
        """A new approval is stored and shown: its approvers are told, and its requester's call says what it waits
        for (an MCP task's or an A2A task's status message). `again`: the call runs again after an interruption, and
        did not find the approval it asked before (it ended long ago), so this one is set up only now."""
        for question in questions:
            if again:
                await self._before_asking(question, policy)
            await self.notices.added(question, asked_of(question))
            if context.progress is not None and not question.asks_requester:
                await context.progress(waiting_for(question))


def _given_key(context: CallContext) -> str | None:
    """Where the approval of this call is noted once it has ended: by the run that makes it and the model's id of
    the call."""
    return f"approval-given:{context.calling_run}:{context.call_id}" if context.call_id is not None else None


class Approved:
    """A trigger whose calls the gate approves first; listing is the trigger's own."""

    def __init__(self, trigger: Trigger, gate: ApprovalGate) -> None:
        self.trigger = trigger
        self.gate = gate

    @property
    def prefix(self) -> str:
        return self.trigger.prefix

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        return await self.trigger.list_tools(context)

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        return await self.gate.call(self.trigger, tool, arguments, context)

    async def close(self) -> None:
        await self.trigger.close()
