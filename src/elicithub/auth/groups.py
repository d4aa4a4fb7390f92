"""The groups the identity provider put each person in at their latest widget sign-in (`auth.oidc.groups_claim` of
the ID token): a signed-in browser's later requests carry no token to read them from, so they are kept by user."""

from __future__ import annotations

import json
from collections.abc import Collection

from elicithub.core.ports import KeyValueStore

PREFIX = "signed-in-groups:"


class SignedInGroups:
    """Kept `keep_s` after each sign-in (as long as the session it starts), in the store every hub shares; each
    sign-in replaces them, so a person taken out of a group loses it with their next sign-in on any browser."""

    def __init__(self, kv: KeyValueStore, keep_s: float) -> None:
        self.kv = kv
        self.keep_s = keep_s

    async def remember(self, user_id: str, groups: Collection[str]) -> None:
        if groups:
            await self.kv.put(PREFIX + user_id, json.dumps(sorted(groups)).encode(), self.keep_s)
        else:
            await self.kv.delete(PREFIX + user_id)

    async def of(self, user_id: str) -> frozenset[str]:
        stored = await self.kv.get(PREFIX + user_id)
        return frozenset(json.loads(stored)) if stored is not None else frozenset()
