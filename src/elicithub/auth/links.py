"""Opaque, signed, short-lived link tokens: a url-mode elicitation's names it and its user; other uses (mail's
links) seal their own data under a purpose of their own."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken

from elicithub.auth.keys import Keys
from elicithub.core.ports import KeyValueStore
from elicithub.core.tickets import OnceTickets
from elicithub.errors import BadRequest


class BadLink(BadRequest):
    """The link token is tampered with, expired, or not one of ours."""


@dataclass(frozen=True)
class Link:
    elicitation_id: str
    user_tag: str
    once: str | None = None
    """A single-use ticket: a link handed privately to its person (in Slack) stands in for their hub session, once."""

    def for_user(self, user_id: str | None, keys: LinkSigner) -> bool:
        return user_id is not None and hmac.compare_digest(self.user_tag, keys.user_tag(user_id))


class LinkSigner:
    """Fernet tokens: encrypted (nothing in the link is readable) and authenticated, with a timestamp for expiry.
    `purpose` keeps the links of one use apart from another's (a sign-in link opens no mail's page)."""

    def __init__(self, keys: Keys, clock: Callable[[], float] = time.time, purpose: str = "link") -> None:
        self._fernet = Fernet(base64.urlsafe_b64encode(keys.derive(purpose)))
        self._tag_key = keys.derive(f"{purpose}-user")
        self.clock = clock
        """The time (seconds since the epoch) links are signed and judged at; a test may move it on."""

    def seal(self, data: dict[str, str | float]) -> str:
        """A token holding `data`, readable only by `unseal`."""
        payload = json.dumps(data, separators=(",", ":"))
        return self._fernet.encrypt_at_time(payload.encode(), int(self.clock())).decode()

    def unseal(self, token: str) -> dict[str, object] | None:
        """What `seal` put in `token`; None for a token that is not one of this signer's, or was altered."""
        try:
            data = json.loads(self._fernet.decrypt(token.encode()))
        except (InvalidToken, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def user_tag(self, user_id: str) -> str:
        return hmac.new(self._tag_key, user_id.encode(), hashlib.sha256).hexdigest()[:32]

    def sign(self, elicitation_id: str, user_id: str, once: str | None = None) -> str:
        data: dict[str, str | float] = {"e": elicitation_id, "u": self.user_tag(user_id)}
        if once is not None:
            data["o"] = once
        return self.seal(data)

    def verify(self, token: str, max_age_s: float) -> Link:
        try:
            opened = self._fernet.decrypt_at_time(token.encode(), max(1, int(max_age_s)), int(self.clock()))
            data = json.loads(opened)
            once = data.get("o")
            return Link(str(data["e"]), str(data["u"]), None if once is None else str(once))
        except (InvalidToken, ValueError, KeyError, TypeError):
            raise BadLink("This sign-in link is not valid or has expired.") from None


class LinkTickets(OnceTickets):
    """The single-use tickets of links opened without a hub session, kept in the store so that every instance
    sharing it accepts such a link once (a link seen by the wrong person would connect their account under
    someone else's name)."""

    def __init__(self, store: KeyValueStore) -> None:
        super().__init__(store, "link-once")
