"""The email surface: approvers (and, with `email.questions`, people whose own questions wait) get a mail whose links
open pages that answer, with a durable outbox every hub sends from. Built by the hub when `email:` is configured."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Mapping

from elicithub.auth.addresses import SignedInAddresses
from elicithub.auth.keys import Keys
from elicithub.config import EmailConfig
from elicithub.core.ports import ElicitationStore, KeyValueStore
from elicithub.runtime.conversations import Conversations
from elicithub.surfaces.email.links import MailLinks
from elicithub.surfaces.email.notices import Addresses, EmailNotices
from elicithub.surfaces.email.pages import GroupsOf, MailPages, no_groups
from elicithub.surfaces.email.smtp import Smtp
from elicithub.surfaces.reach import Notified

__all__ = ["EmailSurface"]


class EmailSurface:
    """`notices` is the hub's approval listener (and, with `email.questions`, hears every question shown); `routes`
    are the links' pages; its lifespan sends the outbox."""

    def __init__(
        self,
        config: EmailConfig,
        public_url: str,
        keys: Keys,
        kv: KeyValueStore,
        store: ElicitationStore,
        conversations: Conversations,
        groups: Mapping[str, Collection[str]],
        notified: Notified,
        groups_of: GroupsOf | None = None,
        signed_in: SignedInAddresses | None = None,
    ) -> None:
        """`groups`: the hub's static groups; `notified`: the hub's count of notifications; `groups_of`: a person's
        identity-provider groups, and `signed_in` the addresses it verified, where there is one."""
        self.config = config
        self.links = MailLinks(keys, kv, public_url)
        addresses = Addresses(config.users, signed_in)
        self.notices = EmailNotices(config, kv, store, self.links, Smtp(config.smtp), groups, notified, addresses)
        self.pages = MailPages(conversations, self.links, groups_of or no_groups)
        self.routes = self.pages.routes

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        sending = asyncio.create_task(self.notices.outbox.run())
        try:
            yield
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            await self.notices.close()
