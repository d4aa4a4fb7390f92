"""The mail itself: multipart text and HTML that read well alone, saying what is asked, the tool, its arguments, who
asks and until when (a clock time in UTC), with one link per decision page. Nothing in it decides: each link opens a
page where the person confirms."""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from html import escape
from typing import Literal, get_args

from elicithub.core.elicitation import Elicitation

Kind = Literal["asked", "reminder", "escalated", "question"]
KINDS: dict[str, Kind] = {kind: kind for kind in get_args(Kind)}

_BUTTON = (
    "display:inline-block;padding:10px 18px;margin:0 8px 8px 0;border-radius:6px;color:#ffffff;"
    "text-decoration:none;font-weight:600;background:{color}"
)
_COLORS = {"Approve…": "#1a7f37", "Deny…": "#cf222e", "Answer…": "#0969da"}
_CELL = "padding:4px 12px 4px 0;vertical-align:top;color:#57606a;white-space:nowrap"


@dataclass(frozen=True)
class Letter:
    """What a mail says: its subject, lines of facts (label, value), the arguments, and its links (label, url)."""

    subject: str
    lead: str
    facts: list[tuple[str, str]]
    arguments: str | None
    links: list[tuple[str, str]]
    note: str


def deadline(elicitation: Elicitation) -> str:
    return elicitation.expires_at.strftime("%Y-%m-%d %H:%M UTC")


def letter(elicitation: Elicitation, kind: Kind, asked: str, links: list[tuple[str, str]]) -> Letter:
    """The mail for `kind`: an approval asked of `asked` (first sent, a reminder, or escalated to the recipient), or a
    person's own question."""
    context = elicitation.context
    if kind == "question":
        fields = (elicitation.requested_schema or {}).get("properties") or {}
        asks = ", ".join(str(p.get("title") or n) for n, p in fields.items() if isinstance(p, dict)) or "a confirmation"
        source = ".".join(str(context[key]) for key in ("serverId", "toolName") if context.get(key))
        facts = [("Asked by", source)] if source else []
        facts += [("Asks for", asks), ("Answer by", deadline(elicitation))]
        note = "The link opens a page with the form; nothing is answered until you submit it there."
        subject = f"Waiting for your answer: {_short(elicitation.message)}"
        return Letter(subject, elicitation.message, facts, None, links, note)
    tool = f"{context.get('serverId')}.{context.get('toolName')}"
    requester = str(context.get("requester") or elicitation.user_id)
    subject = {
        "asked": f"Approval needed: {tool} for {requester}",
        "reminder": f"Reminder: approval needed: {tool} for {requester}",
        "escalated": f"Escalated to you: approval of {tool} for {requester}",
    }[kind]
    facts = [("Tool", tool), ("Requested by", requester), ("Asked of", asked), ("Answer by", deadline(elicitation))]
    arguments = json.dumps(context.get("arguments") or {}, indent=2, ensure_ascii=False)
    note = (
        "Each link opens a page where you confirm; opening it decides nothing. The first answer decides. "
        "The links answer as you: do not forward this mail."
    )
    return Letter(subject, elicitation.message, facts, arguments, links, note)


def _short(text: str, most: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"


def text_of(mail: Letter) -> str:
    width = max(len(label) for label, _ in mail.facts) + 2
    lines = [mail.lead, ""]
    lines += [f"{label + ':':<{width}}{value}" for label, value in mail.facts]
    if mail.arguments is not None:
        lines += ["Arguments:", *(f"  {line}" for line in mail.arguments.splitlines())]
    lines.append("")
    lines += [f"{label.rstrip('…')}: {url}" for label, url in mail.links]
    return "\n".join([*lines, "", mail.note, ""])


def html_of(mail: Letter) -> str:
    rows = "".join(
        f'<tr><td style="{_CELL}">{escape(label)}</td><td style="padding:4px 0">{escape(value)}</td></tr>'
        for label, value in mail.facts
    )
    arguments = ""
    if mail.arguments is not None:
        arguments = (
            '<p style="margin:16px 0 4px;color:#57606a">Arguments</p>'
            '<pre style="margin:0;padding:12px;background:#f6f8fa;border-radius:6px;font-size:13px;'
            f'white-space:pre-wrap;word-break:break-word">{escape(mail.arguments)}</pre>'
        )
    buttons = "".join(
        f'<a href="{escape(url)}" style="{_BUTTON.format(color=_COLORS.get(label, "#0969da"))}">{escape(label)}</a>'
        for label, url in mail.links
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(mail.subject)}</title></head>"
        '<body style="margin:0;padding:24px;background:#ffffff;color:#1f2328;'
        "font:15px/1.5 -apple-system,BlinkMacSystemFont,'Segoe UI',Helvetica,Arial,sans-serif\">"
        '<div style="max-width:560px">'
        f'<p style="margin:0 0 16px;font-size:17px;font-weight:600">{escape(mail.lead)}</p>'
        f'<table role="presentation" style="border-collapse:collapse">{rows}</table>{arguments}'
        f'<p style="margin:24px 0 8px">{buttons}</p>'
        f'<p style="margin:8px 0 0;color:#57606a;font-size:13px">{escape(mail.note)}</p>'
        "</div></body></html>"
    )


def message_of(mail: Letter, sender: str, to: str) -> EmailMessage:
    """The MIME message: multipart/alternative, text first, then HTML (what clients that show HTML prefer)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = mail.subject
    message["Date"] = formatdate(usegmt=True)
    domain = Address(addr_spec=parseaddr(sender)[1]).domain
    message["Message-ID"] = make_msgid(domain=domain)
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: out-of-office replies are not sent back to it
    message.set_content(text_of(mail))
    message.add_alternative(html_of(mail), subtype="html")
    return message
