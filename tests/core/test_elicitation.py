"""The elicitation model and the pure lifecycle rule `decide()`."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from elicithub.core.approval import Approval, ApprovalJson, People, PeopleJson
from elicithub.core.elicitation import (
    Answer,
    AnswerJson,
    Conflict,
    Elicitation,
    ElicitationJson,
    Expire,
    Invalid,
    Repeat,
    Resolve,
    State,
    decide,
    new_elicitation,
    resolved,
)
from elicithub.core.schema import FieldError
from tests.core_fixtures import SCHEMA, question
from tests.shapes import assert_shaped

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


# This module's questions, made at NOW: the rules are pure, every time is given to them.
form = partial(question, at=NOW)
url_mode = partial(question, at=NOW, url="http://127.0.0.1:8700/auth/connect?t=x")


def settle(elicitation: Elicitation, answer: Answer) -> Elicitation:
    decision = decide(elicitation, answer, NOW)
    assert isinstance(decision, Resolve)
    return resolved(elicitation, decision.state, decision.answer, NOW)


def test_new_elicitation_is_pending_with_deadline_from_timeout() -> None:
    e = new_elicitation(
        conversation_id="c", user_id="u", run_id="s", mode="form", message="m", timeout_s=30, requested_schema=SCHEMA
    )
    assert e.state is State.PENDING
    assert e.outcome is None
    assert e.answer is None and e.resolved_at is None
    assert e.id.startswith("eli_")
    assert e.expires_at - e.created_at == timedelta(seconds=30)
    assert e.context == {}


def test_new_elicitations_get_distinct_ids() -> None:
    ids = {
        new_elicitation(conversation_id="c", user_id="u", run_id="s", mode="url", message="m", timeout_s=1).id
        for _ in range(100)
    }
    assert len(ids) == 100


def test_pending_form_accepts_valid_content() -> None:
    answer = Answer("accept", {"region": "eu", "replicas": 2})
    assert decide(form(), answer, NOW) == Resolve(State.ACCEPTED, answer)


def test_pending_decline_resolves_declined_without_content() -> None:
    assert decide(form(), Answer("decline", {"region": "eu"}), NOW) == Resolve(State.DECLINED, Answer("decline"))


def test_a_decline_that_is_no_approvals_drops_its_reason() -> None:
    assert decide(form(), Answer("decline", {"reason": "no"}), NOW) == Resolve(State.DECLINED, Answer("decline"))


def approval_form() -> Elicitation:
    return form(approval=Approval(People(("bob",)), tool_schema=SCHEMA))


def test_an_approvals_decline_keeps_its_reason_and_drops_the_rest() -> None:
    said = Answer("decline", {"reason": "not during the freeze", "approve": True, "region": "eu"}, by="bob")
    kept = Answer("decline", {"reason": "not during the freeze"}, by="bob")
    assert decide(approval_form(), said, NOW) == Resolve(State.DECLINED, kept)


@pytest.mark.parametrize("reason", [3, "  ", None])
def test_an_approvals_decline_without_a_reason_in_words_carries_no_content(reason: object) -> None:
    said = Answer("decline", {"reason": reason, "approve": False}, by="bob")
    assert decide(approval_form(), said, NOW) == Resolve(State.DECLINED, Answer("decline", by="bob"))


def test_an_approvals_same_decline_again_is_a_repeat_and_another_reason_a_conflict() -> None:
    done = settle(approval_form(), Answer("decline", {"reason": "freeze"}, by="bob"))
    assert decide(done, Answer("decline", {"reason": "freeze", "extra": 1}, by="bob"), NOW) == Repeat()
    assert decide(done, Answer("decline", {"reason": "later"}, by="bob"), NOW) == Conflict()
    assert decide(done, Answer("decline", by="bob"), NOW) == Conflict()


def test_pending_cancel_resolves_cancelled_without_content() -> None:
    assert decide(form(), Answer("cancel"), NOW) == Resolve(State.CANCELLED, Answer("cancel"))


def test_decline_needs_no_valid_content() -> None:
    assert decide(form(), Answer("decline", {"nonsense": True}), NOW) == Resolve(State.DECLINED, Answer("decline"))


def test_invalid_content_is_invalid_with_one_error_per_field() -> None:
    e = form()
    decision = decide(e, Answer("accept", {"replicas": 0, "colour": "red"}), NOW)
    assert isinstance(decision, Invalid)
    fields = {error.field for error in decision.errors}
    assert fields == {"region", "replicas", "colour"}
    assert FieldError("region", "is required") in decision.errors
    # decide() is pure: the elicitation is untouched and still pending.
    assert e.state is State.PENDING and e.answer is None


def test_accept_without_content_on_form_is_invalid() -> None:
    decision = decide(form(), Answer("accept"), NOW)
    assert isinstance(decision, Invalid)
    assert decision.errors == [FieldError("", "content must be an object")]


def test_form_without_schema_accepts_only_empty_content() -> None:
    e = form(requested_schema=None)
    assert decide(e, Answer("accept", {}), NOW) == Resolve(State.ACCEPTED, Answer("accept", {}))
    decision = decide(e, Answer("accept", {"x": 1}), NOW)
    assert isinstance(decision, Invalid)
    assert decision.errors == [FieldError("x", "is not a field of this form")]


def test_url_mode_accept_carries_no_content() -> None:
    assert decide(url_mode(), Answer("accept", {"token": "secret"}), NOW) == Resolve(State.ACCEPTED, Answer("accept"))


def test_same_answer_again_is_a_repeat() -> None:
    answer = Answer("accept", {"region": "eu"})
    done = settle(form(), answer)
    assert decide(done, Answer("accept", {"region": "eu"}), NOW) == Repeat()


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_repeated_decline_or_cancel_is_a_repeat_whatever_the_content(action: str) -> None:
    done = settle(form(), Answer(action))  # type: ignore[arg-type]
    assert decide(done, Answer(action, {"anything": 1}), NOW) == Repeat()  # type: ignore[arg-type]


def test_repeat_is_judged_even_after_the_deadline() -> None:
    done = settle(form(), Answer("decline"))
    assert decide(done, Answer("decline"), NOW + timedelta(days=1)) == Repeat()


def test_second_conflicting_answer_is_a_conflict() -> None:
    done = settle(form(), Answer("accept", {"region": "eu"}))
    assert decide(done, Answer("accept", {"region": "us"}), NOW) == Conflict()
    assert decide(done, Answer("decline"), NOW) == Conflict()
    assert decide(done, Answer("cancel"), NOW) == Conflict()


def test_accept_after_decline_is_a_conflict() -> None:
    done = settle(form(), Answer("decline"))
    assert decide(done, Answer("accept", {"region": "eu"}), NOW) == Conflict()


def test_answer_past_deadline_expires() -> None:
    e = form()
    assert decide(e, Answer("accept", {"region": "eu"}), e.expires_at) == Expire()
    assert decide(e, Answer("decline"), e.expires_at + timedelta(seconds=1)) == Expire()


def test_answer_just_before_deadline_is_taken() -> None:
    e = form()
    decision = decide(e, Answer("cancel"), e.expires_at - timedelta(microseconds=1))
    assert decision == Resolve(State.CANCELLED, Answer("cancel"))


def test_expired_state_always_expires() -> None:
    e = resolved(form(), State.EXPIRED, None, NOW)
    assert decide(e, Answer("accept", {"region": "eu"}), NOW) == Expire()
    assert decide(e, Answer("decline"), NOW - timedelta(hours=1)) == Expire()


def test_outcome_and_is_due_follow_state() -> None:
    e = form()
    assert not e.is_due(NOW)
    assert e.is_due(e.expires_at)
    done = resolved(e, State.DECLINED, Answer("decline"), NOW)
    assert done.outcome == "declined"
    assert done.resolved_at == NOW
    assert not done.is_due(e.expires_at + timedelta(days=1))


@pytest.mark.parametrize(
    "elicitation",
    [
        form(),
        url_mode(),
        resolved(form(), State.ACCEPTED, Answer("accept", {"region": "eu", "replicas": 3}), NOW),
        resolved(url_mode(), State.EXPIRED, None, NOW + timedelta(seconds=5)),
        resolved(approval_form(), State.DECLINED, Answer("decline", {"reason": "freeze"}, by="bob"), NOW),
    ],
    ids=["pending-form", "pending-url", "accepted", "expired", "declined-approval"],
)
def test_to_json_from_json_round_trip(elicitation: Elicitation) -> None:
    data = json.loads(json.dumps(elicitation.to_json()))
    back = Elicitation.from_json(data)
    assert back == elicitation
    assert back.state is elicitation.state
    assert back.expires_at.tzinfo is not None


def test_the_stored_form_has_the_keys_of_its_shape_with_an_approval_last() -> None:
    routed = Approval(People(("carol",)), escalate_to=People(groups=("ops",)), escalate_at=NOW, tool_schema=SCHEMA)
    approved = resolved(form(approval=routed), State.ACCEPTED, Answer("accept", {"approve": True}, "carol"), NOW)
    for e in (form(), url_mode(), approved):
        data = e.to_json()
        assert_shaped(data, ElicitationJson)
        if data["answer"] is not None:
            assert_shaped(data["answer"], AnswerJson)
    stored = approved.to_json()
    assert list(stored)[-1] == "approval"
    assert_shaped(stored["approval"], ApprovalJson)
    assert_shaped(stored["approval"]["escalate_to"], PeopleJson)


def test_from_json_tolerates_missing_optional_fields() -> None:
    e = form(context={})
    data = e.to_json()
    for key in ("requested_schema", "url", "context", "answer", "resolved_at"):
        del data[key]
    assert Elicitation.from_json(data) == replace(e, requested_schema=None)


def test_an_accepted_form_gets_the_defaults_of_the_fields_it_leaves_out() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "enum": ["eu", "us"]},
            "replicas": {"type": "integer", "minimum": 1, "default": 2},
            "features": {"type": "array", "items": {"type": "string", "enum": ["canary", "tracing"]}, "default": []},
            "confirm": {"type": "boolean", "default": False},
            "note": {"type": "string", "default": "none given"},
        },
        "required": ["region"],
    }
    e = question(30, requested_schema=schema)
    decision = decide(e, Answer("accept", {"region": "eu"}), e.created_at)
    assert isinstance(decision, Resolve) and decision.answer is not None
    filled = {"region": "eu", "replicas": 2, "features": [], "confirm": False, "note": "none given"}
    assert decision.answer.content == filled
    done = resolved(e, decision.state, decision.answer, e.created_at)
    # The same answer sent again without the defaulted fields is a repeat, not a conflicting answer.
    assert isinstance(decide(done, Answer("accept", {"region": "eu"}), e.created_at), Repeat)
    assert isinstance(decide(done, Answer("accept", {"region": "eu", "replicas": 3}), e.created_at), Conflict)
    # A default does not make a wrong answer right.
    assert isinstance(decide(e, Answer("accept", {"replicas": 0}), e.created_at), Invalid)
