"""The hub's Teams cards rendered by Microsoft's own Adaptive Cards renderer (adaptivecards, pinned in
tests/teams-cards) in Chromium: a form question with several field kinds, an approver's card, and that card once the
approval ended each parse without the renderer's complaints and show their words and buttons. Their screenshots are
the Teams docs' (docs/teams.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from elicithub.core.approval import Approval, People, approval_schema
from elicithub.core.elicitation import Answer, Elicitation, State, new_elicitation, resolved
from elicithub.surfaces.teams import approval_cards, cards
from tests.web.conftest import REPO, NewContext, docs_copy, screenshot

RENDERER = REPO / "tests" / "teams-cards"

pytestmark = pytest.mark.skipif(
    not (RENDERER / "node_modules" / "adaptivecards").exists(),
    reason="needs tests/teams-cards/node_modules (./scripts/test runs npm ci there when node is installed)",
)

DEPLOY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [
                {"const": "eu-west-1", "title": "Europe (Ireland)"},
                {"const": "us-east-1", "title": "US East (Virginia)"},
            ],
        },
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "window": {"type": "string", "title": "Start", "format": "date-time", "default": "2026-12-01T09:30:00Z"},
        "notes": {"type": "string", "title": "Notes", "maxLength": 200, "description": "Shown in the change log."},
        "confirm": {"type": "boolean", "title": "I understand this deploys to production"},
    },
    "required": ["region", "replicas"],
}

RESTART = {"service": "orders", "replicas": 2}


def restart_approval() -> Elicitation:
    """alice's call of ops.restart, routed to group ops with editing on, open until 2026-12-01 09:30 UTC."""
    asked = new_elicitation(
        conversation_id="conv_1",
        user_id="alice",
        run_id="run_1",
        mode="form",
        message="alice asks to call ops.restart. Approve this call?",
        timeout_s=600,
        requested_schema=approval_schema(RESTART, None, allow_edit=True),
        context={"serverId": "ops", "toolName": "restart", "requester": "alice", "arguments": RESTART},
        approval=Approval(approvers=People(groups=("ops",)), requester_answers=False),
    )
    return replace(asked, expires_at=datetime(2026, 12, 1, 9, 30, tzinfo=UTC))


def approved(asked: Elicitation) -> Elicitation:
    answer = Answer("accept", {"approve": True, "reason": "during the window"}, by="carol", via="teams")
    return resolved(asked, State.ACCEPTED, answer, datetime(2026, 12, 1, 9, 12, tzinfo=UTC))


CARDS = {
    "teams-question.png": (
        cards.question_card("eli_1", "How should orders be deployed?", DEPLOY, "Alice"),
        ["How should orders be deployed?", "A question for Alice.", "Replicas", "Shown in the change log."],
        ["Submit", "Decline", "Cancel"],
    ),
    "teams-approval.png": (
        approval_cards.approval_card(restart_approval(), "group ops"),
        ["Approve this call?", "ops.restart", "group ops", "2026-12-01 09:30 UTC", '"service": "orders"'],
        ["Approve", "Deny"],
    ),
    "teams-approval-ended.png": (
        approval_cards.ended_card(approved(restart_approval())),
        ["Approve this call?", "ops.restart", "✅ Approved by carol: during the window"],
        [],
    ),
}


def rendered(new_context: NewContext, card: cards.AdaptiveCard) -> tuple[Page, list[str]]:
    """The card rendered on tests/teams-cards/card.html, and what the renderer said of it while parsing."""
    page = new_context(viewport={"width": 552, "height": 400}).new_page()
    page.goto((RENDERER / "card.html").as_uri())
    complaints: list[str] = page.evaluate("(json) => window.renderCard(json)", cards.card_json(card))
    return page, complaints


@pytest.mark.parametrize("name", list(CARDS))
def test_microsofts_renderer_shows_the_card_as_built(new_context: NewContext, name: str) -> None:
    card, words, buttons = CARDS[name]
    page, complaints = rendered(new_context, card)
    assert complaints == []
    shown = page.locator("#card")
    for said in words:
        expect(shown).to_contain_text(said)
    expect(shown.get_by_role("button")).to_have_text(buttons)
    screenshot(page, "body", name, copy_to=docs_copy(name))


def test_the_question_cards_inputs_are_the_schemas_fields(new_context: NewContext) -> None:
    card, _, _ = CARDS["teams-question.png"]
    page, _ = rendered(new_context, card)
    shown = page.locator("#card")
    expect(shown.get_by_label("Replicas")).to_have_value("2")
    expect(shown.locator("input[type=date]")).to_have_value("2026-12-01")
    expect(shown.locator("input[type=time]")).to_have_value("09:30")
    expect(shown.get_by_role("combobox")).to_have_count(1)
    expect(shown.get_by_role("checkbox")).to_have_count(1)


def test_the_renderer_reports_a_card_it_cannot_read(new_context: NewContext) -> None:
    # The page's own check: what the tests above assert empty does catch a broken card.
    broken = cards.new_card([cards.text("Hello")])
    page = new_context().new_page()
    page.goto((RENDERER / "card.html").as_uri())
    json = {**cards.card_json(broken), "body": [{"type": "Input.Nonsense", "id": "x"}]}
    assert page.evaluate("(json) => window.renderCard(json)", json) != []
