"""The email address the identity provider verified for each person at their latest widget sign-in (OIDC's `email`
with `email_verified`): kept by user, so mail can reach people the config gives no address (surfaces/email)."""

from __future__ import annotations

from elicithub.core.ports import KeyValueStore

PREFIX = "signed-in-email:"


class SignedInAddresses:
    """Kept `keep_s` after each sign-in (as long as the session it starts), in the store every hub shares; a sign-in
    without a verified address forgets the one before."""

    def __init__(self, kv: KeyValueStore, keep_s: float) -> None:
        self.kv = kv
        self.keep_s = keep_s

    async def remember(self, user_id: str, address: str | None) -> None:
        if address is not None:
            await self.kv.put(PREFIX + user_id, address.encode(), self.keep_s)
        else:
            await self.kv.delete(PREFIX + user_id)

    async def of(self, user_id: str) -> str | None:
        stored = await self.kv.get(PREFIX + user_id)
        return stored.decode() if stored is not None else None
