"""Who is mailed, and when: an `ApprovalListener` that writes a mail to the outbox for each approver with an address
(asked, reminded, escalated to), and with `email.questions` a mail of each person's own open question once it has
waited `notify_after_s`. The outbox item names the question, the recipient and the kind; the mail is made when it is
sent, with the question as it is then and links of its own, and not sent at all once the question has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

from elicithub.auth.addresses import SignedInAddresses
from elicithub.config import EmailConfig
from elicithub.core.approval import People
from elicithub.core.elicitation import Elicitation
from elicithub.core.events import ElicitationRequested, StreamEvent
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import ElicitationStore, KeyValueStore
from elicithub.runtime.approvers import asked_of, named
from elicithub.runtime.conversations import is_open
from elicithub.surfaces.email.links import MailLinks
from elicithub.surfaces.email.mail import KINDS, Kind, letter, message_of
from elicithub.surfaces.email.smtp import Smtp
from elicithub.surfaces.outbox import Outbox
from elicithub.surfaces.reach import Notified, reached

PAGES: dict[str, list[tuple[str, str]]] = {
    "question": [("Answer…", "answer")],
    "approval": [("Approve…", "approve"), ("Deny…", "deny")],
}
"""The links of each mail: (label, page)."""


class Addresses:
    """A person's address: the config's (`email.users`), else the one their identity provider verified at their
    latest sign-in (`signed_in`, with OIDC)."""

    def __init__(self, configured: Mapping[str, str], signed_in: SignedInAddresses | None = None) -> None:
        self.configured = configured
        self.signed_in = signed_in

    async def of(self, user_id: str) -> str | None:
        found = self.configured.get(user_id)
        if found is None and self.signed_in is not None:
            found = await self.signed_in.of(user_id)
        return found


LEASE_MARGIN_S = 30.0
"""How much longer than one attempt to send may take another hub waits before it makes the next attempt."""


class EmailNotices:
    """`groups`: the hub's static groups (whose members with an address are mailed approvals); `notified` counts the
    mails sent, tried again, given up or not needed (the hub's metrics)."""

    def __init__(
        self,
        config: EmailConfig,
        kv: KeyValueStore,
        store: ElicitationStore,
        links: MailLinks,
        smtp: Smtp,
        groups: Mapping[str, Collection[str]],
        notified: Notified,
        addresses: Addresses,
    ) -> None:
        self.config = config
        self.addresses = addresses
        self.outbox = Outbox(kv, "email", self.deliver, notified, config.smtp.timeout_s + LEASE_MARGIN_S)
        self.store = store
        self.links = links
        self.smtp = smtp
        self.groups = groups
        self._writing: set[asyncio.Task[None]] = set()

    # -- the approval listener

    async def added(self, elicitation: Elicitation, to: People) -> None:
        await self._mail(elicitation, self._approvers(elicitation, to), "asked")

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        await self._mail(elicitation, self._approvers(elicitation, to), "reminder")

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        """Those it escalates to who were not approvers already (they have had theirs)."""
        approval = elicitation.approval
        before = self._approvers(elicitation, approval.approvers) if approval and approval.approvers else set()
        await self._mail(elicitation, self._approvers(elicitation, to) - before, "escalated")

    async def ended(self, elicitation: Elicitation) -> None:
        """Nothing to send: a link's page says how its question ended, and a mail not yet sent will not be."""

    def _approvers(self, elicitation: Elicitation, to: People) -> set[str]:
        if elicitation.approval is None or elicitation.approval.approvers is None:
            return set()  # its requester approves: one of their own questions
        return reached(elicitation, to, self.groups)

    async def _mail(self, elicitation: Elicitation, users: set[str], kind: Kind) -> None:
        until = elicitation.expires_at.timestamp()
        for user in sorted(users):
            if await self.addresses.of(user) is None:
                continue
            body: JsonObject = {"elicitationId": elicitation.id, "user": user, "kind": kind}
            await self.outbox.put(f"{elicitation.id}.{kind}.{user}", body, until)

    # -- a person's own questions

    def heard(self, elicitation: Elicitation, event: StreamEvent) -> None:
        """A question shown on its run's stream (the broker's sink, on the hub where the run goes on): a form question
        its own person answers, who has an address, is mailed once it has waited `notify_after_s` (written without
        making the run wait)."""
        if not isinstance(event, ElicitationRequested) or elicitation.mode != "form" or not elicitation.asks_requester:
            return
        task = asyncio.create_task(self._question(elicitation))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def _question(self, elicitation: Elicitation) -> None:
        if await self.addresses.of(elicitation.user_id) is None:
            return
        body: JsonObject = {"elicitationId": elicitation.id, "user": elicitation.user_id, "kind": "question"}
        due = elicitation.created_at.timestamp() + self.config.notify_after_s
        item = f"{elicitation.id}.question.{elicitation.user_id}"
        await self.outbox.put(item, body, elicitation.expires_at.timestamp(), not_before=due)

    # -- sending

    async def deliver(self, body: JsonObject) -> bool:
        """Make the mail and send it; False when its question has ended (or its person has no address any more)."""
        elicitation = await self.store.get(str(body["elicitationId"]))
        user, kind = str(body["user"]), KINDS.get(str(body["kind"]))
        address = await self.addresses.of(user)
        if elicitation is None or not is_open(elicitation) or address is None or kind is None:
            return False
        token = await self.links.issue(elicitation, user)
        pages = PAGES["question" if kind == "question" else "approval"]
        links = [(label, self.links.url(page, token)) for label, page in pages]
        mail = letter(elicitation, kind, named(asked_of(elicitation)), links)
        await self.smtp.send(message_of(mail, self.config.sender, address))
        return True

    async def close(self) -> None:
        for task in self._writing:
            task.cancel()
        await asyncio.gather(*self._writing, return_exceptions=True)
