"""The pages a mail's links open, as HTML: the question with its one decision (Approve, Deny, or the form), how it
ended once it has, and the page of a link that is not one; with the headers every such page gets."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from starlette.responses import HTMLResponse

from elicithub.core.approval import DECISION_FIELDS
from elicithub.core.elicitation import Elicitation
from elicithub.core.schema import FieldError
from elicithub.runtime.approvers import asked_of, named
from elicithub.surfaces.email.forms import Submitted, fields
from elicithub.surfaces.email.mail import deadline
from elicithub.surfaces.pages import PAGE_HEADERS
from elicithub.surfaces.reach import how_it_ended

HEADERS = {
    **PAGE_HEADERS,
    # The hub's policy, but for the form that POSTs back here; nothing is cached (a link's page shows its question's
    # state now), and the link's token never leaves in a Referer.
    "content-security-policy": PAGE_HEADERS["content-security-policy"].replace(
        "form-action 'none'", "form-action 'self'"
    ),
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-robots-tag": "noindex, nofollow",
}

TITLES = {"approve": "Approve this call?", "deny": "Deny this call?"}


def _page(title: str, body: str, status: int, state: str) -> HTMLResponse:
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · elicithub</title>"
        '<link rel="stylesheet" href="../../static/email.css"></head>'
        f'<body><main class="mail-page" data-state="{escape(state)}"><h1>{escape(title)}</h1>{body}</main>'
        "</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def not_found() -> HTMLResponse:
    """A link that is not one (forged, altered, another's, or too old): nothing of any question shows."""
    text = "This link is not valid. Open the link from your mail, or answer in the hub's inbox."
    return _page("This link does not work", f"<p>{escape(text)}</p>", 404, "unknown")


def refused(text: str, status: int) -> HTMLResponse:
    """A POST that answers nothing (a form the hub did not serve, or a link used already)."""
    return _page("Nothing was answered", f"<p>{escape(text)}</p>", status, "refused")


def _about(elicitation: Elicitation, own: bool) -> str:
    context = elicitation.context
    facts: list[tuple[str, str]] = []
    if not own:
        facts += [
            ("Tool", f"{context.get('serverId')}.{context.get('toolName')}"),
            ("Requested by", str(context.get("requester") or elicitation.user_id)),
            ("Asked of", named(asked_of(elicitation))),
        ]
    facts.append(("Answer by", deadline(elicitation)))
    rows = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in facts)
    about = f'<p class="lead">{escape(elicitation.message)}</p><dl class="facts">{rows}</dl>'
    if not own:
        arguments = json.dumps(context.get("arguments") or {}, indent=2, ensure_ascii=False)
        about += f'<p class="label">Arguments</p><pre class="arguments">{escape(arguments)}</pre>'
    return about


def ended(elicitation: Elicitation, status: int = 200) -> HTMLResponse:
    """The question as it ended, anywhere: how, and by whom."""
    kind, words = how_it_ended(elicitation)
    what = "question" if elicitation.approval is None else "approval"
    said = f'<p class="status" role="status">{escape(words)}.</p>' + _about(elicitation, elicitation.approval is None)
    return _page(f"This {what} has ended", said, status, kind)


def decision(
    elicitation: Elicitation,
    page: str,
    token: str,
    user_id: str,
    form_token: str,
    submitted: Submitted | None = None,
    errors: Sequence[FieldError] = (),
) -> HTMLResponse:
    """The page of an open question: the question, then the one form that answers it (POSTed back to this page);
    `token`: the link's, for the page of the other decision."""
    schema: dict[str, Any] = dict(elicitation.requested_schema or {})
    properties = schema.get("properties") or {}
    reason = {"reason": properties.get("reason") or {"type": "string", "title": "Reason"}}
    if page == "approve":
        edits = {n: p for n, p in properties.items() if n not in DECISION_FIELDS}
        controls = fields({"properties": {**edits, **reason}}, submitted, errors)
        buttons = '<button type="submit" class="approve">Approve</button>'
        other = ("deny", "Deny instead")
    elif page == "deny":
        controls = fields({"properties": reason}, submitted, errors)
        buttons = '<button type="submit" class="deny">Deny</button>'
        other = ("approve", "Approve instead")
    else:
        controls = fields(schema, submitted, errors)
        buttons = (
            '<button type="submit" name="action" value="accept">Submit</button>'
            '<button type="submit" name="action" value="decline" formnovalidate class="secondary">Decline</button>'
        )
        other = None
    switch = f' <a href="../{other[0]}/{escape(token)}">{other[1]}</a>' if other else ""
    form = (
        f'<form method="post">{controls}<input type="hidden" name="csrf" value="{escape(form_token)}">'
        f'<p class="actions">{buttons}{switch}</p></form>'
    )
    who = f'<p class="who">You answer as <b>{escape(user_id)}</b>. Nothing is decided until you press a button.</p>'
    title = TITLES.get(page, "Your answer is needed")
    own = page == "answer"
    return _page(title, _about(elicitation, own) + form + who, 422 if errors else 200, "pending")
