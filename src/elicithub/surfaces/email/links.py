"""The links a mail carries: each bound to its question and its recipient, single-use, and readable for as long as the
hub keeps the question (after its end, its page says how it ended); and the token a page's form carries, without which
a POST answers nothing.

A link is `/email/KIND/TOKEN`: KIND is the page (`approve`, `deny`, or `answer` for a person's own question), TOKEN a
sealed `{question, recipient, ticket, until}` (with a key of the hub's own: nobody else can make or alter one, and
it reveals nothing). The ticket is taken by the POST that answers, on whichever hub, so a link answers once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from elicithub.auth.keys import Keys
from elicithub.auth.links import LinkSigner
from elicithub.core.elicitation import Elicitation
from elicithub.core.ports import KeyValueStore
from elicithub.core.tickets import OnceTickets

KINDS = ("approve", "deny", "answer")
KEPT_S = 24 * 3600.0
"""How long a link keeps working after its question's deadline: as long as the hub keeps an ended question."""


@dataclass(frozen=True)
class MailLink:
    """An opened link: its token, the question and the person it was made for, and its single-use ticket."""

    token: str
    elicitation_id: str
    user_id: str
    once: str


class MailLinks:
    def __init__(self, keys: Keys, kv: KeyValueStore, public_url: str, clock: Callable[[], float] = time.time) -> None:
        self.signer = LinkSigner(keys, clock, purpose="email-link")
        self._form_key = keys.derive("email-form")
        self.tickets = OnceTickets(kv, "email-link-once")
        self.public_url = public_url.rstrip("/")

    async def issue(self, elicitation: Elicitation, user_id: str) -> str:
        """A token for `user_id`'s links to `elicitation` (one ticket, whichever of its pages answers)."""
        deadline = elicitation.expires_at.timestamp()
        once = await self.tickets.issue(deadline - self.signer.clock() + 60)
        return self.signer.seal({"e": elicitation.id, "u": user_id, "o": once, "x": deadline + KEPT_S})

    def url(self, kind: str, token: str) -> str:
        return f"{self.public_url}/email/{kind}/{token}"

    def open(self, token: str) -> MailLink | None:
        """The link `token` stands for; None when it is not one of ours, was altered, or is too old."""
        data = self.signer.unseal(token)
        if data is None:
            return None
        question, user, once, until = data.get("e"), data.get("u"), data.get("o"), data.get("x")
        if not (isinstance(question, str) and isinstance(user, str) and isinstance(once, str)):
            return None
        if not isinstance(until, int | float) or until < self.signer.clock():
            return None
        return MailLink(token, question, user, once)

    def form_token(self, link: MailLink) -> str:
        """What the link's page puts in its form: only a page the hub served can POST an answer."""
        return hmac.new(self._form_key, link.token.encode(), hashlib.sha256).hexdigest()

    def form_ok(self, link: MailLink, given: str) -> bool:
        return hmac.compare_digest(self.form_token(link), given)

    async def use(self, link: MailLink) -> bool:
        """Use the link up; False when it answered already."""
        return await self.tickets.take(link.once)
