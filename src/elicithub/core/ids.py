"""Ids that clients choose and echo back: what shape they may have."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from elicithub.errors import BadRequest

CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9._~-]{1,128}$"
"""The shape, as a JSON Schema `pattern` (which /openapi.json documents)."""
_CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN)


def check_conversation_id(value: str) -> str:
    """The id itself when it is 1-128 characters of A-Z a-z 0-9 . _ ~ -; else BadRequest saying so."""
    if not _CONVERSATION_ID.fullmatch(value):
        raise BadRequest(
            "conversation id: use 1-128 characters of letters, digits, '.', '_', '~' and '-' "
            f"(got {len(value)} characters that do not fit)."
        )
    return value


def anonymous_conversation_id(holder: str) -> str:
    """A new conversation id bound to an anonymous caller's secret `holder` (a cookie only they have): whoever
    learns the id but lacks the secret cannot continue or read it."""
    nonce = secrets.token_urlsafe(12)
    return f"conv_{nonce}.{_tag(holder, nonce)}"


def held_by(conversation_id: str, holder: str | None) -> bool:
    """Whether the id was issued to the anonymous caller whose secret is `holder`."""
    nonce, dot, tag = conversation_id.removeprefix("conv_").rpartition(".")
    return holder is not None and bool(dot) and hmac.compare_digest(tag, _tag(holder, nonce))


def _tag(holder: str, nonce: str) -> str:
    return hashlib.sha256(f"{holder}\0{nonce}".encode()).hexdigest()[:32]
