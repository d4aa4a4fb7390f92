"""Text as Slack takes it: mrkdwn with what people and tools wrote escaped, and text shortened to a field's limit
visibly (with an ellipsis), never cut silently."""

from __future__ import annotations

from typing import Any

SECTION_MAX = 3000  # a section's text, a text input's length


def escape(text: str) -> str:
    """Slack's mrkdwn reads &, < and > as markup; anything a person or a tool wrote is shown as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, limit: int) -> str:
    """`text`, or as much of it as fits in `limit` characters ending with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": shorten(text, limit) or " "}


def mrkdwn(text: str) -> dict[str, Any]:
    """Written text as a section's mrkdwn, escaped, and shortened before escaping so that no escape is cut."""
    escaped = escape(text)
    if len(escaped) > SECTION_MAX:
        size = len("…")
        for kept, char in enumerate(text):
            size += len(escape(char))
            if size > SECTION_MAX:
                escaped = escape(text[:kept].rstrip()) + "…"
                break
    return {"type": "mrkdwn", "text": escaped}
