"""Ids that clients choose and echo back: what shape they may have."""

from __future__ import annotations

import re

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
