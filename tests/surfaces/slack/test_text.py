"""Text within Slack's limits: shortened visibly, escaped without cutting an escape in two."""

from __future__ import annotations

from elicithub.surfaces.slack.text import SECTION_MAX, escape, mrkdwn, plain, shorten


def test_text_that_fits_is_kept_and_longer_text_ends_with_an_ellipsis() -> None:
    assert shorten("Which region?", 13) == "Which region?"
    assert shorten("Which region now?", 13) == "Which region…"
    assert plain("", 24) == {"type": "plain_text", "text": " "}  # Slack refuses empty text


def test_a_long_message_is_escaped_then_fitted_without_a_broken_escape() -> None:
    for text in ["a" * 5000, "<&>" * 2000, "x" * 2999 + "&&&"]:
        shown = mrkdwn(text)["text"]
        assert len(shown) <= SECTION_MAX and shown.endswith("…")
        kept = shown[:-1]
        assert escape(text).startswith(kept) and not kept.endswith(("&", "&a", "&am", "&amp", "&l", "&lt", "&g"))
    assert mrkdwn("a < b & c") == {"type": "mrkdwn", "text": "a &lt; b &amp; c"}
